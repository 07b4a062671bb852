"""Few-shot: a GPU's predictions from a few measured launches of that GPU.

A user who can run a short profiling sweep on a GPU gets ``k`` measured launches; the fingerprint predictor then
refits that GPU's constants on them (choosing, where the model chose to for ``k``, whose own-GPU corrections its
rows take: :func:`chosen_borrow`) and corrects its predictions by a correction fitted on the same rows
(:func:`fewshot_predictor`; :func:`fingerprint_fewshot` simulates it on public data). The parts:

* :func:`short_sweep`, the row-drawing rule. Deterministic and shape-based: the GPU's launches are ordered by
  their theoretical time (``theoretical_time_us``, the analytical time of the launch's shape on that GPU, a proxy
  for problem size), cut into ``k`` strata of equal row count along that order, and one row is drawn per stratum
  (uniformly inside it, with ``numpy.random.default_rng(seed)``). The ``k`` rows therefore span the problem space
  from the smallest to the largest launches; the same ``seed`` gives the same rows.
* :data:`CALIBRATIONS`, the candidate corrections after the refit, all on the log ratio ``log(measured /
  predicted)``: ``none``; ``median_scale`` (one factor, the median ratio: robust to a few outliers); ``ape_scale``
  (one factor, the one with the lowest MAPE on the calibration rows: a weighted median ratio); ``loglinear_k0_<n>``
  (ratio linear in ``log(theoretical_time_us)``: a Theil-Sen slope shrunk towards zero by ``k / (k + n)``, then
  the median intercept, so a small ``k`` falls back to a scale factor); ``neighbours_8`` (a local factor per row:
  the median ratio of its 8 nearest calibration rows by size and predicted efficiency,
  :class:`NeighbourCalibration`); ``trees_8_leaves`` (small boosted trees on the predictor's correction design,
  :class:`TreeCalibration`: the GPU's own correction learned from its ``k`` rows). Each GPU's refit chooses one on
  its own ``k`` rows (:func:`choose_calibration`): :data:`CV_FOLDS`-fold cross-validation over the rows in order of
  theoretical time, the simplest (earliest) candidate within :data:`MIN_RELATIVE_GAIN` of the lowest MAPE. The
  ``k`` rows are the user's measurements of that GPU, so the choice reads nothing else of it; the few-shot
  evaluation scores the GPU's other rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.linear_model import TheilSenRegressor

from synperf.data.io import InputError
from synperf.evaluation.metrics import ape
from synperf.model.pipes import at_compute_bound

#: calibration sizes (measured rows of the new GPU) of the simulation
KS = (0, 8, 32, 128)
#: seeds of the short-sweep draw; results are means over them
SEEDS = (0, 1, 2)
#: the simplest candidate within this share of the lowest mean MAPE is chosen
MIN_RELATIVE_GAIN = 0.05
#: folds of the cross-validation that chooses a GPU's correction on its own few-shot rows (fewer rows: one per row)
CV_FOLDS = 4


def short_sweep(rows: pd.DataFrame, k: int, seed: int = 0) -> np.ndarray:
    """Positions (``0 .. len(rows) - 1``) of the ``k`` rows a short sweep measures.

    Rows are ordered by ``theoretical_time_us`` (ties by position), the order is cut into ``k`` strata of equal
    size (``numpy.array_split``) and one row per stratum is drawn with ``numpy.random.default_rng(seed)``.

    Args:
        rows: launches of one GPU with ``theoretical_time_us`` (microseconds, positive).
        k: number of rows to draw; ``0`` draws none, ``k >= len(rows)`` returns every position.
        seed: the draw's seed.

    Returns:
        Sorted positions, ``min(k, len(rows))`` of them.

    Raises:
        ValueError: ``k`` is negative or ``theoretical_time_us`` is missing.
    """
    if k < 0:
        raise ValueError(f"short sweep: k must be >= 0, got {k}")
    if "theoretical_time_us" not in rows.columns:
        raise ValueError("short sweep: rows need a 'theoretical_time_us' column")
    n = len(rows)
    if k >= n:
        return np.arange(n)
    if k == 0:
        return np.arange(0)
    order = np.argsort(rows["theoretical_time_us"].to_numpy(dtype="float64"), kind="stable")
    rng = np.random.default_rng(seed)
    picks = [stratum[rng.integers(len(stratum))] for stratum in np.array_split(order, k)]
    return np.sort(np.asarray(picks, dtype="int64"))


@dataclass
class Calibration:
    """A correction of predicted latency, ``log(corrected) = log(predicted) + a + b * (x - x0)`` with
    ``x = log(theoretical_time_us)``.

    Attributes:
        name: the candidate's name (key of :data:`CALIBRATIONS`).
        slope_prior_rows: ``None`` for a pure scale factor (``b = 0``); else the row count ``n`` of the slope's
            shrinkage ``k / (k + n)``.
        identity: no correction.
        ape_weighted: the intercept is the factor with the lowest mean absolute percentage error on the
            calibration rows (the median of ``measured / predicted`` weighted by ``predicted / measured``), not the
            plain median ratio.
        a, b, x0: fitted intercept, slope and centre of ``x`` (natural logs; zero before :meth:`fit`).
    """

    name: str
    slope_prior_rows: float | None = None
    identity: bool = False
    ape_weighted: bool = False
    a: float = 0.0
    b: float = 0.0
    x0: float = 0.0

    def fit(self, predicted_us, measured_us, theoretical_us, design=None) -> Calibration:
        """Fit on the calibration rows (microseconds, positive); returns a fitted copy. No rows: the identity.
        ``design`` (the rows' correction design, :meth:`synperf.model.fingerprint.FingerprintModel.design`) is not
        read.

        Raises:
            ValueError: the three arrays differ in length, or a value is not positive.
        """
        p, m, t = _checked(self.name, predicted_us, measured_us, theoretical_us)
        out = Calibration(self.name, self.slope_prior_rows, self.identity, self.ape_weighted)
        if self.identity or len(p) == 0:
            return out
        y, x = np.log(m / p), np.log(t)
        out.x0 = float(np.median(x))
        if self.slope_prior_rows is not None and len(p) >= 3 and np.ptp(x) > 0:
            ts = TheilSenRegressor(random_state=0).fit((x - out.x0).reshape(-1, 1), y)
            out.b = float(ts.coef_[0]) * len(p) / (len(p) + self.slope_prior_rows)
        resid = y - out.b * (x - out.x0)
        if self.ape_weighted:
            # sum_i |c q_i - m_i| / m_i with q_i the slope-corrected prediction is minimised at the median of
            # m_i / q_i weighted by q_i / m_i
            order = np.argsort(resid)
            w = np.exp(-resid[order])
            out.a = float(resid[order][np.searchsorted(np.cumsum(w), 0.5 * w.sum())])
        else:
            out.a = float(np.median(resid))
        return out

    def apply(self, predicted_us, theoretical_us, design=None) -> np.ndarray:
        """Corrected latency (microseconds) of predictions ``predicted_us`` with theoretical times
        ``theoretical_us`` (microseconds); ``design`` is not read."""
        p, t = np.asarray(predicted_us, dtype="float64"), np.asarray(theoretical_us, dtype="float64")
        return p * np.exp(self.a + self.b * (np.log(t) - self.x0))


@dataclass
class NeighbourCalibration:
    """A local correction: each row's predicted latency is multiplied by the median ratio ``measured / predicted``
    of its ``neighbours`` nearest calibration rows, ``log(corrected) = log(predicted) + median_j r_j``.

    Rows are placed at ``(log theoretical_time_us, log(theoretical_time_us / predicted_latency_us))``: the
    problem's size and the efficiency the model predicts for it (which separates memory-bound, compute-bound and
    launch-bound launches of one family), each axis divided by its standard deviation over the calibration rows
    (an axis with no spread is left as is). Distances are Euclidean (``scipy.spatial.cKDTree``; a tie at the last
neighbour is broken by the tree, deterministically). With at most
    ``neighbours`` calibration rows every row gets the median ratio of all of them (``median_scale``).

    Attributes:
        name: the candidate's name (key of :data:`CALIBRATIONS`).
        neighbours: calibration rows per corrected row (>= 1).
        points, log_ratios, scale: the fitted calibration rows' coordinates ``(n, 2)``, their
            ``log(measured / predicted)`` ``(n,)`` and the axis scales ``(2,)`` (empty before :meth:`fit`).
    """

    name: str
    neighbours: int = 8
    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    log_ratios: np.ndarray = field(default_factory=lambda: np.zeros(0))
    scale: np.ndarray = field(default_factory=lambda: np.ones(2))

    @staticmethod
    def _coordinates(predicted_us: np.ndarray, theoretical_us: np.ndarray) -> np.ndarray:
        return np.column_stack([np.log(theoretical_us), np.log(theoretical_us / predicted_us)])

    def fit(self, predicted_us, measured_us, theoretical_us, design=None) -> NeighbourCalibration:
        """Fit on the calibration rows (microseconds, positive); returns a fitted copy. No rows: the identity.

        Raises:
            ValueError: ``neighbours`` below 1, the three arrays differ in length, or a value is not positive.
        """
        if self.neighbours < 1:
            raise ValueError(f"calibration {self.name}: neighbours must be >= 1, got {self.neighbours}")
        p, m, t = _checked(self.name, predicted_us, measured_us, theoretical_us)
        out = NeighbourCalibration(self.name, self.neighbours)
        if len(p) == 0:
            return out
        out.points = self._coordinates(p, t)
        out.log_ratios = np.log(m / p)
        sd = out.points.std(axis=0)
        out.scale = np.where(sd > 0, sd, 1.0)
        return out

    def apply(self, predicted_us, theoretical_us, design=None) -> np.ndarray:
        """Corrected latency (microseconds) of predictions ``predicted_us`` with theoretical times
        ``theoretical_us`` (microseconds); ``design`` is not read."""
        from scipy.spatial import cKDTree

        p, t = np.asarray(predicted_us, dtype="float64"), np.asarray(theoretical_us, dtype="float64")
        n = len(self.log_ratios)
        if n == 0:
            return p.copy()
        if n <= self.neighbours:
            return p * np.exp(np.median(self.log_ratios))
        _, near = cKDTree(self.points / self.scale).query(self._coordinates(p, t) / self.scale, k=self.neighbours)
        return p * np.exp(np.median(self.log_ratios[near], axis=1))


#: the few-shot trees' budget (``HistGradientBoostingRegressor``): small trees, shrunk leaves, at least 4 rows a leaf
FEWSHOT_TREES = {"max_iter": 100, "learning_rate": 0.1, "max_leaf_nodes": 8, "min_samples_leaf": 4,
                 "l2_regularization": 1.0}


@dataclass
class TreeCalibration:
    """A learned correction on the calibration rows: gradient-boosted trees (:data:`FEWSHOT_TREES`, seeded, no early
    stopping) on ``log(measured / predicted)`` with the predictor's own correction design as features
    (:func:`synperf.model.correction.correction_design` at the GPU's few-shot constants: log shapes, waves, pipe
    time shares, tile, the floor's share; the GPU's class columns are constant here),
    ``log(corrected) = log(predicted) + trees(design)``: the GPU's own correction learned from its ``k`` rows, as a
    trained GPU's own-GPU correction is from all of its rows.

    Attributes:
        name: the candidate's name (key of :data:`CALIBRATIONS`).
        trees: the fitted regressor (None before :meth:`fit`, or when fitted on no rows: the identity).
        needs_design: True: callers pass the rows' design to :meth:`fit` and :meth:`apply`.
        columns: the design columns the trees read: those with a finite value on some calibration row (scikit-learn's
            binning refuses a column with none).
    """

    name: str
    trees: object = None
    needs_design: bool = True
    columns: np.ndarray | None = None

    def fit(self, predicted_us, measured_us, theoretical_us, design=None) -> TreeCalibration:
        """Fit on the calibration rows (microseconds, positive; ``design`` their correction design, shape
        ``(n, p)``); returns a fitted copy. No rows: the identity.

        Raises:
            ValueError: the arrays differ in length, a value is not positive, or rows without ``design``.
        """
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits

        p, m, _ = _checked(self.name, predicted_us, measured_us, theoretical_us)
        if len(p) == 0:
            return TreeCalibration(self.name)
        if design is None or len(design) != len(p):
            raise ValueError(f"calibration {self.name}: needs the design of each of its {len(p)} rows")
        x = np.asarray(design, dtype="float64")
        columns = np.flatnonzero(np.isfinite(x).any(axis=0))
        with threadpool_limits(1, user_api="openmp"):
            trees = HistGradientBoostingRegressor(**FEWSHOT_TREES, early_stopping=False, random_state=0)
            return TreeCalibration(self.name, trees.fit(x[:, columns], np.log(m / p)), columns=columns)

    def apply(self, predicted_us, theoretical_us, design=None) -> np.ndarray:
        """Corrected latency (microseconds) of predictions ``predicted_us`` whose rows have correction design
        ``design`` (``(n, p)``; ``theoretical_us`` is not read).

        Raises:
            ValueError: a fitted correction without ``design`` for the rows.
        """
        from threadpoolctl import threadpool_limits

        p = np.asarray(predicted_us, dtype="float64")
        if self.trees is None:
            return p.copy()
        if design is None or len(design) != len(p):
            raise ValueError(f"calibration {self.name}: needs the design of each of its {len(p)} rows")
        with threadpool_limits(1, user_api="openmp"):
            return p * np.exp(self.trees.predict(np.asarray(design, dtype="float64")[:, self.columns]))


def _checked(name: str, predicted_us, measured_us, theoretical_us) -> tuple[np.ndarray, ...]:
    """The three calibration arrays as float arrays.

    Raises:
        ValueError: they differ in length, or a value is not positive.
    """
    p, m, t = (np.asarray(v, dtype="float64") for v in (predicted_us, measured_us, theoretical_us))
    if not (len(p) == len(m) == len(t)):
        raise ValueError(f"calibration {name}: {len(p)} predicted, {len(m)} measured, {len(t)} theoretical")
    if len(p) and (np.any(~(p > 0)) or np.any(~(m > 0)) or np.any(~(t > 0))):
        raise ValueError(f"calibration {name}: latencies and theoretical times must be positive")
    return p, m, t


#: the candidates, simplest first (a later one must beat an earlier one by MIN_RELATIVE_GAIN)
CALIBRATIONS = {
    "none": Calibration("none", identity=True),
    "median_scale": Calibration("median_scale"),
    "ape_scale": Calibration("ape_scale", ape_weighted=True),
    "loglinear_k0_64": Calibration("loglinear_k0_64", slope_prior_rows=64),
    "loglinear_k0_8": Calibration("loglinear_k0_8", slope_prior_rows=8),
    "neighbours_8": NeighbourCalibration("neighbours_8", neighbours=8),
    "trees_8_leaves": TreeCalibration("trees_8_leaves"),
}


def needs_design(calibration) -> bool:
    """Whether ``calibration`` reads the rows' correction design (:attr:`TreeCalibration.needs_design`)."""
    return bool(getattr(calibration, "needs_design", False))


