"""The report's end-to-end section: predicted against real serving runs (tables of :mod:`synperf.e2e.evaluate`)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .tables import md_table

_METRIC_LABELS = {"prefill": "prefill latency", "decode": "median decode step", "decode_step": "median decode step",
                  "total": "total latency"}


def report_lines(e2e: dict | None, out_md: str) -> list[str]:
    """:func:`e2e_section` of the report's ``e2e`` inputs (``summary``, ``configs``, ``breakdown``, ``overhead``,
    ``figure``, optionally ``models``: the files of :func:`synperf.e2e.evaluate.run_e2e_evaluation`), the figure
    linked relative to the report ``out_md``; no lines when ``e2e`` is empty."""
    if not e2e:
        return []
    rel = str(Path(e2e["figure"]).resolve().relative_to(Path(out_md).resolve().parent))
    return e2e_section(e2e["summary"], e2e["configs"], e2e["breakdown"], e2e["overhead"], rel, e2e.get("models"))


def e2e_section(summary_csv: str, configs_csv: str, breakdown_csv: str, overhead_json: str,
                figure_rel: str, models_csv: str | None = None) -> list[str]:
    """Markdown lines: MAPE per metric beside the paper's predictor and NeuSight, the per-configuration table
    (seconds), MAPE per GPU (when the configurations name their ``gpu``; with ``models_csv``, the
    ``e2e_models.csv`` of :func:`synperf.e2e.evaluate.evaluate_e2e`, also the kernel families whose experiment
    trained on that GPU and those it is unseen for; with ``total_in_interval``, the share of its configurations whose
    measured total lies in the 80% interval), each operator family's mean share of the total time, and the fitted
    overhead. The summary's ``interval_coverage_pct`` and the configurations' ``total_low_s``/``total_high_s``/
    ``total_in_interval`` are shown where the tables have them."""
    summary = pd.read_csv(summary_csv)
    configs = pd.read_csv(configs_csv)
    breakdown = pd.read_csv(breakdown_csv)
    overhead = json.loads(Path(overhead_json).read_text())
    keep = ["metric", "synperf_mape_pct", "paper_mape_pct", "neusight_mape_pct", "configurations",
            "interval_coverage_pct"]
    s = summary.assign(metric=summary["metric"].map(lambda m: _METRIC_LABELS.get(m, m)))[
        [c for c in keep if c in summary.columns]].rename(columns={
            "synperf_mape_pct": "synperf MAPE %", "paper_mape_pct": "SynPerf paper %",
            "neusight_mape_pct": "NeuSight (as reported) %",
            "interval_coverage_pct": "measured in 80% interval %"})
    cols = ["config"] + [f"{m}_{k}" for m in ("prefill", "decode", "decode_step", "total")
                         for k in ("measured_s", "predicted_s", "ape_pct")] + ["total_low_s", "total_high_s",
                                                                              "total_in_interval"]
    per = configs[[c for c in cols if c in configs.columns]]
    md = ["## End-to-end latency on real serving runs", "",
          "Each configuration with a real run in the public data (pipeweave `e2e/real`: A100, H100, H200; TP1, TP2, "
          "TP4) is rebuilt from its Hugging Face config and request trace (`synperf/e2e/workload.py`, which "
          "reproduces the authors' 25 operator lists exactly), every kernel is priced by one bulk `predict` call per "
          "family (the experiment's fingerprint predictor, the one `synperf.api.predict` serves users), "
          "all-reduce by a model of the NCCL tables, and a per-iteration framework "
          "overhead `a + b * batch` is fitted on the real runs of the other model-and-trace pairs (leave one run "
          "out: neither the scored configuration nor the same workload on another GPU or TP enters its fit). "
          "The paper's own predictor on the same "
          "configurations: 5.7 / 10.3 / 7.2%; NeuSight 78.4 / 24.4 / 43.7%. Each prediction carries an 80% "
          "interval propagated from its kernels' intervals (errors fully correlated within a kernel family, "
          "independent across families) and widened in quadrature by the composition error of the other "
          "model-and-trace pairs (a split-conformal quantile, leave one run out; `synperf/e2e/intervals.py`); the "
          "last column is how often the measured value falls inside (nominal 80%).", "", md_table(s), "",
          f"Overhead fitted on all configurations (used by the CLI): a = {1e3 * overhead.get('a_s', float('nan')):.2f} "
          f"ms, b = {1e3 * overhead.get('b_s', float('nan')):.3f} ms per sequence in the batch"
          + _composition_text(overhead.get("composition_log_half_width")) + ".", "",
          "### Per configuration (seconds; APE %)", "", md_table(per), ""]
    ape = [c for c in ("prefill_ape_pct", "decode_step_ape_pct", "total_ape_pct") if c in configs.columns]
    if "gpu" in configs.columns and ape:
        by_gpu = configs.groupby("gpu")[ape].mean().round(1)
        by_gpu.insert(0, "configurations", configs.groupby("gpu").size())
        if "total_in_interval" in configs.columns:   # True/False, empty (NaN) without an interval
            cov = configs.groupby("gpu")["total_in_interval"].agg(
                lambda x: x.dropna().astype(str).eq("True").mean() * 100 if x.notna().any() else float("nan"))
            by_gpu["total in 80% interval %"] = cov.round(1)
        if models_csv is not None:
            models = pd.read_csv(models_csv)
            if {"training_gpu", "config", "family"} <= set(models.columns):
                kern = models[models["prediction_path"].astype(str) != "measured table"].merge(
                    configs[["config", "gpu"]], on="config")
                for col, flag in (("seen path (trained on this GPU)", True), ("unseen GPU for", False)):
                    fams = kern[kern["training_gpu"].astype(str).eq(str(flag))].groupby("gpu")["family"].agg(
                        lambda f: ", ".join(sorted(set(f))))
                    by_gpu[col] = fams.reindex(by_gpu.index).fillna("–")
        md += ["### MAPE per GPU (%)", "", "A GPU that a family's experiment trained on is priced by that "
               "experiment's seen path (its training rows and held-out problems); only on the others is the "
               "kernel prediction an unseen-GPU one, so the pooled MAPE above mixes both.", "",
               md_table(by_gpu.reset_index()), ""]
    if {"family", "share"} <= set(breakdown.columns):
        share = (breakdown.groupby(["config", "family"])["share"].sum().unstack("family", fill_value=0.0).mean()
                 .sort_values(ascending=False).mul(100).round(1).reset_index(name="mean share of total time %"))
        md += ["### Where the time goes", "", "Mean over configurations of each operator family's share of the "
               "predicted total: the kernel models that matter most for end-to-end accuracy.", "",
               md_table(share), ""]
    md += [f"![Per-operator breakdown]({figure_rel})", ""]
    return md


def _composition_text(comp: dict | None) -> str:
    """``; composition error ...`` of ``overhead.json``'s ``composition_log_half_width`` (empty without one)."""
    if not comp:
        return ""
    parts = ", ".join(f"{_METRIC_LABELS.get(m, m)} {float(c):.3f}" for m, c in comp.items())
    return f"; composition error (log half-width, all runs): {parts}"
