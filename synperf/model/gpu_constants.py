"""A GPU's fingerprint: its effective constants (launch floor and pipe multipliers), fitted on its measurements
(:func:`fit_fingerprint`), predicted from the training GPUs of its class (:func:`predict_fingerprint`,
:func:`pool_constants`), or refitted on a few measured rows (:func:`fewshot_fingerprint`). The method is described
in :mod:`synperf.model.fingerprint`, which uses them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

from synperf.model.pipes import LOWER_BOUNDS, PIPES, class_pool

#: how a GPU without measurements gets its constants from its pool (:func:`pool_constants`), the default first:
#: ``pooled`` is the estimator of a measured GPU's own constants applied to the pool's rows; ``mean`` averages
#: constants whose pipes may be collinear on one GPU (an L2 and a DRAM multiplier that trade off). With two training
#: GPUs, leaving one out leaves a pool of one, where both rules give the same constants, so the default decides.
RULES = ("pooled", "mean")
#: relative weight of each prior pseudo-row in a few-shot fit (one measured row weighs 1)
FEWSHOT_PRIOR_WEIGHT = 1.0
#: a prior constant at or below this (microseconds, or a dimensionless multiplier) counts as zero in a few-shot fit
PRIOR_ZERO = 1e-9


@dataclass
class Fingerprint:
    """The effective constants of one GPU.

    Attributes:
        gpu: registry id.
        floor_us: launch floor, microseconds.
        multipliers: one per :data:`PIPES`, dimensionless (1 = the spec-sheet time, 2 = half the peak reached).
        source: where the constants came from (``"fitted on h100_sxm measurements (812 rows)"``, ``"predicted
            from spec row: class sm_8x GDDR (a40, l40)"``, ``"few-shot fit on 8 rows"``).
        log_spread: standard deviation of ``log(time / fitted time)`` expected of these constants (0 for fitted
            ones; leave-one-training-GPU-out for predicted ones).
    """

    gpu: str
    floor_us: float
    multipliers: np.ndarray
    source: str
    log_spread: float = 0.0

    @property
    def constants(self) -> np.ndarray:
        """``[floor_us, *multipliers]``, shape ``(1 + len(PIPES),)``."""
        return np.concatenate([[self.floor_us], self.multipliers])

    def time_us(self, terms: np.ndarray) -> np.ndarray:
        """Fingerprint time per row of ``terms`` (:func:`pipe_times`), microseconds."""
        return self.floor_us + np.asarray(terms, dtype="float64") @ self.multipliers

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "launch_floor_us": float(self.floor_us),
                **{p: float(c) for p, c in zip(PIPES, self.multipliers)}, "source": self.source,
                "log_spread": float(self.log_spread)}


def _relative_lsq(terms: np.ndarray, y: np.ndarray, prior: np.ndarray | None = None,
                  prior_weight: float = FEWSHOT_PRIOR_WEIGHT, weights: np.ndarray | None = None) -> np.ndarray:
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype="float64")
    x = np.column_stack([np.ones(len(y)), terms]) * (w / y)[:, None]
    b = w.copy()
    if prior is not None:
        # one pseudo-row per constant: prior_weight * (c_j / prior_j - 1); a zero prior pulls on the absolute value.
        # A prior below PRIOR_ZERO is a zero of the solver's rounding (a pooled fit leaves 1e-17): dividing by it
        # would give its pseudo-row a weight of 1e16 and stop the bounded solver at the bounds
        positive = prior > PRIOR_ZERO
        scale = np.where(positive, prior, 1.0)
        x = np.vstack([x, np.diag(prior_weight / scale)])
        b = np.concatenate([b, prior_weight * np.where(positive, 1.0, 0.0)])
    return lsq_linear(x, b, bounds=(LOWER_BOUNDS, np.inf), method="bvls").x


def fit_fingerprint(gpu: str, terms: np.ndarray, latency_us: np.ndarray) -> Fingerprint:
    """Fit a GPU's constants on its measured rows: ``terms`` (:func:`pipe_times`, ``(n, len(PIPES))``) and
    ``latency_us`` (``(n,)``, > 0), by relative least squares with every constant ``>= 0`` and the DRAM
    multiplier ``>= 1`` (:data:`LOWER_BOUNDS`).

    Raises:
        ValueError: no rows, or a latency that is not finite and > 0.
    """
    y = np.asarray(latency_us, dtype="float64")
    if len(y) == 0 or not (np.isfinite(y) & (y > 0)).all():
        raise ValueError(f"fingerprint of {gpu}: needs >= 1 row with finite latency_us > 0")
    c = _relative_lsq(np.asarray(terms, dtype="float64"), y)
    return Fingerprint(gpu, float(c[0]), c[1:], f"fitted on {gpu} measurements ({len(y)} rows)")


def fewshot_fingerprint(prior: Fingerprint, terms: np.ndarray, latency_us: np.ndarray,
                        prior_weight: float = FEWSHOT_PRIOR_WEIGHT) -> Fingerprint:
    """Refit ``prior``'s constants (a predicted fingerprint of the same GPU) on ``k`` measured rows of the GPU,
    each constant pulled to its prior value by one pseudo-row (:data:`FEWSHOT_PRIOR_WEIGHT`); ``k = 0`` returns
    ``prior``. The spread shrinks as ``prior.log_spread * sqrt(w / (w + k))`` (``w`` = the number of constants).

    Raises:
        ValueError: a latency that is not finite and > 0.
    """
    y = np.asarray(latency_us, dtype="float64")
    if len(y) == 0:
        return prior
    if not (np.isfinite(y) & (y > 0)).all():
        raise ValueError(f"few-shot fingerprint of {prior.gpu}: latency_us must be finite and > 0")
    c = _relative_lsq(np.asarray(terms, dtype="float64"), y, prior=prior.constants, prior_weight=prior_weight)
    w = 1 + len(PIPES)
    return Fingerprint(prior.gpu, float(c[0]), c[1:], f"few-shot fit on {len(y)} rows (prior: {prior.source})",
                       prior.log_spread * float(np.sqrt(w / (w + len(y)))))


def pool_constants(pool: list[str], fitted: dict[str, Fingerprint], terms_of: dict | None, rule: str
                   ) -> np.ndarray:
    """Constants ``[floor_us, *multipliers]`` for a GPU without measurements from the GPUs of ``pool``:
    ``rule`` ``"mean"`` of their fitted constants, or ``"pooled"``: one relative least-squares fit
    on the rows of every GPU of the pool (``terms_of``: GPU -> ``(pipe_times, latency_us)``), each GPU weighing
    the same whatever its row count.

    Raises:
        ValueError: an unknown rule, or ``"pooled"`` without the rows of a pool GPU.
    """
    if rule == "mean":
        return np.mean([fitted[g].constants for g in pool], axis=0)
    if rule != "pooled":
        raise ValueError(f"fingerprint rule {rule!r}: expected one of {list(RULES)}")
    if len(pool) == 1:
        return fitted[pool[0]].constants
    if not terms_of or any(g not in terms_of for g in pool):
        raise ValueError("pooled fingerprint: the training rows of every pool GPU are needed")
    terms = np.vstack([terms_of[g][0] for g in pool])
    y = np.concatenate([terms_of[g][1] for g in pool])
    w = np.concatenate([np.full(len(terms_of[g][1]), 1.0 / np.sqrt(len(terms_of[g][1]))) for g in pool])
    return _relative_lsq(terms, y, weights=w)


def predict_fingerprint(gpu: str, fitted: dict[str, Fingerprint], registry,
                        terms_of: dict[str, tuple] | None = None, rule: str = "pooled") -> Fingerprint:
    """Predicted constants of ``gpu`` (no measurements) from the fitted GPUs of :func:`class_pool` by
    :func:`pool_constants`. ``terms_of`` (GPU -> ``(pipe_times, latency_us)`` of its training rows), when given,
    sets :attr:`Fingerprint.log_spread` by leaving each GPU of the pool out in turn (the pool minus it predicts
    it; all other fitted GPUs when it is alone in the pool): the root mean square of ``log(predicted time / own
    fitted time)`` over its rows, each GPU weighing the same.

    Raises:
        ValueError: no fitted GPU other than ``gpu``; as :func:`pool_constants`.
    """
    pool, text = class_pool(gpu, list(fitted), registry)
    if not pool:
        raise ValueError(f"fingerprint of {gpu}: no training GPU to predict it from")
    c = pool_constants(pool, fitted, terms_of, rule)
    spread = 0.0
    if terms_of:
        errs = []
        for g in pool:
            others = [o for o in pool if o != g] or [o for o in fitted if o not in (g, gpu)]
            if not others or g not in terms_of:
                continue
            terms, _ = terms_of[g]
            co = pool_constants(others, fitted, terms_of, rule)
            pred = co[0] + terms @ co[1:]
            own = fitted[g].time_us(terms)
            ok = (pred > 0) & (own > 0)
            errs.append(np.mean(np.log(pred[ok] / own[ok]) ** 2))
        if errs:
            spread = float(np.sqrt(np.mean(errs)))
    return Fingerprint(gpu, float(c[0]), c[1:], f"predicted from spec row: {text}", spread)
