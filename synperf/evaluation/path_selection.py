"""Choose the prediction path of an experiment by leave-one-seen-GPU-out (LOSGO) inside its training rows.

The candidates are the paths of :mod:`synperf.model.paths`: the base models ``mlp`` (the efficiency MLP),
``physical`` (the fitted physical time model), ``residual`` (the physical model times a tree-fitted correction) and
``ensemble`` (the geometric mean of those three), and transfer of another training GPU's measurement by ratio
(``transfer+<base>``) or by difference (``shift+<base>``) with a base model, or by ratio from a GPU of the target's
own class only (``sibling+<base>``) or shifted by the spec-sheet roofline difference
(``sibling_roofline+<base>``), the base where no such GPU measured the launch. Each seen GPU in turn
is the validation GPU: the other seen GPUs' training rows fit the base models and are the only transfer sources,
the validation GPU's training rows score each path (MAPE). The path with the lowest mean fold MAPE wins
(:func:`choose_paths`).

What the choice can see is enforced here, not left to callers: :func:`score_paths` drops every row whose ``split``
is not ``train`` before anything is fitted or scored, so held-out problems (``test_seen``), unseen GPUs
(``unseen``) and other GPUs (``unused``) never inform it. The folds (scikit-learn ``LeaveOneGroupOut`` over the
training rows' GPUs) are those of :func:`synperf.evaluation.selection.losgo_folds`, which chose the feature set.

:func:`fit_chosen` then fits the chosen path on every training row and :func:`predict_chosen` predicts new rows,
reporting per row the path used (``transfer`` rows without a sibling fall back to their base) and the source GPU.

The LOSGO choice answers "which path predicts a GPU that was not trained on"; rows on a training GPU (held-out
problems of a seen GPU) get their own *seen path* instead, a zero-shot path or the local correction of the residual
model or of the MLP by the GPU's own measured neighbours (:data:`SEEN_PATHS`), chosen by held-out problems inside
the training rows (:func:`score_seen_paths`, :func:`choose_seen_path`): the MLP's own early-stopping validation
rows, reproduced from its meta, so no further MLP is trained.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.model_selection import LeaveOneGroupOut

from synperf.data.io import read_table
from synperf.evaluation.evidence import trained_gpus
from synperf.evaluation.metrics import ape
from synperf.model.estimator import TrainConfig, TrainedModel, groups_sha256, train, training_rows
from synperf.model.features import FeatureFrame
from synperf.model.paths import (
    BASE,
    BASE_MODELS,
    BASES,
    LOCAL,
    LOCAL_MLP,
    LOCAL_PATHS,
    PATHS,
    SIBLING_MODES,
    TRANSFER,
    LocalModel,
    PhysicalModel,
    ResidualModel,
    design_columns,
    sibling_gpus,
    source_keys,
    transfer_predict,
    transfer_sources,
    with_spec_columns,
)

#: MLP budget of the LOSGO folds inside a protocol fold (``TrainConfig`` fields), as the feature-set selection's
#: ``selection.training`` of config/config.yaml: one MLP per seen GPU of every fold
SELECTION_TRAINING = {"max_epochs": 25, "max_train_rows": 5000}
#: validation rows per LOSGO fold inside a protocol fold (a seeded sample of the validation GPU's rows; the
#: configured choice scores every row): over the configured choice's 352 (fold, path) scores of more than 5,000 rows
#: (results/selection/*/path_rows.parquet), the standard deviation of a 5,000-row sample's MAPE across 20 seeds is
#: a median 0.9% of the full MAPE (90th percentile 1.3%, largest 2.6%), well under :data:`MIN_RELATIVE_GAIN`
SELECTION_VALIDATION_ROWS = 5000
#: columns of :func:`score_paths`'s result
PATH_SCORE_COLUMNS = ["experiment", "path", "fold", "validation_gpu", "n_train", "n_rows", "mape_pct",
                      "n_rows_no_sibling", "mape_no_sibling_pct"]


def _frame(rows: pd.DataFrame, meta: dict) -> FeatureFrame:
    return FeatureFrame(rows, list(meta["numeric"]), list(meta["linear"]), list(meta["categorical"]))


def fit_mlp(rows: pd.DataFrame, meta: dict, train_cfg: TrainConfig) -> TrainedModel:
    """The efficiency MLP (:func:`synperf.model.estimator.train`) on ``rows`` of a feature table (needs
    ``latency_us`` and ``problem_key``)."""
    return train(_frame(rows, meta), rows["latency_us"], rows["problem_key"], train_cfg, log=lambda *_: None)


@dataclass
class FittedPaths:
    """The base models fitted on one set of training rows, and those rows (the only transfer sources).

    Attributes:
        train: the training rows (feature table rows with ``bl_*`` columns and ``latency_us``).
        meta: the feature table's sidecar (``numeric``, ``linear``, ``categorical``).
        mlp: the efficiency MLP, or None when no path needs it.
        physical: the physical time model, or None when no path needs it.
        residual: the physical model with its tree-fitted correction, or None when no path needs it.
        local: the residual model corrected by measured neighbours on the same GPU (:class:`LocalModel`), or None
            when no path needs it.
        local_mlp: the MLP corrected the same way (:class:`LocalModel` on the MLP), or None when no path needs it.
        base_train: base model name -> its predicted latency on every ``train`` row (microseconds), given when
            known (a recorded path's sources); other bases are predicted on the source rows a transfer reads, when
            it reads them (:meth:`train_base`).
    """

    train: pd.DataFrame
    meta: dict
    mlp: TrainedModel | None = None
    physical: PhysicalModel | None = None
    residual: ResidualModel | None = None
    local: LocalModel | None = None
    local_mlp: LocalModel | None = None
    base_train: dict = field(default_factory=dict)
    _model_train: dict = field(default_factory=dict, repr=False)  # model -> latency on train rows, NaN unpredicted

    def base_predict(self, base: str, rows: pd.DataFrame, registry) -> np.ndarray:
        """Latency of base model ``base`` (one of :data:`synperf.model.paths.BASES`) on ``rows``, microseconds."""
        return base_predictions(self, (base,), rows, registry)[base]

    def train_base(self, base: str, positions: np.ndarray, registry) -> np.ndarray:
        """Latency of base model ``base`` on the ``train`` rows, shape ``(len(train),)``, microseconds, known at
        least at ``positions`` (int positions in ``train``); other entries are NaN unless predicted before.

        A transfer reads the base model at its source rows only, a small share of the training rows, so each
        model predicts a training row once, when a transfer first reads it. ``base_train[base]``, when given, is
        returned as it is.
        """
        if base in self.base_train:
            return np.asarray(self.base_train[base], dtype="float64")
        positions = np.unique(np.asarray(positions, dtype="int64"))
        preds = {}
        for m in models_of((base,)):
            have = self._model_train.get(m)
            if have is None:
                have = self._model_train[m] = np.full(len(self.train), np.nan)
            need = positions[np.isnan(have[positions])]
            if len(need):
                have[need] = base_predictions(self, (m,), self.train.iloc[need], registry)[m]
            preds[m] = have
        return ensemble(preds) if base == "ensemble" else preds[base]


def models_of(paths) -> set:
    """The fitted models (``mlp``, ``physical``, ``residual``, ``local``) that ``paths`` (path names, base names or None
    entries, which are skipped) need, through their bases (:data:`synperf.model.paths.BASE_MODELS`)."""
    return {m for p in paths if p for m in BASE_MODELS[BASE.get(p, p)]}


def ensemble(preds: dict) -> np.ndarray:
    """The ``ensemble`` base from the three models' latencies (``mlp``, ``physical``, ``residual`` of ``preds``,
    microseconds): their geometric mean."""
    return np.cbrt(preds["mlp"] * preds["physical"] * preds["residual"])


def base_predictions(fitted: FittedPaths, bases, rows: pd.DataFrame, registry, known: dict | None = None) -> dict:
    """Latency of each base model of ``bases`` on ``rows`` (microseconds, by base name), each fitted model
    predicting once (``ensemble`` combines the three it needs). ``known``: latencies already computed on the same
    rows, by model name (e.g. the MLP's), used instead of predicting again."""
    preds = dict(known or {})
    if models_of(bases) - {"mlp"} - set(preds):  # the spec columns once for the physical and residual models
        rows = with_spec_columns(rows, registry)
    for m in ("mlp", "physical", "residual"):
        if m in models_of(bases) and m not in preds:
            if m == "mlp":
                preds[m] = fitted.mlp.predict_latency_us(_frame(rows, fitted.meta))
            else:
                preds[m] = getattr(fitted, m).predict(rows, registry)
    if LOCAL in models_of(bases) and LOCAL not in preds:  # the residual model's latencies, corrected
        preds[LOCAL] = fitted.local.predict(rows, registry, base_pred=preds["residual"])
    if LOCAL_MLP in models_of(bases) and LOCAL_MLP not in preds:  # the MLP's latencies, corrected
        preds[LOCAL_MLP] = fitted.local_mlp.predict(rows, registry, base_pred=preds["mlp"])
    if "ensemble" in bases:
        preds["ensemble"] = ensemble(preds)
    return {b: np.asarray(preds[b], dtype="float64") for b in bases}


def fit_local_mlp(rows: pd.DataFrame, meta: dict, mlp: TrainedModel) -> LocalModel:
    """:meth:`synperf.model.paths.LocalModel.fit_to_base` on ``rows`` against ``mlp``'s latency on them, over the
    feature set's numeric and linear columns (the residual model's design columns)."""
    return LocalModel.fit_to_base(rows, mlp.predict_latency_us(_frame(rows, meta)), *design_columns(meta))


def fit_residual(rows: pd.DataFrame, meta: dict, registry, train_cfg: TrainConfig) -> ResidualModel:
    """:meth:`synperf.model.paths.ResidualModel.fit` on ``rows`` with the MLP budget's row cap, seed and threads."""
    return ResidualModel.fit(rows, meta, registry, max_train_rows=train_cfg.max_train_rows, seed=train_cfg.seed,
                             threads=train_cfg.threads)


def fit_paths(rows: pd.DataFrame, meta: dict, registry, train_cfg: TrainConfig, paths=PATHS,
              mlp: TrainedModel | None = None, residual: ResidualModel | None = None) -> FittedPaths:
    """Fit the base models the ``paths`` need on ``rows`` (training rows of a feature table).

    ``mlp``, ``residual``: models already fitted on exactly these rows with ``train_cfg`` (reused instead of
    fitting them). The residual model's trees take the row cap, seed and threads of ``train_cfg``.

    Raises:
        KeyError: an unknown path.
        ValueError: as :func:`synperf.model.estimator.train` or :meth:`PhysicalModel.fit`.
    """
    unknown = [p for p in paths if p not in BASE]
    if unknown:
        raise KeyError(f"unknown path(s) {unknown}; known: {list(PATHS)}")
    rows = with_spec_columns(rows.reset_index(drop=True), registry)
    bases = sorted({BASE[p] for p in paths}, key=(BASES + LOCAL_PATHS).index)
    models = models_of(bases)
    fitted = FittedPaths(rows, meta)
    if "mlp" in models:
        fitted.mlp = mlp if mlp is not None else fit_mlp(rows, meta, train_cfg)
    if "residual" in models:
        fitted.residual = residual if residual is not None else fit_residual(rows, meta, registry, train_cfg)
    if "physical" in models:  # the residual model's own physical model is fitted on the same rows
        fitted.physical = fitted.residual.physical if fitted.residual is not None else PhysicalModel.fit(rows,
                                                                                                          registry)
    if LOCAL in models:
        fitted.local = LocalModel.fit(rows, fitted.residual, registry)
    if LOCAL_MLP in models:
        fitted.local_mlp = fit_local_mlp(rows, meta, fitted.mlp)
    return fitted


def predict_path(fitted: FittedPaths, path: str, rows: pd.DataFrame, registry, *, base_pred: np.ndarray | None = None,
                 sources: pd.DataFrame | None = None, fallback: str | None = None) -> pd.DataFrame:
    """Predict ``rows`` (feature table rows, any GPUs) with ``path`` of ``fitted``.

    ``base_pred`` (the path's base model on ``rows``, microseconds) and ``sources``
    (:func:`synperf.model.paths.transfer_sources` of ``fitted.train`` and ``rows``) are computed here when None;
    scoring several paths on the same rows passes them once. ``fallback`` (a base model, default the path's
    base): the model that predicts the rows of a transfer path no sibling measured (``fitted`` must hold it).

    Returns:
        One row per input row (positional): ``predicted_latency_us`` (microseconds), ``prediction_path`` (``path``,
        or the fallback for a transfer row without a sibling) and ``source_gpu`` (the sibling GPU, <NA>
        otherwise).
    """
    base = BASE[path]
    fallback = fallback or base
    rows = rows.reset_index(drop=True)
    if models_of((base, fallback)) - {"mlp"}:  # once for every model (the MLP reads none of these columns)
        rows = with_spec_columns(rows, registry)
    pred = fitted.base_predict(base, rows, registry) if base_pred is None else np.asarray(base_pred, dtype="float64")
    src = pd.Series([pd.NA] * len(rows), dtype="string")
    if TRANSFER[path]:
        if sources is None:
            sources = transfer_sources(fitted.train, rows, registry)
        pos = sources["src_pos"].to_numpy()
        base_train = (np.full(len(fitted.train), np.nan) if TRANSFER[path] == "sibling_roofline"  # not read
                      else fitted.train_base(base, pos[pos >= 0], registry))
        pred, src = transfer_predict(fitted.train, rows, registry, base_train, pred, TRANSFER[path], sources=sources)
        uncovered = src.isna().to_numpy()
        if fallback != base and uncovered.any():
            pred[uncovered] = fitted.base_predict(fallback, rows.iloc[np.flatnonzero(uncovered)], registry)
    label = np.where(src.notna().to_numpy(), path, fallback)
    return pd.DataFrame({"predicted_latency_us": np.asarray(pred, dtype="float64"), "prediction_path": label,
                         "source_gpu": src.to_numpy()})


#: columns of the per-row predictions :func:`score_paths` collects in ``rows_out``
PATH_ROW_COLUMNS = ["experiment", "kernel", "gpu", "fold", "row", "path", "latency_us", "predicted_latency_us",
                    "prediction_path", "theoretical_time_us"]


def score_paths(table: pd.DataFrame, meta: dict, experiment: str, registry, train_cfg: TrainConfig, paths=PATHS,
                log=print, fold_mlps: dict | None = None, rows_out: list | None = None,
                fit_cache: dict | None = None, max_val_rows: int = 0) -> pd.DataFrame:
    """LOSGO score of every path on an experiment's training rows.

    Args:
        table: feature table with a ``split`` column; only its ``train`` rows are read (the rest is dropped
            first, so no held-out problem or unseen GPU can inform the score).
        meta: the table's sidecar (``numeric``, ``linear``, ``categorical``).
        train_cfg: the MLP budget of each fold.
        fold_mlps: fold name (``losgo:<gpu>``) -> an MLP already trained with ``train_cfg`` on exactly that fold's
            training rows (:func:`synperf.evaluation.selection.score_feature_set`'s ``models_out``), reused
            instead of training one.
        rows_out: a list that receives, per fold, the per-row predictions of every path on the validation GPU's
            rows (a frame of :data:`PATH_ROW_COLUMNS`; ``row`` is the position among the ``train`` rows,
            ``theoretical_time_us`` NaN when the table has none).
        fit_cache: a dict kept by the caller across calls: the fitted MLP and residual model of a fold are stored
            under the fold's fitted rows (:func:`rows_key`) and budget, and a later fold with the same rows and
            budget reuses them (leave-one-GPU-out protocol folds share their inner folds in pairs).
        max_val_rows: score each fold on a seeded sample (``train_cfg.seed``) of at most this many of the
            validation GPU's rows (0: every row); the models are fitted on every training row either way.

    Returns:
        :data:`PATH_SCORE_COLUMNS`, one row per (path, fold): MAPE (percent) on the validation GPU's training
        rows (``n_rows`` of them), and on those of them no GPU of the validation GPU's class measured among
        the fold's other rows (``n_rows_no_sibling``, ``mape_no_sibling_pct``; NaN when there is none): the
        evidence for a target GPU without a sibling (:func:`synperf_predict`); empty when fewer than two seen GPUs
        have training rows.
    """
    if "split" not in table.columns:
        raise ValueError("path selection: the table has no 'split' column")
    rows = table[table["split"].astype(str).to_numpy() == "train"].reset_index(drop=True)
    gpu = rows["gpu"].astype(str).to_numpy()
    out = []
    if len(np.unique(gpu)) < 2:
        return pd.DataFrame(out, columns=PATH_SCORE_COLUMNS)
    rows = with_spec_columns(rows, registry)  # once for every fold
    # the sibling lookup's shape keys once for every fold (a fold's training rows are a subset of these rows)
    keys = source_keys(rows) if any(TRANSFER[p] for p in paths) else None
    for fit_idx, val_idx in LeaveOneGroupOut().split(rows, groups=gpu):
        if max_val_rows and len(val_idx) > max_val_rows:
            val_idx = np.sort(np.random.default_rng(train_cfg.seed).choice(val_idx, max_val_rows, replace=False))
        tr, va = rows.iloc[fit_idx], rows.iloc[val_idx]
        name = f"losgo:{gpu[val_idx[0]]}"
        key = (rows_key(tr), repr(train_cfg), tuple(meta[k] for k in ("numeric", "linear", "categorical")).__repr__())
        hit = (fit_cache or {}).get(key, {})
        try:
            fitted = fit_paths(tr, meta, registry, train_cfg, paths, mlp=(fold_mlps or {}).get(name) or hit.get("mlp"),
                               residual=hit.get("residual"))
        except ValueError as e:  # too few rows on the remaining GPUs for an MLP validation split
            log(f"{experiment} {name}: skipped ({e})")
            continue
        if fit_cache is not None:
            fit_cache[key] = {**hit, **{m: v for m, v in (("mlp", fitted.mlp), ("residual", fitted.residual))
                                        if v is not None}}
        y = va["latency_us"].to_numpy(dtype="float64")
        va = va.reset_index(drop=True)
        # every path of the fold shares the base predictions and the sibling lookup
        base_pred = base_predictions(fitted, sorted({BASE[p] for p in paths}, key=BASES.index), va, registry)
        sources = (transfer_sources(fitted.train, va, registry, train_keys=keys[fit_idx]) if keys is not None
                   else None)
        # rows with a sibling source (another GPU of the validation GPU's class measured the launch)
        sib = (np.zeros(len(va), dtype=bool) if sources is None else
               (sources["src_pos"].to_numpy() >= 0) & sources["same_class"].to_numpy(dtype=bool))
        for p in paths:
            res = predict_path(fitted, p, va, registry, base_pred=base_pred[BASE[p]], sources=sources)
            pred = res["predicted_latency_us"].to_numpy()
            if rows_out is not None:
                tt = va["theoretical_time_us"] if "theoretical_time_us" in va.columns else np.nan
                rows_out.append(pd.DataFrame({
                    "experiment": experiment, "kernel": va["kernel"].astype(str).to_numpy(),
                    "gpu": va["gpu"].astype(str).to_numpy(), "fold": name, "row": val_idx, "path": p,
                    "latency_us": y, "predicted_latency_us": pred, "prediction_path": res["prediction_path"].to_numpy(),
                    "theoretical_time_us": np.asarray(tt, dtype="float64") * np.ones(len(va))})[PATH_ROW_COLUMNS])
            err = ape(pred, y)
            out.append({"experiment": experiment, "path": p, "fold": name,
                        "validation_gpu": gpu[val_idx[0]], "n_train": len(tr), "n_rows": len(va),
                        "mape_pct": float(np.mean(err)), "n_rows_no_sibling": int((~sib).sum()),
                        "mape_no_sibling_pct": float(np.mean(err[~sib])) if (~sib).any() else float("nan")})
        log(f"{experiment} {name}: " + ", ".join(f"{r['path']} {r['mape_pct']:.1f}%" for r in out[-len(paths):]))
    return pd.DataFrame(out, columns=PATH_SCORE_COLUMNS)


def rows_key(rows: pd.DataFrame) -> str:
    """sha256 (hex) of the rows' GPU, problem key (when present) and measured latency, in order: two row sets with
    the same key hold the same measurements, for reusing models fitted on them."""
    cols = [c for c in ("gpu", "problem_key", "latency_us") if c in rows.columns]
    h = pd.util.hash_pandas_object(rows[cols].reset_index(drop=True), index=False).to_numpy()
    return hashlib.sha256(h.tobytes()).hexdigest()


#: a path replaces the default only when its mean leave-one-seen-GPU-out MAPE is this share lower: retraining with
#: another seed moves a MAPE by up to 25% of its value (tests/expected/seed_spread.csv), so a smaller lead is not
#: evidence, and a choice decided by noise would flip between machines
MIN_RELATIVE_GAIN = 0.05


def choose_paths(scores: pd.DataFrame, paths=PATHS, default: str = "mlp",
                 min_gain: float = MIN_RELATIVE_GAIN) -> tuple[dict, pd.DataFrame]:
    """The path with the lowest mean fold MAPE per experiment, and the selection table.

    The best path wins only when its MAPE is at least ``min_gain`` (relative) below ``default``'s; otherwise, and
    for an experiment without scores (one seen GPU), ``default``. Ties keep the earlier path of ``paths``.

    Returns:
        ``(chosen, table)``: experiment -> path, and one row per experiment with each path's mean LOSGO MAPE
        (percent), ``n_folds`` and ``chosen``.
    """
    if scores.empty:
        return {}, pd.DataFrame(columns=["experiment", *paths, "n_folds", "chosen"])
    per = scores.groupby(["experiment", "path"])["mape_pct"].mean().unstack("path")
    per = per[[p for p in paths if p in per.columns]]
    chosen = {}
    for e, r in per.iterrows():
        best = str(r.idxmin()) if r.notna().any() else default
        base = r.get(default)
        keep_default = pd.notna(base) and r[best] > (1.0 - min_gain) * base
        chosen[e] = default if keep_default else best
    table = per.copy()
    table["n_folds"] = scores.groupby("experiment")["fold"].nunique()
    table["chosen"] = pd.Series(chosen)
    return chosen, table.reset_index(names="experiment")


#: the paths that need no sibling measurement, candidates for the rows a transfer path cannot cover
ZERO_SHOT = BASES
#: the candidates of the seen path (rows of a training GPU): the zero-shot paths and the two local corrections
SEEN_PATHS = ZERO_SHOT + LOCAL_PATHS


def choose_fallback(scores: pd.DataFrame, experiment: str, min_gain: float = MIN_RELATIVE_GAIN,
                    default: str = "mlp") -> str:
    """The zero-shot path (:data:`ZERO_SHOT`) for the rows no sibling measured: :func:`choose_paths` over the
    zero-shot paths' scores of the same folds (``default`` unless another is ``min_gain`` lower)."""
    sub = scores[scores["path"].isin(ZERO_SHOT)] if len(scores) else scores
    chosen, _ = choose_paths(sub, ZERO_SHOT, default=default, min_gain=min_gain)
    return chosen.get(experiment, default)


def pooled_default(scores: dict[str, pd.DataFrame], experiments: dict[str, dict], *, exclude_gpus=(),
                   exclude=(), min_gain: float = MIN_RELATIVE_GAIN) -> dict:
    """The default path of the choice rule (:func:`choose_paths`), from the leave-one-seen-GPU-out evidence of
    several experiments pooled: the base model that predicts left-out seen GPUs best across kernel families.

    One experiment's LOSGO folds often cannot tell the base models apart (two seen GPUs, or scores within the
    rule's ``min_gain``), and the rule then keeps its default; pooling the experiments makes that default itself
    a measured choice. Per experiment of ``scores`` that is used: the mean fold MAPE of each base model
    (:data:`ZERO_SHOT`); then the geometric mean over the experiments. The default is ``mlp`` (the paper's
    estimator) unless another base model's geometric mean is at least ``min_gain`` lower; then the lowest (ties:
    :data:`ZERO_SHOT` order).

    An experiment is left out when it is named in ``exclude``, when one of its seen GPUs (its config's ``seen``
    and the scores' ``validation_gpu``) is in ``exclude_gpus`` (its training rows were measured there), or when
    it lacks a base model's scores. The caller excludes the GPUs it tests (a configured split's unseen GPUs, a
    leave-one-out fold's test GPUs), so nothing measured on them informs the default.

    Args:
        scores: experiment -> :func:`score_paths` of its configured training rows (:data:`PATH_SCORE_COLUMNS`).
        experiments: experiment -> its config entry (``seen``: its training GPUs).

    Returns:
        ``{"default", "min_gain", "excluded_gpus", "geometric_mean": {base: MAPE %}, "experiments": [{"experiment",
        base: MAPE %, ...}]}``; without a usable experiment ``default`` is ``mlp`` and the lists are empty.

    Raises:
        KeyError: an experiment of ``scores`` has no entry in ``experiments``.
    """
    drop = {str(g) for g in exclude_gpus}
    used = []
    for name in sorted(scores):
        sc = scores[name]
        if name in exclude or drop & trained_gpus(experiments[name], sc):
            continue
        per = sc[sc["path"].isin(ZERO_SHOT)].groupby("path")["mape_pct"].mean() if len(sc) else pd.Series()
        if all(b in per.index and np.isfinite(per[b]) and per[b] > 0 for b in ZERO_SHOT):
            used.append({"experiment": name, **{b: float(per[b]) for b in ZERO_SHOT}})
    out = {"default": "mlp", "min_gain": min_gain, "excluded_gpus": sorted(drop), "geometric_mean": {},
           "experiments": used}
    if not used:
        return out
    table = pd.DataFrame(used)
    geo = {b: float(np.exp(np.log(table[b].to_numpy(dtype="float64")).mean())) for b in ZERO_SHOT}
    best = min(ZERO_SHOT, key=lambda b: (geo[b], ZERO_SHOT.index(b)))
    out["geometric_mean"] = geo
    out["default"] = best if geo[best] <= (1.0 - min_gain) * geo["mlp"] else "mlp"
    return out


def seen_validation_rows(rows: pd.DataFrame, mlp: TrainedModel) -> tuple[np.ndarray, np.ndarray]:
    """The fitted and early-stopping validation rows of ``mlp`` among ``rows``, the rows it was trained on.

    :func:`synperf.model.training.training_rows` with ``rows["problem_key"]`` (the groups every caller of
    :func:`synperf.model.estimator.train` here passes) and the model's recorded ``train_config`` reproduces
    :func:`synperf.model.estimator.train`'s split; the result is checked against the model's meta
    (``n_train_rows``, ``n_val_rows`` and, when recorded, ``validation_groups_sha256``).

    Args:
        rows: exactly the rows ``mlp`` was trained on, in the same order (needs ``problem_key``).

    Returns:
        ``(fit, validation)``: sorted int arrays of positions in ``rows``.

    Raises:
        ValueError: ``rows`` lack ``problem_key``, or the reproduced split differs from the model's (``rows`` are
            not its training rows).
    """
    if "problem_key" not in rows.columns:
        raise ValueError("seen path: the training rows have no 'problem_key' column")
    fit, val = training_rows(rows["problem_key"], TrainConfig.from_dict(mlp.meta["train_config"]))
    got = {"n_train_rows": len(fit), "n_val_rows": len(val)}
    if "validation_groups_sha256" in mlp.meta:
        got["validation_groups_sha256"] = groups_sha256(rows["problem_key"].to_numpy()[val])
    differ = {k: (v, mlp.meta[k]) for k, v in got.items() if k in mlp.meta and mlp.meta[k] != v}
    if differ:
        raise ValueError("seen path: the rows are not the MLP's training rows (reproduced vs recorded: "
                         + ", ".join(f"{k} {a} vs {b}" for k, (a, b) in differ.items()) + ")")
    return fit, val


def score_seen_paths(rows: pd.DataFrame, meta: dict, registry, mlp: TrainedModel, experiment: str = "",
                     log=print, rows_out: list | None = None) -> pd.DataFrame:
    """Held-out-problem score of the seen-path candidates (:data:`SEEN_PATHS`) on the training GPUs, the analog
    inside the training rows of the seen-GPU held-out test (``test_seen``).

    The scored rows are ``mlp``'s early-stopping validation rows (:func:`seen_validation_rows`): whole problems
    ``mlp`` was not fitted on. ``mlp`` predicts them as trained; the physical and residual models are fitted on
    every row of ``rows`` whose problem is not a validation problem (the rows the row cap left out included; the
    residual model's trees then take the MLP's own row cap and seed) and predict them; the ensemble combines the
    three; the local models take their neighbours among the same rows, against that residual model (``local``)
    and against ``mlp`` (``local_mlp``). No MLP is trained. Each path's score is, per training GPU, the MAPE
    (percent) over that GPU's validation rows; :func:`choose_seen_path` averages over GPUs, so every training GPU
    weighs the same, as in the LOSGO folds.

    Known optimism: ``mlp``'s best epoch was picked on these same rows (early stopping), so its score is mildly
    optimistic, a bias toward ``mlp`` and ``local_mlp``; the physical model has no such advantage.

    Args:
        rows: exactly the rows ``mlp`` was trained on, in the same order: training rows only (feature table rows
            with ``gpu``, ``problem_key`` and ``latency_us`` in microseconds); no other row is read.
        meta: the feature table's sidecar (``numeric``, ``linear``, ``categorical``).
        mlp: the efficiency MLP trained on ``rows`` (:func:`synperf.model.estimator.train` with groups
            ``problem_key``).
        rows_out: a list that receives, per path, its per-row predictions of the validation rows (a frame of
            :data:`PATH_ROW_COLUMNS`, ``fold`` ``seen:<gpu>``, ``row`` the position in ``rows``).

    Returns:
        :data:`PATH_SCORE_COLUMNS`, one row per (path, training GPU with validation rows): ``fold``
        ``seen:<gpu>``, ``n_train`` the rows that fitted the path, ``n_rows`` the GPU's validation rows. No rows of
        the paths after the first model that cannot be fitted (physical, then residual; logged).

    Raises:
        ValueError: as :func:`seen_validation_rows`.
    """
    rows = rows.reset_index(drop=True)
    fit, val = seen_validation_rows(rows, mlp)
    key = rows["problem_key"].to_numpy()
    held = np.isin(key, key[val])
    va = with_spec_columns(rows.iloc[val].reset_index(drop=True), registry)
    y = va["latency_us"].to_numpy(dtype="float64")
    preds = {"mlp": (len(fit), mlp.predict_latency_us(_frame(va, meta)))}
    rest = with_spec_columns(rows[~held].reset_index(drop=True), registry)
    try:
        physical = PhysicalModel.fit(rest, registry)
        preds["physical"] = (len(rest), physical.predict(va, registry))
        residual = fit_residual(rest, meta, registry, TrainConfig.from_dict(mlp.meta["train_config"]))
        preds["residual"] = (len(rest), residual.predict(va, registry))
        preds["ensemble"] = (len(rest), ensemble({m: v for m, (_, v) in preds.items()}))
        local = LocalModel.fit(rest, residual, registry)
        preds[LOCAL] = (len(rest), local.predict(va, registry, base_pred=preds["residual"][1]))
    except ValueError as e:
        log(f"{experiment} seen path: {', '.join(sorted(set(SEEN_PATHS) - set(preds) - {LOCAL_MLP}))} skipped ({e})")
    preds[LOCAL_MLP] = (len(rest), fit_local_mlp(rest, meta, mlp).predict(va, registry, base_pred=preds["mlp"][1]))
    gpu = va["gpu"].astype(str).to_numpy()
    out = []
    for p, (n_train, pred) in preds.items():
        err = ape(pred, y)
        if rows_out is not None:
            tt = va["theoretical_time_us"] if "theoretical_time_us" in va.columns else np.nan
            rows_out.append(pd.DataFrame({
                "experiment": experiment, "kernel": va["kernel"].astype(str).to_numpy(), "gpu": gpu,
                "fold": np.char.add("seen:", gpu.astype(str)), "row": val, "path": p, "latency_us": y,
                "predicted_latency_us": np.asarray(pred, dtype="float64"), "prediction_path": p,
                "theoretical_time_us": np.asarray(tt, dtype="float64") * np.ones(len(va))})[PATH_ROW_COLUMNS])
        for g in np.unique(gpu):
            on = gpu == g
            out.append({"experiment": experiment, "path": p, "fold": f"seen:{g}", "validation_gpu": g,
                        "n_train": n_train, "n_rows": int(on.sum()), "mape_pct": float(np.mean(err[on]))})
    return pd.DataFrame(out, columns=PATH_SCORE_COLUMNS)


def choose_seen_path(scores: pd.DataFrame, experiment: str, min_gain: float = MIN_RELATIVE_GAIN) -> str:
    """The seen path of ``experiment`` from :func:`score_seen_paths`'s ``scores``: :func:`choose_paths` over
    :data:`SEEN_PATHS` with default ``mlp`` (mean over training GPUs of the per-GPU MAPE; another path only when
    ``min_gain`` lower; ``mlp`` without scores)."""
    sub = scores[scores["path"].isin(SEEN_PATHS)] if len(scores) else scores
    chosen, _ = choose_paths(sub, SEEN_PATHS, default="mlp", min_gain=min_gain)
    return chosen.get(experiment, "mlp")


def predict_rows(fitted: FittedPaths, path: str, rows: pd.DataFrame, registry, *, fallback: str | None = None,
                 seen_path: str | None = None, seen_gpus=(), mlp_pred: np.ndarray | None = None,
                 sources: pd.DataFrame | None = None) -> pd.DataFrame:
    """Predict ``rows`` with ``path`` (:func:`predict_path`), except those on ``seen_gpus`` with ``seen_path``.

    Args:
        rows: feature table rows, any GPUs.
        fallback: as :func:`predict_path`, for the rows not on ``seen_gpus``.
        seen_path: a :data:`SEEN_PATHS` path for the rows whose ``gpu`` is in ``seen_gpus`` (the GPUs the models
            were trained on); None predicts every row with ``path``.
        mlp_pred: the MLP's latency on ``rows`` (microseconds, positional), used for the bases that need the MLP
            (``mlp``, ``ensemble``) instead of predicting it again; computed by :func:`predict_path` when None.
        sources: :func:`synperf.model.paths.transfer_sources` of ``rows`` (positional), passed on to ``path``.

    Returns:
        As :func:`predict_path`, one row per input row (positional); a row on a seen GPU has ``prediction_path``
        ``seen_path`` and ``source_gpu`` <NA>.

    Raises:
        ValueError: ``seen_path`` not in :data:`SEEN_PATHS`.
    """
    rows = rows.reset_index(drop=True)

    def part(p: str, fb: str | None, mask: np.ndarray | None) -> pd.DataFrame:
        sub = rows if mask is None else rows[mask].reset_index(drop=True)
        if models_of((p, fb)) - {"mlp"}:  # the spec columns once for the base and the path
            sub = with_spec_columns(sub, registry)
        base = None
        if mlp_pred is not None and "mlp" in models_of((p,)):  # the MLP's latencies serve its bases
            known = {"mlp": np.asarray(mlp_pred)[slice(None) if mask is None else mask]}
            base = base_predictions(fitted, (BASE[p],), sub, registry, known=known)[BASE[p]]
        src = None if sources is None or not TRANSFER[p] else (
            sources if mask is None else sources.iloc[np.flatnonzero(mask)].reset_index(drop=True))
        return predict_path(fitted, p, sub, registry, base_pred=base, sources=src, fallback=fb)

    if seen_path is None:
        return part(path, fallback, None)
    if seen_path not in SEEN_PATHS:
        raise ValueError(f"seen path {seen_path!r}: expected one of {list(SEEN_PATHS)}")
    seen = rows["gpu"].astype(str).isin({str(g) for g in seen_gpus}).to_numpy()
    parts = [part(p, fb, mask).set_axis(np.flatnonzero(mask))
             for mask, p, fb in ((~seen, path, fallback), (seen, seen_path, None)) if mask.any()]
    if not parts:
        return part(path, fallback, None)
    return pd.concat(parts).sort_index().reset_index(drop=True)


def select_path(table: pd.DataFrame, meta: dict, experiment: str, registry, train_cfg: TrainConfig, paths=PATHS,
                default: str = "mlp", log=print, fit_cache: dict | None = None,
                max_val_rows: int = 0) -> tuple[str, pd.DataFrame]:
    """The chosen path of one experiment (:func:`score_paths` then :func:`choose_paths`) and its fold scores
    (``fit_cache`` and ``max_val_rows`` as :func:`score_paths`)."""
    scores = score_paths(table, meta, experiment, registry, train_cfg, paths, log, fit_cache=fit_cache,
                         max_val_rows=max_val_rows)
    chosen, _ = choose_paths(scores, paths, default)
    return chosen.get(experiment, default), scores


def synperf_predict(train_rows: pd.DataFrame, test_rows: pd.DataFrame, meta: dict, registry,
                    select_cfg: TrainConfig, train_cfg: TrainConfig | None = None, mlp: TrainedModel | None = None,
                    experiment: str = "", paths=PATHS, log=print, fit_cache: dict | None = None,
                    default: str = "mlp", max_val_rows: int = 0) -> tuple[pd.DataFrame, str, pd.DataFrame]:
    """The ``synperf`` method of a protocol fold: choose a path on ``train_rows`` only, fit it there, predict.

    Test rows on a GPU of ``train_rows`` (held-out problems of a seen GPU) take the seen path instead
    (:func:`score_seen_paths` on the validation rows of the fold's MLP, :func:`choose_seen_path`); the other test
    rows take the LOSGO-chosen path. A test GPU without a training GPU of its own class
    (:func:`synperf.model.paths.sibling_gpus`) takes the path chosen, with its fallback, on the validation rows
    that had no sibling either (``mape_no_sibling_pct`` of :func:`score_paths`), among the candidates without a
    :data:`synperf.model.paths.SIBLING_MODES` mode: the sibling rows of other validation GPUs (where a transfer
    reads a sibling's measurement) say nothing about a GPU whose sources are of other classes. The choice
    reads the test GPUs' registry class (compute capability, memory type), never their rows.

    Args:
        train_rows: the fold's training rows (seen GPUs, problems not held out), a feature table's rows.
        test_rows: rows to predict (held-out problems, unseen GPUs); their ``latency_us`` is never read.
        select_cfg: MLP budget of the LOSGO folds of the choice.
        train_cfg: MLP budget of the final fit (default ``select_cfg``); unused when ``mlp`` is given.
        mlp: an MLP already trained on exactly ``train_rows`` (the fold's ``synperf_mlp``), reused: it scores the
            seen path on its own validation rows. Without it, the fold's MLP is trained here (``train_cfg``) when
            the chosen path needs it or a test row is on a training GPU.
        fit_cache: as :func:`score_paths`, for the LOSGO folds of the choice (a caller evaluating several protocol
            folds passes one dict to all of them).
        default: the path the choice keeps unless another is ``MIN_RELATIVE_GAIN`` better, also the fallback's
            (:func:`pooled_default` of evidence that excludes the fold's test GPUs).
        max_val_rows: as :func:`score_paths`, for the LOSGO folds of the choice.

    Returns:
        ``(predictions, chosen path, LOSGO scores)``; predictions as :func:`predict_rows`, with
        ``attrs["seen_path"]`` (None when no test row is on a training GPU), ``attrs["seen_scores"]``
        (:func:`score_seen_paths`, empty then) and ``attrs["paths"]`` (test GPU -> the path that predicted its rows
        off the training GPUs). The chosen path is the one of the test GPUs with a sibling, else the one without;
        ``"<with> / <without> (no sibling)"`` when the test GPUs hold both kinds and the two paths differ.
    """
    rows = train_rows.reset_index(drop=True).assign(split="train")
    chosen, scores = select_path(rows, meta, experiment, registry, select_cfg, paths, default=default, log=log,
                                 fit_cache=fit_cache, max_val_rows=max_val_rows)
    test = test_rows.drop(columns=["latency_us"], errors="ignore").reset_index(drop=True)
    gpus = sorted(rows["gpu"].astype(str).unique())
    test_gpu = test["gpu"].astype(str).to_numpy()
    targets = sorted(set(test_gpu) - set(gpus))
    with_sib = sibling_gpus(targets, gpus, registry)
    chosen_plain, fallback_plain = chosen, None
    if set(targets) - with_sib:
        plain = [p for p in paths if TRANSFER[p] not in SIBLING_MODES]
        no_sib_scores = scores.assign(mape_pct=scores["mape_no_sibling_pct"]).dropna(subset=["mape_pct"])
        chosen_plain = choose_paths(no_sib_scores, plain, default)[0].get(experiment, default)
        if TRANSFER[chosen_plain]:
            fallback_plain = choose_fallback(no_sib_scores, experiment, default=default)
    fallback = choose_fallback(scores, experiment, default=default) if TRANSFER[chosen] else BASE[chosen]
    fallback_plain = fallback_plain or BASE[chosen_plain]
    seen_path, seen_scores = None, pd.DataFrame(columns=PATH_SCORE_COLUMNS)
    if np.isin(test_gpu, gpus).any():
        if mlp is None:
            mlp = fit_mlp(rows, meta, train_cfg or select_cfg)
        seen_scores = score_seen_paths(rows, meta, registry, mlp, experiment, log)
        seen_path = choose_seen_path(seen_scores, experiment)
    need = (chosen, chosen_plain, fallback, fallback_plain) + ((seen_path,) if seen_path else ())
    fitted = fit_paths(rows, meta, registry, train_cfg or select_cfg, need,
                       mlp=mlp if "mlp" in models_of(need) else None)
    # rows of a target without a sibling take chosen_plain; every other row (sibling targets, seen GPUs) chosen
    no_sib = np.isin(test_gpu, sorted(set(targets) - with_sib))
    parts = []
    for mask, p, fb in ((~no_sib, chosen, fallback), (no_sib, chosen_plain, fallback_plain)):
        if mask.any():
            parts.append(predict_rows(fitted, p, test[mask], registry, fallback=fb, seen_path=seen_path,
                                      seen_gpus=gpus).set_axis(np.flatnonzero(mask)))
    res = (pd.concat(parts).sort_index().reset_index(drop=True) if parts else
           predict_rows(fitted, chosen, test, registry, fallback=fallback, seen_path=seen_path, seen_gpus=gpus))
    res.attrs.update(seen_path=seen_path, seen_scores=seen_scores,
                     paths={g: (chosen_plain if g not in with_sib else chosen) for g in targets})
    label = chosen if with_sib or not targets else chosen_plain
    if with_sib and set(targets) - with_sib and (chosen_plain, fallback_plain) != (chosen, fallback):
        label = f"{chosen} / {chosen_plain} (no sibling)"
    return res, label, scores


# ------------------------------------------------------------------------------------------------
# the chosen path of a model directory (read by synperf.api.predict)

#: file of a model directory that records the chosen path (JSON) and the transfer sources (parquet)
CHOICE_FILE = "path.json"
SOURCES_FILE = "path_sources.parquet"
#: file of a model directory holding the residual model (joblib)
RESIDUAL_FILE = "path_residual.joblib"
#: file of a model directory holding the local model on the residual model (joblib)
LOCAL_FILE = "path_local.joblib"
#: file of a model directory holding the local model on the MLP (joblib)
LOCAL_MLP_FILE = "path_local_mlp.joblib"


def _with_features(rows: pd.DataFrame, registry, feature_set: str, ff: FeatureFrame | None = None
                   ) -> tuple[pd.DataFrame, dict]:
    """``rows`` (index reset) with the feature columns of ``feature_set`` they lack, and the feature names
    (``numeric``, ``linear``, ``categorical``). ``ff``: :func:`synperf.model.features.build_features` of these
    rows and feature set, built here when None."""
    from synperf.model.features import build_features

    ff = build_features(rows, registry, feature_set) if ff is None else ff
    if len(ff.frame) != len(rows):
        raise ValueError(f"features: {len(ff.frame)} rows for {len(rows)} rows")
    feats = ff.frame.drop(columns=[c for c in ff.frame.columns if c in rows.columns])
    out = pd.concat([rows.reset_index(drop=True), feats.reset_index(drop=True)], axis=1)
    return out, {"numeric": ff.numeric, "linear": ff.linear, "categorical": ff.categorical}


def save_choice(directory, chosen: str, train_rows: pd.DataFrame, registry, scores: pd.DataFrame | None = None,
                mlp_dir: str | None = None, feature_set: str = "v2", fallback: str | None = None,
                seen_path: str | None = None, seen_scores: pd.DataFrame | None = None, meta: dict | None = None,
                train_cfg: TrainConfig | None = None, default: dict | None = None,
                mlp: TrainedModel | None = None) -> None:
    """Record ``chosen`` in ``directory`` (an experiment's model folder) for :func:`load_choice`.

    Writes :data:`CHOICE_FILE` (path, its fallback for rows no sibling measured, the seen path for rows on the
    training GPUs, MLP folder name, feature set, training GPUs, the physical model fitted on ``train_rows``, the
    LOSGO and seen-path scores), :data:`RESIDUAL_FILE` (the residual model fitted on ``train_rows``; with ``meta``
    it is written whichever path is recorded, and the record names it when one of the paths has it as base),
    :data:`LOCAL_FILE` (the local model on ``train_rows`` against that residual model; written with it, named in
    the record when the seen path is ``local``), :data:`LOCAL_MLP_FILE` (the local model on ``train_rows`` against
    ``mlp``; written when ``mlp`` and ``meta`` are given, named in the record when the seen path is ``local_mlp``) and
    :data:`SOURCES_FILE` (the canonical key columns and ``latency_us`` of ``train_rows``: the only rows a sibling
    may come from; always written, named in the record for a transfer path). The pipeline declares all three
    files as outputs, so a missing one reruns the training.

    Args:
        train_rows: the experiment's training rows (seen GPUs, problems not held out), canonical columns.
        mlp_dir: the MLP folder inside ``directory`` the path uses (e.g. ``v2-all``).
        seen_path: the :data:`SEEN_PATHS` path of rows on a training GPU (:func:`choose_seen_path`); None records
            none, and :func:`predict_with_choice` then predicts those rows with ``chosen`` too.
        seen_scores: :func:`score_seen_paths` behind ``seen_path``.
        meta: the feature table's sidecar, needed when a recorded path has the residual model as base
            (``train_rows`` then carry its feature columns).
        train_cfg: the row cap, seed and threads of the residual model's trees (default :class:`TrainConfig`).
        default: the :func:`pooled_default` record behind the choice's default path (stored as ``default``).
        mlp: the MLP of ``mlp_dir``, trained on ``train_rows``.

    Raises:
        ValueError: ``fallback`` not in :data:`ZERO_SHOT`, ``seen_path`` not in :data:`SEEN_PATHS`; the residual
            model is needed and ``meta`` is None; the seen path is ``local_mlp`` and ``mlp`` or ``meta`` is None.
    """
    import json
    from pathlib import Path

    from synperf.data.io import write_parquet, write_text
    from synperf.data.schema import KEY_COLUMNS

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fallback = fallback or BASE[chosen]
    if fallback not in ZERO_SHOT:
        raise ValueError(f"fallback {fallback!r}: expected one of {list(ZERO_SHOT)}")
    if seen_path is not None and seen_path not in SEEN_PATHS:
        raise ValueError(f"seen path {seen_path!r}: expected one of {list(SEEN_PATHS)}")
    rec = {"path": chosen, "base": BASE[chosen], "transfer": TRANSFER[chosen], "fallback": fallback,
           "mlp_dir": mlp_dir,
           "feature_set": feature_set, "training_gpus": sorted(train_rows["gpu"].astype(str).unique()),
           "scores": [] if scores is None else scores.to_dict(orient="records")}
    if default is not None:
        rec["default"] = default
    if seen_path is not None:
        rec["seen_path"] = seen_path
        rec["seen_scores"] = [] if seen_scores is None else seen_scores.to_dict(orient="records")
    used = models_of((chosen, fallback, seen_path))
    if "residual" in used and meta is None:
        raise ValueError("save_choice: the residual model needs the feature table's meta")
    if LOCAL_MLP in used and (mlp is None or meta is None):
        raise ValueError("save_choice: the seen path local_mlp needs the MLP and the feature table's meta")
    if meta is not None:  # written whichever path is recorded, so the folder always holds the same files
        spec_rows = with_spec_columns(train_rows.reset_index(drop=True), registry)
        residual = fit_residual(spec_rows, meta, registry, train_cfg or TrainConfig())
        residual.save(directory / RESIDUAL_FILE)
        LocalModel.fit(spec_rows, residual, registry).save(directory / LOCAL_FILE)
        if LOCAL in used:
            rec["local"] = LOCAL_FILE
        if mlp is not None:
            fit_local_mlp(spec_rows, meta, mlp).save(directory / LOCAL_MLP_FILE)
        if LOCAL_MLP in used:
            rec["local_mlp"] = LOCAL_MLP_FILE
        if "residual" in used:
            rec["residual"] = RESIDUAL_FILE
            rec["physical"] = residual.physical.to_dict()
    if "physical" in used and "residual" not in used:
        rec["physical"] = PhysicalModel.fit(train_rows, registry).to_dict()
    keep = [c for c in KEY_COLUMNS if c in train_rows.columns] + ["latency_us"]
    write_parquet(train_rows[keep].reset_index(drop=True), directory / SOURCES_FILE)
    if TRANSFER[chosen]:
        rec["sources"] = SOURCES_FILE
    write_text(json.dumps(rec, indent=1, default=str), directory / CHOICE_FILE)


def load_choice(directory) -> dict | None:
    """The record :func:`save_choice` wrote in ``directory`` (None when the folder has none).

    Raises:
        InputError: the file is not valid JSON or has no ``path`` (:func:`synperf.data.io.read_artefact`).
    """
    from pathlib import Path

    from synperf.data.io import read_artefact

    f = Path(directory) / CHOICE_FILE
    return read_artefact(f, keys=("path",)) if f.exists() else None


def _choice_paths(choice: dict, gpus: pd.Series) -> tuple[str, str | None, set]:
    """The fallback and seen path that :func:`predict_with_choice` takes for rows on ``gpus`` (the seen path None
    when no row is on a training GPU) and the fitted models they read (:func:`models_of`)."""
    fallback = choice.get("fallback") or BASE[choice["path"]]
    seen_path = choice.get("seen_path")
    if seen_path is not None and not gpus.astype(str).isin([str(g) for g in choice.get("training_gpus", [])]).any():
        seen_path = None  # no row on a training GPU
    return fallback, seen_path, models_of((choice["path"], fallback, seen_path))


def choice_reads_mlp(choice: dict, gpus: pd.Series) -> bool:
    """True when :func:`predict_with_choice` of ``choice`` reads the MLP for rows on ``gpus``."""
    return "mlp" in _choice_paths(choice, gpus)[2]


def predict_with_choice(choice: dict, directory, rows: pd.DataFrame, registry, mlp: TrainedModel | None,
                        features: FeatureFrame | None = None, mlp_pred: np.ndarray | None = None) -> pd.DataFrame:
    """Predict canonical ``rows`` with the recorded paths of ``choice`` (from :func:`load_choice`).

    A row whose ``gpu`` is one of the record's ``training_gpus`` takes the recorded ``seen_path`` (``prediction_path``
    a base model, ``source_gpu`` <NA>); any other row takes the recorded ``path``. A record without
    ``seen_path`` (written before it existed) predicts every row with ``path``.

    The transfer sources (their features, spec columns, shape keys and base predictions) are built once per
    sources file version, feature set and registry values, and reused by later calls (:func:`_cached_sources`).

    Args:
        directory: the folder holding the record (and its sources file).
        rows: canonical launch rows (key columns), any GPUs.
        mlp: the model of ``choice["mlp_dir"]`` when a path used here has the MLP as base.
        features: :func:`synperf.model.features.build_features` of ``rows`` with the choice's feature set
            (built here when None).
        mlp_pred: ``mlp``'s predicted latency on ``rows`` with those features, microseconds, shape
            ``(len(rows),)`` (computed here when None and a path used here has the MLP as base).

    Returns:
        As :func:`predict_rows`: ``predicted_latency_us`` (microseconds), ``prediction_path``, ``source_gpu``.

    Raises:
        ValueError: a path needs an MLP and none was given.
    """
    from pathlib import Path

    path, fs = choice["path"], choice.get("feature_set", "v2")
    fallback, seen_path, used = _choice_paths(choice, rows["gpu"])
    seen_gpus = [str(g) for g in choice.get("training_gpus", [])]
    if "mlp" in used and mlp is None:
        raise ValueError(f"path {path!r} (fallback {fallback!r}, seen path {seen_path!r}) needs the MLP of "
                         f"{choice.get('mlp_dir')!r}")
    rows, meta = _with_features(rows, registry, fs, features)
    train = rows.iloc[:0]
    physical = PhysicalModel.from_dict(choice["physical"]) if "physical" in used else None
    residual = _cached_model(Path(directory) / choice["residual"], ResidualModel) if "residual" in used else None
    local = _cached_model(Path(directory) / choice["local"], LocalModel) if LOCAL in used else None
    local_mlp = _cached_model(Path(directory) / choice["local_mlp"], LocalModel) if LOCAL_MLP in used else None
    base_train, sources = {}, None
    if TRANSFER[path]:
        # only the MLP and the residual model read the sources' features; the physical model and the sibling
        # lookup read the launch and spec columns
        cached = _cached_sources(Path(directory) / choice["sources"], registry,
                                 fs if models_of((path,)) & {"mlp", "residual"} else None)
        train = cached.rows
        models = {"mlp": mlp, "physical": physical, "residual": residual}
        single = {m: cached.base_prediction(m, models[m], meta, registry) for m in models_of((path,))}
        base_train[BASE[path]] = single[BASE[path]] if BASE[path] in single else ensemble(single)
        sources = transfer_sources(train, rows, registry, train_keys=cached.keys)
    fitted = FittedPaths(train, meta, mlp=mlp, physical=physical, residual=residual, local=local,
                         local_mlp=local_mlp, base_train=base_train)
    if mlp_pred is not None and len(mlp_pred) != len(rows):
        raise ValueError(f"mlp_pred: {len(mlp_pred)} predictions for {len(rows)} rows")
    return predict_rows(fitted, path, rows, registry, fallback=fallback, seen_path=seen_path, seen_gpus=seen_gpus,
                        mlp_pred=mlp_pred, sources=sources)


def registry_key(registry) -> tuple:
    """A hashable value equal for two registries whose GPUs hold the same values (spec fields, the raw registry
    entry and the datasheet values), for caches of what the registry's numbers determine."""
    return tuple((gid, spec, repr(spec.raw), repr(sorted(spec.datasheet_values.items())))
                 for gid, spec in sorted(registry.gpus.items()))


@dataclass
class _SourceCache:
    """The transfer sources of one model folder with their features and spec columns (:attr:`rows`, never
    modified), their :func:`synperf.model.paths.source_keys` (:attr:`keys`), and the base models' predictions on
    them, one per (base, model) pair (:meth:`base_prediction`)."""

    rows: pd.DataFrame
    keys: np.ndarray
    base: dict = field(default_factory=dict)

    def base_prediction(self, base: str, model, meta: dict, registry) -> np.ndarray:
        """Latency of ``model`` (a :class:`TrainedModel` for base ``mlp``, a :class:`PhysicalModel` for
        ``physical``, a :class:`ResidualModel` for ``residual``) on :attr:`rows`, microseconds, shape
        ``(len(rows),)``; computed once per model (the physical model by its coefficients, the others by identity)
        and feature columns of ``meta``. The array is shared and read-only."""
        cols = tuple(tuple(meta[k]) for k in ("numeric", "linear", "categorical"))
        by_id = base != "physical"
        key = (base, cols, id(model) if by_id else tuple(np.asarray(model.coef, dtype="float64")))
        hit = self.base.get(key)
        if hit is None or (by_id and hit[0] is not model):
            fitted = FittedPaths(self.rows, meta, mlp=model if base == "mlp" else None,
                                 physical=model if base == "physical" else None,
                                 residual=model if base == "residual" else None)
            pred = np.asarray(fitted.base_predict(base, self.rows, registry), dtype="float64")
            pred.setflags(write=False)
            hit = self.base[key] = (model, pred)
        return hit[1]


#: source file, its mtime and size, feature set, registry key -> :class:`_SourceCache`; the newest
#: :data:`_SOURCE_CACHE_SIZE` entries are kept
_SOURCE_CACHE: dict = {}
_SOURCE_CACHE_SIZE = 8


def _cached_sources(file, registry, feature_set: str | None) -> _SourceCache:
    """The rows of a :data:`SOURCES_FILE` with ``feature_set``'s features (none when None) and the ``bl_*`` spec
    columns, built once per file version (path, modification time, size), feature set and registry values
    (:func:`registry_key`).

    Raises:
        FileNotFoundError: ``file`` does not exist.
        InputError: ``file`` is not a readable Parquet table (:func:`synperf.data.io.read_table`).
    """
    from pathlib import Path

    file = Path(file).resolve()
    st = file.stat()
    key = (str(file), st.st_mtime_ns, st.st_size, feature_set, registry_key(registry))
    hit = _SOURCE_CACHE.pop(key, None)
    if hit is None:
        rows = read_table(file)
        if feature_set is not None:
            rows = _with_features(rows, registry, feature_set)[0]
        rows = with_spec_columns(rows.reset_index(drop=True), registry)
        keys = source_keys(rows)
        keys.setflags(write=False)
        hit = _SourceCache(rows, keys)
    _SOURCE_CACHE[key] = hit  # most recent last
    while len(_SOURCE_CACHE) > _SOURCE_CACHE_SIZE:
        _SOURCE_CACHE.pop(next(iter(_SOURCE_CACHE)))
    return hit


#: model file, its mtime and size -> :class:`ResidualModel` or :class:`LocalModel`; the newest
#: :data:`_SOURCE_CACHE_SIZE` kept
_MODEL_CACHE: dict = {}


def _cached_model(file, cls):
    """The model of class ``cls`` (:class:`ResidualModel`, :class:`LocalModel`) in ``file``, read once per file
    version (path, modification time, size).

    Raises:
        FileNotFoundError: ``file`` does not exist.
        TypeError: the file holds another class.
    """
    from pathlib import Path

    file = Path(file).resolve()
    st = file.stat()
    key = (str(file), st.st_mtime_ns, st.st_size)
    hit = _MODEL_CACHE.pop(key, None)
    if hit is None:
        hit = cls.load(file)
    _MODEL_CACHE[key] = hit
    while len(_MODEL_CACHE) > _SOURCE_CACHE_SIZE:
        _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
    return hit


def record_choice(table: pd.DataFrame, meta: dict, experiment: str, registry, scores: pd.DataFrame, directory,
                  mlp_dir: str, paths=PATHS, mlp: TrainedModel | None = None, log=print,
                  seen_rows_out: list | None = None, train_cfg: TrainConfig | None = None,
                  default: dict | None = None) -> tuple[str, pd.DataFrame]:
    """Record an experiment's path, chosen (:func:`choose_paths`) from its LOSGO ``scores``, and for a transfer path
    its fallback (:func:`choose_fallback`, the same scores), in its model folder ``directory`` (:func:`save_choice`)
    for :func:`synperf.api.predict`; with ``mlp``, also the seen path of rows on the training GPUs
    (:func:`score_seen_paths` on ``mlp``'s validation rows, :func:`choose_seen_path`).

    Args:
        table, meta: the experiment's feature table (with ``split``) and sidecar (``feature_set`` included); its
            ``train`` rows are the transfer sources and fit the physical model, and only they score the seen path.
        scores: :func:`score_paths` of the same ``train`` rows (:data:`PATH_SCORE_COLUMNS`); empty for an
            experiment with one seen GPU (the MLP then).
        mlp_dir: the experiment's primary MLP folder inside ``directory`` (e.g. ``v2-all``).
        mlp: that MLP, trained on exactly the table's ``train`` rows in table order (groups ``problem_key``); None
            records no seen path.
        seen_rows_out: a list that receives the seen-path scoring's per-row predictions (``rows_out`` of
            :func:`score_seen_paths`).
        train_cfg: the residual model's row cap, seed and threads (default ``mlp``'s training config, else
            :class:`TrainConfig`).
        default: :func:`pooled_default`'s record (evidence that excludes the experiment's unseen GPUs): its
            ``default`` is the path the choice and the fallback keep unless another is ``MIN_RELATIVE_GAIN``
            better, and the record is stored in the path record; None: ``mlp``.

    Returns:
        ``(chosen path, scores)``.

    Raises:
        ValueError: ``scores`` hold another experiment; ``mlp`` was not trained on the table's ``train`` rows
            (:func:`seen_validation_rows`).
    """
    other = sorted(set(scores["experiment"].astype(str)) - {experiment}) if len(scores) else []
    if other:
        raise ValueError(f"path scores of experiment(s) {other}, expected {experiment!r}")
    base = (default or {}).get("default", "mlp")
    chosen, _ = choose_paths(scores, paths, default=base)
    path = chosen.get(experiment, base)
    fallback = choose_fallback(scores, experiment, default=base) if TRANSFER[path] else BASE[path]
    rows = table[table["split"].astype(str).to_numpy() == "train"].reset_index(drop=True)
    seen_path, seen_scores = None, None
    if mlp is not None:
        seen_scores = score_seen_paths(rows, meta, registry, mlp, experiment, log, rows_out=seen_rows_out)
        seen_path = choose_seen_path(seen_scores, experiment)
    if train_cfg is None:
        train_cfg = TrainConfig.from_dict(mlp.meta["train_config"]) if mlp is not None else TrainConfig()
    save_choice(directory, path, rows, registry, scores, mlp_dir=mlp_dir, feature_set=meta.get("feature_set", "v2"),
                fallback=fallback, seen_path=seen_path, seen_scores=seen_scores, meta=meta, train_cfg=train_cfg,
                default=default, mlp=mlp)
    return path, scores
