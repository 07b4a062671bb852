"""The serving simulator's own error, measured on the silicon sample, added to the kernel bounds of TTFT and TPOT.

The 80% bounds :func:`.simulate.serve` returns hold the kernel predictors' errors only. What the simulator itself
gets wrong (the scheduler's timing, the client's arrivals, CPU time between iterations, preemption) is measured
here as one log half-width ``c`` per metric, the split-conformal quantile of what each measured row needs beyond
its kernel bounds (:func:`synperf.e2e.intervals.needed_half_width`, :func:`~synperf.e2e.intervals.
conformal_half_width`), added in quadrature (:func:`~synperf.e2e.intervals.widen`), the rule the end-to-end
intervals follow (docs/e2e.md).

:func:`widen_scores` scores each row with the ``c`` of the rows on the *other* GPUs (leave one GPU out: no
measurement of the row's GPU sizes its interval) and keeps the kernel bounds as ``<metric>_kernel_low_ms``/
``_high_ms``; :func:`fit_serving_error` gives the ``c`` of all rows, which ``serving_error.json`` carries to
``synperf plan --concurrency --serving-error``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ._deps import (
    MAX_LOG_HALF_WIDTH,
    InputError,
    check_keys,
    conformal_half_width,
    needed_half_width,
    non_negative_number,
    shipped_half_width,
    widen,
)

#: the metrics with an interval
METRICS = ("ttft", "tpot")


def _needed(scores: pd.DataFrame, m: str) -> np.ndarray:
    return needed_half_width(scores[f"{m}_mean_ms"], scores[f"measured_{m}_ms"], scores[f"{m}_kernel_low_ms"],
                             scores[f"{m}_kernel_high_ms"])


def _with_kernel_bounds(scores: pd.DataFrame) -> pd.DataFrame:
    """``scores`` with ``<metric>_kernel_low_ms``/``_high_ms``: the bounds as :func:`.simulate.serve` gave them
    (copied from ``<metric>_low_ms``/``_high_ms`` the first time; kept when present)."""
    s = scores.copy()
    for m in METRICS:
        for side in ("low", "high"):
            if f"{m}_kernel_{side}_ms" not in s.columns:
                s[f"{m}_kernel_{side}_ms"] = s[f"{m}_{side}_ms"] if f"{m}_{side}_ms" in s.columns else np.nan
    return s


def kernel_bounds_only(scores: pd.DataFrame) -> pd.DataFrame:
    """``scores`` as :func:`.simulate.serve` gave them: ``<m>_low_ms``/``_high_ms`` back to the kernel bounds of a
    table :func:`widen_scores` widened, without its ``<m>_kernel_*`` and ``<m>_serving_log_hw`` columns (so that
    rows read back from ``serving_scores.csv`` and freshly scored ones are widened alike)."""
    s = scores.copy()
    for m in METRICS:
        if f"{m}_kernel_low_ms" in s.columns:
            s[f"{m}_low_ms"], s[f"{m}_high_ms"] = s[f"{m}_kernel_low_ms"], s[f"{m}_kernel_high_ms"]
    return s.drop(columns=[f"{m}_{c}" for m in METRICS for c in ("kernel_low_ms", "kernel_high_ms", "serving_log_hw")],
                  errors="ignore")


def widen_scores(scores: pd.DataFrame, group: str = "gpu") -> pd.DataFrame:
    """``scores`` (one row per measured serving point: ``measured_<m>_ms``, ``<m>_mean_ms`` and the kernel bounds)
    with ``<m>_low_ms``/``_high_ms`` widened by the ``c`` of the rows of the other ``group`` values, and that ``c``
    as ``<m>_serving_log_hw`` (``inf`` where fewer than four other rows: too few for the coverage)."""
    s = _with_kernel_bounds(scores)
    keys = s[group].astype(str).to_numpy()
    for m in METRICS:
        need = _needed(s, m)
        c_of = {k: conformal_half_width(need[keys != k]) for k in np.unique(keys)}
        c = np.array([c_of[k] for k in keys], dtype="float64")
        bounds = [widen(p, lo, hi, ci) for p, lo, hi, ci in
                  zip(s[f"{m}_mean_ms"], s[f"{m}_kernel_low_ms"], s[f"{m}_kernel_high_ms"], c)]
        s[f"{m}_serving_log_hw"] = c
        s[f"{m}_low_ms"] = [b[0] for b in bounds]
        s[f"{m}_high_ms"] = [b[1] for b in bounds]
    return s


def fit_serving_error(scores: pd.DataFrame) -> dict:
    """The ``c`` of all rows per metric (``{"ttft": c, "tpot": c, "rows": n}``); a metric with too few rows for the
    coverage (an infinite or NaN quantile) gets 0, with a warning (the end-to-end composition error's rule)."""
    s = _with_kernel_bounds(scores)
    out = {m: shipped_half_width(conformal_half_width(_needed(s, m)), f"serving {m.upper()}") for m in METRICS}
    out["rows"] = int(len(s))
    return out


def write_serving_error(error: dict, path: str | os.PathLike) -> None:
    """Write :func:`fit_serving_error`'s result as JSON (atomically)."""
    p = Path(path)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps({"form": "log half-width added in quadrature to the kernel bounds (80%)",
                               "serving_log_half_width": {m: error[m] for m in METRICS},
                               "rows": error.get("rows")}, indent=1))
    os.replace(tmp, p)


def read_serving_error(path: str | os.PathLike) -> dict[str, float]:
    """``{"ttft": c, "tpot": c}`` from a file of :func:`write_serving_error`.

    Raises:
        InputError: unreadable, not JSON, an unknown key, no ``serving_log_half_width`` object, a metric missing
            or unknown, or a value that is not a JSON number in [0, :data:`~synperf.e2e.compose.MAX_LOG_HALF_WIDTH`].
    """
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot read the serving error ({e})") from None
    if isinstance(d, dict):
        check_keys(d, ("form", "serving_log_half_width", "rows"), path)
    hw = d.get("serving_log_half_width") if isinstance(d, dict) else None
    if not isinstance(hw, dict):
        raise InputError(f"{path}: expected a JSON object with serving_log_half_width {{ttft, tpot}} (as written by "
                         f"the serving rule, results/serving/serving_error.json)")
    missing = [m for m in METRICS if m not in hw]
    if missing:
        raise InputError(f"{path}: serving_log_half_width lacks {missing[0]!r} (expected ttft and tpot)")
    check_keys(hw, METRICS, f"{path}: serving_log_half_width")
    out = {m: non_negative_number(hw[m], f"{path}: serving_log_half_width.{m}",
                                  f"a log half-width in [0, {MAX_LOG_HALF_WIDTH:g}]", MAX_LOG_HALF_WIDTH)
           for m in METRICS}
    return out