def choose_calibration(predicted_us, measured_us, theoretical_us, design=None, candidates=None
                       ) -> tuple[str, dict]:
    """The correction of one GPU's few-shot predictions, chosen on its ``k`` measured rows alone: the rows, ordered
    by ``theoretical_us``, go round-robin into ``min(CV_FOLDS, k)`` folds; each candidate of ``candidates`` (default
    :data:`CALIBRATIONS`, simplest first) is fitted on the other folds and scored on each fold's rows (APE %); the
    first whose mean is within :data:`MIN_RELATIVE_GAIN` of the lowest wins. Arrays shape ``(k,)`` (microseconds,
    after the constants' refit); ``design`` ``(k, n)`` or None (then no candidate that reads it). Fewer than two
    rows: ``none``.

    Returns:
        ``(name, {name: cross-validated MAPE %})``.
    """
    candidates = CALIBRATIONS if candidates is None else candidates
    p, m, t = _checked("choose_calibration", predicted_us, measured_us, theoretical_us)
    if len(p) < 2:
        return "none", {}
    folds = np.empty(len(p), dtype="int64")
    folds[np.argsort(t, kind="stable")] = np.arange(len(p)) % min(CV_FOLDS, len(p))
    scores = {}
    for name, cal in candidates.items():
        if needs_design(cal) and design is None:
            continue
        err = np.zeros(len(p))
        for f in np.unique(folds):
            tr, te = folds != f, folds == f
            fitted = cal.fit(p[tr], m[tr], t[tr], None if design is None else design[tr])
            err[te] = ape(fitted.apply(p[te], t[te], None if design is None else design[te]), m[te])
        scores[name] = float(err.mean())
    best = min(scores.values())
    return next(n for n in scores if scores[n] <= best * (1.0 + MIN_RELATIVE_GAIN)), scores


