"""The fingerprint predictor's interval: bounds of ``log(latency / prediction)`` per row.

A GPU that trained takes the correction's out-of-fold residual quantiles (:attr:`synperf.model.fingerprint.
FingerprintModel.residual_q`), widened in quadrature by its fingerprint's ``log_spread``; a GPU without measurements
takes the interval rule :func:`synperf.model.fingerprint_choice.choose_interval` chose on the training GPUs'
residuals when each was predicted from the others (:func:`rule_bounds`). Both are 10%/90% quantiles, scaled by the
ratio of normal quantiles for another level.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from synperf.model.pipes import class_pool, spec_distance


def rule_bounds(rule: dict, gpu: str, training: list[str], registry) -> tuple[float, float]:
    """The 80% bounds of ``log(latency / prediction)`` that ``rule`` (:func:`synperf.model.fingerprint_choice.
    interval_rule`) gives a GPU without measurements when the GPUs of ``training`` trained: the case quantiles of
    its case (a GPU of its class among ``training`` or not), or the scaled quantiles times ``offset + d`` with
    ``d`` its :func:`synperf.model.pipes.spec_distance` to ``training``."""
    if rule["kind"] == "case":
        found = class_pool(gpu, training, registry)[1].startswith("class")
        return rule["q"].get(found, rule["q"][None])
    scale = rule["offset"] + spec_distance(gpu, training, registry)
    return rule["q"][0] * scale, rule["q"][1] * scale


def log_bounds(residual_q: tuple, unseen_q: dict, training: list[str], gpus: np.ndarray, spread: np.ndarray,
               registry, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``log(latency / prediction)`` per row (GPU ids ``gpus``, fingerprint spreads ``spread``, shape
    ``(n,)``) at ``level``: the correction's out-of-fold residual quantiles ``residual_q`` (10%/90%, scaled by the
    normal quantile ratio for another ``level``), widened in quadrature by the fingerprint's ``log_spread``; for a
    GPU not in ``training``, when a rule was recorded (``unseen_q``, :func:`synperf.model.fingerprint_choice.
    interval_rule`), the rule's bounds (:func:`rule_bounds`, scaled the same way). NaN where neither is known."""
    z = norm.ppf(0.5 + level / 2) / norm.ppf(0.9)
    low, high = np.full(len(gpus), np.nan), np.full(len(gpus), np.nan)
    if np.isfinite(residual_q).all():
        lo, hi = (q * z for q in residual_q)
        zs = norm.ppf(0.5 + level / 2)
        low[:] = -np.sqrt(lo ** 2 + (zs * spread) ** 2) if lo < 0 else lo - zs * spread
        high[:] = np.sqrt(hi ** 2 + (zs * spread) ** 2) if hi > 0 else hi + zs * spread
    if unseen_q:
        new = ~np.isin(gpus, list(training))
        for g in np.unique(gpus[new]):
            q = rule_bounds(unseen_q, str(g), sorted(training), registry)
            low[gpus == g], high[gpus == g] = q[0] * z, q[1] * z
    return low, high
