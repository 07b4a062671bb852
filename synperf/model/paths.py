"""Prediction paths beside the efficiency MLP: a fitted physical time model and transfer from a measured sibling.

Both paths work on rows of a feature table (:func:`synperf.pipeline.features.experiment_features` or
:func:`synperf.evaluation.protocols.feature_table`) that carry the per-row work and spec columns of
:func:`synperf.evaluation.baselines.add_baseline_columns` (``bl_*``; :func:`physical_design` adds them when absent).

Physical time model (:class:`PhysicalModel`)
    ``latency_us = a + sum_j c_j * t_j`` with ``t_j`` the per-pipeline times of the launch on the row's GPU from the
    registry's spec-sheet numbers (:data:`PHYSICAL_TERMS`): DRAM bytes / DRAM bandwidth, FLOPs / peak FLOP/s of the
    row's dtype and pipe (FP32 CUDA-core peak for RMSNorm and SiLU&Mul), XU operations / XU rate, and the launch's
    FLOPs + XU operations per SM cycle, ``work / (SMs * clock)``, a time that ignores how many lanes an SM has.
    Bounded least squares (:func:`scipy.optimize.lsq_linear`, bounded-variable method, which returns a vertex of the
    bounds where terms are collinear, as FLOPs and XU operations of element-wise kernels are) on relative error:
    rows are scaled by ``1 / latency`` so the objective is ``sum_i (pred_i / y_i - 1)^2``, close to what MAPE
    measures. Bounds (:data:`PHYSICAL_LOWER`): ``a >= 0``, ``c_j >= 1`` for the three spec-sheet times (no pipe runs
    faster than its peak, so a kernel pays at least each time in full), ``c >= 0`` for the work per SM cycle (no
    peak behind it). The bounds are physics, not fitted choices: a coefficient below 1 would claim a pipe faster
    than its spec-sheet peak. They matter where the training GPUs do not reach the bound of a target: RMSNorm on
    A100 and H100 runs at about a third of DRAM bandwidth, so a free fit could set the DRAM coefficient to 0 and
    predict a GPU with a third of A100's bandwidth as fast as an A100. (These bounds were written after seeing the
    configured split's A40 errors, an unseen GPU; the A40 numbers are therefore not independent evidence for
    them.) The sum of times
    (not their max) charges the pipes without overlap; the fitted ``c_j`` absorb the share of each pipe's peak a
    kernel reaches. One model per experiment, fitted on the training rows of the seen GPUs; it transfers to an
    unseen GPU through the spec-sheet terms only.

Sibling transfer (:func:`transfer_predict`)
    Where a seen GPU measured the same launch in the training rows (same shape key,
    :func:`synperf.evaluation.split.shape_key`: kernel, implementation, dtype, every parameter), the prediction on
    the target GPU is ``latency_src * base(target) / base(source)``: the measured latency corrected by the ratio of
    a base model's predictions on the two GPUs. The source is the nearest seen GPU of
    :func:`synperf.evaluation.baselines.nearest_sources` (same GPU class first, then the smallest distance of
    ``(ln peak, ln DRAM bandwidth)``), never the target GPU itself; rows without a source take the base prediction.

Physical time model with a learned residual (:class:`ResidualModel`)
    ``latency_us = physical(row) * exp(r(row))``: the physical time model above times a correction ``r`` that
    gradient-boosted trees (scikit-learn ``HistGradientBoostingRegressor``) fit to ``log(latency / physical)`` on the
    feature set's features (``log1p`` of the numeric ones, the linear ones as they are, categorical ones as
    categories). Trees predict a piecewise-constant function, bounded by the sum of their leaf values, which are
    fitted to training residuals: on a GPU outside the training range the correction stays within that bound and
    the spec-sheet terms of the physical model carry the difference in hardware, where an MLP on the same features
    can extrapolate without bound.

Ensemble (base ``ensemble``)
    The geometric mean of the three base models above, ``(mlp * physical * residual) ** (1/3)``: where their errors
    are not the same, the mean's error is smaller than the worst one's, and a model that runs away on a GPU outside
    the training range moves the prediction by the cube root of its error only.

Local correction (paths ``local`` and ``local_mlp``, :class:`LocalModel`, rows of a training GPU only)
    A base model (the residual model for ``local``, the MLP for ``local_mlp``) times the inverse-distance-weighted
    mean ratio ``latency / base`` of the launch's nearest measured training rows on the same GPU: the seen path's
    candidates for a held-out problem of a measured GPU.

Path names (:data:`PATHS`): the base models ``mlp``, ``physical``, ``residual`` and ``ensemble``, and
``<mode>+<base>`` with mode ``transfer`` (ratio), ``shift`` (difference), ``sibling`` (ratio, from a source of the
target's own class only, :meth:`synperf.data.hardware.GPUSpec.same_class`; the other rows take the base prediction)
or ``sibling_roofline`` (a source of the target's own class shifted by the spec-sheet roofline difference, the rule of
:func:`synperf.evaluation.baselines.nearest_gpu_roofline` restricted to siblings; the other rows take the base
prediction) of :func:`transfer_predict`. The ``sibling`` paths come last: where no training GPU has a sibling they
predict exactly as their base, and a tie keeps the earlier path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import lsq_linear

from synperf.evaluation.baselines import (
    BASELINE_COLUMNS,
    add_baseline_columns,
    nearest_sources,
    roofline_shift,
    shape_hash,
)

#: per-pipeline time columns of the physical model, microseconds (see :func:`physical_design`)
PHYSICAL_TERMS = ("bl_memory_us", "bl_compute_us", "bl_xu_us", "work_per_sm_cycle_us")
#: lower bounds of the physical model's coefficients: launch floor, then one per term of :data:`PHYSICAL_TERMS`
PHYSICAL_LOWER = (0.0, 1.0, 1.0, 1.0, 0.0)
#: the base models, each a path of its own
BASES = ("mlp", "physical", "residual", "ensemble")
#: the seen-GPU-only paths: :class:`LocalModel` on the residual model (:data:`LOCAL`) or on the MLP
#: (:data:`LOCAL_MLP`), for rows of a GPU with measured training rows; not in :data:`PATHS` (they have nothing to say
#: about a GPU without measurements)
LOCAL = "local"
LOCAL_MLP = "local_mlp"
LOCAL_PATHS = (LOCAL, LOCAL_MLP)
#: the models each base (and each of :data:`LOCAL_PATHS`) needs fitted
BASE_MODELS = {"mlp": ("mlp",), "physical": ("physical",), "residual": ("residual",),
               "ensemble": ("mlp", "physical", "residual"), LOCAL: ("residual", LOCAL),
               LOCAL_MLP: ("mlp", LOCAL_MLP)}
#: transfer modes of :func:`transfer_predict`
TRANSFER_MODES = ("transfer", "shift", "sibling", "sibling_roofline")
#: transfer modes that read a source of the target GPU's own class only: on a target without such a training
#: GPU their paths predict as their base (see :func:`sibling_gpus`)
SIBLING_MODES = ("sibling", "sibling_roofline")
#: every prediction path, in tie-break order (a tie in selection keeps the earlier one)
PATHS = BASES + tuple(f"{mode}+{base}" for mode in TRANSFER_MODES for base in BASES)
#: the base model of each path (:data:`PATHS` and :data:`LOCAL_PATHS`)
BASE = {p: p.split("+")[-1] for p in PATHS + LOCAL_PATHS}
#: how a path carries a sibling's latency over (None: no transfer), see :func:`transfer_predict`
TRANSFER = {p: (p.split("+")[0] if "+" in p else None) for p in PATHS + LOCAL_PATHS}


def sibling_gpus(targets, training_gpus, registry) -> set:
    """The GPUs of ``targets`` (registry ids) with a GPU of their own class
    (:meth:`synperf.data.hardware.GPUSpec.same_class`: compute capability major version and memory family) among
    ``training_gpus`` other than themselves: the targets a :data:`SIBLING_MODES` path can transfer to.

    Raises:
        InputError: a GPU the registry does not know.
    """
    train = [str(g) for g in training_gpus]
    return {str(t) for t in targets
            if any(registry[g].same_class(registry[str(t)]) for g in train if g != str(t))}


def with_spec_columns(rows: pd.DataFrame, registry) -> pd.DataFrame:
    """``rows`` with the ``bl_*`` work and spec columns (added when any is missing; row order kept)."""
    if all(c in rows.columns for c in BASELINE_COLUMNS):
        return rows
    return add_baseline_columns(rows.drop(columns=[c for c in BASELINE_COLUMNS if c in rows.columns]), registry,
                                tiles=False)


def physical_design(rows: pd.DataFrame, registry) -> np.ndarray:
    """Design matrix of the physical model, shape ``(len(rows), 1 + len(PHYSICAL_TERMS))``, microseconds.

    Column 0 is 1 (the launch floor ``a``); then ``bl_memory_us`` (DRAM bytes / DRAM B/s), ``bl_compute_us``
    (FLOPs / peak FLOP/s), ``bl_xu_us`` (XU ops / XU ops/s) of :func:`add_baseline_columns`, and
    ``(FLOPs + XU ops) / (SM count * clock)`` in microseconds.

    Raises:
        KeyError, InputError: as :func:`synperf.evaluation.baselines.add_baseline_columns`.
    """
    r = with_spec_columns(rows, registry)
    sm_clock = r["bl_sm_count"].to_numpy(dtype="float64") * r["bl_clock_hz"].to_numpy(dtype="float64")
    per_cycle = (r["bl_flops"].to_numpy(dtype="float64") + r["bl_xu_ops"].to_numpy(dtype="float64")) / sm_clock * 1e6
    cols = [np.ones(len(r))] + [r[c].to_numpy(dtype="float64") for c in PHYSICAL_TERMS[:3]] + [per_cycle]
    return np.column_stack(cols)


@dataclass
class PhysicalModel:
    """``latency_us = coef[0] + coef[1:] @ terms`` (terms :data:`PHYSICAL_TERMS`, microseconds), ``coef >= 0``.

    Attributes:
        coef: shape ``(1 + len(PHYSICAL_TERMS),)``: launch floor in microseconds, then one dimensionless
            multiplier per term (1 = the term's spec-sheet time, 2 = half the peak reached).
        train_mape_pct: MAPE of the fit on its own training rows, percent.
    """

    coef: np.ndarray
    train_mape_pct: float = float("nan")

    @classmethod
    def fit(cls, rows: pd.DataFrame, registry) -> "PhysicalModel":
        """Bounded least squares on relative error over ``rows`` (needs ``latency_us`` > 0), see the module
        docstring.

        Raises:
            ValueError: no rows, or a latency that is not finite and > 0.
        """
        y = rows["latency_us"].to_numpy(dtype="float64")
        if len(y) == 0 or not (np.isfinite(y) & (y > 0)).all():
            raise ValueError("physical model: needs >= 1 row with finite latency_us > 0")
        x = physical_design(rows, registry)
        coef = lsq_linear(x / y[:, None], np.ones(len(y)), bounds=(np.array(PHYSICAL_LOWER), np.inf),
                          method="bvls").x
        model = cls(coef)
        model.train_mape_pct = float(np.mean(np.abs(x @ coef / y - 1.0)) * 100.0)
        return model

    def predict(self, rows: pd.DataFrame, registry) -> np.ndarray:
        """Predicted latency per row, microseconds, shape ``(len(rows),)``."""
        if len(rows) == 0:
            return np.zeros(0)
        return physical_design(rows, registry) @ self.coef

    def to_dict(self) -> dict:
        return {"terms": ["launch_floor_us", *PHYSICAL_TERMS], "coef": [float(c) for c in self.coef],
                "train_mape_pct": self.train_mape_pct}

    @classmethod
    def from_dict(cls, d: dict) -> "PhysicalModel":
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: the stored terms differ from :data:`PHYSICAL_TERMS`.
        """
        if list(d["terms"]) != ["launch_floor_us", *PHYSICAL_TERMS]:
            raise ValueError(f"physical model terms {d['terms']} differ from this version's {list(PHYSICAL_TERMS)}")
        return cls(np.asarray(d["coef"], dtype="float64"), float(d.get("train_mape_pct", float("nan"))))


#: the residual model's tree budget (``HistGradientBoostingRegressor`` arguments). Chosen by
#: ``tools/residual_tree_budget.py``: leave one seen GPU out inside every experiment's configured training rows
#: (never a held-out problem or an unseen GPU), 5,000-row cap; the cheapest budget whose geometric-mean MAPE over
#: the 11 experiments is within ``MIN_RELATIVE_GAIN`` (5%) of the lowest, the margin of every other choice.
#: Measured: 300 x 0.1 (the ``gbt`` baseline's) 20.03%, 150 x 0.2 20.17%, 100 x 0.3 20.15%, 60 x 0.5 20.25%,
#: 40 x 0.7 20.84% (+4.0%); fitting 40 x 0.7 took 18% of 300 x 0.1's time (52% of 100 x 0.3's) and predicting 22%.
RESIDUAL_TREES = {"max_iter": 40, "learning_rate": 0.7, "max_leaf_nodes": 31}


class JoblibModel:
    """A fitted model stored as one joblib file (:meth:`save`, :meth:`load`)."""

    def save(self, file) -> None:
        """Write the model to ``file`` (joblib) atomically."""
        import joblib

        from synperf.data.io import atomic_path

        with atomic_path(file) as tmp:
            joblib.dump(self, tmp)

    @classmethod
    def load(cls, file):
        """Read a model :meth:`save` wrote, of this class.

        Raises:
            InputError: no such file, or not a valid joblib file (:func:`synperf.data.io.read_artefact`).
            TypeError: the file holds something else.
        """
        from synperf.data.io import read_artefact

        model = read_artefact(file)
        if not isinstance(model, cls):
            raise TypeError(f"{file}: expected a {cls.__name__}, found {type(model).__name__}")
        return model


def design_columns(meta: dict) -> tuple[list, list]:
    """The numeric (log1p) and linear design columns of a feature set's sidecar ``meta``: ``linear`` as listed, the
    ``numeric`` ones that are not also linear."""
    linear = list(meta["linear"])
    return [c for c in meta["numeric"] if c not in linear], linear


def _level_codes(column: pd.Series, levels: dict) -> np.ndarray:
    """``levels[str(value)]`` per row as float64 (NaN for a value not in ``levels``), shape ``(len(column),)``;
    each distinct value is converted and looked up once."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    return pd.Series(uniques).astype(str).map(levels).astype("float64").to_numpy()[codes]


def _openmp_threads(n: int):
    """``threadpoolctl``'s limit of OpenMP to ``n`` threads, from one controller per process (making one lists
    the loaded libraries, a few milliseconds); the trees' OpenMP runtime is loaded before the first call."""
    global _OPENMP
    if _OPENMP is None:
        from threadpoolctl import ThreadpoolController

        _OPENMP = ThreadpoolController()
    return _OPENMP.limit(limits=n, user_api="openmp")


