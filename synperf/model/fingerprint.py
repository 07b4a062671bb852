"""One predictor per kernel family: the physical time of a launch with the GPU's fingerprint, times a correction.

``latency_us = fingerprint_time(row) * exp(r(row))``

Fingerprint (:class:`Fingerprint`)
    A handful of effective constants of one GPU: a launch floor ``a`` (microseconds) and one non-negative multiplier
    per spec-sheet pipe time of :func:`pipe_times` (:data:`PIPES`): the compute time (for the Tensor Core families
    the most-loaded SM's Tensor/FMA/XU cycles of feature set v2 at the registry's per-SM rates; for RMSNorm and
    SiLU&Mul ``bl_compute_us`` of :func:`synperf.evaluation.baselines.add_baseline_columns`, FLOPs / FP32 CUDA-core
    peak), the DRAM time (``bl_memory_us``), the L2 time (feature set v2's
    ``l2_cycle`` / clock) and the shared-memory time of the most-loaded SM (``sm_max_smem_cycle`` / clock), all from
    the registry's numbers (``config/gpus.yaml``, or a ``data/hardware/<gpu>.json`` that replaced them).
    ``fingerprint_time = a + sum_j c_j * t_j``. Each constant records where it came from (:attr:`Fingerprint.source`):

    * fitted on a training GPU's measurements (:func:`fit_fingerprint`): bounded least squares on relative error
      (:func:`scipy.optimize.lsq_linear`, bounded-variable method; rows scaled by ``1 / latency`` so the objective is
      ``sum_i (pred_i / y_i - 1)^2``), every constant ``>= 0`` and the DRAM multiplier ``>= 1``
      (:data:`LOWER_BOUNDS`: no launch moves its bytes faster than the spec-sheet bandwidth);
    * predicted for a GPU without measurements (:func:`predict_fingerprint`): from the training GPUs of its class
      (:func:`gpu_class`: compute capability major and memory family, HBM or GDDR, from the registry's
      ``compute_capability`` and ``memory_type``, :meth:`synperf.data.hardware.GPUSpec.same_class`), else from
      every training GPU: one relative least-squares fit on
      their rows pooled, each GPU weighing the same (rule ``pooled``; ``mean`` averages their fitted constants,
      :func:`pool_constants`); its spread (:attr:`Fingerprint.log_spread`) is the root mean square of
      ``log(predicted time / fitted time)`` over the rows of each GPU of that pool predicted from the others (leave
      one training GPU out);
    * few-shot (:func:`fewshot_fingerprint`): the relative least squares above on the target's ``k`` measured rows,
      with the predicted constants as a prior (one pseudo-row per constant pulling it to the prior value, relative
      weight :data:`FEWSHOT_PRIOR_WEIGHT`), so ``k = 0`` gives the predicted fingerprint and many rows the fitted one.

Correction (:mod:`synperf.model.correction`)
    scikit-learn ``HistGradientBoostingRegressor`` on ``log(latency / fingerprint_time)`` with features that name no
    GPU (:func:`synperf.model.correction.correction_design`). Trained on the training GPUs' rows with their own
    fitted fingerprints; budget :data:`synperf.model.correction.RESIDUAL_TREES` or a larger one, seeded, one OpenMP
    thread.

Own-GPU evidence (:attr:`FingerprintModel.local`)
    A training GPU's own measurements also fit a second, per-GPU correction: the same trees on that GPU's rows'
    residual ``log(latency / (fingerprint time * exp(shared correction)))``; it is added for that GPU's rows (held-out
    problems of a seen GPU) and never for another GPU's, except as class-mates' evidence (below). Its budget is set
    on the GPU's own rows: :data:`OWN_GPU_TREES`, scikit-learn's early stopping on a seeded tenth of at most
    :data:`OWN_GPU_MAX_ROWS` of them.

Class-mates' evidence (:meth:`FingerprintModel.predict`, ``sibling=True``)
    One documented correction, fixed beforehand (never chosen): for a GPU without measurements, the mean of the
    own-GPU corrections of the training GPUs of its class (its class-mates, :meth:`synperf.data.hardware.GPUSpec.
    same_class`) is added to the shared correction at every launch; with no class-mate in training, nothing is
    added. A class-mate's measurements so reach the new GPU as that GPU's learned residual, at launches it measured
    and at launches it did not. A few-shot refit may instead take other training GPUs' own-GPU corrections
    (:meth:`FingerprintModel.fewshot_fit`, :attr:`FingerprintModel.borrowed`): the ones its measured rows fit best.
Twins' evidence (:mod:`synperf.model.twins`, also fixed beforehand)
    Where a near class-mate (within :data:`synperf.model.twins.TWIN_MAX_DISTANCE` on the spec sheet) measured the
    very launch, a GPU without measurements takes that measurement with its time above the roofline carried over,
    in place of the prediction above: the nearest-GPU baseline's evidence inside the one predictor.

One way to choose (:mod:`synperf.model.fingerprint_choice`)
    Whether to correct, with which tree budget, and how a GPU without measurements gets its constants from its pool
    (:data:`RULES`) form one grid (:data:`GRID`, simplest first), scored by leaving each training GPU out (its
    constants predicted from the others and its class-mates' correction added, as for an unseen GPU); the first
    option within :data:`MARGIN` (5%) of the lowest mean MAPE wins. The few-shot prior weight, and per short-sweep
    size whether a few-shot refit borrows own-GPU corrections, are chosen the same way, on the short sweeps of the
    left-out training GPUs. Nothing else is chosen: the pipes, the class rule, the
    class-mates' correction and the correction's features are fixed beforehand.

Interval (:meth:`FingerprintModel.interval`, :mod:`synperf.model.fingerprint_interval`)
    80% by default: a training GPU's residual quantiles on problems its own-GPU correction did not train on; the
    correction's out-of-fold residuals (leave one training GPU out) where it has none; a GPU without measurements
    the rule :func:`synperf.model.fingerprint_choice.choose_interval` chose on the training GPUs left out in turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from synperf.model.correction import (  # noqa: F401  (the correction's budgets are part of this interface)
    OWN_GPU_MAX_ROWS,
    OWN_GPU_TREES,
    RESIDUAL_TREES,
    JoblibModel,
    correction_columns,
    correction_design,
    gpu_quantiles,
)
from synperf.model.fingerprint_interval import held_out_quantiles, log_bounds, rule_bounds  # noqa: F401
from synperf.model.gpu_constants import (  # noqa: F401  (the constants are part of this module's interface)
    FEWSHOT_PRIOR_WEIGHT,
    PRIOR_ZERO,
    RULES,
    Fingerprint,
    fewshot_fingerprint,
    fit_fingerprint,
    pool_constants,
    predict_fingerprint,
)
from synperf.model.pipes import (  # noqa: F401  (the pipe terms are part of this module's interface)
    LINEAR,
    LOWER_BOUNDS,
    PIPES,
    SM_COMPUTE_CYCLES,
    V2_COLUMNS,
    at_compute_bound,
    class_pool,
    class_text,
    gpu_class,
    pipe_times,
    spec_distance,
    with_spec_columns,
    with_v2_columns,
)
from synperf.model.twins import measured_table, twin_latency

#: an experiment's fitted predictor in its model folder (``models/<experiment>/``, ``models/deploy/<experiment>/``)
FINGERPRINT_FILE = "fingerprint.joblib"
#: the layout of a saved :class:`FingerprintModel`, raised when a field changes meaning (6: the own-GPU corrections
#: a few-shot fit borrows, :attr:`FingerprintModel.borrowed`); :meth:`FingerprintModel.load` refuses another layout
MODEL_FORMAT = 6
#: a few-shot fit borrows other own-GPU corrections than its class-mates' only when they fit its rows by this much
#: (the simplest candidate within this share of the lowest MAPE)
BORROW_MARGIN = 0.05


@dataclass
class FingerprintModel(JoblibModel):
    """Fingerprints of the training GPUs and the GPU-invariant correction of one kernel family; stored as one
    joblib file (:meth:`save`, :meth:`load`; :data:`FINGERPRINT_FILE` in an experiment's model folder).

    Attributes:
        fitted: training GPU id -> its fitted :class:`Fingerprint`.
        trees: the correction (``HistGradientBoostingRegressor``) on :func:`correction_design`.
        columns: :func:`correction_columns`; levels: training categories per categorical column.
        residual_q: the 10% and 90% quantiles of the correction's out-of-fold log residuals (NaN when one GPU
            trains).
        train_terms: training GPU -> ``(pipe_times, latency_us)`` of its rows (for the spread of predicted
            constants).
        overrides: GPU -> a given or few-shot :class:`Fingerprint` that replaces the fitted or predicted one.
        rule: :data:`RULES` member giving a GPU without measurements its constants; prior_weight: the few-shot
            prior weight (:func:`fewshot_fingerprint`); both chosen by
            :func:`synperf.model.fingerprint_choice.fit_chosen`.
        local: training GPU -> its own-GPU correction (trees on its rows' residual after the shared correction).
        local_q: training GPU -> the 10% and 90% quantiles of its log residuals on problems its own-GPU correction
            did not train on (:func:`synperf.model.fingerprint_interval.held_out_quantiles`), its interval.
        unseen_q: the interval rule of a GPU without measurements (:func:`synperf.model.fingerprint_choice.
            interval_rule`; empty when fewer than two GPUs trained).
        feature_set: the feature set of the rows it was fitted on (the sidecar's ``feature_set``); a caller builds
            the same features for the rows it predicts.
        measured: training GPU -> its measured launches (:func:`synperf.model.twins.measured_table`), the twins'
            evidence for a GPU without measurements.
        borrowed: GPU without measurements -> the training GPUs whose own-GPU corrections it takes in place of its
            class-mates' (:meth:`fewshot_fit` sets it from a few measured launches).
    """

    fitted: dict
    trees: object
    columns: tuple
    levels: dict
    residual_q: tuple = (float("nan"), float("nan"))
    train_terms: dict = field(default_factory=dict, repr=False)
    overrides: dict = field(default_factory=dict)
    rule: str = "pooled"
    prior_weight: float = FEWSHOT_PRIOR_WEIGHT
    local: dict = field(default_factory=dict, repr=False)
    local_q: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict, repr=False)
    trees_args: dict = field(default_factory=dict)
    choice: dict = field(default_factory=dict)
    unseen_q: dict = field(default_factory=dict)
    feature_set: str = ""
    measured: dict = field(default_factory=dict, repr=False)
    borrowed: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # an instance attribute, not a field: a file pickled before it existed has none (format 2 or older)
        self.model_format = MODEL_FORMAT

    @classmethod
    def load(cls, file) -> "FingerprintModel":
        """Read a model :meth:`save` wrote.

        Raises:
            InputError: as :meth:`JoblibModel.load`, or a file of another layout than :data:`MODEL_FORMAT` (saved
                by another synperf version; the message says to retrain).
        """
        from synperf.data.io import InputError

        model = super().load(file)
        found = model.__dict__.get("model_format", 2)
        if found != MODEL_FORMAT:
            raise InputError(f"{file}: fingerprint model of format {found}, this synperf reads format {MODEL_FORMAT} "
                             "(saved by another version); retrain it: snakemake --cores all (the train stage)")
        return model

    @classmethod
    def fit(cls, rows: pd.DataFrame, meta: dict, registry, *, max_train_rows: int = 0, seed: int = 0,
            oof: bool = True, rule: str = "pooled", correct: bool = True, trees: dict | None = None,
            local: bool | list = True, local_oof: bool | None = None) -> "FingerprintModel":
        """Fit on feature-table ``rows`` (``gpu``, ``latency_us`` > 0, feature set v2 columns; ``meta`` its
        sidecar). Fingerprints on every row of each GPU; the correction on a seeded subsample of at most
        ``max_train_rows`` rows (0: all). ``oof``: also the out-of-fold residuals for :meth:`interval`.
        ``rule``: :data:`RULES` (:func:`pool_constants`). ``correct``: False leaves the correction out (the
        prediction is the fingerprint time). ``trees``: arguments over :data:`synperf.model.correction.RESIDUAL_TREES`.
        ``local``: also fit each GPU's own-GPU correction (:attr:`local`; :data:`OWN_GPU_TREES` on a seeded
        subsample of at most :data:`OWN_GPU_MAX_ROWS` of its rows); a list: only for those GPUs. ``local_oof``
        (default ``oof``): also each own-GPU correction's held-out residual quantiles (:attr:`local_q`).

        Raises:
            ValueError: no rows, or a latency that is not finite and > 0.
        """
        # the spec columns once, for the pipe times and the measured launches' rooflines alike
        rows = with_spec_columns(with_v2_columns(rows, registry), registry)
        terms = pipe_times(rows, registry)
        y = rows["latency_us"].to_numpy(dtype="float64")
        gpus = rows["gpu"].astype(str).to_numpy()
        fitted, train_terms = {}, {}
        for g in sorted(set(gpus)):
            on = gpus == g
            fitted[g] = fit_fingerprint(g, terms[on], y[on])
            train_terms[g] = (terms[on], y[on])
        model_measured = {g: measured_table(rows[gpus == g], registry) for g in fitted}
        columns = correction_columns(meta, rows.columns)
        sub = np.arange(len(rows))
        if max_train_rows and len(rows) > max_train_rows:
            sub = np.sort(np.random.default_rng(seed).choice(len(rows), max_train_rows, replace=False))
        srows = rows.iloc[sub]
        levels = {c: {v: i for i, v in enumerate(sorted(srows[c].astype(str).unique()))} for c in columns[2]}
        model = cls(fitted, None, columns, levels, train_terms=train_terms, rule=rule, trees_args=dict(trees or {}),
                    feature_set=str(meta.get("feature_set", "")), measured=model_measured)
        x, fp = model._design(srows, terms[sub], registry)
        r = np.log(y[sub] / fp)
        if correct:
            model.trees = model._fit_trees(x, r, seed)
        if local:
            own = sorted(fitted) if local is True else sorted(g for g in local if g in fitted)
            model._fit_local(rows, terms, registry, seed, own)
            if oof if local_oof is None else local_oof:
                model.local_q = model._held_out_q(rows, terms, registry, seed, max_train_rows, own)
        if oof:
            model.residual_q = model._oof_quantiles(x, r, gpus[sub], seed) if correct else gpu_quantiles(r, gpus[sub])
        return model

    def _fit_trees(self, x: np.ndarray, r: np.ndarray, seed: int, args: dict | None = None):
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits

        n_cat = len(self.columns[2])
        is_cat = np.array([False] * (x.shape[1] - n_cat) + [True] * n_cat)
        args = {**RESIDUAL_TREES, **self.trees_args, "early_stopping": False} if args is None else args
        trees = HistGradientBoostingRegressor(**args, categorical_features=is_cat if n_cat else None,
                                              random_state=seed)
        with threadpool_limits(1, user_api="openmp"):
            return trees.fit(x, r)

    def _shared(self, x: np.ndarray) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        if self.trees is None:
            return np.zeros(len(x))
        with threadpool_limits(1, user_api="openmp"):
            return self.trees.predict(x)

    def _fit_local(self, rows: pd.DataFrame, terms: np.ndarray, registry, seed: int, gpus_to_fit: list,
                   trees: dict | None = None, max_rows: int | None = None) -> None:
        """Fit the own-GPU corrections of ``gpus_to_fit`` (:attr:`local`) with ``trees`` (default
        :data:`OWN_GPU_TREES`) on at most ``max_rows`` (default :data:`OWN_GPU_MAX_ROWS`; 0: all) of each GPU's rows."""
        trees = OWN_GPU_TREES if trees is None else trees
        max_rows = OWN_GPU_MAX_ROWS if max_rows is None else max_rows
        gpus = rows["gpu"].astype(str).to_numpy()
        y = rows["latency_us"].to_numpy(dtype="float64")
        for g in gpus_to_fit:
            if g not in self.fitted:
                continue
            on = np.flatnonzero(gpus == g)
            if max_rows and len(on) > max_rows:
                on = np.sort(np.random.default_rng(seed).choice(on, max_rows, replace=False))
            x, fp = self._design(rows.iloc[on], terms[on], registry)
            r = np.log(y[on] / fp) - self._shared(x)
            # early stopping needs rows to hold out; a GPU with few rows gets the shared correction's budget
            self.local[g] = self._fit_trees(x, r, seed, trees if len(on) >= 200 else None)

    def _held_out_q(self, rows: pd.DataFrame, terms: np.ndarray, registry, seed: int, max_train_rows: int,
                    own: list) -> dict:
        """:attr:`local_q` of the GPUs ``own``: :func:`held_out_quantiles` with the shared and own-GPU corrections
        refitted per fold on the same budgets and row caps as :meth:`fit` (folds by ``problem_key``, else by row)."""
        from threadpoolctl import threadpool_limits

        x, fp = self._design(rows, terms, registry)
        r = np.log(rows["latency_us"].to_numpy(dtype="float64") / fp)
        gpus = rows["gpu"].astype(str).to_numpy()
        rng = np.random.default_rng(seed)

        def capped(idx: np.ndarray, cap: int) -> np.ndarray:
            return np.sort(rng.choice(idx, cap, replace=False)) if cap and len(idx) > cap else idx

        def fit_shared(train: np.ndarray) -> np.ndarray:
            if self.trees is None:
                return np.zeros(len(r))
            train = capped(train, max_train_rows)
            trees = self._fit_trees(x[train], r[train], seed)
            with threadpool_limits(1, user_api="openmp"):
                return trees.predict(x)

        def fit_own(g: str, train: np.ndarray, base: np.ndarray):
            train = capped(train, OWN_GPU_MAX_ROWS)
            trees = self._fit_trees(x[train], base[train], seed, OWN_GPU_TREES if len(train) >= 200 else None)

            def at(idx: np.ndarray) -> np.ndarray:
                with threadpool_limits(1, user_api="openmp"):
                    return trees.predict(x[idx])
            return at

        keys = rows["problem_key"].to_numpy() if "problem_key" in rows.columns else np.arange(len(rows))
        return held_out_quantiles(fit_shared, fit_own, r, gpus, keys, own)

    def _mates(self, gpu: str, registry, sibling: bool = True) -> list[str]:
        """The training GPUs whose own-GPU corrections ``gpu``'s rows take: itself where it trained; else, with
        ``sibling``, those a few-shot fit borrowed (:attr:`borrowed`), else its class-mates; else none."""
        if gpu in self.local:
            return [gpu]
        if not sibling:
            return []
        if gpu in self.borrowed:
            return [m for m in self.borrowed[gpu] if m in self.local]
        return self._class_mates(gpu, registry)

    def _class_mates(self, gpu: str, registry) -> list[str]:
        """The training GPUs with an own-GPU correction in ``gpu``'s class."""
        return [s for s in sorted(self.local) if registry[s].same_class(registry[gpu])]

    def _local(self, rows: pd.DataFrame, x: np.ndarray, registry, sibling: bool) -> np.ndarray:
        """The own-GPU correction per row: the mean of :meth:`_mates`' own-GPU corrections; 0 where none."""
        from threadpoolctl import threadpool_limits

        out = np.zeros(len(rows))
        if not self.local:
            return out
        gpus = rows["gpu"].astype(str).to_numpy()
        for g in np.unique(gpus):
            on = gpus == g
            mates = self._mates(g, registry, sibling)
            if mates:
                with threadpool_limits(1, user_api="openmp"):
                    out[on] = np.mean([self.local[m].predict(x[on]) for m in mates], axis=0)
        return out

    def _oof_quantiles(self, x: np.ndarray, r: np.ndarray, gpus: np.ndarray, seed: int) -> tuple:
        from threadpoolctl import threadpool_limits

        if len(set(gpus)) < 2:
            return (float("nan"), float("nan"))
        res = np.empty(len(r))
        for g in sorted(set(gpus)):
            on = gpus == g
            trees = self._fit_trees(x[~on], r[~on], seed)
            with threadpool_limits(1, user_api="openmp"):
                res[on] = r[on] - trees.predict(x[on])
        return gpu_quantiles(res, gpus)

    def fingerprint(self, gpu: str, registry, rule: str | None = None) -> Fingerprint:
        """The GPU's fingerprint: a few-shot or given one (:attr:`overrides`), else fitted, else predicted
        (:func:`predict_fingerprint` with ``rule``, default :attr:`rule`; cached per registry row of the GPU and of
        the training GPUs)."""
        gpu, rule = str(gpu), rule or self.rule
        if gpu in self.overrides:
            return self.overrides[gpu]
        if gpu in self.fitted:
            return self.fitted[gpu]
        # keyed by the registry rows the prediction reads (the GPU's and the training GPUs'), so that another
        # registry, or an edited row of this GPU, never gets constants cached for a different spec
        key = (gpu, rule, registry[gpu], tuple(registry[g] for g in sorted(self.fitted)))
        if key not in self.predicted:
            self.predicted[key] = predict_fingerprint(gpu, self.fitted, registry, self.train_terms, rule)
        return self.predicted[key]

    def calibrated(self, gpu: str, rows: pd.DataFrame, registry, prior_weight: float | None = None,
                   rule: str | None = None) -> Fingerprint:
        """Few-shot constants of ``gpu`` from its measured ``rows`` (``latency_us`` > 0; e.g. a short sweep):
        its fitted or predicted constants (not :attr:`overrides`) refitted by :func:`fewshot_fingerprint` on
        ``latency_us / exp(correction)``, the correction (shared plus class-mates') taken at those constants, so
        the constants absorb what the correction leaves. ``prior_weight``: default :attr:`prior_weight`.
        Set the result in :attr:`overrides` to predict with it."""
        gpu = str(gpu)
        saved = self.overrides.pop(gpu, None)
        try:
            prior = self.fingerprint(gpu, registry, rule)
            if len(rows) == 0:
                return prior
            rows = with_spec_columns(with_v2_columns(rows.reset_index(drop=True), registry), registry)
            terms = pipe_times(rows, registry)
            x, _ = self._design(rows, terms, registry, rule)
            target = rows["latency_us"].to_numpy(dtype="float64") / np.exp(
                self._shared(x) + self._local(rows, x, registry, True))
        finally:
            if saved is not None:
                self.overrides[gpu] = saved
        return fewshot_fingerprint(prior, terms, target,
                                   prior_weight=self.prior_weight if prior_weight is None else prior_weight)

    def fewshot_fit(self, gpu: str, rows: pd.DataFrame, registry, prior_weight: float | None = None,
                    rule: str | None = None, borrow: bool = False) -> tuple[Fingerprint, tuple | None]:
        """Few-shot constants of ``gpu`` (no training rows) from its measured ``rows`` (:meth:`calibrated`) and,
        with ``borrow`` and no class-mate among the training GPUs (the case the choice to borrow is scored on: the
        training GPUs left out in turn), the own-GPU corrections its rows take: candidates, simplest first, are none
        (the rule without measurements), every training GPU's (their mean), and each training GPU's alone; each
        refits the constants and predicts ``rows``, and the first within :data:`BORROW_MARGIN` of the lowest MAPE
        on them wins. A GPU with class-mates keeps theirs. The model is left as it was.

        Returns:
            ``(fingerprint, mates)``: set ``overrides[gpu] = fingerprint`` and, where ``mates`` is not None,
            ``borrowed[gpu] = mates`` to predict with them.
        """
        gpu = str(gpu)
        if not borrow or not self.local or len(rows) == 0 or gpu in self.fitted or self._class_mates(gpu, registry):
            return self.calibrated(gpu, rows, registry, prior_weight, rule), None
        y = rows["latency_us"].to_numpy(dtype="float64")
        trained = tuple(sorted(self.local))
        candidates = [None, trained, *((g,) for g in trained if len(trained) > 1)]
        saved = self.overrides.get(gpu), self.borrowed.get(gpu)
        fits = []
        try:
            for mates in candidates:
                self.borrowed.pop(gpu, None)
                if mates is not None:
                    self.borrowed[gpu] = mates
                self.overrides.pop(gpu, None)
                fp = self.calibrated(gpu, rows, registry, prior_weight, rule)
                self.overrides[gpu] = fp
                pred = self.predict(rows, registry, rule=rule)
                fits.append((float(np.mean(np.abs(pred / y - 1.0))), fp, mates))
        finally:
            for store, value in zip((self.overrides, self.borrowed), saved):
                store.pop(gpu, None)
                if value is not None:
                    store[gpu] = value
        best = min(f[0] for f in fits)
        _, fp, mates = next(f for f in fits if f[0] <= best * (1.0 + BORROW_MARGIN))
        return fp, mates

    def fit_local(self, rows: pd.DataFrame, registry, gpus_to_fit: list, seed: int = 0) -> None:
        """Fit the own-GPU corrections (:attr:`local`) of the training GPUs ``gpus_to_fit`` that have none, on their
        rows of ``rows`` (the rows the model was fitted on), as :meth:`fit` does with ``local``."""
        todo = [g for g in gpus_to_fit if g in self.fitted and g not in self.local]
        if not todo:
            return
        rows = with_spec_columns(with_v2_columns(rows, registry), registry)
        self._fit_local(rows, pipe_times(rows, registry), registry, seed, todo)

    def _fingerprints(self, rows: pd.DataFrame, terms: np.ndarray, registry, rule: str | None = None
                      ) -> tuple[np.ndarray, ...]:
        gpus = rows["gpu"].astype(str).to_numpy()
        fp_time, floor, spread = np.empty(len(rows)), np.empty(len(rows)), np.empty(len(rows))
        for g in np.unique(gpus):
            on = gpus == g
            fp = self.fingerprint(g, registry, rule)
            fp_time[on] = fp.time_us(terms[on])
            floor[on] = fp.floor_us
            spread[on] = fp.log_spread
        return np.maximum(fp_time, 1e-6), floor, spread

    def _design(self, rows: pd.DataFrame, terms: np.ndarray, registry, rule: str | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        fp_time, floor, _ = self._fingerprints(rows, terms, registry, rule)
        return correction_design(rows, terms, fp_time, floor, self.columns, self.levels, registry), fp_time

    def design(self, rows: pd.DataFrame, registry, rule: str | None = None) -> np.ndarray:
        """The correction design of ``rows`` (launch rows with ``gpu``), shape ``(len(rows), p)``: the features the
        correction reads (:func:`synperf.model.correction.correction_design`) at each GPU's constants
        (:meth:`fingerprint`, ``rule`` as in :meth:`predict`)."""
        rows = with_spec_columns(with_v2_columns(rows.reset_index(drop=True), registry), registry)
        return self._design(rows, pipe_times(rows, registry), registry, rule)[0]

    def predict(self, rows: pd.DataFrame, registry, sibling: bool = True, rule: str | None = None) -> np.ndarray:
        """Predicted latency per row, microseconds, shape ``(len(rows),)``. ``sibling``: add the class-mates'
        correction for the rows of a GPU without measurements (the predictor's own rule; False only to measure
        what it adds; it also leaves out the twins' evidence, :meth:`_twins`). ``rule`` (default :attr:`rule`): how a
        GPU without measurements gets its constants. No faster than the spec-sheet FLOP time
        (:func:`synperf.model.pipes.at_compute_bound`)."""
        if len(rows) == 0:
            return np.zeros(0)
        rows = with_spec_columns(with_v2_columns(rows, registry), registry)
        x, fp = self._design(rows, pipe_times(rows, registry), registry, rule)
        pred = self._twins(rows, fp * np.exp(self._shared(x) + self._local(rows, x, registry, sibling)), registry,
                           sibling)[0]
        return at_compute_bound(rows["bl_compute_us"].to_numpy(dtype="float64"), pred)[0]

    def _twins(self, rows: pd.DataFrame, pred: np.ndarray, registry, sibling: bool = True
               ) -> tuple[np.ndarray, np.ndarray]:
        """``pred`` with the twins' evidence in place for the rows of GPUs without measurements where a near
        class-mate measured the launch (:func:`synperf.model.twins.twin_latency`; none without ``sibling``), and
        the twin per row (``""`` where none)."""
        if not sibling or not self.measured:
            return pred, np.full(len(rows), "", dtype=object)
        twin, src = twin_latency(self.measured, rows, registry, exclude=set(self.fitted))
        return np.where(np.isfinite(twin), twin, pred), src

    def interval(self, rows: pd.DataFrame, registry, level: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` latency per row, microseconds (:meth:`describe`'s bounds; how they are set:
        :func:`synperf.model.fingerprint_interval.log_bounds`).

        Raises:
            ValueError: a row has no bounds: its GPU trained and the model was fitted without out-of-fold
                residuals, or it did not and no left-out GPU's residuals were recorded.
        """
        d = self.describe(rows, registry, level)
        low, high = d["predicted_latency_low_us"].to_numpy(), d["predicted_latency_high_us"].to_numpy()
        if np.isnan(low).any():
            gpus = sorted(set(rows["gpu"].astype(str).to_numpy()[np.isnan(low)]))
            raise ValueError(f"fingerprint model: no interval for {gpus} (fitted without out-of-fold residuals, or "
                             "without left-out GPUs' residuals for a GPU without measurements)")
        return low, high

    def evidence(self, gpu: str, registry) -> str:
        """How the correction of ``gpu``'s rows was learned, in words: the shared correction (or none), plus the
        GPU's own-GPU correction where it trained, else its class-mates' (:meth:`_local`)."""
        gpu = str(gpu)
        shared = ("no correction (fingerprint time alone)" if self.trees is None
                  else f"shared correction learned on {', '.join(sorted(self.fitted))}")
        if gpu in self.local:
            return f"{shared}; own-GPU correction on {gpu}'s measurements"
        mates = self._mates(gpu, registry)
        if gpu in self.borrowed:
            return (f"{shared}; own-GPU corrections of {', '.join(mates)}, chosen on its few-shot rows" if mates
                    else f"{shared}; no own-GPU correction (chosen on its few-shot rows)")
        if mates:
            return f"{shared}; class-mates' own-GPU corrections ({', '.join(mates)})"
        return f"{shared}; no class-mate of class {class_text(gpu_class(registry[gpu]))} in training"

    def describe(self, rows: pd.DataFrame, registry, level: float = 0.8) -> pd.DataFrame:
        """Prediction and provenance per row of ``rows`` (launch rows: ``gpu`` and the key columns), index
        ``0..len-1``: ``predicted_latency_us``, ``predicted_latency_low_us`` and ``predicted_latency_high_us``
        (:func:`synperf.model.fingerprint_interval.log_bounds` at ``level``; NaN where no residuals set them; all
        three held at or above ``compute_bound_us``, the spec-sheet FLOP time, by :func:`synperf.model.pipes.
        at_compute_bound`), ``fingerprint_time_us`` (the physical
        time with the GPU's constants), ``theoretical_time_us`` (feature set v2's), ``gpu_constants`` (where the
        GPU's constants came from, :attr:`Fingerprint.source`), ``evidence`` (:meth:`evidence`, or the twin whose
        measurement of the same launch it is), ``twin_gpu`` (that twin, ``""`` where none) and
        ``unknown_category`` (``column=value`` pairs of categorical columns whose value no training row had: the
        correction sees no level there; empty when none)."""
        rows = with_spec_columns(with_v2_columns(rows.reset_index(drop=True), registry), registry)
        terms = pipe_times(rows, registry)
        fp_time, floor, spread = self._fingerprints(rows, terms, registry)
        x = correction_design(rows, terms, fp_time, floor, self.columns, self.levels, registry)
        pred, twin = self._twins(rows, fp_time * np.exp(self._shared(x) + self._local(rows, x, registry, True)),
                                 registry)
        gpus = rows["gpu"].astype(str).to_numpy()
        low, high = log_bounds(self.residual_q, self.unseen_q, list(self.fitted), gpus, spread, registry, level,
                               self.local_q)
        bound = rows["bl_compute_us"].to_numpy(dtype="float64")
        pred, low, high, raised = at_compute_bound(bound, pred, pred * np.exp(low), pred * np.exp(high))
        out = pd.DataFrame({"predicted_latency_us": pred, "predicted_latency_low_us": low,
                            "predicted_latency_high_us": high, "compute_bound_us": bound}, index=rows.index)
        out["fingerprint_time_us"] = fp_time
        out["theoretical_time_us"] = (rows["theoretical_time_us"].to_numpy(dtype="float64")
                                      if "theoretical_time_us" in rows.columns else np.nan)
        uniq, inv = np.unique(gpus, return_inverse=True)
        out["gpu_constants"] = np.array([self.fingerprint(g, registry).source for g in uniq], dtype=object)[inv]
        out["evidence"] = np.array([self.evidence(g, registry) for g in uniq], dtype=object)[inv]
        out.loc[twin != "", "evidence"] = [
            f"the same launch measured on {t} (its time above the roofline carried over)" if t != g
            else "the same launch measured on this GPU (its few-shot rows)" for t, g in zip(twin[twin != ""],
                                                                                      gpus[twin != ""])]
        out.loc[raised, "evidence"] += "; raised to the spec-sheet FLOP time (predicted faster than the GPU's peak)"
        out["twin_gpu"] = twin
        unknown = np.full(len(rows), "", dtype=object)
        for c in self.columns[2]:
            values = rows[c].astype(str).to_numpy()
            new = ~np.isin(values, list(self.levels[c]))
            unknown[new] = [f"{u};{c}={v}" if u else f"{c}={v}" for u, v in zip(unknown[new], values[new])]
        out["unknown_category"] = unknown
        return out

