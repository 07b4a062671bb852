"""Evaluation protocols and a runner that scores synperf's MLP and every baseline on them.

A protocol turns a feature table (one kernel family's rows, as written by
:func:`synperf.pipeline.features.experiment_features`, or built by :func:`feature_table`) into folds. A
:class:`Fold` labels every row of the table ``train``, ``test_seen``, ``unseen`` or ``unused``:

``configured`` (:func:`configured`)
    the table's own ``split`` column: the experiment's seen GPUs (minus held-out problems) for training,
    held-out problems on the seen GPUs (``test_seen``) and every row of the unseen GPUs (``unseen``).
``logo`` (:func:`leave_one_gpu_out`)
    each GPU of the table unseen in turn, all the others seen.
``loao`` (:func:`leave_one_architecture_out`)
    all GPUs of one registry ``architecture`` (Ampere, Ada, Hopper, Blackwell, ...) unseen, the GPUs of
    the other architectures seen; one fold per architecture present; a fold that would leave no
    training GPU is skipped.

In ``logo`` and ``loao`` the seen GPUs' rows are split by :func:`synperf.evaluation.split.experiment_split`: a
problem is held out (``test_seen``) on every seen GPU at once by a seeded hash of its problem key, so with the
experiment's ``heldout_frac`` and seed the held-out problems are those of the configured split and a held-out
problem never reaches training; an experiment with ``heldout_source_files`` keeps its source's test files as the
held-out rows in every fold. The same GPU-level folds are available without a table as
``(name, seen_gpus, unseen_gpus)`` tuples (:func:`logo_gpu_sets`, :func:`loao_gpu_sets`).

The runner (:func:`run_protocol`, :func:`predict_protocol`) fits, per fold, the efficiency MLP
(``synperf_mlp``: :func:`synperf.model.estimator.train` on the fold's training rows) and every baseline of
:data:`synperf.evaluation.baselines.BASELINES` on the same rows, predicts the fold's ``test_seen`` and ``unseen``
rows and scores them with :mod:`synperf.evaluation.metrics`. Features are computed once per table; each fold only
selects rows.

The method ``synperf`` is the fingerprint predictor (:class:`synperf.model.fingerprint.FingerprintModel`), what
:func:`synperf.api.predict` serves, fitted per fold on the fold's training rows with its options chosen there by
leaving each training GPU out (:func:`synperf.model.fingerprint_choice.fit_chosen`); the chosen option leads its
``budget`` text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np
import pandas as pd

from synperf.data.schema import KEY_COLUMNS
from synperf.evaluation.baselines import BASELINES, BaselineConfig, add_baseline_columns, fit_predict
from synperf.evaluation.leak_check import LeakError, fold_leaks
from synperf.evaluation.metrics import ape, summarize
from synperf.evaluation.split import experiment_split, problem_key
from synperf.model.estimator import TrainConfig, train
from synperf.model.features import FeatureFrame, build_features

#: the evaluated methods: the paper's efficiency MLP, then every baseline, then synperf's predictor
MLP = "synperf_mlp"
#: one predictor per family: the physical time with the GPU's fingerprint times a GPU-invariant correction
#: (:class:`synperf.model.fingerprint.FingerprintModel`), what :func:`synperf.api.predict` serves
SYNPERF = "synperf"
METHODS: tuple[str, ...] = (MLP,) + tuple(BASELINES) + (SYNPERF,)
TEST_SPLITS = ("test_seen", "unseen")
LABELS = ("train", "test_seen", "unseen", "unused")

#: columns of :func:`run_protocol`'s result, in order
SUMMARY_COLUMNS = ["protocol", "fold", "method", "gpu", "split", "n_rows", "n_total", "coverage", "mape_pct",
                   "median_ape_pct", "p90_ape_pct", "interval_coverage", "fit_seconds", "budget"]
#: the level of the intervals the ``synperf`` method's predictions carry (``predicted_low_us``/``_high_us``)
INTERVAL_LEVEL = 0.8


def method_budget(method: str, max_train_rows: int, train_cfg: TrainConfig, baseline_cfg: BaselineConfig) -> str:
    """The training budget of ``method`` on a fold, as the report states it: row cap and epochs/iterations
    (``max_train_rows`` 0 = every training row); lookups and closed forms have no fitted budget."""
    rows = f"<= {max_train_rows} rows" if max_train_rows else "all rows"
    if method == MLP:
        return f"{rows}, <= {train_cfg.max_epochs} epochs (early stopping)"
    if method == "neusight":
        return f"{rows}, {baseline_cfg.neusight_epochs} epochs"
    if method == "gbt":
        return f"{rows}, {baseline_cfg.gbt_max_iter} boosting iterations"
    if method == "linear":
        return f"{rows}, closed form"
    if method == SYNPERF:
        return f"fingerprints on all rows; correction {rows}"
    if method.startswith("nearest_gpu"):
        return "lookup over all training rows"
    return "no training"


@dataclass(frozen=True, eq=False)
class Fold:
    """One train/test assignment over the rows of a table.

    Attributes:
        protocol: ``configured``, ``logo`` or ``loao``.
        name: unique fold name, e.g. ``configured``, ``logo:a40``, ``loao:Hopper``.
        labels: one label per table row (positional, length = table rows): ``train``, ``test_seen``,
            ``unseen`` or ``unused``.
        seen_gpus, unseen_gpus: the GPU ids on each side (sorted).

    Iterating a fold yields ``(name, train_mask, test_mask)``, so ``for name, tr, te in folds`` works.
    """

    protocol: str
    name: str
    labels: np.ndarray
    seen_gpus: tuple[str, ...]
    unseen_gpus: tuple[str, ...]

    @property
    def train_mask(self) -> np.ndarray:
        """Boolean mask of the training rows (label ``train``)."""
        return self.labels == "train"

    @property
    def test_mask(self) -> np.ndarray:
        """Boolean mask of the evaluated rows (labels ``test_seen`` and ``unseen``)."""
        return np.isin(self.labels, TEST_SPLITS)

    def __iter__(self) -> Iterator:
        return iter((self.name, self.train_mask, self.test_mask))


# ------------------------------------------------------------------------------------------------
# GPU-level folds


def logo_gpu_sets(gpus) -> list[tuple[str, list[str], list[str]]]:
    """Leave-one-GPU-out over ``gpus``: ``(f"logo:{g}", other GPUs, [g])`` for each GPU, sorted by id.

    A single GPU gives no fold (nothing to train on).
    """
    gpus = sorted(set(map(str, gpus)))
    if len(gpus) < 2:
        return []
    return [(f"logo:{g}", [o for o in gpus if o != g], [g]) for g in gpus]


def loao_gpu_sets(gpus, registry) -> list[tuple[str, list[str], list[str]]]:
    """Leave-one-architecture-out: ``(f"loao:{arch}", GPUs of other architectures, GPUs of arch)``.

    Architectures from the registry (``GPUSpec.architecture``), one fold per architecture present in
    ``gpus``, sorted by name; an architecture holding every GPU (no training GPU left) gives no fold.

    Raises:
        InputError: a GPU id not in the registry.
    """
    gpus = sorted(set(map(str, gpus)))
    arch = {g: registry[g].architecture for g in gpus}
    out = []
    for a in sorted(set(arch.values())):
        unseen = [g for g in gpus if arch[g] == a]
        seen = [g for g in gpus if arch[g] != a]
        if seen:
            out.append((f"loao:{a}", seen, unseen))
    return out


def folds_from_gpu_sets(table: pd.DataFrame, gpu_sets, protocol: str, heldout_frac: float = 0.2,
                        seed: int = 0, heldout_source_files: str | None = None) -> list[Fold]:
    """Label the rows of ``table`` for each ``(name, seen, unseen)`` with
    :func:`synperf.evaluation.split.experiment_split`: held-out problems by hash, or, with
    ``heldout_source_files``, the data source's own test files (the table then needs ``source_file``), so a
    fold keeps the split the source defines (pipeweave FP8's train/test files).

    ``table`` needs the canonical key columns. Folds without any ``train`` row or any test row are skipped.

    Raises:
        ValueError: as :func:`synperf.evaluation.split.assign_split` (a GPU on both sides, bad ``heldout_frac``).
    """
    folds = []
    for name, seen, unseen in gpu_sets:
        exp = {"seen": list(seen), "unseen": list(unseen), "heldout_frac": heldout_frac,
               "heldout_source_files": heldout_source_files}
        labels = experiment_split(table, exp, seed).to_numpy().astype(str)
        if not (labels == "train").any() or not np.isin(labels, TEST_SPLITS).any():
            continue
        folds.append(Fold(protocol, name, labels, tuple(sorted(seen)), tuple(sorted(unseen))))
    return folds


# ------------------------------------------------------------------------------------------------
# protocols over a table


def configured(table: pd.DataFrame) -> list[Fold]:
    """The table's configured split (its ``split`` column) as one fold named ``configured``.

    Raises:
        ValueError: no ``split`` column, or a label outside train/test_seen/unseen/unused.
    """
    if "split" not in table.columns:
        raise ValueError("configured protocol: the table has no 'split' column "
                         "(see synperf.pipeline.features.experiment_features)")
    labels = table["split"].astype(str).to_numpy()
    bad = sorted(set(labels) - set(LABELS))
    if bad:
        raise ValueError(f"configured protocol: unknown split label(s) {bad}; expected {list(LABELS)}")
    gpu = table["gpu"].astype(str).to_numpy()
    seen = tuple(sorted(set(gpu[np.isin(labels, ("train", "test_seen"))])))
    unseen = tuple(sorted(set(gpu[labels == "unseen"])))
    return [Fold("configured", "configured", labels, seen, unseen)]


def _gpus(table: pd.DataFrame, gpus) -> list[str]:
    present = sorted(table["gpu"].astype(str).unique())
    if gpus is None:
        return present
    gpus = [str(g) for g in gpus]
    missing = sorted(set(gpus) - set(present))
    if missing:
        raise ValueError(f"GPU(s) {missing} have no rows in the table (present: {present})")
    return sorted(set(gpus))


def leave_one_gpu_out(table: pd.DataFrame, gpus=None, *, heldout_frac: float = 0.2, seed: int = 0,
                      heldout_source_files: str | None = None) -> list[Fold]:
    """Leave-one-GPU-out folds: each GPU of ``gpus`` (default: every GPU of the table) unseen in turn.

    Seen GPUs are the other GPUs of ``gpus``; their rows are ``train`` or ``test_seen`` by the held-out-shape
    rule (:func:`synperf.evaluation.split.assign_split` with ``heldout_frac`` and ``seed``); rows of GPUs outside
    ``gpus`` are ``unused``. Fold names ``logo:<gpu>``.

    Raises:
        ValueError: a GPU of ``gpus`` without rows in the table.
    """
    return folds_from_gpu_sets(table, logo_gpu_sets(_gpus(table, gpus)), "logo", heldout_frac, seed,
                               heldout_source_files)


def leave_one_architecture_out(table: pd.DataFrame, registry, gpus=None, *, heldout_frac: float = 0.2,
                               seed: int = 0, heldout_source_files: str | None = None) -> list[Fold]:
    """Leave-one-architecture-out folds: all GPUs of one architecture unseen, the others seen.

    One fold per registry ``architecture`` among ``gpus`` (default: every GPU of the table), named
    ``loao:<architecture>``; skipped when no GPU of another architecture is left to train on. Seen rows
    are split as in :func:`leave_one_gpu_out`.

    Raises:
        ValueError: a GPU of ``gpus`` without rows in the table.
        InputError: a GPU id not in the registry.
    """
    return folds_from_gpu_sets(table, loao_gpu_sets(_gpus(table, gpus), registry), "loao", heldout_frac, seed,
                               heldout_source_files)


PROTOCOLS = ("configured", "logo", "loao")


def make_folds(protocol: str, table: pd.DataFrame, registry, *, gpus=None, heldout_frac: float = 0.2,
               seed: int = 0, heldout_source_files: str | None = None) -> list[Fold]:
    """Folds of ``protocol`` (``configured``, ``logo`` or ``loao``) over ``table`` (dispatcher for rules);
    ``heldout_source_files`` as in :func:`folds_from_gpu_sets`.

    Raises:
        KeyError: unknown protocol.
    """
    if protocol == "configured":
        return configured(table)
    if protocol == "logo":
        return leave_one_gpu_out(table, gpus, heldout_frac=heldout_frac, seed=seed,
                                 heldout_source_files=heldout_source_files)
    if protocol == "loao":
        return leave_one_architecture_out(table, registry, gpus, heldout_frac=heldout_frac, seed=seed,
                                          heldout_source_files=heldout_source_files)
    raise KeyError(f"unknown protocol {protocol!r}; known: {list(PROTOCOLS)}")


# ------------------------------------------------------------------------------------------------
# runner


def feature_table(rows: pd.DataFrame, registry, feature_set: str = "v2", seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Build a feature table from canonical rows once (all rows, no split): ``(table, meta)``.

    The table has the layout of :func:`synperf.pipeline.features.experiment_features` without ``split``: the key
    columns, ``latency_us``, ``source`` (when present), the feature columns, ``theoretical_time_us`` and
    ``problem_key`` (seeded with ``seed``); ``meta`` holds ``feature_set``, ``numeric``, ``linear`` and
    ``categorical``. Use it for the ``logo``/``loao`` protocols over every GPU of a family.

    Raises:
        KeyError: as :func:`synperf.model.features.build_features`.
    """
    ff = build_features(rows, registry, feature_set)
    keep = list(KEY_COLUMNS) + ["latency_us"] + [c for c in ("source", "source_file") if c in rows.columns]
    out = pd.concat([rows[keep].reset_index(drop=True),
                     ff.frame.drop(columns=[c for c in ff.frame.columns if c in keep]).reset_index(drop=True)], axis=1)
    out["problem_key"] = problem_key(rows, seed).to_numpy()
    return out, {"feature_set": feature_set, "numeric": ff.numeric, "linear": ff.linear,
                 "categorical": ff.categorical}


def _prepare(table, registry, features, seed, methods) -> tuple[pd.DataFrame, dict]:
    if isinstance(features, str):
        table, meta = feature_table(table, registry, features, seed)
    else:
        meta = dict(features)
        for k in ("numeric", "linear", "categorical"):
            if k not in meta:
                raise ValueError(f"feature meta lacks {k!r} (pass the feature table's sidecar JSON)")
        cols = list(meta["numeric"]) + list(meta["linear"]) + list(meta["categorical"]) + ["theoretical_time_us"]
        missing = [c for c in cols if c not in table.columns]
        if missing:
            raise ValueError(f"the table lacks feature column(s) {missing} named in the feature meta")
        table = table.reset_index(drop=True)
    if "problem_key" not in table.columns:
        table = table.assign(problem_key=problem_key(table, seed).to_numpy())
    return add_baseline_columns(table, registry, tiles="neusight" in methods), meta


def _iter_fold_predictions(table, folds, methods, registry, train_cfg, features, max_train_rows, baseline_cfg, seed,
                           log, pretrained=None, models_out=None):
    methods = list(METHODS if methods is None else methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise KeyError(f"unknown method(s) {unknown}; known: {list(METHODS)}")
    table, meta = _prepare(table, registry, features, seed, methods)
    cfg = train_cfg or TrainConfig()
    bcfg = baseline_cfg or BaselineConfig(threads=cfg.threads)
    if max_train_rows:
        cap = lambda c: max_train_rows if not c else min(c, max_train_rows)  # noqa: E731
        cfg = replace(cfg, max_train_rows=cap(cfg.max_train_rows))
        bcfg = replace(bcfg, max_train_rows=cap(bcfg.max_train_rows))
    for fold in folds:
        if len(fold.labels) != len(table):
            raise ValueError(f"fold {fold.name}: {len(fold.labels)} labels for a table of {len(table)} rows")
        leaks = fold_leaks(fold.labels, table["gpu"].to_numpy(), table["problem_key"].to_numpy(), fold.seen_gpus,
                           fold.unseen_gpus)
        if any(leaks.values()):
            raise LeakError(f"fold {fold.name}: " + ", ".join(f"{k}: {v}" for k, v in leaks.items() if v))
        # every fitted method of a fold gets the row cap of the fold's MLP (the primary model's own on the
        # configured fold), so the methods compare on the same training budget
        fold_cfg = cfg
        if fold.name in (pretrained or {}):
            fold_cfg = TrainConfig.from_dict(pretrained[fold.name].meta["train_config"])
        fold_bcfg = replace(bcfg, max_train_rows=fold_cfg.max_train_rows)
        tr = table[fold.train_mask]
        te_idx = np.flatnonzero(fold.test_mask)
        te = table.iloc[te_idx]
        base = pd.DataFrame({"protocol": fold.protocol, "fold": fold.name, "row": te_idx,
                             "gpu": te["gpu"].astype(str).to_numpy(), "kernel": te["kernel"].astype(str).to_numpy(),
                             "split": fold.labels[te_idx], "latency_us": te["latency_us"].to_numpy(dtype="float64")})
        for method in methods:
            t0 = time.time()
            bounds = np.full((len(te), 2), np.nan)
            budget = method_budget(method, fold_cfg.max_train_rows, fold_cfg, fold_bcfg)
            if method == SYNPERF:
                from synperf.model.fingerprint_choice import fit_chosen

                # the configured fold's held-out problems of training GPUs carry the own-GPU corrections' intervals
                # (what the trained predictor serves them); the leave-one-out folds score unseen GPUs' only
                held_out = fold.protocol == "configured" and bool((fold.labels[te_idx] == "test_seen").any())
                fp_model = fit_chosen(tr, meta, registry, max_train_rows=fold_bcfg.max_train_rows, seed=seed,
                                      oof=False, fewshot=False, local_oof=held_out)
                d = fp_model.describe(te, registry, INTERVAL_LEVEL)
                pred = d["predicted_latency_us"].to_numpy()
                bounds = d[["predicted_latency_low_us", "predicted_latency_high_us"]].to_numpy()
                budget = (f"{fp_model.choice['option']}, interval {fp_model.choice.get('interval', 'none')} (chosen by "
                          f"leave-one-training-GPU-out); {budget}")
            elif method == MLP and fold.name in (pretrained or {}):
                model = pretrained[fold.name]
                pred = model.predict_latency_us(FeatureFrame(te, meta["numeric"], meta["linear"], meta["categorical"]))
            elif method == MLP:
                model = train(FeatureFrame(tr, meta["numeric"], meta["linear"], meta["categorical"]),
                              tr["latency_us"], tr["problem_key"], cfg, log=lambda *_: None)
                if models_out is not None:
                    models_out[fold.name] = model
                pred = model.predict_latency_us(FeatureFrame(te, meta["numeric"], meta["linear"], meta["categorical"]))
            else:
                pred = fit_predict(method, tr, te, registry, seed=seed, feature_meta=meta, cfg=fold_bcfg)
            seconds = time.time() - t0
            out = base.assign(method=method, predicted_latency_us=np.asarray(pred, dtype="float64"),
                              predicted_low_us=bounds[:, 0], predicted_high_us=bounds[:, 1], budget=budget)
            out["ape_pct"] = ape(out["predicted_latency_us"], out["latency_us"])
            out["fit_seconds"] = seconds
            log(f"{fold.name} {method}: {len(tr)} train rows, {len(te)} test rows, {seconds:.1f} s")
            yield out


_PRED_COLUMNS = ["protocol", "fold", "method", "row", "gpu", "kernel", "split", "latency_us", "predicted_latency_us",
                 "predicted_low_us", "predicted_high_us", "ape_pct", "fit_seconds", "budget"]


def predict_protocol(table: pd.DataFrame, folds: list[Fold], methods, registry, train_cfg: TrainConfig | None,
                     features, *, max_train_rows: int = 0, baseline_cfg: BaselineConfig | None = None, seed: int = 0,
                     log=print, pretrained: dict | None = None, models_out: dict | None = None) -> pd.DataFrame:
    """Per-row predictions of every method on every fold's test rows (for error CDFs and scatter plots).

    Arguments as :func:`run_protocol`; ``pretrained`` maps a fold name (e.g. ``configured``) to a
    :class:`synperf.model.estimator.TrainedModel` used as ``synperf_mlp`` on that fold instead of training one (the
    pipeline passes the experiment's primary model, trained on exactly the configured fold's training rows).
    ``models_out`` (a dict) receives the ``synperf_mlp`` trained on each fold, by fold name.

    Returns:
        Long table, one row per (fold, method, test row): ``protocol``, ``fold``, ``method``, ``row`` (position
        in ``table``), ``gpu``, ``kernel``, ``split`` (``test_seen``/``unseen``), ``latency_us`` (measured),
        ``predicted_latency_us`` (NaN where a nearest-GPU method has no source), ``predicted_low_us`` and
        ``predicted_high_us`` (the ``synperf`` method's interval at :data:`INTERVAL_LEVEL`; NaN for the other
        methods and where it has none), ``ape_pct``, ``fit_seconds``
        (wall time to fit that method on the fold and predict its test rows).
    """
    parts = list(_iter_fold_predictions(table, folds, methods, registry, train_cfg, features, max_train_rows,
                                        baseline_cfg, seed, log, pretrained, models_out))
    if not parts:
        return pd.DataFrame(columns=_PRED_COLUMNS)
    return pd.concat(parts, ignore_index=True)[_PRED_COLUMNS]


def summarize_predictions(preds: pd.DataFrame, on_rows_covered_by: str | None = None) -> pd.DataFrame:
    """Error summary per (fold, method, gpu, split), plus ``gpu = "ALL"`` per (fold, method, split).

    Errors are over the covered rows (finite prediction); ``n_total`` counts every test row and
    ``coverage = n_rows / n_total``; ``interval_coverage`` is the share of the rows with finite
    ``predicted_low_us``/``predicted_high_us`` whose measured latency lies between them (NaN where none has).
    With ``on_rows_covered_by`` (e.g. ``"nearest_gpu_roofline"``) every method is scored only on the rows that
    method covers, a paired comparison.

    Returns:
        Columns :data:`SUMMARY_COLUMNS` (``mape_pct``, ``median_ape_pct``, ``p90_ape_pct`` in percent, NaN
        where no row is covered).

    Raises:
        ValueError: ``on_rows_covered_by`` is not a method of ``preds``, or it predicts a (fold, row) more than
            once.
    """
    keep = None  # the rows scored (all of them without on_rows_covered_by)
    if on_rows_covered_by is not None:
        method, methods = pd.factorize(preds["method"].astype(str), sort=False)
        if on_rows_covered_by not in set(methods):
            raise ValueError(f"method {on_rows_covered_by!r} not in the predictions")
        # the rows whose (fold, row) the reference method predicts (finite), in their order
        fold = pd.factorize(preds["fold"].astype(str), sort=False)[0].astype("int64")
        pair = fold * (int(preds["row"].max()) + 1) + preds["row"].to_numpy(dtype="int64")
        ref = ((method == list(methods).index(on_rows_covered_by))
               & np.isfinite(preds["predicted_latency_us"].to_numpy(dtype="float64")))
        if len(np.unique(pair[ref])) != int(ref.sum()):
            raise ValueError(f"method {on_rows_covered_by!r} predicts a (fold, row) more than once")
        keep = np.isin(pair, pair[ref])
    if len(preds) == 0 or (keep is not None and not keep.any()):
        return pd.DataFrame(columns=SUMMARY_COLUMNS)

    def kept(values: np.ndarray) -> np.ndarray:
        return values if keep is None else values[keep]

    # integer codes instead of a groupby over strings: (protocol, fold, method) in order of appearance, gpu and
    # split sorted; each group's rows keep their order (a stable sort), so every statistic is the per-group one
    pfm, pfm_first = _codes(preds, ["protocol", "fold", "method"], keep)
    gpu_codes, gpus = pd.factorize(preds["gpu"].astype(str), sort=True)
    split_codes, splits = pd.factorize(preds["split"].astype(str), sort=True)
    gpu_codes, split_codes = kept(gpu_codes), kept(split_codes)
    ape_pct = kept(preds["ape_pct"].to_numpy(dtype="float64"))
    covered = np.isfinite(kept(preds["predicted_latency_us"].to_numpy(dtype="float64")))
    y = kept(preds["latency_us"].to_numpy(dtype="float64"))
    lo, hi = (kept(preds[c].to_numpy(dtype="float64")) if c in preds.columns else np.full(len(y), np.nan)
              for c in ("predicted_low_us", "predicted_high_us"))
    inside = np.where(np.isfinite(lo) & np.isfinite(hi), (y >= lo) & (y <= hi), np.nan)
    secs = kept(preds["fit_seconds"].to_numpy(dtype="float64"))
    # the first row of each (protocol, fold, method), in group order
    firsts = preds.iloc[pfm_first if keep is None else np.flatnonzero(keep)[pfm_first]]
    keys = {c: firsts[c].astype(str).to_numpy() for c in ("protocol", "fold", "method")}
    budgets = firsts["budget"].astype(str).to_numpy() if "budget" in preds.columns else None
    n_gpu, n_split = len(gpus), len(splits)
    per_gpu = _groups((pfm * n_gpu + gpu_codes) * n_split + split_codes)
    per_split = _groups(pfm * n_split + split_codes)
    rows = []
    for g, first in enumerate(pfm_first):
        head = {c: keys[c][g] for c in ("protocol", "fold", "method")}
        extra = {"fit_seconds": round(float(secs[first]), 2), "budget": budgets[g] if budgets is not None else ""}
        # every (gpu, split) of the group, then ("ALL", split) over all its GPUs
        cells = [(per_gpu.get((g * n_gpu + i) * n_split + j), gpus[i], j) for i in range(n_gpu) for j in range(n_split)]
        cells += [(per_split.get(g * n_split + j), "ALL", j) for j in range(n_split)]
        for idx, gpu_key, j in cells:
            if idx is None:
                continue
            cov = covered[idx]
            bounded = inside[idx][np.isfinite(inside[idx])]
            rows.append({**head, "gpu": gpu_key, "split": splits[j], **summarize(ape_pct[idx][cov]),
                         "n_total": len(idx), "coverage": float(cov.mean()),
                         "interval_coverage": float(bounded.mean()) if len(bounded) else np.nan, **extra})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _codes(frame: pd.DataFrame, columns: list[str], keep: np.ndarray | None = None, sort: bool = False
           ) -> tuple[np.ndarray, np.ndarray]:
    """One integer per distinct combination of ``columns`` (as strings) per row of ``frame`` (only the rows
    ``keep`` marks, when given), numbered in order of first appearance (``sort``: in the sorted order of the
    combinations, that of a sorted groupby), and the position of each combination's first row among those rows."""
    codes = np.zeros(len(frame), dtype="int64")
    for c in columns:
        col, uniques = pd.factorize(frame[c].astype(str), sort=sort)
        codes = codes * len(uniques) + col
    codes = pd.factorize(codes if keep is None else codes[keep], sort=sort)[0]
    return codes, np.unique(codes, return_index=True)[1]


def _groups(codes: np.ndarray) -> dict[int, np.ndarray]:
    """Group code -> the positions of its rows, in row order."""
    order = np.argsort(codes, kind="stable")
    uniq, start = np.unique(codes[order], return_index=True)
    return dict(zip(uniq.tolist(), np.split(order, start[1:])))


#: quantiles (0..1) at which :func:`error_cdf` tabulates the absolute percentage error
CDF_QUANTILES = tuple(np.round(np.linspace(0.0, 1.0, 101), 2))


def error_cdf(preds: pd.DataFrame, quantiles=CDF_QUANTILES) -> pd.DataFrame:
    """Empirical CDF of the absolute percentage error per (protocol, method, split), pooled over folds and GPUs.

    Only covered rows (finite prediction) count. Returns columns ``protocol``, ``method``, ``split``,
    ``quantile`` (share of rows, 0..1), ``ape_pct`` (that quantile of the APE, percent) and ``n_rows``;
    plotting ``quantile`` against ``ape_pct`` gives the CDF.
    """
    rows = []
    ok = np.isfinite(preds["predicted_latency_us"].to_numpy(dtype="float64"))
    ape_pct = preds["ape_pct"].to_numpy(dtype="float64")[ok]
    keys = ["protocol", "method", "split"]
    codes, _ = _codes(preds, keys, ok, sort=True)  # the groups come in the order of a sorted groupby
    labels = preds.loc[ok, keys].astype(str).to_numpy()
    for idx in _groups(codes).values():
        proto, method, split = labels[idx[0]]
        vals = np.quantile(ape_pct[idx], quantiles)
        rows += [{"protocol": proto, "method": method, "split": split, "quantile": float(q), "ape_pct": float(v),
                  "n_rows": len(idx)} for q, v in zip(quantiles, vals)]
    return pd.DataFrame(rows, columns=["protocol", "method", "split", "quantile", "ape_pct", "n_rows"])


def run_protocol(table: pd.DataFrame, folds: list[Fold], methods, registry, train_cfg: TrainConfig | None,
                 features, *, max_train_rows: int = 0, baseline_cfg: BaselineConfig | None = None, seed: int = 0,
                 log=print) -> pd.DataFrame:
    """Fit and score every method on every fold; one summary row per (fold, method, gpu, split).

    Args:
        table: a feature table (``features`` is its meta dict) or canonical measurement rows (``features`` is a
            feature-set name; features are then built once, in row order). Folds index its rows positionally.
        folds: from :func:`configured`, :func:`leave_one_gpu_out`, :func:`leave_one_architecture_out` or
            :func:`make_folds`.
        methods: names from :data:`METHODS` (``synperf_mlp`` and the baselines); ``None`` = all.
        registry: GPU registry.
        train_cfg: the MLP's hyper-parameters (:class:`synperf.model.training.TrainConfig`; small epoch budgets
            keep CI fast); ``None`` = defaults.
        features: the feature table's sidecar meta (``numeric``, ``linear``, ``categorical`` lists) or a
            feature-set name (``v1``, ``v2``).
        max_train_rows: when > 0, caps (seeded subsample) the training rows of the MLP and of the fitted
            baselines (linear, neusight, gbt); nearest-GPU lookups always see every training row.
        baseline_cfg: budgets of the baselines (:class:`synperf.evaluation.baselines.BaselineConfig`).
        seed: seed of the baselines (the MLP uses ``train_cfg.seed``) and of ``problem_key`` when the table
            lacks it.
        log: progress callback, one line per fold and method.

    Returns:
        :data:`SUMMARY_COLUMNS`: ``protocol``, ``fold``, ``method``, ``gpu`` (or ``ALL``), ``split``,
        ``n_rows`` (covered rows scored), ``n_total``, ``coverage``, ``mape_pct``, ``median_ape_pct``,
        ``p90_ape_pct`` (percent, :func:`synperf.evaluation.metrics.summarize`), ``fit_seconds`` (fit + predict wall
        time of the fold and method).

    Raises:
        KeyError: unknown method.
        ValueError: fold length differs from the table, feature columns missing, too few training rows.
    """
    parts = [summarize_predictions(p) for p in _iter_fold_predictions(
        table, folds, methods, registry, train_cfg, features, max_train_rows, baseline_cfg, seed, log)]
    if not parts:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    return pd.concat(parts, ignore_index=True)