_OPENMP = None


@dataclass
class ResidualModel(JoblibModel):
    """The physical time model times a tree-fitted correction: ``latency_us = physical(row) * exp(r(row))``.

    ``r`` is a scikit-learn ``HistGradientBoostingRegressor`` fitted to ``log(latency_us / physical(row))`` on the
    feature set's columns: ``log1p`` of the ``numeric`` ones (missing as 0, negative clipped to 0, as the MLP's
    encoder reads them), the ``linear`` ones as they are, the ``categorical`` ones as categories (a value not seen
    in training is a missing value, which the trees route as they learned to). Its budget is
    :data:`RESIDUAL_TREES` (40 iterations, learning rate 0.7, 31 leaves), chosen on the seen GPUs only (see there).

    Attributes:
        physical: the :class:`PhysicalModel` fitted on the same rows.
        trees: the fitted regressor.
        numeric, linear, categorical: the feature columns, in design-matrix order.
        levels: the training categories per categorical column.
    """

    physical: PhysicalModel
    trees: object
    numeric: list
    linear: list
    categorical: list
    levels: dict

    @staticmethod
    def _design(rows: pd.DataFrame, numeric, linear, categorical, levels) -> np.ndarray:
        """Columns: ``log1p`` of the numeric features (missing as 0, negative clipped to 0), the linear ones
        (missing as 0), the categorical ones as level codes (a value not in ``levels`` missing)."""
        def filled(c):
            x = rows[c].to_numpy(dtype="float64", na_value=np.nan)
            return np.where(np.isnan(x), 0.0, x)

        cols = [np.log1p(np.where(x >= 0.0, x, 0.0)) for x in map(filled, numeric)]
        cols += [filled(c) for c in linear]
        cols += [_level_codes(rows[c], levels[c]) for c in categorical]
        return np.column_stack(cols) if cols else np.zeros((len(rows), 0))

    @classmethod
    def fit(cls, rows: pd.DataFrame, meta: dict, registry, *, max_train_rows: int = 0, seed: int = 0,
            threads: int = 1, trees: dict | None = None) -> "ResidualModel":
        """Fit on feature-table ``rows`` (with ``latency_us`` > 0 and the columns ``meta`` names).

        Args:
            meta: the feature table's sidecar (``numeric``, ``linear``, ``categorical``).
            max_train_rows: a seeded subsample of at most this many rows fits the trees (0: every row); the
                physical model is fitted on every row.
            threads: OpenMP threads of the trees.
            trees: ``HistGradientBoostingRegressor`` arguments over :data:`RESIDUAL_TREES`.

        Raises:
            ValueError: as :meth:`PhysicalModel.fit`; a feature column ``meta`` names is missing.
        """
        from sklearn.ensemble import HistGradientBoostingRegressor

        numeric, linear = design_columns(meta)
        categorical = list(meta["categorical"])
        missing = [c for c in numeric + linear + categorical if c not in rows.columns]
        if missing:
            raise ValueError(f"residual model: the rows lack feature column(s) {missing}")
        physical = PhysicalModel.fit(rows, registry)
        sub = rows
        if max_train_rows and len(rows) > max_train_rows:
            sub = rows.iloc[np.sort(np.random.default_rng(seed).choice(len(rows), max_train_rows, replace=False))]
        levels = {c: {v: i for i, v in enumerate(sorted(sub[c].astype(str).unique()))} for c in categorical}
        x = cls._design(sub, numeric, linear, categorical, levels)
        y = np.log(sub["latency_us"].to_numpy(dtype="float64") / physical.predict(sub, registry))
        is_cat = np.array([False] * (len(numeric) + len(linear)) + [True] * len(categorical))
        model = HistGradientBoostingRegressor(
            **{**RESIDUAL_TREES, **(trees or {})}, categorical_features=is_cat if is_cat.any() else None,
            early_stopping=False, random_state=seed)
        with _openmp_threads(max(1, threads)):
            model.fit(x, y)
        return cls(physical, model, numeric, linear, categorical, levels)

    def predict(self, rows: pd.DataFrame, registry) -> np.ndarray:
        """Predicted latency per row, microseconds, shape ``(len(rows),)``."""
        if len(rows) == 0:
            return np.zeros(0)
        x = self._design(rows, self.numeric, self.linear, self.categorical, self.levels)
        with _openmp_threads(1):
            r = self.trees.predict(x)
        return self.physical.predict(rows, registry) * np.exp(r)


