"""The fingerprint predictor's correction: its features and tree budgets, and its persistence.

The correction is scikit-learn's ``HistGradientBoostingRegressor`` on ``log(latency / fingerprint time)``; its
design (:func:`correction_design`) names no GPU: ``log1p`` of the launch's shape parameters (``p_*``) and of its
tiles, waves, CTAs per SM, tile sizes and fused MoE's shard alignment (:data:`GEOMETRY`), the wave efficiency and L2
footprint, the share of each
pipe time in their sum and the floor's share of the fingerprint time, ``log`` of the fingerprint time, the feature
set's categorical columns, and the GPU class (compute capability major; 1 for HBM, 0 for GDDR).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.model.pipes import LINEAR, gpu_class

#: the shared correction's default tree budget (``HistGradientBoostingRegressor`` arguments): chosen on seen GPUs
#: (each left out inside every experiment's configured training rows) for a residual-tree model of the same kind,
#: as the cheapest within 5% of the lowest MAPE; :data:`synperf.model.fingerprint_choice.CORRECTIONS` adds a larger
#: budget, chosen per training set
RESIDUAL_TREES = {"max_iter": 40, "learning_rate": 0.7, "max_leaf_nodes": 31}


#: the own-GPU correction's trees (``HistGradientBoostingRegressor``): the number of trees set by early stopping on
#: a seeded 10% of the GPU's rows (no improvement of the validation loss in 20 iterations). With
#: :data:`OWN_GPU_MAX_ROWS`, the cheapest budget within 5% of the lowest MAPE on set-aside problems of the training
#: GPUs' configured training rows (``tools/own_gpu_budget.py``; larger caps, leaves and slower rates are scored)
OWN_GPU_TREES = {"max_iter": 1000, "learning_rate": 0.1, "max_leaf_nodes": 31, "early_stopping": True,
                 "validation_fraction": 0.1, "n_iter_no_change": 20}
#: the own-GPU correction's row cap per GPU (a seeded subsample above it)
OWN_GPU_MAX_ROWS = 20000
#: tile and launch-geometry columns read by the correction where the feature table has them (``log1p``);
#: ``shard_align``: :func:`synperf.model.kernels.fused_moe.shard_alignment`
GEOMETRY = ("waves", "num_tasks", "ctas_per_sm", "sm_max_tasks", "tile_m", "tile_n", "split_k", "block_m", "block_n",
            "shard_align")

def _filled(rows: pd.DataFrame, c: str) -> np.ndarray:
    x = rows[c].to_numpy(dtype="float64", na_value=np.nan)
    return np.where(np.isfinite(x), x, 0.0)


def correction_columns(meta: dict, columns) -> tuple[list, list, list]:
    """``(log1p columns, as-is columns, categorical columns)`` of the correction for a feature table with
    sidecar ``meta`` and these ``columns``: the shape parameters (``p_*``) and :data:`GEOMETRY` present;
    :data:`LINEAR`; the feature set's ``categorical`` ones."""
    cols = list(columns)
    logs = sorted(c for c in cols if c.startswith("p_")) + [c for c in GEOMETRY if c in cols]
    return logs, list(LINEAR), [c for c in meta["categorical"] if c in cols]


def correction_design(rows: pd.DataFrame, terms: np.ndarray, fp_time: np.ndarray, floor: np.ndarray,
                      columns: tuple[list, list, list], levels: dict, registry) -> np.ndarray:
    """The correction's design matrix, shape ``(len(rows), features)`` (see the module docstring); ``terms``
    (:func:`pipe_times`), ``fp_time`` and ``floor`` (microseconds, per row) from the row's fingerprint."""
    logs, linear, categorical = columns
    total = np.maximum(terms.sum(axis=1), 1e-12)
    gpus = rows["gpu"].astype(str).to_numpy()
    uniq, inv = np.unique(gpus, return_inverse=True)
    classes = np.array([gpu_class(registry[g]) for g in uniq], dtype=object)
    major = np.array([c[0] for c in classes], dtype="float64")[inv]
    hbm = np.array([c[1] == "HBM" for c in classes], dtype="float64")[inv]
    cols = [np.log1p(np.maximum(_filled(rows, c), 0.0)) for c in logs] + [_filled(rows, c) for c in linear]
    cols += [terms[:, j] / total for j in range(terms.shape[1])]
    cols += [floor / fp_time, np.log(fp_time), major, hbm]
    for c in categorical:
        codes, uniques = pd.factorize(rows[c], use_na_sentinel=False)
        cols.append(pd.Series(uniques).astype(str).map(levels[c]).astype("float64").to_numpy()[codes])
    return np.column_stack(cols)


def gpu_quantiles(values: np.ndarray, gpus: np.ndarray, q: tuple = (0.1, 0.9)) -> tuple:
    """Quantiles ``q`` of ``values`` with each GPU of ``gpus`` (one id per value) weighing the same, whatever its
    number of values; NaN for no values."""
    if len(values) == 0:
        return tuple(float("nan") for _ in q)
    counts = pd.Series(gpus).map(pd.Series(gpus).value_counts()).to_numpy(dtype="float64")
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(1.0 / counts[order]) / np.sum(1.0 / counts)
    return tuple(float(values[order][min(np.searchsorted(cum, p), len(values) - 1)]) for p in q)


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
