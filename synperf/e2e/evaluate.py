"""Score the end-to-end predictions against the authors' real serving runs.

Source: ``pipeweave/e2e/real/e2e[_tp<T>]_<GPU>.jsonl`` (github.com/zksainx/pipeweave @ 55e0317): one line per
repetition; ``run_name`` = ``<model>-<trace>``, ``batch_size``, latencies in **seconds**. A configuration is
(model, trace, batch, TP, GPU); its measured value is the median over repetitions. The workload is generated
from ``pipeweave/config/<model>.json`` and ``pipeweave/workload/<trace>.csv`` with the static policy,
``max_batch`` = the run's batch size, PP 1, and the GPU's FA path (FA3 on Hopper, FA2 otherwise).

The framework overhead ``a + b * batch`` (seconds per iteration) is fitted leave-one-run-out: for each
configuration, by non-negative least squares on the decode-step residuals (measured median decode step minus
predicted kernels + collectives) of the configurations of all OTHER runs (``run_name`` = model and trace), so
neither the configuration's own measurement nor the same workload on another GPU or TP enters its prediction.
``overhead.json`` holds the fit on all configurations (for the CLI).

Reference numbers on these configurations (README of the public data, from the authors'
``e2e/pipeweave_comparison.csv``): the paper's predictor 5.7 / 10.3 / 7.2 % MAPE (prefill / decode step /
total), NeuSight 78.4 / 24.4 / 43.7 %.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from ._deps import (
    InputError,
    Registry,
    default_registry,
    gpu_name_map,
    load_registry,
    predict,
    require_columns,
    write_csv,
)
from .collectives import CollectiveModel
from .compose import E2EResult, Overhead, SharedPredictor, attention_path, compose, fit_overhead
from .intervals import INTERVAL_METRICS, conformal_half_width, needed_half_width, shipped_half_width, widen
from .model_config import load_model_config
from .workload import generate, read_trace

PAPER_MAPE = {"prefill": 5.7, "decode_step": 10.3, "total": 7.2}
NEUSIGHT_MAPE = {"prefill": 78.4, "decode_step": 24.4, "total": 43.7}
METRICS = {"prefill": ("prefill_latency", "prefill_s"), "decode_step": ("median_decode_latency", "decode_step_s"),
           "total": ("total_latency", "total_s")}
_REAL = re.compile(r"^e2e(?:_tp(?P<tp>\d+))?_(?P<gpu>[A-Za-z0-9][A-Za-z0-9_]*)\.jsonl$")
#: the keys every line of a real-run file needs (``iteration``: the repetition's index)
REAL_KEYS = ("run_name", "batch_size", "iteration", "prefill_latency", "median_decode_latency", "total_latency")
#: config key of the map from the GPU names of the real-run files to registry ids
GPU_MAP_KEY = "e2e.real_gpu_map"


def real_runs(public_data_dir: str | os.PathLike, gpu_map: Mapping[str, str] | None) -> pd.DataFrame:
    """The measured configurations: one row per (run_name, batch_size, tp, gpu) with ``model``, ``trace``,
    ``gpu_id`` (registry id), ``repetitions`` and the median ``prefill_latency``, ``median_decode_latency``,
    ``total_latency`` (seconds).

    Args:
        public_data_dir: the public-data folder.
        gpu_map: the GPU name of ``e2e[_tp<T>]_<GPU>.jsonl`` (``A100``, ``H100``, ``H200``; ``RTX_6000_Ada``
            for ``e2e_RTX_6000_Ada.jsonl``: letters, digits and underscores, as written in the file name) ->
            registry id: the config's ``e2e.real_gpu_map``.

    Every ``e2e*.jsonl`` file of ``pipeweave/e2e/real`` is read or refused; none is passed over.

    Raises:
        InputError: naming the file: ``gpu_map`` missing or empty (naming ``e2e.real_gpu_map``), no real-run
            files, a file name not of the form ``e2e[_tp<T>]_<GPU>.jsonl``, a GPU name the map lacks, a file that
            is not JSON lines or has no line, a missing key of :data:`REAL_KEYS` (with the present key it looks
            misspelled as), a run_name without ``-``.
    """
    gpu_map = gpu_name_map(gpu_map, GPU_MAP_KEY, "real-run file GPU")
    root = Path(public_data_dir) / "pipeweave" / "e2e" / "real"
    frames = []
    for p in sorted(root.glob("e2e*.jsonl")):
        m = _REAL.match(p.name)
        if not m:
            raise InputError(f"{p}: not a real-run file name; expected e2e[_tp<T>]_<GPU>.jsonl (<T> digits, <GPU> "
                             f"letters, digits and underscores)")
        if m["gpu"] not in gpu_map:
            raise InputError(f"{p}: GPU {m['gpu']!r} has no registry id in config key {GPU_MAP_KEY} "
                             f"(known: {sorted(gpu_map)})")
        try:
            df = pd.read_json(p, lines=True)
        except ValueError as e:
            raise InputError(f"{p}: not JSON lines ({' '.join(str(e).split())}); expected one JSON object per "
                             f"repetition") from None
        if df.empty:
            raise InputError(f"{p}: no lines; expected one JSON object per repetition")
        require_columns(df, REAL_KEYS, str(p), noun="key")
        bad = df.loc[~df["run_name"].astype(str).str.contains("-"), "run_name"]
        if len(bad):
            raise InputError(f"{p}: run_name {bad.iloc[0]!r} is not <model>-<trace>")
        df["tp"], df["gpu"], df["gpu_id"] = int(m["tp"] or 1), m["gpu"], gpu_map[m["gpu"]]
        frames.append(df)
    if not frames:
        raise InputError(f"{root}: no e2e*.jsonl real-run files")
    df = pd.concat(frames, ignore_index=True)
    keys = ["run_name", "batch_size", "tp", "gpu", "gpu_id"]
    out = df.groupby(keys, as_index=False).agg(
        repetitions=("iteration", "count"), prefill_latency=("prefill_latency", "median"),
        median_decode_latency=("median_decode_latency", "median"), total_latency=("total_latency", "median"))
    out["model"] = out["run_name"].str.rsplit("-", n=1).str[0]
    out["trace"] = out["run_name"].str.rsplit("-", n=1).str[1]
    return out


def composition_needed(configs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per metric of :data:`METRICS`, each configuration's :func:`~.intervals.needed_half_width`: the composition
    half-width (log) its measured value needs beyond the kernel bounds ``<metric>_kernel_low_s``/``_high_s``."""
    return {m: needed_half_width(configs[f"{m}_predicted_s"], configs[f"{m}_measured_s"],
                                 configs[f"{m}_kernel_low_s"], configs[f"{m}_kernel_high_s"]) for m in METRICS}