#: neighbours of :class:`LocalModel`, chosen on the seen-path validation rows of the training GPUs only (the
#: primary MLPs' early-stopping validation problems of gemm, attention_prefill, attention_decode and fused_moe; mean
#: per-GPU MAPE % for k = 3 / 5 / 10: gemm 4.58 / 4.51 / 4.49, prefill 4.18 / 4.03 / 4.14, decode 3.66 / 3.74 /
#: 3.87, MoE 7.11 / 7.10 / 7.41, against 5.22 / 5.16 / 4.76 / 9.01 for the residual model alone)
LOCAL_NEIGHBOURS = 5


@dataclass
class LocalModel(JoblibModel):
    """A base model corrected by a launch's measured neighbours on the same GPU, for GPUs with training rows.

    ``latency_us = base(row) * exp(sum_j w_j r_j / sum_j w_j)`` over the :data:`LOCAL_NEIGHBOURS` nearest
    training rows ``j`` of the row's GPU, with ``r_j = log(latency_j / base(row_j))`` and ``w_j = 1 /
    distance`` (scikit-learn ``KNeighborsRegressor(weights="distance")``; a training row at distance 0 gives its own
    ratio; an exact k-d tree search, whose order among equidistant rows decides ties). Distance: Euclidean over the
    feature set's numeric and linear design columns (:meth:`ResidualModel._design`: ``log1p`` of the numeric
    features, the linear ones as they are), each standardized by the training rows' mean and standard deviation.
    A held-out problem of a measured GPU sits between measured shapes of that GPU; the neighbours carry what the
    base model, fitted across GPUs under a row cap, leaves of that GPU's own deviation. The base is the residual
    model (path ``local``, :meth:`fit`, kept in :attr:`residual`) or the MLP (path ``local_mlp``,
    :meth:`fit_to_base`; its predictions are passed in).

    Attributes:
        numeric, linear: the design columns (as :class:`ResidualModel`).
        mean, scale: the design columns' training mean and standard deviation (1 where it is 0).
        neighbours: GPU id -> the fitted regressor over that GPU's training rows.
        residual: the residual model the ratios are taken against, None when the base is another model.
    """

    numeric: list
    linear: list
    mean: np.ndarray
    scale: np.ndarray
    neighbours: dict
    residual: ResidualModel | None = None

    def _design(self, rows: pd.DataFrame) -> np.ndarray:
        x = ResidualModel._design(rows, self.numeric, self.linear, [], {})
        return (x - self.mean) / self.scale

    @classmethod
    def fit(cls, rows: pd.DataFrame, residual: ResidualModel, registry, *, k: int = LOCAL_NEIGHBOURS,
            base_pred: np.ndarray | None = None) -> "LocalModel":
        """Fit on feature-table ``rows`` (``gpu``, ``latency_us`` > 0 and ``residual``'s feature columns) against
        ``residual`` (fitted on the same or a subset of the rows); ``base_pred``: ``residual``'s latency on ``rows``
        (microseconds, positional), predicted here when None.

        Raises:
            ValueError: as :meth:`fit_to_base`.
        """
        pred = residual.predict(rows, registry) if base_pred is None else base_pred
        return cls.fit_to_base(rows, pred, residual.numeric, residual.linear, k=k, residual=residual)

    @classmethod
    def fit_to_base(cls, rows: pd.DataFrame, base_pred: np.ndarray, numeric: list, linear: list, *,
                    k: int = LOCAL_NEIGHBOURS, residual: ResidualModel | None = None) -> "LocalModel":
        """Fit on feature-table ``rows`` (``gpu``, ``latency_us`` > 0, the ``numeric`` and ``linear`` columns)
        against a base model's latency on them (``base_pred``, microseconds, positional, > 0).

        Raises:
            ValueError: no rows, a latency or base prediction that is not positive, or ``base_pred`` not one value
                per row.
        """
        from sklearn.neighbors import KNeighborsRegressor

        if len(rows) == 0:
            raise ValueError("local model: no training rows")
        y = rows["latency_us"].to_numpy(dtype="float64")
        pred = np.asarray(base_pred, dtype="float64")
        if len(pred) != len(rows):
            raise ValueError(f"local model: {len(pred)} base predictions for {len(rows)} rows")
        if not (y > 0).all() or not (pred > 0).all():
            raise ValueError("local model: every training latency_us and base prediction must be > 0")
        x = ResidualModel._design(rows, numeric, linear, [], {})
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        x = (x - mean) / scale
        r = np.log(y / pred)
        gpu = rows["gpu"].astype(str).to_numpy()
        neighbours = {}
        for g in np.unique(gpu):
            on = gpu == g
            neighbours[str(g)] = KNeighborsRegressor(n_neighbors=int(min(k, on.sum())), weights="distance",
                                                     algorithm="kd_tree").fit(x[on], r[on])
        return cls(list(numeric), list(linear), mean, scale, neighbours, residual)

    def predict(self, rows: pd.DataFrame, registry, base_pred: np.ndarray | None = None) -> np.ndarray:
        """Predicted latency per row, microseconds, shape ``(len(rows),)``; ``base_pred``: the base model's latency
        on ``rows`` (microseconds, positional), predicted here when None and the base is the residual model.

        Raises:
            ValueError: a row's GPU has no training rows here (the model predicts measured GPUs only); no
                ``base_pred`` for a model whose base is not the residual model.
        """
        if len(rows) == 0:
            return np.zeros(0)
        gpu = rows["gpu"].astype(str).to_numpy()
        unknown = sorted(set(np.unique(gpu)) - set(self.neighbours))
        if unknown:
            raise ValueError(f"local model: no training rows of GPU(s) {unknown}; it predicts only "
                             f"{sorted(self.neighbours)}")
        if base_pred is None:
            if self.residual is None:
                raise ValueError("local model: its base is not the residual model; pass the base's predictions")
            base_pred = self.residual.predict(rows, registry)
        pred = np.asarray(base_pred, dtype="float64")
        x = self._design(rows)
        r = np.zeros(len(rows))
        for g in np.unique(gpu):
            on = gpu == g
            r[on] = self.neighbours[g].predict(x[on])
        return pred * np.exp(r)


