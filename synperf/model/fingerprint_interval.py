"""The fingerprint predictor's interval: bounds of ``log(latency / prediction)`` per row, 80% by default.

* A training GPU with an own-GPU correction: the 10% and 90% quantiles of its log residuals on problems that
  correction did not train on (:func:`held_out_quantiles`, :attr:`synperf.model.fingerprint.FingerprintModel.
  local_q`: five folds by problem, both corrections refitted without the fold's problems).
* Another GPU that trained: the shared correction's out-of-fold log residuals (leave one training GPU out: the
  correction refitted without that GPU, its fitted fingerprint kept; without a correction, the fingerprint's own
  residuals), each GPU weighing the same (:func:`synperf.model.correction.gpu_quantiles`;
  :attr:`synperf.model.fingerprint.FingerprintModel.residual_q`).
* Both widened in quadrature by the fingerprint's ``log_spread`` (normal approximation, ``z = 1.2816`` for 80%).
* A GPU without measurements: the rule :func:`synperf.model.fingerprint_choice.choose_interval` chose on the training
  GPUs' residuals when each was predicted from the others (:func:`rule_bounds`): their quantiles in the same case (a
  GPU of its class trained or not), or quantiles that widen with the GPU's spec-sheet distance to every training
  GPU (:func:`synperf.model.pipes.spec_distance`).

All are 10%/90% quantiles, scaled by the ratio of normal quantiles for another level.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from synperf.model.pipes import class_pool, spec_distance

#: folds (by problem) of an own-GPU correction's held-out residuals (:func:`held_out_quantiles`)
OWN_GPU_FOLDS = 5


def held_out_quantiles(fit_shared, fit_own, r: np.ndarray, gpus: np.ndarray, groups: np.ndarray,
                       own_gpus: list, n_folds: int = OWN_GPU_FOLDS) -> dict:
    """GPU of ``own_gpus`` -> the 10% and 90% quantiles of its log residuals ``r`` (shape ``(n,)``, one GPU id of
    ``gpus`` and one problem key of ``groups`` per row) after the shared and its own-GPU correction, each row
    predicted by corrections that never saw its problem: scikit-learn's ``GroupKFold`` by problem, and per fold
    ``fit_shared(train_rows)`` (the shared correction fitted on those row positions, returning its ``(n,)``
    prediction of every row; zeros for no shared correction) then ``fit_own(gpu, train_rows, base)`` (a callable
    giving the GPU's own correction of ``base = r - shared`` at row positions) on that GPU's training rows of the
    fold. ``{}`` with fewer than ``n_folds`` problems. The GPU's fingerprint constants (in ``r``) stay fitted on
    all of its rows: a few numbers per GPU, so the quantiles are slightly optimistic; the configured protocol's
    held-out problems measure by how much."""
    from sklearn.model_selection import GroupKFold

    if len(np.unique(groups)) < n_folds:
        return {}
    res = {g: [] for g in own_gpus}
    for train, test in GroupKFold(n_folds).split(r, r, groups):
        base = r - fit_shared(train)
        for g in own_gpus:
            tr, te = train[gpus[train] == g], test[gpus[test] == g]
            if len(tr) and len(te):
                res[g].append(base[te] - fit_own(g, tr, base)(te))
    return {g: tuple(float(v) for v in np.quantile(np.concatenate(v), (0.1, 0.9))) for g, v in res.items() if v}


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
               registry, level: float, local_q: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``log(latency / prediction)`` per row (GPU ids ``gpus``, fingerprint spreads ``spread``, shape
    ``(n,)``) at ``level``: 10%/90% residual quantiles (scaled by the normal quantile ratio for another ``level``),
    widened in quadrature by the fingerprint's ``log_spread``: a GPU's own held-out quantiles where ``local_q`` has
    them (GPU -> quantiles, :func:`held_out_quantiles`), else the correction's out-of-fold quantiles
    ``residual_q``; for a GPU not in ``training``, when a rule was recorded (``unseen_q``,
    :func:`synperf.model.fingerprint_choice.interval_rule`), the rule's bounds (:func:`rule_bounds`, scaled the
    same way). NaN where none is known."""
    z = norm.ppf(0.5 + level / 2) / norm.ppf(0.9)
    zs = norm.ppf(0.5 + level / 2)
    low, high = np.full(len(gpus), np.nan), np.full(len(gpus), np.nan)
    own = {str(g): q for g, q in (local_q or {}).items() if np.isfinite(q).all()}
    for g in np.unique(gpus):
        q = own.get(str(g), residual_q)
        if not np.isfinite(q).all():
            continue
        on = gpus == g
        lo, hi = (v * z for v in q)
        low[on] = -np.sqrt(lo ** 2 + (zs * spread[on]) ** 2) if lo < 0 else lo - zs * spread[on]
        high[on] = np.sqrt(hi ** 2 + (zs * spread[on]) ** 2) if hi > 0 else hi + zs * spread[on]
    if unseen_q:
        new = ~np.isin(gpus, list(training))
        for g in np.unique(gpus[new]):
            q = rule_bounds(unseen_q, str(g), sorted(training), registry)
            low[gpus == g], high[gpus == g] = q[0] * z, q[1] * z
    return low, high