def _metric_bounds(res: E2EResult) -> dict[str, tuple[float, float, float]]:
    """Per metric of :data:`METRICS`: the point prediction and its kernel bounds (seconds; the overhead of a fit
    carries no composition error)."""
    iv = res.intervals()
    return {m: (float(getattr(res, attr)), iv[f"{m}_low_s"], iv[f"{m}_high_s"]) for m, (_, attr) in METRICS.items()}


def composition_of_others(runs: pd.DataFrame, base: list[E2EResult], batch: np.ndarray, resid: np.ndarray,
                          i: int) -> dict[str, float]:
    """The composition half-width per metric that scores configuration ``i``: the split-conformal quantile over the
    configurations of the *other* model-and-trace pairs, each re-predicted with an overhead fitted without its own
    pair and without ``i``'s (so no measurement of ``i``'s pair enters, not even through another run's overhead).

    Args:
        runs: the real runs (:func:`real_runs`); ``base``: their predictions without overhead; ``batch``,
            ``resid``: per run the batch size and the measured minus predicted decode step (seconds), the
            overhead's fit data.
    """
    name = runs["run_name"].to_numpy()
    others = np.flatnonzero(name != name[i])
    measured = {m: runs[col].to_numpy(dtype="float64") for m, (col, _) in METRICS.items()}
    cache: dict = {}
    pred, meas, lo, hi = ({m: [] for m in METRICS} for _ in range(4))
    for j in others:
        keep = (name != name[i]) & (name != name[j])
        ov = fit_overhead(batch[keep], resid[keep]) if keep.any() else Overhead()
        key = (j, ov.a_s, ov.b_s)
        if key not in cache:
            cache[key] = _metric_bounds(base[j].with_overhead(ov))
        for m, (p, low, high) in cache[key].items():
            pred[m].append(p)
            meas[m].append(measured[m][j])
            lo[m].append(low)
            hi[m].append(high)
    return {m: conformal_half_width(needed_half_width(pred[m], meas[m], lo[m], hi[m])) for m in METRICS}