def _family_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the parameters of other kernel families blanked (NA), so that a launch built with defaults
    for every family (``synperf.api.launch_table`` fills ``window_size``, ``kv_cache_dtype``, ... for a GEMM)
    matches the measured rows of the same launch."""
    from synperf.data.schema import KERNEL_PARAMS

    foreign = {c for ps in KERNEL_PARAMS.values() for c in ps}
    kernel = rows["kernel"].astype(str).to_numpy()
    blank = {}  # column -> rows to blank
    for k in np.unique(kernel):
        for c in sorted(foreign - set(KERNEL_PARAMS.get(k, ()))):
            if c in rows.columns:
                blank[c] = blank.get(c, np.zeros(len(rows), dtype=bool)) | (kernel == k)
    new = {}
    for c, mask in blank.items():
        col = rows[c]
        if isinstance(col.dtype, (pd.StringDtype, pd.Int64Dtype)):
            new[c] = col.mask(mask, pd.NA)
        else:
            values = col.to_numpy(dtype=object, copy=True)
            values[mask] = pd.NA
            new[c] = pd.Series(values, index=rows.index, dtype=object, name=c)
    return rows.assign(**new) if new else rows.copy()


def source_keys(train: pd.DataFrame) -> np.ndarray:
    """The shape hash :func:`transfer_sources` matches ``train`` rows on (parameters of other kernel families
    blanked), uint64, shape ``(len(train),)``.

    Raises:
        ValueError: ``train`` lacks a canonical key column.
    """
    return shape_hash(_family_columns(train))


def transfer_sources(train: pd.DataFrame, test: pd.DataFrame, registry, train_keys: np.ndarray | None = None
                     ) -> pd.DataFrame:
    """The sibling measurement of each ``test`` row among ``train`` rows on other GPUs.

    :func:`synperf.evaluation.baselines.nearest_sources` per target GPU, over the ``train`` rows of every other
    GPU: a GPU is never its own source. The launch matches on every key column but the GPU, after blanking the
    parameters that belong to other kernel families (:data:`synperf.data.schema.KERNEL_PARAMS`).

    ``train_keys``: :func:`source_keys` of ``train`` (computed here when None); a caller matching many test sets
    against the same ``train`` passes it once.

    Raises:
        ValueError: a frame lacks a canonical key column, or ``train_keys`` is not one key per ``train`` row.

    Returns:
        One row per ``test`` row (positional): ``src_pos`` (position in ``train``, -1 where no other GPU measured
        the launch), ``src_gpu`` (<NA> where uncovered) and ``same_class`` (the source GPU is of the target's
        class, :meth:`synperf.data.hardware.GPUSpec.same_class`; False where uncovered).
    """
    out = pd.DataFrame({"src_pos": np.full(len(test), -1, dtype="int64"),
                        "src_gpu": pd.Series([pd.NA] * len(test), dtype="string"),
                        "same_class": np.zeros(len(test), dtype=bool)})
    if len(test) == 0 or len(train) == 0:
        return out
    if train_keys is None:
        train_keys = source_keys(train)
    elif len(train_keys) != len(train):
        raise ValueError(f"train_keys: {len(train_keys)} keys for {len(train)} train rows")
    train_keys = np.asarray(train_keys)
    test = _family_columns(test)
    tr_gpu_col = train[["gpu"]]  # all nearest_sources reads of train rows once their keys are known
    tr_gpu = train["gpu"].astype(str).to_numpy()
    te_gpu = test["gpu"].astype(str).to_numpy()
    for g in np.unique(te_gpu):
        others = np.flatnonzero(tr_gpu != g)
        rows = np.flatnonzero(te_gpu == g)
        if len(others) == 0:
            continue
        src = nearest_sources(tr_gpu_col.iloc[others], test.iloc[rows], registry, train_keys=train_keys[others])
        ok = src["src_pos"].to_numpy() >= 0
        out.loc[rows[ok], "src_pos"] = others[src["src_pos"].to_numpy()[ok]]
        out.loc[rows[ok], "src_gpu"] = src["src_gpu"].to_numpy()[ok]
        out.loc[rows[ok], "same_class"] = src["same_class"].to_numpy(dtype=bool)[ok]
    return out


def transfer_predict(train: pd.DataFrame, test: pd.DataFrame, registry, base_train: np.ndarray,
                     base_test: np.ndarray, mode: str = "transfer", sources: pd.DataFrame | None = None
                     ) -> tuple[np.ndarray, pd.Series]:
    """Sibling transfer; the base prediction where no other GPU measured the launch.

    ``mode="transfer"``: ``latency_src * base_test / base_train[src]`` (the base model's ratio between the GPUs).
    ``mode="shift"``: ``latency_src - base_train[src] + base_test`` (the source's excess over the base model
    carried over, the form of :func:`synperf.evaluation.baselines.nearest_gpu_roofline` with a fitted base),
    floored at ``1e-3 * latency_src``.
    ``mode="sibling"``: as ``transfer``, from a source of the target GPU's own class only (a sibling,
    :meth:`synperf.data.hardware.GPUSpec.same_class`: same SM generation and memory family, so the base model's
    ratio has mostly spec differences to carry); a row whose nearest source is of another class takes the base
    prediction.
    ``mode="sibling_roofline"``: from a sibling only, as ``sibling``, but ``latency_src - roofline_src +
    roofline_target`` (``bl_roofline_us``, the spec-sheet ``max(compute, DRAM)`` time; floored at ``1e-3 *
    latency_src``), the rule of :func:`synperf.evaluation.baselines.nearest_gpu_roofline` restricted to siblings:
    the roofline carries the spec difference and the base model predicts the other rows only (``base_train`` is
    not read). Between siblings the SM design is the same, so what differs is peak FLOP/s and DRAM bandwidth, and
    the max charges a bandwidth change to a launch only where DRAM bounds it; the fitted models' sums of pipe times
    charge every launch for it.

    Args:
        train: rows that may serve as sources (measured ``latency_us``, microseconds): training rows only.
        test: rows to predict.
        base_train, base_test: the base model's predicted latency for ``train`` and ``test`` rows, shapes
            ``(len(train),)`` and ``(len(test),)``, microseconds.
        sources: :func:`transfer_sources` of the same ``train`` and ``test`` (computed here when None).

    Returns:
        ``(pred, src_gpu)``: predicted latency per ``test`` row (microseconds) and the source GPU (<NA> where the
        base prediction was used).

    Raises:
        ValueError: a base array of the wrong length, or an unknown ``mode``.
    """
    if mode not in TRANSFER_MODES:
        raise ValueError(f"transfer mode {mode!r}: expected one of {list(TRANSFER_MODES)}")
    base_train = np.asarray(base_train, dtype="float64")
    base_test = np.asarray(base_test, dtype="float64")
    if len(base_train) != len(train) or len(base_test) != len(test):
        raise ValueError(f"base predictions: {len(base_train)}/{len(base_test)} for {len(train)}/{len(test)} rows")
    src = transfer_sources(train, test, registry) if sources is None else sources
    if len(src) != len(test):
        raise ValueError(f"sources: {len(src)} rows for {len(test)} test rows")
    pos = src["src_pos"].to_numpy()
    ok = pos >= 0
    src_gpu = src["src_gpu"]
    if mode in SIBLING_MODES:
        ok &= src["same_class"].to_numpy(dtype=bool)
        src_gpu = src_gpu.where(ok, pd.NA)
    pred = base_test.copy()
    lat = train["latency_us"].to_numpy(dtype="float64")
    src_lat = lat[pos[ok]]
    if mode == "sibling_roofline":
        if ok.any():
            pred[ok] = roofline_shift(src_lat, with_spec_columns(train.iloc[pos[ok]], registry)["bl_roofline_us"],
                                      with_spec_columns(test.iloc[np.flatnonzero(ok)], registry)["bl_roofline_us"])
        return pred, src_gpu
    if mode == "shift":
        pred[ok] = np.maximum(src_lat - base_train[pos[ok]] + base_test[ok], 1e-3 * src_lat)
    else:
        pred[ok] = src_lat * base_test[ok] / base_train[pos[ok]]
    return pred, src_gpu
