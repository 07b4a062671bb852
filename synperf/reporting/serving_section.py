"""The report's serving section: TTFT/TPOT of the serving simulator against aiconfigurator's measured vLLM runs,
beside aiconfigurator's own estimate (tables of :mod:`synperf.serving.score`)."""

from __future__ import annotations

import pandas as pd

from .tables import md_table

_COLS = {"rows": "rows", "ttft_mape_pct": "TTFT MAPE %", "tpot_mape_pct": "TPOT MAPE %",
         "ttft_coverage_pct": "TTFT in 80% interval %", "tpot_coverage_pct": "TPOT in 80% interval %",
         "aic_rows": "aic rows",
         "synperf_ttft_mape_on_aic_rows_pct": "TTFT % (aic rows)", "synperf_tpot_mape_on_aic_rows_pct":
         "TPOT % (aic rows)", "aic_ttft_mape_pct": "aic TTFT %", "aic_tpot_mape_pct": "aic TPOT %"}


def _fmt(t: pd.DataFrame) -> pd.DataFrame:
    t = t.rename(columns=_COLS).copy()
    for c in ("rows", "aic rows", "tp", "concurrency"):
        if c in t.columns:
            t[c] = t[c].map(lambda v: "-" if pd.isna(v) else str(int(v)))
    for c in t.columns:
        if c.endswith("%"):
            t[c] = t[c].map(lambda v: "-" if pd.isna(v) else f"{v:.1f}")
    return t


def serving_section(mape_csv: str, rows_csv: str, scores_csv: str, figure_rel: str) -> list[str]:
    """Markdown lines: MAPE per scope (all rows, fp8 rows, per model, per model/GPU/TP) for synperf and
    aiconfigurator on the same rows, the seen/unseen status of the row GPUs per kernel family, and the rows of the
    silicon file counted by reason."""
    mape, rows, scores = pd.read_csv(mape_csv), pd.read_csv(rows_csv), pd.read_csv(scores_csv)
    top = mape[~mape["scope"].isin(["model/gpu/tp", "concurrency"])].drop(columns="concurrency", errors="ignore")
    per_c = mape[mape["scope"] == "concurrency"]
    per_c = per_c[[c for c in ["concurrency", *_COLS] if c in per_c.columns]]
    detail = mape[mape["scope"] == "model/gpu/tp"].drop(columns="concurrency", errors="ignore")
    seen_cols = [c for c in scores.columns if c.startswith("seen_")]
    seen = scores.groupby("gpu")[seen_cols].agg(lambda s: "seen" if s.all() else ("unseen" if not s.any() else
                                                                                  "mixed")).reset_index()
    seen.columns = ["gpu"] + [c[len("seen_"):] for c in seen_cols]
    md = ["## Serving latency (TTFT/TPOT) against measured vLLM runs", "",
          "Every vLLM aggregated row of a dense or MoE model with fp8 or unquantized (bf16) linear layers in "
          "aiconfigurator's silicon sample is simulated with vLLM V1's scheduler (chunked prefill, mixed "
          "iterations, KV-cache preemption; `synperf/serving/`, docs/serving.md) in a closed loop at the row's "
          "concurrency (a replacement misses the step under way when it arrives), each iteration priced by the "
          "kernel predictors. The means are those of a benchmark's 20 rounds: one burst of `concurrency` requests "
          "on an idle engine, then 19 rounds of the steady state (docs/serving.md, rule 6). MAPE of the mean TTFT "
          "and TPOT. aiconfigurator's vLLM TTFT formula is calibrated on this corpus by its authors. "
          "aiconfigurator's estimate (`aiconfigurator cli estimate`, cached in "
          "data/baselines/aiconfigurator_serving.csv) is priced from its own measured kernel tables of these very "
          "GPUs; synperf's kernels are predicted by models that may or may not have trained on the row's GPU "
          "(table below). The 80% intervals add the simulator's own error, measured on the rows of the other GPUs "
          "(leave one GPU out, `synperf/serving/error.py`), to the kernel bounds.", "", md_table(_fmt(top)), "",
          f"![predicted against measured TTFT and TPOT]({figure_rel})", "",
          "Per model, GPU and TP:", "", md_table(_fmt(detail.drop(columns="scope"))), "",
          *(["Per concurrency (all models and GPUs):", "", md_table(_fmt(per_c)), ""] if len(per_c) else []),
          "Whether the row's GPU is a training GPU of each family's model (``unseen``: that family's kernels on that "
          "GPU come from a model that never saw it, so those rows are leave-one-GPU-out for that family):", "",
          md_table(seen), "", "Rows of the silicon file by reason (every row counted once):", "", md_table(rows), ""]
    return md


def logo_section(logo_mape_csv: str) -> list[str]:
    """Markdown lines: the MAPE table of :func:`synperf.serving.logo.score_logo` (every kernel of a row priced by a
    model that never trained on the row's GPU), aiconfigurator's on the same rows."""
    mape = pd.read_csv(logo_mape_csv)
    top = mape[~mape["scope"].isin(["concurrency"])].drop(columns="concurrency", errors="ignore")
    return ["### Leave one GPU out", "",
            "The same rows with every kernel family priced by a model whose training left the row's GPU out: H100 "
            "and B200 rows by the `synperf` method of each experiment's leave-one-GPU-out fold of that GPU (the "
            "protocols stage; path, feature set and default chosen without it; the folds give no kernel interval, so "
            "there the interval is the simulator's error on the other GPUs), H200 rows as above "
            "(no family trained on H200). aiconfigurator cannot do this: its estimate reads its measured kernel "
            "tables of the row's GPU.", "", md_table(_fmt(top)), ""]


def serving_lines(out_md: str) -> list[str]:
    """:func:`serving_section` of ``<report folder>/serving/`` (the outputs of rule ``serving``) and, when present,
    :func:`logo_section` of its ``serving_logo_mape.csv`` (rule ``serving_logo``), or no lines when that folder has
    no ``serving_mape.csv``."""
    from pathlib import Path

    d = Path(out_md).parent / "serving"
    if not (d / "serving_mape.csv").exists():
        return []
    lines = serving_section(str(d / "serving_mape.csv"), str(d / "serving_rows.csv"),
                            str(d / "serving_scores.csv"), "serving/serving_scatter.png")
    return lines + (logo_section(str(d / "serving_logo_mape.csv")) if (d / "serving_logo_mape.csv").exists() else [])
