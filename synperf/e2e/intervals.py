"""80% intervals of an end-to-end prediction (prefill, median decode step, total) from the kernel launches' intervals.

:func:`synperf.api.predict` bounds each launch by an 80% interval, ``predicted_latency_low_us`` and
``predicted_latency_high_us`` (:meth:`synperf.model.fingerprint.FingerprintModel.interval`: quantiles of
``measured / predicted`` on held-out problems for a GPU the family trained on, on training GPUs left out in turn for
one it did not). How those combine depends on how the launches' errors are
correlated; the rule here is:

* **fully correlated within a kernel family**: the launches of one family on one GPU share a model and a GPU, and
  their errors share its bias, so a family's bound is every one of its launches at its bound at
  once: ``d_f = M(latency + delta_f) - M(latency)`` where ``delta_f`` is, per iteration, the family's launches'
  ``count x (bound - point)`` and ``M`` the metric (sum of prefill iterations, median of decode iterations, sum of
  all iterations);
* **independent across families**: different models, features and training rows, so the families' deviations add
  in quadrature, ``low = M - sqrt(sum_f min(d_f_low, 0)^2)``, ``high = M + sqrt(sum_f max(d_f_high, 0)^2)`` (the
  80% half-width of a sum of independent errors when each is about normal; exact for one family).

The result lies between the two extremes: narrower than every launch at its bound at once (all families
correlated), wider than treating every launch as independent. Collectives (measured tables) and the framework
overhead count at their point value; launches without an interval (NaN bounds) count at their point value; a
prediction none of whose launches has an interval has NaN bounds.

**Composition error.** The kernel bounds leave out what the composition itself gets wrong (the operator list, the
framework's CPU time, collectives priced from a proxy table). The end-to-end evaluation measures it on the real
runs as one log half-width ``c`` per metric, added in quadrature to the kernel bounds:
``low = P * exp(-sqrt(l^2 + c^2))``, ``high = P * exp(sqrt(h^2 + c^2))`` with ``l = log(P / low)``,
``h = log(high / P)`` (:func:`widen`). ``c`` is a split-conformal quantile (Lei et al., "Distribution-free
predictive inference for regression", JASA 2018): each run needs ``c_i`` to hold its measured value
(:func:`needed_half_width`), and ``c`` is the ``ceil((n + 1) 0.8)``-th smallest of the ``n`` runs' ``c_i``
(:func:`conformal_half_width`). The evaluation scores each run with the ``c`` of the other model-and-trace pairs
(leave one run out) and writes the ``c`` of all runs beside the overhead (``overhead.json``), where ``synperf e2e``
and ``synperf plan`` read it with ``--overhead``.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

#: the bounds :func:`phase_intervals` returns (seconds)
INTERVAL_KEYS = ("prefill_low_s", "prefill_high_s", "decode_step_low_s", "decode_step_high_s", "total_low_s",
                 "total_high_s")
LOW, HIGH = "predicted_latency_low_us", "predicted_latency_high_us"
#: the metrics of an end-to-end prediction that carry an interval
INTERVAL_METRICS = ("prefill", "decode_step", "total")
#: nominal coverage of the intervals
COVERAGE = 0.8
log = logging.getLogger(__name__)


def family_deltas(launches: pd.DataFrame, families) -> pd.DataFrame | None:
    """Per iteration and kernel family, the change of the iteration's latency (seconds) with every launch of the
    family at its lower (upper) bound: columns ``iteration`` and ``<family>_low_s``/``<family>_high_s``.

    Args:
        launches: one row per (iteration, operator) with ``iteration``, ``family``, ``count``, ``latency_us`` (the
            point prediction of one launch, µs) and ``latency_low_us``/``latency_high_us`` (NaN: no interval).
        families: the kernel families to bound.

    Returns:
        None when no launch has an interval.
    """
    if "latency_low_us" not in launches.columns or launches["latency_low_us"].isna().all():
        return None
    its = pd.Index(launches["iteration"].unique(), name="iteration")
    out = pd.DataFrame(index=its)
    for fam in families:
        sel = launches["family"] == fam
        if not sel.any() or launches.loc[sel, "latency_low_us"].isna().all():
            continue
        f = launches.loc[sel]
        for side in ("low", "high"):
            b = f[f"latency_{side}_us"].fillna(f["latency_us"])
            d = (f["count"] * (b - f["latency_us"]) / 1e6).groupby(f["iteration"]).sum()
            out[f"{fam}_{side}_s"] = d.reindex(its).fillna(0.0).to_numpy()
    return out.reset_index()


def phase_intervals(iterations: pd.DataFrame, deltas: pd.DataFrame | None) -> dict:
    """The bounds :data:`INTERVAL_KEYS` (seconds) of prefill (sum of prefill iterations), decode step (median of
    decode iterations) and total (sum of all), by the module's rule.

    Args:
        iterations: ``iteration``, ``phase`` (``prefill``/``decode``) and ``latency_s`` per iteration.
        deltas: :func:`family_deltas` of the same iterations (None: every bound NaN).
    """
    if deltas is None:
        return dict.fromkeys(INTERVAL_KEYS, float("nan"))
    d = iterations[["iteration"]].merge(deltas, on="iteration", how="left").fillna(0.0)
    lat = iterations["latency_s"].to_numpy(dtype="float64")
    phase = iterations["phase"].to_numpy()
    metrics = {"prefill": lambda x: float(x[phase == "prefill"].sum()),
               "decode_step": lambda x: float(np.median(x[phase == "decode"])) if (phase == "decode").any()
               else float("nan"),
               "total": lambda x: float(x.sum())}
    fams = sorted({c.rsplit("_", 2)[0] for c in deltas.columns if c.endswith(("_low_s", "_high_s"))})
    fam_deltas = {f: (d[f"{f}_low_s"].to_numpy(), d[f"{f}_high_s"].to_numpy()) for f in fams}
    out = {}
    for name, m in metrics.items():
        out[f"{name}_low_s"], out[f"{name}_high_s"] = quadrature_bounds(m, lat, fam_deltas)
    return out


def quadrature_bounds(metric, latency_s: np.ndarray, fam_deltas: dict) -> tuple[float, float]:
    """``(low, high)`` of ``metric(latency_s)`` by the module's rule: each family's shift ``d_f`` is the metric with
    the family's per-iteration deltas added minus the point value; the shifts add in quadrature.

    Args:
        metric: a function of a per-iteration latency array (seconds) returning a float.
        latency_s: the point latency per iteration (seconds).
        fam_deltas: per family, ``(low_delta_s, high_delta_s)`` arrays aligned with ``latency_s`` (the change of
            each iteration with every launch of the family at its lower / upper bound).
    """
    point = metric(latency_s)
    lo = [min(metric(latency_s + dl) - point, 0.0) for dl, _ in fam_deltas.values()]
    hi = [max(metric(latency_s + dh) - point, 0.0) for _, dh in fam_deltas.values()]
    return point - float(np.sqrt(np.sum(np.square(lo)))), point + float(np.sqrt(np.sum(np.square(hi))))


def _half_widths(point, low, high) -> tuple[np.ndarray, np.ndarray]:
    """The kernel bounds' log half-widths ``(log(point / low), log(high / point))``: 0 for a NaN bound (none), ``inf``
    for a low bound <= 0 (unbounded below: a sum of family shifts can reach below zero) or an infinite high one."""
    p = np.asarray(point, dtype="float64")
    lo, hi = np.asarray(low, dtype="float64"), np.asarray(high, dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        lw = np.where(np.isnan(lo), 0.0, np.where(lo > 0, np.log(p / lo), np.inf))
        hw = np.where(np.isnan(hi), 0.0, np.log(np.maximum(hi, p) / p))
    return np.maximum(lw, 0.0), np.maximum(hw, 0.0)


def needed_half_width(predicted, measured, low, high) -> np.ndarray:
    """Per prediction, the smallest composition half-width ``c >= 0`` (log) whose :func:`widen` interval holds the
    measured value: 0 inside the kernel bounds, else ``sqrt(r^2 - h^2)`` above and ``sqrt(r^2 - l^2)`` below, with
    ``r = log(measured / predicted)`` and ``l``, ``h`` the bounds' log half-widths (0 without a bound, ``inf``
    unbounded). NaN where the measured value is missing; ``inf`` where a value is 0 (no width holds it).

    Args:
        predicted, measured, low, high: arrays of one shape (seconds or milliseconds alike); ``low``/``high`` NaN
            for a prediction without kernel bounds.
    """
    lw, hw = _half_widths(predicted, low, high)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(np.asarray(measured, dtype="float64") / np.asarray(predicted, dtype="float64"))
        side = np.where(r >= 0, hw, lw)
        inside = np.abs(r) <= side
        return np.where(inside, 0.0, np.sqrt(np.maximum(r ** 2 - np.where(np.isinf(side), 0.0, side) ** 2, 0.0)))


def conformal_half_width(needed, coverage: float = COVERAGE) -> float:
    """The split-conformal quantile of ``needed`` (:func:`needed_half_width` of ``n`` calibration runs, NaN ones
    left out, ``inf`` ones kept: no width holds them): its ``ceil((n + 1) coverage)``-th smallest value; ``inf``
    when that rank exceeds ``n`` (too few runs to hold the coverage), NaN without runs."""
    v = np.asarray(needed, dtype="float64")
    v = np.sort(v[~np.isnan(v)])
    if len(v) == 0:
        return float("nan")
    k = math.ceil((len(v) + 1) * coverage)
    return float(v[k - 1]) if k <= len(v) else float("inf")


def widen(point: float, low: float, high: float, c: float) -> tuple[float, float]:
    """``(low, high)`` of one metric with the composition half-width ``c`` (log) added in quadrature to the kernel
    bounds' log half-widths (module docstring). Without kernel bounds (NaN) the interval is ``c`` alone; a low bound
    <= 0 (unbounded below) is kept; with ``c`` 0 or NaN, or a point value <= 0, the bounds are returned unchanged."""
    if not (c > 0) or not (point > 0):
        return low, high
    lw, hw = (float(x) for x in _half_widths(point, low, high))
    new_low = low if np.isinf(lw) else point * math.exp(-math.hypot(lw, c))
    return new_low, point * math.exp(math.hypot(hw, c))


def shipped_half_width(c: float, what: str) -> float:
    """A conformal half-width to write for the CLI: ``c``, or 0 with a warning naming ``what`` when there were too
    few rows for the coverage (``inf``) or none (NaN)."""
    if math.isfinite(c):
        return c
    log.warning("%s: too few measured rows for an 80%% error (half-width %s); 0 is written", what, c)
    return 0.0
