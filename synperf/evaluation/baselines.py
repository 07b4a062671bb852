"""Baselines for the paper-style evaluation: what a user would do instead of synperf.

Every baseline has one signature, registered in :data:`BASELINES`::

    fn(train, test, registry, *, seed=0, feature_meta=None, cfg=None) -> np.ndarray

* ``train``, ``test``: rows carrying the canonical key columns (:data:`synperf.data.schema.KEY_COLUMNS`);
  ``train`` also ``latency_us`` (microseconds, > 0). Rows of an experiment's feature table (written by
  :func:`synperf.pipeline.features.experiment_features`) qualify, and so do canonical measurement rows.
* ``registry``: the GPU registry (:func:`synperf.data.hardware.load_registry`).
* ``seed``: every random choice (row subsampling, network initialisation, tree splits) derives from it.
* ``feature_meta``: ``{"numeric": [...], "linear": [...], "categorical": [...]}``, the feature set's
  column lists (the sidecar JSON of the feature table). ``linear`` reads all three (and computes feature
  set v2 from the canonical columns when it is ``None``); ``neusight`` only the categorical list.
* ``cfg``: :class:`BaselineConfig` (row cap, epochs, tree budget); default ``BaselineConfig()``.

Each returns a float64 array of predicted ``latency_us`` for the rows of ``test`` (same order). The
nearest-GPU baselines return NaN for rows they cannot cover; :func:`coverage` gives the covered share.
:func:`fit_predict` dispatches by name.

Methods (names are the keys of :data:`BASELINES`):

``roofline``
    ``max(FLOPs / peak, XU ops / XU rate, DRAM bytes / DRAM bandwidth)`` with the registry's spec-sheet
    numbers: feature set v1's ``theoretical_time_us`` (:mod:`synperf.model.features.v1`; peak = dense tensor
    peak of the dtype, FP32 CUDA-core peak for RMSNorm and SiLU&Mul). Ignores ``train``.
``linear``
    scikit-learn linear regression of ``log(latency_us)`` on the MLP's own inputs: the feature set's
    numeric features as ``log1p``, the linear ones as they are, standardised and clipped like the MLP
    (:class:`synperf.model.estimator.Encoder`), plus the one-hot categorical features. Ridge-penalised
    (``Ridge``): the cycle and operation counts are collinear up to a per-GPU constant, so with two or
    three training GPUs ordinary least squares puts huge opposite weights on them and predicts ~1e-250 us
    on an unseen GPU. The penalty is chosen from :data:`LINEAR_ALPHAS` by leave-one-GPU-out
    cross-validation over the training GPUs (MAPE of the held-out GPU; 5 folds of shapes when only one
    GPU trains), so the choice sees no test GPU; ``BaselineConfig.linear_alpha`` fixes it instead
    (0 = ordinary least squares).
``neusight``
    NeuSight-style (ASPLOS 2025; ``method.md``, NeuSight section): the launch is cut into tiles (the
    tasks of our decomposer, ``num_tasks`` of feature set v2), ``waves = ceil(tiles / SMs)``; the
    per-tile roofline ``t_tile = max(tile FLOPs / (peak / SMs), tile XU / (XU rate / SMs),
    tile bytes / (DRAM bw / SMs))`` with the launch's FLOPs and DRAM bytes shared evenly by its tiles;
    a small MLP on the tile's work normalised by the device (cycles of each roofline term per SM,
    arithmetic intensity over the ridge point, waves, tiles per SM, L2 footprint, log SMs and log L2
    size, plus the feature set's categorical columns) outputs ``(c, a)`` and the utilisation
    ``u = alpha * (1 - sigmoid(a) / (waves + 1))`` with ``alpha = sigmoid(c)``: NeuSight's
    ``alpha - beta / waves`` with ``beta = alpha * s`` kept below ``alpha``, so ``u`` stays in (0, 1] (the
    unconstrained ``sigmoid(c) - sigmoid(a) / waves`` went negative on unseen GPUs and predicted up to 80x the
    latency). ``u`` is floored at half the lowest utilisation a training row reached (at least
    :data:`NEUSIGHT_U_MIN`); prediction ``latency = waves * t_tile / u``. Since ``u <= 1`` the prediction never
    beats the roofline.
    Trained on ``|log(pred / measured)|`` with AdamW, seeded, on CPU.
``nearest_gpu_scaled`` (variant a), ``nearest_gpu_roofline`` (variant b)
    The latency measured in ``train`` for the same shape on the most similar GPU, carried to the target
    (:mod:`synperf.evaluation.nearest_gpu`, with the similarity rule).
``gbt``
    scikit-learn ``HistGradientBoostingRegressor`` on ``log1p`` of every canonical shape parameter
    present, the categorical key columns (kernel, implementation, dtype, KV-cache dtype, MoE stage and
    routing) and ``log`` GPU specs (peak FLOP/s of the row's dtype and pipe, DRAM B/s, L2 bytes, SM
    count, clock); target ``log(latency_us)``; no analytical feature.

Shared per-row inputs live in columns prefixed ``bl_`` (:func:`synperf.model.roofline.add_baseline_columns`); a
caller that evaluates many folds adds them once to the table and every baseline reuses them instead of recomputing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from synperf.data.schema import KEY_COLUMNS, PARAM_COLUMNS
from synperf.evaluation.nearest_gpu import (  # noqa: F401  (coverage and the lookups are part of this interface)
    coverage,
    nearest_gpu_roofline,
    nearest_gpu_scaled,
    nearest_sources,
    roofline_shift,
    shape_hash,
)
from synperf.evaluation.split import problem_key
from synperf.model.roofline import (  # noqa: F401  (the shared inputs are part of this interface)
    BASELINE_COLUMNS,
    TILE_COLUMN,
    add_baseline_columns,
    training_latency_us,
    with_baseline_columns,
)

#: ridge penalties tried by ``linear``'s cross-validation
LINEAR_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
#: floor of NeuSight's utilisation (keeps the predicted latency finite)
NEUSIGHT_U_MIN = 1e-3


@dataclass
class BaselineConfig:
    """Budgets of the trained baselines (``linear``, ``neusight``, ``gbt``).

    Attributes:
        max_train_rows: seeded subsample of the training rows for the fitted baselines (0 = all rows).
            The nearest-GPU lookups always use every training row.
        neusight_hidden: hidden layer widths of the NeuSight MLP.
        neusight_epochs: training epochs (fixed budget, the last epoch's weights are used).
        neusight_lr, neusight_weight_decay, neusight_batch_size: AdamW step size, weight decay, batch rows.
        gbt_max_iter, gbt_learning_rate, gbt_max_leaf_nodes: HistGradientBoostingRegressor budget.
        threads: CPU threads (torch for NeuSight, OpenMP for the trees).
        linear_alpha: ridge penalty of ``linear`` on the standardised features; ``None`` (default) chooses it
            by cross-validation over the training GPUs, 0 = ordinary least squares.
    """

    max_train_rows: int = 20000
    neusight_hidden: list[int] = field(default_factory=lambda: [64, 64])
    neusight_epochs: int = 60
    neusight_lr: float = 3e-3
    neusight_weight_decay: float = 1e-4
    neusight_batch_size: int = 512
    gbt_max_iter: int = 300
    gbt_learning_rate: float = 0.1
    gbt_max_leaf_nodes: int = 31
    threads: int = 1
    linear_alpha: float | None = None


def _subsample(train: pd.DataFrame, cfg: BaselineConfig, seed: int) -> pd.DataFrame:
    if cfg.max_train_rows and len(train) > cfg.max_train_rows:
        rng = np.random.default_rng(seed)
        return train.iloc[np.sort(rng.choice(len(train), cfg.max_train_rows, replace=False))]
    return train


# ------------------------------------------------------------------------------------------------
# roofline


def roofline(train: pd.DataFrame, test: pd.DataFrame, registry, *, seed: int = 0, feature_meta: dict | None = None,
             cfg: BaselineConfig | None = None) -> np.ndarray:
    """Roofline latency per ``test`` row, microseconds: ``max(FLOPs/peak, XU/XU rate, bytes/DRAM bw)``.

    Spec-sheet numbers from the registry (feature set v1's ``theoretical_time_us``). ``train`` is unused.
    """
    return with_baseline_columns(test, registry)["bl_roofline_us"].to_numpy(dtype="float64")


# ------------------------------------------------------------------------------------------------
# linear regression on the MLP's features


def _feature_frames(train: pd.DataFrame, test: pd.DataFrame, registry, feature_meta: dict | None):
    """(train frame, test frame, numeric, linear, categorical) with the feature set's columns."""
    if feature_meta is not None:
        cols = list(feature_meta["numeric"]) + list(feature_meta["linear"]) + list(feature_meta["categorical"])
        missing = [c for c in cols if c not in train.columns or c not in test.columns]
        if missing:
            raise ValueError(f"feature_meta names column(s) {missing} absent from the rows")
        return (train, test, list(feature_meta["numeric"]), list(feature_meta["linear"]),
                list(feature_meta["categorical"]))
    from synperf.model.features import build_features

    both = pd.concat([train[list(KEY_COLUMNS)], test[list(KEY_COLUMNS)]], ignore_index=True)
    ff = build_features(both, registry, "v2")
    fr = ff.frame
    return fr.iloc[:len(train)], fr.iloc[len(train):], ff.numeric, ff.linear, ff.categorical


def _fit_linear(ftr: pd.DataFrame, logy: np.ndarray, enc_args: tuple, alpha: float):
    from sklearn.linear_model import LinearRegression, Ridge

    from synperf.model.estimator import Encoder

    enc = Encoder(*enc_args).fit(ftr)
    model = Ridge(alpha=alpha) if alpha > 0 else LinearRegression()
    model.fit(enc.transform(ftr).astype("float64"), logy)
    return lambda f: model.predict(enc.transform(f).astype("float64"))


def select_linear_alpha(ftr: pd.DataFrame, logy: np.ndarray, enc_args: tuple, gpus: np.ndarray,
                        shapes: np.ndarray) -> float:
    """Ridge penalty of :data:`LINEAR_ALPHAS` with the lowest cross-validated MAPE on the training rows.

    Folds: each training GPU held out in turn (``gpus``); with a single GPU, 5 folds of shape groups
    (``shapes``, e.g. the shape hash). The encoder is refitted on each fold's training part, so a held-out
    GPU is extrapolated to as an unseen GPU would be. Ties go to the larger penalty.
    """
    ugpu = np.unique(gpus)
    if len(ugpu) >= 2:
        folds = [gpus == g for g in ugpu]
    else:
        fold_of = pd.Series(shapes).astype("uint64").to_numpy() % np.uint64(5)
        folds = [fold_of == f for f in range(5) if (fold_of == f).any() and not (fold_of == f).all()]
    if not folds:
        return LINEAR_ALPHAS[len(LINEAR_ALPHAS) // 2]
    from sklearn.linear_model import Ridge

    from synperf.model.estimator import Encoder

    alphas = np.asarray(LINEAR_ALPHAS, dtype="float64")
    errs = []
    for held in folds:  # one encoder per fold; one Ridge fit with a penalty per (identical) target column
        enc = Encoder(*enc_args).fit(ftr[~held])
        x_fit, x_held = (enc.transform(f).astype("float64") for f in (ftr[~held], ftr[held]))
        pred = Ridge(alpha=alphas).fit(x_fit, np.repeat(logy[~held][:, None], len(alphas), axis=1)).predict(x_held)
        errs.append(np.mean(np.abs(np.expm1(np.clip(pred - logy[held][:, None], -50, 50))), axis=0))
    scores = dict(zip(LINEAR_ALPHAS, np.mean(errs, axis=0).astype(float)))
    best = min(scores.values())
    return max(a for a, v in scores.items() if v <= best * (1 + 1e-9))


def linear(train: pd.DataFrame, test: pd.DataFrame, registry, *, seed: int = 0, feature_meta: dict | None = None,
           cfg: BaselineConfig | None = None) -> np.ndarray:
    """Ridge regression of ``log(latency_us)`` on the MLP's encoded features; predicted latency, us.

    The encoding is the estimator's (:class:`synperf.model.estimator.Encoder`: ``log1p`` numeric, linear as is,
    standardised on the training rows, clipped at +-8 sigma, one-hot categoricals). The penalty is
    ``cfg.linear_alpha`` or, when that is ``None``, :func:`select_linear_alpha` over the training GPUs.
    Deterministic; ``seed`` only picks the training subsample when ``cfg.max_train_rows`` caps it.

    Raises:
        ValueError: no training rows, non-positive training latency, or ``feature_meta`` naming absent columns.
    """
    cfg = cfg or BaselineConfig()
    train = _subsample(train, cfg, seed)
    y = training_latency_us(train, "linear")
    ftr, fte, numeric, lin, cat = _feature_frames(train, test, registry, feature_meta)
    enc_args = (numeric, lin, cat)
    logy = np.log(y)
    alpha = cfg.linear_alpha
    if alpha is None:
        shapes = (train["problem_key"].to_numpy() if "problem_key" in train.columns
                  else problem_key(train, 0).to_numpy())
        alpha = select_linear_alpha(ftr.reset_index(drop=True), logy, enc_args,
                                    train["gpu"].astype(str).to_numpy(), shapes)
    predict = _fit_linear(ftr, logy, enc_args, alpha)
    if len(test) == 0:
        return np.zeros(0)
    return np.exp(np.clip(predict(fte), -50.0, 50.0))


# ------------------------------------------------------------------------------------------------
# NeuSight-style tile/wave model


def _neusight_inputs(df: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(features, waves, per-wave tile roofline time in us) from the ``bl_*`` columns."""
    sms = df["bl_sm_count"].to_numpy()
    clock = df["bl_clock_hz"].to_numpy()
    tiles = df["bl_tiles"].to_numpy()
    waves = np.ceil(tiles / sms)
    tile_flops = df["bl_flops"].to_numpy() / tiles
    tile_xu = df["bl_xu_ops"].to_numpy() / tiles
    tile_bytes = df["bl_dram_bytes"].to_numpy() / tiles
    t_c = tile_flops / (df["bl_peak_flops_per_s"].to_numpy() / sms)  # seconds on one SM
    t_x = tile_xu / (df["bl_xu_ops_per_s"].to_numpy() / sms)
    t_m = tile_bytes / (df["bl_dram_bytes_per_s"].to_numpy() / sms)
    t_tile_us = np.maximum(np.maximum(t_c, t_x), t_m) * 1e6
    ridge = df["bl_peak_flops_per_s"].to_numpy() / df["bl_dram_bytes_per_s"].to_numpy()
    intensity = df["bl_flops"].to_numpy() / np.maximum(df["bl_dram_bytes"].to_numpy(), 1.0)
    x = pd.DataFrame({
        "tile_compute_cycles": np.log1p(t_c * clock),
        "tile_xu_cycles": np.log1p(t_x * clock),
        "tile_memory_cycles": np.log1p(t_m * clock),
        "intensity_over_ridge": np.log(np.maximum(intensity, 1e-9) / ridge),
        "waves": np.log(waves),
        "tiles_per_sm": np.log(tiles / sms),
        "last_wave_fill": (tiles / sms) / waves,
        "l2_footprint_log2": np.log2(np.maximum(df["bl_dram_bytes"].to_numpy(), 1.0) / df["bl_l2_bytes"].to_numpy()),
        "log_sm_count": np.log(sms),
        "log_l2_bytes": np.log(df["bl_l2_bytes"].to_numpy()),
    }, index=df.index)
    return x, waves, t_tile_us


def neusight(train: pd.DataFrame, test: pd.DataFrame, registry, *, seed: int = 0, feature_meta: dict | None = None,
             cfg: BaselineConfig | None = None) -> np.ndarray:
    """NeuSight-style prediction per ``test`` row, microseconds: ``waves * t_tile / u`` (see module docstring).

    Seeded (torch and numpy from ``seed``), CPU, ``cfg.threads`` threads. ``feature_meta["categorical"]``
    (when given) adds one-hot inputs; the analytical feature columns of the feature set are not used.

    Raises:
        ValueError: no training rows or non-positive training latency.
    """
    import torch
    from torch import nn

    cfg = cfg or BaselineConfig()
    training_latency_us(train, "neusight")
    train = with_baseline_columns(_subsample(train, cfg, seed), registry, tiles=True)
    test = with_baseline_columns(test, registry, tiles=True)
    y = train["latency_us"].to_numpy(dtype="float64")
    cat = [c for c in (feature_meta or {}).get("categorical", []) if c in train.columns and c in test.columns]
    xtr_df, w_tr, t_tr = _neusight_inputs(train)
    xte_df, w_te, t_te = _neusight_inputs(test)
    from synperf.model.estimator import Encoder

    enc = Encoder([], list(xtr_df.columns), cat).fit(pd.concat([xtr_df, train[cat]], axis=1))

    def encode(xdf, frame):
        return enc.transform(pd.concat([xdf, frame[cat]], axis=1))

    torch.manual_seed(seed)
    torch.set_num_threads(max(1, cfg.threads))
    x_tr = torch.from_numpy(encode(xtr_df, train))
    layers: list[nn.Module] = []
    prev = x_tr.shape[1]
    for h in cfg.neusight_hidden:
        layers += [nn.Linear(prev, h), nn.ReLU()]
        prev = h
    head = nn.Linear(prev, 2)
    with torch.no_grad():  # start at u = sigmoid(1) * (1 - sigmoid(-3) / (waves + 1)), inside (0, 1)
        head.bias.copy_(torch.tensor([1.0, -3.0]))
    net = nn.Sequential(*layers, head)

    # utilisation floor: half the lowest utilisation a training row reached (see the module docstring)
    u_floor = float(np.clip(0.5 * np.quantile(w_tr * t_tr / y, 0.001), NEUSIGHT_U_MIN, 0.5))

    def predict_log(x, waves, t_tile):
        out = net(x)
        alpha = torch.sigmoid(out[:, 0])
        u = alpha * (1.0 - torch.sigmoid(out[:, 1]) / (waves + 1.0))  # alpha - beta/waves', beta = alpha * s
        u = torch.clamp(u, min=u_floor)
        return torch.log(waves * t_tile) - torch.log(u)

    w_tr_t = torch.from_numpy(w_tr.astype("float32"))
    t_tr_t = torch.from_numpy(t_tr.astype("float32"))
    logy = torch.from_numpy(np.log(y).astype("float32"))
    from synperf.model.estimator import TrainConfig, fit_network

    loop = TrainConfig(max_epochs=cfg.neusight_epochs, batch_size=cfg.neusight_batch_size, lr=cfg.neusight_lr,
                       weight_decay=cfg.neusight_weight_decay, grad_clip=1.0, seed=seed)
    fit_network(net, lambda b: torch.abs(predict_log(x_tr[b], w_tr_t[b], t_tr_t[b]) - logy[b]).mean(), len(x_tr), loop)
    if len(test) == 0:
        return np.zeros(0)
    net.eval()
    with torch.no_grad():
        lp = predict_log(torch.from_numpy(encode(xte_df, test)), torch.from_numpy(w_te.astype("float32")),
                         torch.from_numpy(t_te.astype("float32")))
    return np.exp(lp.numpy().astype("float64"))


# ------------------------------------------------------------------------------------------------
# gradient-boosted trees on raw shapes and specs

_GBT_CATEGORICAL = ["kernel", "implementation", "dtype"] + [c for c, t in PARAM_COLUMNS.items() if t == "str"]
_GBT_NUMERIC = [c for c, t in PARAM_COLUMNS.items() if t == "Int64"]
_GBT_SPECS = ["bl_peak_flops_per_s", "bl_dram_bytes_per_s", "bl_l2_bytes", "bl_sm_count", "bl_clock_hz"]


def gbt(train: pd.DataFrame, test: pd.DataFrame, registry, *, seed: int = 0, feature_meta: dict | None = None,
        cfg: BaselineConfig | None = None) -> np.ndarray:
    """Gradient-boosted trees on ``log1p`` shape parameters, categorical key columns and ``log`` GPU specs.

    Shape parameters: every numeric canonical parameter (``m``, ``n``, ``k``, ``batch``, ``num_tokens``, ...)
    not null on all training rows; null entries stay missing (the trees route them). Specs: peak FLOP/s of
    the row's dtype and pipe, DRAM B/s, L2 bytes, SM count, clock. Target ``log(latency_us)``; seeded
    (``random_state=seed``, subsample). Returns predicted latency, us.

    Raises:
        ValueError: no training rows or non-positive training latency.
    """
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    cfg = cfg or BaselineConfig()
    training_latency_us(train, "gbt")
    train = with_baseline_columns(_subsample(train, cfg, seed), registry)
    test = with_baseline_columns(test, registry)
    y = train["latency_us"].to_numpy(dtype="float64")
    num = [c for c in _GBT_NUMERIC if c in train.columns and train[c].notna().any()]
    cat = [c for c in _GBT_CATEGORICAL if c in train.columns and train[c].notna().any()
           and train[c].astype("string").nunique() > 1]
    levels = {c: {v: i for i, v in enumerate(sorted(train[c].astype(str).unique()))} for c in cat}

    def design(df):
        cols = [np.log1p(df[c].astype("float64").clip(lower=0).to_numpy()) for c in num]
        cols += [np.log(df[c].to_numpy(dtype="float64")) for c in _GBT_SPECS]
        cols += [df[c].astype(str).map(levels[c]).astype("float64").to_numpy() for c in cat]
        return np.column_stack(cols) if cols else np.zeros((len(df), 0))

    is_cat = np.array([False] * (len(num) + len(_GBT_SPECS)) + [True] * len(cat))
    model = HistGradientBoostingRegressor(
        max_iter=cfg.gbt_max_iter, learning_rate=cfg.gbt_learning_rate, max_leaf_nodes=cfg.gbt_max_leaf_nodes,
        categorical_features=is_cat if is_cat.any() else None, early_stopping=False, random_state=seed)
    # OpenMP threads capped (cfg.threads): on a shared 2-core box, 2 OpenMP threads run ~15x slower than 1
    with threadpool_limits(max(1, cfg.threads), user_api="openmp"):
        model.fit(design(train), np.log(y))
        if len(test) == 0:
            return np.zeros(0)
        return np.exp(model.predict(design(test)))


# ------------------------------------------------------------------------------------------------

#: name -> baseline function (signature in the module docstring)
BASELINES = {
    "roofline": roofline,
    "linear": linear,
    "neusight": neusight,
    "nearest_gpu_scaled": nearest_gpu_scaled,
    "nearest_gpu_roofline": nearest_gpu_roofline,
    "gbt": gbt,
}

#: baselines that may leave rows uncovered (NaN)
PARTIAL_COVERAGE = ("nearest_gpu_scaled", "nearest_gpu_roofline")


def fit_predict(method: str, train: pd.DataFrame, test: pd.DataFrame, registry, seed: int = 0,
                feature_meta: dict | None = None, cfg: BaselineConfig | None = None) -> np.ndarray:
    """Fit baseline ``method`` on ``train`` and predict ``latency_us`` (float64, microseconds) for ``test``.

    Args:
        method: a key of :data:`BASELINES`.
        train, test: rows with the canonical key columns (``train`` with ``latency_us``); see the module docstring.
        registry: GPU registry.
        seed: seed of every random choice.
        feature_meta: the feature set's ``numeric``/``linear``/``categorical`` lists (``linear``, ``neusight``).
        cfg: budgets (:class:`BaselineConfig`).

    Returns:
        One prediction per ``test`` row, in order; NaN where a nearest-GPU method has no source.

    Raises:
        KeyError: unknown method.
        ValueError: no training rows, bad training latency, or missing columns.
    """
    try:
        fn = BASELINES[method]
    except KeyError:
        raise KeyError(f"unknown baseline {method!r}; known: {sorted(BASELINES)}") from None
    return fn(train, test, registry, seed=seed, feature_meta=feature_meta, cfg=cfg)