def chosen_borrow(model, k: int) -> bool:
    """Whether a few-shot fit of ``k`` rows chooses the own-GPU corrections it borrows
    (:meth:`synperf.model.fingerprint.FingerprintModel.fewshot_fit`): ``model``'s choice for the largest chosen
    ``k`` not above it (``model.choice["fewshot_borrow"]``), else False."""
    chosen = {int(n): v for n, v in (model.choice.get("fewshot_borrow") or {}).items() if int(n) <= k}
    return bool(chosen[max(chosen)]) if chosen else False


def fewshot_predictor(model, measured: pd.DataFrame, registry):
    """``model`` refitted on each GPU's ``measured`` launches (canonical launch rows with ``gpu`` and
    ``latency_us`` > 0, e.g. a short sweep): a copy whose :attr:`measured` also holds each GPU's own launches (the
    launches it measured then answer with their measurement, :func:`synperf.model.twins.twin_latency`), whose
    :attr:`overrides` hold each GPU's few-shot constants
    and :attr:`borrowed` the own-GPU corrections its rows chose where the model chose to borrow for that row count
    (:meth:`synperf.model.fingerprint.FingerprintModel.fewshot_fit`, :func:`chosen_borrow`), and per GPU the
    correction its rows chose (:func:`choose_calibration`) fitted on them. ``model`` itself is not changed.

    Returns:
        ``(model copy, {gpu: (correction name, fitted correction)})``; apply a correction with
        ``fitted.apply(predicted_latency_us, theoretical_time_us, design)`` (``design``: the model copy's
        :meth:`synperf.model.fingerprint.FingerprintModel.design` of the rows).

    Raises:
        ValueError: a GPU of ``measured`` trained the model, or a latency that is not finite and > 0.
    """
    import copy

    trained = sorted(set(measured["gpu"].astype(str)) & set(model.fitted))
    if trained:
        raise ValueError(f"few-shot: {trained} trained the model; measured launches must be of GPUs without "
                         "training rows")
    y = measured["latency_us"].to_numpy(dtype="float64")
    if not (np.isfinite(y) & (y > 0)).all():
        raise ValueError("few-shot: measured latency_us must be finite and > 0")
    from synperf.model.twins import measured_table

    out = copy.copy(model)
    out.overrides, out.borrowed = dict(model.overrides), dict(model.borrowed)
    out.measured = dict(model.measured or {})
    corrections = {}
    for gpu, g in measured.groupby(measured["gpu"].astype(str), sort=True):
        g = g.reset_index(drop=True)
        out.overrides[gpu], mates = out.fewshot_fit(gpu, g, registry, borrow=chosen_borrow(out, len(g)))
        out.borrowed.pop(gpu, None)
        if mates is not None:
            out.borrowed[gpu] = mates
        d = out.describe(g, registry)
        pred, theo, design = d["predicted_latency_us"], d["theoretical_time_us"], out.design(g, registry)
        name = choose_calibration(pred, g["latency_us"], theo, design)[0]
        corrections[gpu] = (name, CALIBRATIONS[name].fit(pred, g["latency_us"], theo, design))
        out.measured[gpu] = measured_table(g, registry)   # after the fits: its own launches answer as measured
    return out, corrections