def interval_coverage(inside: pd.Series) -> float:
    """Percentage of the configurations with an interval whose measured value lies inside it (``inside``: True,
    False or NA without an interval); NaN when none has one."""
    known = inside.dropna()
    return float(known.astype(bool).mean() * 100) if len(known) else float("nan")


def _plot(breakdown: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    piv = breakdown.pivot_table(index="config", columns="family", values="time_s", aggfunc="sum").fillna(0.0)
    share = piv.div(piv.sum(axis=1), axis=0) * 100
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(share)), 5))
    bottom = np.zeros(len(share))
    for fam in share.columns:
        ax.bar(share.index, share[fam], bottom=bottom, label=fam)
        bottom += share[fam].to_numpy()
    ax.set_ylabel("share of predicted total latency (%)")
    ax.set_title("Predicted end-to-end time per operator family")
    ax.tick_params(axis="x", rotation=75, labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


def run_e2e_evaluation(public_data_dir: str | os.PathLike, registry_path: str | os.PathLike | None,
                       models_dir: str | os.PathLike | None, out_dir: str | os.PathLike,
                       e2e_cfg: Mapping[str, Mapping[str, str]] | None, *,
                       predict_fn: Callable | None = None, registry: Registry | None = None) -> dict:
    """Predict and score every configuration with a real run; write the tables and the figure.

    Args:
        public_data_dir: folder with ``pipeweave/{config,workload,e2e/real,dataset/collective}``.
        registry_path: ``config/gpus.yaml`` (None: the default registry).
        models_dir: trained models (``models/``; None: predict's default).
        out_dir: where to write (created).
        e2e_cfg: the config block ``e2e``: ``real_gpu_map`` (real-run file GPU names -> registry ids) and
            ``collective_gpu_map`` (collective table folders -> registry ids), both required.
        predict_fn: the kernel predictor (default :func:`synperf.api.predict` of the evaluation models,
            ``models="evaluation"``, never the deploy models, which trained on the GPUs scored here; tests inject a
            fake).
        registry: the loaded registry (default: loaded from ``registry_path``, measured values not merged).

    Writes (atomically) in ``out_dir``: ``e2e_configs.csv`` (per configuration: measured and predicted prefill,
    decode step and total in seconds, APE in %, the kernel bounds ``<metric>_kernel_low_s``/``_high_s``, the
    composition error ``<metric>_composition_log_hw`` of the other model-and-trace pairs
    (:func:`composition_of_others`), the 80% interval ``<metric>_low_s``/``<metric>_high_s`` they make
    (:func:`synperf.e2e.intervals.widen`) and ``<metric>_in_interval`` (the measured value inside it; empty without
    a finite interval), the overhead used), ``e2e_summary.csv`` (MAPE per metric beside the paper's and NeuSight's, and
    ``interval_coverage_pct``: the share of configurations whose measured value lies in its interval, nominal 80),
    ``e2e_breakdown.csv`` (per configuration, phase, operator: seconds and share),
    ``e2e_models.csv`` (per configuration and family: :data:`synperf.e2e.compose.MODEL_COLUMNS`, the model folder,
    prediction paths and whether the GPU trained the family's model), ``overhead.json`` (the overhead fitted
    on all configurations, and the composition error of all of them, each from its leave-one-run-out prediction)
    and ``e2e_breakdown.png`` (stacked bars of the per-family share).

    Returns:
        ``{"configs": DataFrame, "summary": DataFrame, "overhead": Overhead, "files": [paths]}``.

    Raises:
        InputError: a missing GPU map (naming its ``e2e`` key), missing data files, unknown GPU, no trained model
            (from predict), a prediction of the deploy models (:meth:`SharedPredictor.refuse_deploy`).
    """
    predict_fn = predict_fn or functools.partial(predict, models="evaluation")
    pub = Path(public_data_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if registry is None:
        registry = load_registry(registry_path) if registry_path else default_registry()
    e2e_cfg = e2e_cfg or {}
    runs = real_runs(pub, e2e_cfg.get("real_gpu_map"))
    coll = CollectiveModel.from_dir(pub / "pipeweave" / "dataset" / "collective", registry,
                                    e2e_cfg.get("collective_gpu_map"))
    workloads = []
    for r in runs.itertuples(index=False):
        model = load_model_config(pub.joinpath("pipeweave", "config", f"{r.model}.json"))
        reqs = read_trace(pub / "pipeweave" / "workload" / f"{r.trace}.csv")
        workloads.append(generate(model, reqs, tp=int(r.tp), pp=1, max_batch=int(r.batch_size),
                                  prefill_impl=attention_path(r.gpu_id, registry)))
    # every configuration's launches first, then one predict call per family and GPU over all of them
    shared = SharedPredictor(predict_fn)
    for wl, r in zip(workloads, runs.itertuples(index=False)):
        compose(wl, r.gpu_id, predict_fn=shared.record, registry=registry, collectives=coll)
    shared.predict(models_dir=models_dir, registry=registry)
    shared.refuse_deploy("e2e evaluation")
    base: list[E2EResult] = [compose(wl, r.gpu_id, predict_fn=shared, models_dir=models_dir, registry=registry,
                                     collectives=coll) for wl, r in zip(workloads, runs.itertuples(index=False))]
    batch = runs["batch_size"].to_numpy(dtype="float64")
    resid = runs["median_decode_latency"].to_numpy() - np.array([b.decode_step_s for b in base])
    rows, bds, mods = [], [], []
    for i, (r, b) in enumerate(zip(runs.itertuples(index=False), base)):
        others = (runs["run_name"] != r.run_name).to_numpy()
        ov = fit_overhead(batch[others], resid[others]) if others.any() else fit_overhead([1.0], [0.0])
        res = b.with_overhead(ov)
        config = f"{r.run_name}/tp{r.tp}/{r.gpu}"
        row = {"config": config, "run_name": r.run_name, "model": r.model, "trace": r.trace,
               "batch_size": r.batch_size, "tp": r.tp, "gpu": r.gpu, "gpu_id": r.gpu_id,
               "repetitions": r.repetitions, "overhead_a_s": ov.a_s, "overhead_b_s": ov.b_s}
        for metric, (pred, lo, hi) in _metric_bounds(res).items():
            meas = float(getattr(r, METRICS[metric][0]))
            row[f"{metric}_measured_s"], row[f"{metric}_predicted_s"] = meas, pred
            row[f"{metric}_ape_pct"] = abs(pred - meas) / meas * 100
            row[f"{metric}_kernel_low_s"], row[f"{metric}_kernel_high_s"] = lo, hi
        rows.append(row)
        bds.append(res.breakdown().assign(config=config))
        mods.append(res.models.assign(config=config))
    configs = pd.DataFrame(rows)
    for i, r in configs.iterrows():
        c_of = composition_of_others(runs, base, batch, resid, i)
        for metric in METRICS:
            c = c_of[metric]
            lo, hi = widen(r[f"{metric}_predicted_s"], r[f"{metric}_kernel_low_s"], r[f"{metric}_kernel_high_s"], c)
            configs.loc[i, f"{metric}_composition_log_hw"] = c
            configs.loc[i, f"{metric}_low_s"], configs.loc[i, f"{metric}_high_s"] = lo, hi
            configs.loc[i, f"{metric}_in_interval"] = (pd.NA if np.isnan(lo) or not np.isfinite(hi) else
                                                       bool(lo <= r[f"{metric}_measured_s"] <= hi))
    needed = composition_needed(configs)
    summary = pd.DataFrame([{"metric": m, "synperf_mape_pct": configs[f"{m}_ape_pct"].mean(),
                             "paper_mape_pct": PAPER_MAPE[m], "neusight_mape_pct": NEUSIGHT_MAPE[m],
                             "configurations": len(configs),
                             "interval_coverage_pct": interval_coverage(configs[f"{m}_in_interval"])}
                            for m in METRICS])
    ov_all = fit_overhead(batch, resid)
    overall = Overhead(ov_all.a_s, ov_all.b_s, tuple(shipped_half_width(conformal_half_width(needed[m]), f"e2e {m}")
                                                     for m in INTERVAL_METRICS))
    files = []
    for df, name in ((configs, "e2e_configs.csv"), (summary, "e2e_summary.csv"),
                     (pd.concat(bds, ignore_index=True), "e2e_breakdown.csv"),
                     (pd.concat(mods, ignore_index=True), "e2e_models.csv")):
        write_csv(df, out / name)
        files.append(out / name)
    tmp = out / "overhead.json.tmp"
    tmp.write_text(json.dumps({**overall.to_json(), "fitted_on": configs["config"].tolist()}, indent=1))
    os.replace(tmp, out / "overhead.json")
    files.append(out / "overhead.json")
    _plot(pd.concat(bds, ignore_index=True), out / "e2e_breakdown.png")
    files.append(out / "e2e_breakdown.png")
    return {"configs": configs, "summary": summary, "overhead": overall, "files": files}
