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
prediction none of whose launches has an interval has NaN bounds. The rule is an assumption about error structure,
not a calibration: ``synperf.e2e.evaluate`` reports how often the measured totals fall inside.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the bounds :func:`phase_intervals` returns (seconds)
INTERVAL_KEYS = ("prefill_low_s", "prefill_high_s", "decode_step_low_s", "decode_step_high_s", "total_low_s",
                 "total_high_s")
LOW, HIGH = "predicted_latency_low_us", "predicted_latency_high_us"


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