def fingerprint_fewshot(model, rows: pd.DataFrame, registry, ks=KS, seeds=SEEDS, level: float = 0.8,
                        experiment: str = "") -> pd.DataFrame:
    """Few-shot on the fingerprint predictor, simulated on measured rows: for each GPU, ``k`` and seed the short
    sweep's rows (:func:`short_sweep`) go through :func:`fewshot_predictor` (the GPU's constants refitted on them,
    its predicted constants as prior, then the correction those rows chose, :func:`choose_calibration`) and the
    GPU's other rows are scored.

    Args:
        model: a fitted :class:`synperf.model.fingerprint.FingerprintModel` (not changed).
        rows: the measured rows of the GPUs to calibrate (feature-table rows with ``theoretical_time_us``).
        ks, seeds: short-sweep sizes and draws (``k = 0``: the predicted constants, once per seed on every row).
        level: the interval level whose coverage is reported (``interval_coverage``, of the refitted constants'
            interval times the correction; NaN where the model has no out-of-fold residuals).
        experiment: the ``experiment`` column's value.

    Returns:
        One row per (GPU, k, seed): ``experiment``, ``gpu``, ``k``, ``seed``, ``prior_weight`` (the model's),
        ``calibration``, ``borrowed`` (the training GPUs whose own-GPU corrections the refit took, ``,``-joined;
        empty: its class-mates'), ``n_calibration_rows``, ``n_eval_rows``, ``mape_pct`` (on the rows not measured by the
        sweep), ``uncalibrated_mape_pct`` (the same rows at ``k = 0``) and ``interval_coverage`` (0..1).

    Raises:
        ValueError: ``rows`` hold a GPU the model trained on (its fitted constants would be the prior).
    """
    trained = sorted(set(rows["gpu"].astype(str)) & set(model.fitted))
    if trained:
        raise ValueError(f"few-shot on the fingerprint: {trained} trained the model; few-shot rows must be of GPUs "
                         "without training rows")
    out = []
    for gpu, g in rows.groupby(rows["gpu"].astype(str), sort=True):
        g = g.reset_index(drop=True)
        y, theo = g["latency_us"].to_numpy(dtype="float64"), g["theoretical_time_us"].to_numpy(dtype="float64")
        prior = model.describe(g, registry, level)
        for k in ks:
            if 0 < k and len(g) <= k:
                continue
            for seed in seeds:
                cal = short_sweep(g, k, seed)
                rest = np.ones(len(g), dtype=bool)
                rest[cal] = False
                name, d, factor, borrowed = "none", prior[rest], np.ones(int(rest.sum())), ""
                if k:
                    refitted, corrections = fewshot_predictor(model, g.iloc[cal], registry)
                    name, correction = corrections[gpu]
                    borrowed = ",".join(refitted.borrowed.get(gpu, ()))
                    d = refitted.describe(g[rest], registry, level)
                    pred = d["predicted_latency_us"].to_numpy()
                    design = refitted.design(g[rest], registry) if needs_design(correction) else None
                    factor = correction.apply(pred, theo[rest], design) / pred
                pred, lo, hi, _ = at_compute_bound(d["compute_bound_us"].to_numpy(), *(
                    d[c].to_numpy() * factor
                    for c in ("predicted_latency_us", "predicted_latency_low_us", "predicted_latency_high_us")))
                cover = float(np.mean((y[rest] >= lo) & (y[rest] <= hi))) if np.isfinite(lo).all() else float("nan")
                out.append({"experiment": experiment, "gpu": gpu, "k": int(k), "seed": int(seed),
                            "prior_weight": float(model.prior_weight), "calibration": name, "borrowed": borrowed,
                            "n_calibration_rows": len(cal), "n_eval_rows": int(rest.sum()),
                            "mape_pct": float(ape(pred, y[rest]).mean()),
                            "uncalibrated_mape_pct": float(ape(prior["predicted_latency_us"][rest], y[rest]).mean()),
                            "interval_coverage": cover})
    return pd.DataFrame(out, columns=["experiment", "gpu", "k", "seed", "prior_weight", "calibration", "borrowed",
                                      "n_calibration_rows", "n_eval_rows", "mape_pct", "uncalibrated_mape_pct",
                                      "interval_coverage"])


