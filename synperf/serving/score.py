"""Score the serving simulator against aiconfigurator's measured serving runs, beside aiconfigurator's own estimate.

:func:`score_silicon` prices every priced row of :func:`.silicon.read_silicon` with :func:`.simulate.serve` and
writes, in ``out_dir``:

* ``serving_scores.csv``: per row ``model``, ``gpu``, ``tp``, ``gemm_dtype``, ``concurrency``, ``isl``, ``osl``,
  measured and predicted TTFT/TPOT (ms; the predicted mean over the simulated requests, its median and p90, and
  the 80% interval: :func:`.simulate.serve`'s kernel bounds ``<m>_kernel_low_ms``/``_high_ms`` widened by the
  simulator's own error ``<m>_serving_log_hw`` measured on the rows of the other GPUs,
  :func:`.error.widen_scores`), ``seen_<family>``
  (the row's GPU is one of that family's training GPUs: False means that family's kernels were predicted for a
  GPU its model never saw), and, when the cached aiconfigurator table is given, ``aic_ttft_ms``/``aic_tpot_ms``;
* ``serving_mape.csv``: MAPE of TTFT and TPOT per (model, gemm_dtype, gpu, tp), per (model, gemm_dtype), per
  concurrency, over all
  priced rows, all fp8 rows, and the fp8 rows whose GPU every kernel family's model trained on (seen) or none did
  (unseen: leave-one-GPU-out for every family), the same two for dense models only (the goals' scopes), and, as a
  diagnostic, the fp8 rows whose simulated KV cache never
  saturates (no preemption) (``scope``), for synperf and, on the rows it estimated,
  aiconfigurator (``aic_*``, with ``aic_rows``);
* ``serving_error.json``: the simulator's error measured on all rows (:func:`.error.fit_serving_error`), which
  ``synperf plan --concurrency --serving-error`` adds to its kernel bounds;
* ``serving_rows.csv``: rows per reason (every row of the file counted once, :func:`.silicon.counts_by_reason`);
* ``serving_scatter.png``: predicted against measured TTFT and TPOT (log axes), aiconfigurator's beside.

MAPE = mean over rows of ``|predicted - measured| / measured`` in percent.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ._deps import (
    CollectiveModel,
    InputError,
    Overhead,
    Registry,
    SharedPredictor,
    load_model_config,
    predict,
    write_csv,
)
from .error import fit_serving_error, widen_scores, write_serving_error
from .price import GEMM_ROUTES
from .silicon import MOE_MODELS, counts_by_reason, read_silicon
from .simulate import serve

#: the scoring's predictor: the evaluation models only (trained on the configured seen GPUs), never the deploy
#: models, which trained on the GPUs scored here
EVALUATION_PREDICT = functools.partial(predict, models="evaluation")

KEYS = ["model", "gemm_dtype", "gpu", "tp", "concurrency", "isl", "osl"]
#: the scopes of the serving goals: dense-model fp8 rows whose GPU every launched family's model trained on / none did
DENSE_SEEN = "dense fp8 rows, GPU seen by every family"
DENSE_UNSEEN = "dense fp8 rows, GPU unseen by every family"


def _ape(pred, meas) -> pd.Series:
    return (pd.Series(pred, dtype="float64") - pd.Series(meas, dtype="float64")).abs() / pd.Series(meas) * 100


def score_rows(rows: pd.DataFrame, examples_dir: str | os.PathLike, *, registry: Registry,
               collectives: CollectiveModel, models_dir: str | os.PathLike | None = None,
               predict_fn: Callable = EVALUATION_PREDICT, overhead: Overhead = Overhead(), num_requests_per_c: int = 10,
               progress: Callable[[int, int], None] | None = None, record_only: bool = False,
               kv_cache_dtype: str | None = None) -> pd.DataFrame:
    """One scored row per priced row of ``rows`` (``reason`` empty), in ``rows``' order. Every row is simulated
    twice: the first pass records the launches of all rows, one ``predict_fn`` call per (kernel family, GPU) prices
    their distinct launches (:class:`synperf.e2e.compose.SharedPredictor`), the second pass prices each row from
    those predictions. ``record_only``: stop after that one ``predict_fn`` call per (family, GPU) (a recording
    ``predict_fn`` then holds every distinct launch, :func:`.logo.record_launches`) and return an empty frame.
    ``kv_cache_dtype``: every row's KV cache (default: :func:`.price.kv_cache_dtype_of` its linear layers' dtype).

    Raises:
        InputError: a missing example config, a pricing error (the row is named), or a prediction of the deploy
            models (:meth:`synperf.e2e.compose.SharedPredictor.refuse_deploy`).
    """
    priced = rows[rows["reason"] == ""].reset_index(drop=True)
    if priced.empty:
        return pd.DataFrame(columns=[*KEYS, "measured_ttft_ms", "measured_tpot_ms", "ttft_mean_ms", "tpot_mean_ms",
                                     "preemptions"])
    configs = {m: load_model_config(Path(examples_dir) / f"{m}.json") for m in priced["model"].unique()}
    experiments = {fam: exp for fam, exp in GEMM_ROUTES.values() if exp}

    def routed(family, params, gpu, **kw):
        return predict_fn(family, params, gpu, **({"experiment": experiments[family]} if family in experiments
                                                  else {}), **kw)

    # two passes: the first records every row's launches, one predict per (family, GPU) prices them all
    shared = SharedPredictor(routed)
    out = []
    for fn in (shared.record, None):
        if fn is None:
            shared.predict(models_dir=models_dir, registry=registry)
            if record_only:
                return pd.DataFrame()
            shared.refuse_deploy("serving evaluation")
            fn = shared
        out = []
        for i, r in priced.iterrows():
            try:
                res = serve(configs[r["model"]], r["gpu"], int(r["tp"]), int(r["isl"]), int(r["osl"]),
                            int(r["concurrency"]), num_requests=num_requests_per_c * int(r["concurrency"]),
                            gemm_dtype=r["gemm_dtype"], predict_fn=fn, models_dir=models_dir,
                            registry=registry, collectives=collectives, overhead=overhead,
                            kv_cache_dtype=kv_cache_dtype)
            except InputError as e:
                raise InputError(f"silicon row {r.get('id', i)}: {e}") from None
            out.append({**{k: r[k] for k in KEYS}, "measured_ttft_ms": r["silicon_ttft_ms"],
                        "measured_tpot_ms": r["silicon_tpot_ms"], **res})
            if progress:
                progress(i + 1, len(priced))
    return pd.DataFrame(out)


def add_baseline(scores: pd.DataFrame, baseline_csv: str | os.PathLike | None) -> pd.DataFrame:
    """``scores`` with aiconfigurator's ``aic_ttft_ms``/``aic_tpot_ms`` joined on :data:`KEYS` from the cached
    table (``#`` header lines are comments); NaN where the table has no estimate or is absent.

    Raises:
        InputError: the table lacks a key or estimate column.
    """
    s = scores.copy()
    if baseline_csv is None or not Path(baseline_csv).exists():
        s["aic_ttft_ms"], s["aic_tpot_ms"] = np.nan, np.nan
        return s
    b = pd.read_csv(baseline_csv, comment="#")
    missing = [c for c in KEYS + ["aic_ttft_ms", "aic_tpot_ms"] if c not in b.columns]
    if missing:
        raise InputError(f"{baseline_csv}: missing columns {missing}")
    b = b[KEYS + ["aic_ttft_ms", "aic_tpot_ms"]].drop_duplicates(KEYS)
    s = s.astype({"tp": "int64", "concurrency": "int64", "isl": "int64", "osl": "int64"})
    return s.merge(b.astype({"tp": "int64", "concurrency": "int64", "isl": "int64", "osl": "int64"}),
                   on=KEYS, how="left")


def mape_table(s: pd.DataFrame) -> pd.DataFrame:
    """MAPE of TTFT and TPOT (%) per (model, gemm_dtype, gpu, tp), per (model, gemm_dtype) and over all rows, and
    the share of rows (%) whose measured TTFT/TPOT lies inside the predicted 80% interval
    (``ttft_coverage_pct``/``tpot_coverage_pct``, over the rows with finite bounds; NaN when none has)."""
    s = s.assign(e_ttft=_ape(s["ttft_mean_ms"], s["measured_ttft_ms"]),
                 e_tpot=_ape(s["tpot_mean_ms"], s["measured_tpot_ms"]),
                 a_ttft=_ape(s["aic_ttft_ms"], s["measured_ttft_ms"]),
                 a_tpot=_ape(s["aic_tpot_ms"], s["measured_tpot_ms"]))

    def cover(g, m):
        lo, hi, y = (g.get(f"{m}_low_ms", pd.Series(np.nan, index=g.index)),
                     g.get(f"{m}_high_ms", pd.Series(np.nan, index=g.index)), g[f"measured_{m}_ms"])
        ok = np.isfinite(lo.astype(float)) & np.isfinite(hi.astype(float)) & y.notna()
        return 100.0 * float(((lo[ok] <= y[ok]) & (y[ok] <= hi[ok])).mean()) if ok.any() else np.nan

    def agg(g):
        have = g["a_ttft"].notna()
        both = g[have]
        return pd.Series({"rows": len(g), "ttft_mape_pct": g["e_ttft"].mean(), "tpot_mape_pct": g["e_tpot"].mean(),
                          "ttft_coverage_pct": cover(g, "ttft"), "tpot_coverage_pct": cover(g, "tpot"),
                          "aic_rows": int(have.sum()),
                          "synperf_ttft_mape_on_aic_rows_pct": both["e_ttft"].mean() if len(both) else np.nan,
                          "synperf_tpot_mape_on_aic_rows_pct": both["e_tpot"].mean() if len(both) else np.nan,
                          "aic_ttft_mape_pct": both["a_ttft"].mean() if len(both) else np.nan,
                          "aic_tpot_mape_pct": both["a_tpot"].mean() if len(both) else np.nan})

    parts = []
    for scope, keys in (("model/gpu/tp", ["model", "gemm_dtype", "gpu", "tp"]), ("model", ["model", "gemm_dtype"]),
                        ("concurrency", ["concurrency"])):
        t = s.groupby(keys).apply(agg, include_groups=False).reset_index()
        t.insert(0, "scope", scope)
        parts.append(t)
    # True / False per family; unknown (None: the model did not say) is neither seen nor unseen; a family the row's
    # model does not launch (a float NaN: no flag in that row, e.g. fused_moe for a dense model) does not count
    flags = s[[c for c in s.columns if c.startswith("seen_")]]
    absent = flags.apply(lambda col: col.map(lambda v: isinstance(v, float) and np.isnan(v)))
    seen, unseen = flags.isin([True]) | absent, flags.isin([False]) | absent
    seen, unseen = seen & ~absent.all(axis=1).to_numpy()[:, None], unseen & ~absent.all(axis=1).to_numpy()[:, None]
    scopes = [("all fp8 rows", s["gemm_dtype"] == "fp8"), ("all rows", s["gemm_dtype"].notna())]
    if "preemptions" in s.columns:   # a diagnostic split: rows whose simulated KV cache never saturates
        scopes.append(("fp8 rows without simulated preemption", (s["gemm_dtype"] == "fp8") & (s["preemptions"] == 0)))
    if seen.shape[1]:
        fp8 = s["gemm_dtype"] == "fp8"
        dense = s["s_fused_moe"].isna() if "s_fused_moe" in s.columns else pd.Series(True, index=s.index)
        scopes += [("fp8 rows, GPU seen by every family", fp8 & seen.all(axis=1)),
                   ("fp8 rows, GPU unseen by every family", fp8 & unseen.all(axis=1)),
                   (DENSE_SEEN, fp8 & dense & seen.all(axis=1)),
                   (DENSE_UNSEEN, fp8 & dense & unseen.all(axis=1))]
    for name, sel in scopes:
        if sel.any():
            t = agg(s[sel]).to_frame().T
            t.insert(0, "scope", name)
            parts.append(t)
    return pd.concat(parts, ignore_index=True)


def scatter(s: pd.DataFrame, path: str | os.PathLike) -> None:
    """Predicted against measured TTFT and TPOT (log-log), synperf and aiconfigurator, written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, m in zip(axes, ("ttft", "tpot")):
        x = s[f"measured_{m}_ms"]
        if x.isna().all():
            ax.text(0.5, 0.5, "no priced rows", ha="center", transform=ax.transAxes)
            continue
        ax.scatter(x, s[f"{m}_mean_ms"], s=12, label="synperf", alpha=0.7)
        if s[f"aic_{m}_ms"].notna().any():
            ax.scatter(x, s[f"aic_{m}_ms"], s=12, marker="x", label="aiconfigurator", alpha=0.7)
        lo, hi = np.nanmin(x) / 1.5, np.nanmax(x) * 1.5
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {m.upper()} (ms)")
        ax.set_ylabel(f"predicted {m.upper()} (ms)")
        ax.legend()
    fig.suptitle("vLLM serving rows of aiconfigurator's silicon sample")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


#: the experiments every priced row needs (the LM head is a bf16 GEMM), and those of each linear-layer dtype
NEEDED = ("gemm", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul")


def mark_untrained(rows: pd.DataFrame, experiments: dict) -> pd.DataFrame:
    """``rows`` with the priced rows whose kernels no experiment of ``experiments`` (a config's ``experiments``
    block) prices given the reason ``no trained model in this config (<experiments>)`` (MoE rows also need
    ``fused_moe``)."""
    out = rows.copy()
    for dtype, (_, exp) in GEMM_ROUTES.items():
        missing = [e for e in NEEDED + ((exp,) if exp else ()) if e not in experiments]
        sel = (out["reason"] == "") & (out["gemm_dtype"] == dtype)
        if missing and sel.any():
            out.loc[sel, "reason"] = f"no trained model in this config ({', '.join(missing)})"
    moe = (out["reason"] == "") & out["model_path"].isin(MOE_MODELS)
    if "fused_moe" not in experiments and moe.any():
        out.loc[moe, "reason"] = "no trained model in this config (fused_moe)"
    return out


def score_silicon(silicon_csv: str | os.PathLike, examples_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                  registry: Registry, collectives: CollectiveModel, models_dir: str | os.PathLike | None = None,
                  baseline_csv: str | os.PathLike | None = None, predict_fn: Callable = EVALUATION_PREDICT,
                  overhead: Overhead = Overhead(), experiments: dict | None = None) -> dict[str, pd.DataFrame]:
    """Write the four outputs of the module docstring; returns the tables by file stem. With ``experiments`` (the
    config's block), rows whose kernels no configured experiment prices are counted by that reason
    (:func:`mark_untrained`) instead of failing.

    Raises:
        InputError: from :func:`.silicon.read_silicon`, :func:`score_rows` or :func:`add_baseline`.
    """
    rows = read_silicon(silicon_csv)
    if experiments is not None:
        rows = mark_untrained(rows, experiments)
    scores = add_baseline(score_rows(rows, examples_dir, registry=registry, collectives=collectives,
                                     models_dir=models_dir, predict_fn=predict_fn, overhead=overhead),
                          baseline_csv)
    scores = widen_scores(scores)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = {"serving_scores": scores, "serving_mape": mape_table(scores), "serving_rows": counts_by_reason(rows)}
    for name, t in tables.items():
        write_csv(t, out / f"{name}.csv")
    write_serving_error(fit_serving_error(scores), out / "serving_error.json")
    scatter(scores, out / "serving_scatter.png")
    return tables