def check_measured(measured: pd.DataFrame, table: pd.DataFrame, registry) -> None:
    """Refuse few-shot rows (:func:`synperf.api.measured_table`) that would refit nothing the call predicts, or
    refit it wrongly: a GPU none of ``table``'s launches names, or a latency faster than the GPU's spec-sheet peak
    FLOP rate or DRAM bandwidth allow (:func:`synperf.data.quality.ceiling_violations`, the ingest's check at its
    default margins).

    Raises:
        InputError: no rows, or naming the first such row (0-based) and why.
    """
    from synperf.data.quality import QualitySettings, ceiling_violations

    if measured.empty:
        raise InputError("measured: no rows (a few-shot refit needs at least one measured launch)")

    gpus = measured["gpu"].astype(str)
    other = ~gpus.isin(set(table["gpu"].astype(str)))
    if other.any():
        i = int(np.flatnonzero(other)[0])
        raise InputError(f"measured: row {i}: gpu = {gpus.iloc[i]!r}, which no launch of this call predicts "
                         f"({', '.join(sorted(set(table['gpu'].astype(str))))}): its refit would answer nothing")
    bad, _, _ = ceiling_violations(measured, registry, QualitySettings())
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"measured: row {i}: latency_us = {measured['latency_us'].iloc[i]:g} is faster than "
                         f"{gpus.iloc[i]}'s spec-sheet peak FLOP rate or DRAM bandwidth allow")
