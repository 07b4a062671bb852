"""Model selection on the seen GPUs only: leave one seen GPU out inside the training rows.

Every choice made by comparing numbers (here: the primary feature set, which also decides the target and the
launch floor: ``v2_launch`` is ``v2_paper`` plus a 3 us floor) is scored by this protocol and nothing else.
Its universe is an experiment's ``train`` rows of the configured split (seen GPUs, problems not held out):
each seen GPU in turn is the validation GPU, the other seen GPUs' training rows train an MLP with the
selection budget, and the MAPE on the validation GPU's rows is the score. Held-out problems, configured unseen
GPUs and GPUs outside the experiment never enter (:func:`losgo_folds` labels them ``unused``).

:func:`choose` ranks the candidates by the geometric mean of their scores over experiments (each experiment's
score is the mean over its folds): every experiment weighs the same whatever its row count, and one family
where a candidate fails badly (a MAPE in the thousands) counts as a large factor, not as the whole sum.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.evaluation.protocols import MLP, Fold, predict_protocol, summarize_predictions

#: a candidate replaces a simpler (or the configured) one only when its score is this share lower
MIN_RELATIVE_GAIN = 0.05

#: columns of :func:`score_feature_set`'s result
SCORE_COLUMNS = ["experiment", "feature_set", "fold", "validation_gpu", "n_train", "n_rows", "mape_pct",
                 "median_ape_pct", "p90_ape_pct"]


def losgo_folds(table: pd.DataFrame) -> list[Fold]:
    """Leave-one-seen-GPU-out folds over the ``train`` rows of a feature table (its ``split`` column).

    Fold ``losgo:<gpu>`` labels that GPU's training rows ``unseen`` (validation), the other GPUs' training rows
    ``train`` and every other row (held-out problems, unseen GPUs) ``unused``. An experiment with one seen GPU
    has no fold.

    Raises:
        ValueError: the table has no ``split`` column.
    """
    if "split" not in table.columns:
        raise ValueError("selection: the feature table has no 'split' column")
    train = table["split"].astype(str).to_numpy() == "train"
    gpu = table["gpu"].astype(str).to_numpy()
    gpus = sorted(set(gpu[train]))
    if len(gpus) < 2:
        return []
    folds = []
    for g in gpus:
        labels = np.where(train & (gpu == g), "unseen", np.where(train, "train", "unused"))
        folds.append(Fold("losgo", f"losgo:{g}", labels, tuple(o for o in gpus if o != g), (g,)))
    return folds


def score_feature_set(table: pd.DataFrame, meta: dict, experiment: str, registry, train_cfg, seed: int = 0,
                      log=print, models_out: dict | None = None) -> pd.DataFrame:
    """Score one experiment's feature table (one feature set) by leave-one-seen-GPU-out.

    Args:
        table, meta: the feature table and its sidecar (``numeric``, ``linear``, ``categorical``,
            ``feature_set``), as written by :func:`synperf.pipeline.features.experiment_features`.
        train_cfg: the MLP's :class:`synperf.model.training.TrainConfig` (the selection budget).
        models_out: a dict that receives each fold's MLP by fold name (``losgo:<gpu>``), e.g. to score the
            training recipes on the same folds.

    Returns:
        :data:`SCORE_COLUMNS`, one row per fold (MAPE in percent on the validation GPU's rows); empty when the
        experiment has fewer than two seen GPUs.
    """
    folds = losgo_folds(table)
    if not folds:
        return pd.DataFrame(columns=SCORE_COLUMNS)
    preds = predict_protocol(table.reset_index(drop=True), folds, [MLP], registry, train_cfg, meta, seed=seed,
                             log=log, models_out=models_out)
    s = summarize_predictions(preds)
    s = s[s["gpu"] == "ALL"]
    n_train = {f.name: int(f.train_mask.sum()) for f in folds}
    out = pd.DataFrame({"experiment": experiment, "feature_set": meta["feature_set"], "fold": s["fold"],
                        "validation_gpu": s["fold"].str.removeprefix("losgo:"),
                        "n_train": s["fold"].map(n_train), "n_rows": s["n_rows"], "mape_pct": s["mape_pct"],
                        "median_ape_pct": s["median_ape_pct"], "p90_ape_pct": s["p90_ape_pct"]})
    return out[SCORE_COLUMNS].reset_index(drop=True)


def choose(scores: pd.DataFrame, configured: str | None = None,
           min_gain: float = MIN_RELATIVE_GAIN) -> tuple[str, pd.DataFrame]:
    """The chosen candidate by geometric-mean validation MAPE over experiments, and the selection table.

    The candidate with the lowest geometric mean wins, except that ``configured`` (the primary feature set of the
    config) stays chosen while its geometric mean is within ``min_gain`` (relative) of the lowest: a smaller lead
    is retraining noise (:data:`MIN_RELATIVE_GAIN`, the rule of the recipe choice), so it never displaces the
    configured set. Only experiments scored for every candidate count (a fair mean). The table has one row per
    experiment (columns: the candidates' fold-mean MAPE, ``best``) and a last row ``geometric mean`` over experiments
    (``best`` there: the chosen candidate).

    Raises:
        ValueError: no experiment was scored for every candidate.
    """
    per = scores.groupby(["experiment", "feature_set"])["mape_pct"].mean().unstack("feature_set")
    per = per.dropna()
    if per.empty:
        raise ValueError("selection: no experiment has a score for every candidate feature set")
    mean = np.exp(np.log(per.clip(lower=1e-9)).mean(axis=0))
    chosen = str(mean.idxmin())
    if configured in mean.index and mean[configured] * (1.0 - min_gain) <= mean[chosen]:
        chosen = configured
    table = per.copy()
    table["best"] = per.idxmin(axis=1)
    table.loc["geometric mean"] = list(mean) + [chosen]
    return chosen, table.reset_index(names="experiment")


def choose_recipe(scores: pd.DataFrame, recipes: dict, min_gain: float = MIN_RELATIVE_GAIN) -> dict:
    """An experiment's training recipe from its leave-one-seen-GPU-out scores: the first listed recipe whose mean
    MAPE over folds is within ``min_gain`` (relative) of the lowest. A lead smaller than that is retraining noise
    (:data:`MIN_RELATIVE_GAIN`), so it never displaces an earlier (simpler)
    recipe: the configured default is listed first and stays unless another beats it clearly. ``scores`` has a
    ``recipe`` column (:func:`score_feature_set` per recipe). An experiment without folds (one seen GPU) keeps the
    first recipe listed.

    Returns:
        ``{"chosen", "overrides", "mape_pct": {recipe: mean MAPE}, "folds", "min_gain", "protocol"}``.
    """
    names = list(recipes)
    mean = scores.groupby("recipe")["mape_pct"].mean().reindex(names) if len(scores) else pd.Series(dtype=float)
    chosen = names[0]
    if not mean.dropna().empty:
        best = float(mean.min())
        chosen = next(n for n in names if pd.notna(mean.get(n)) and mean[n] * (1.0 - min_gain) <= best)
    return {"chosen": chosen, "overrides": dict(recipes[chosen]),
            "mape_pct": {k: (None if pd.isna(v) else round(float(v), 3)) for k, v in mean.items()},
            "folds": int(scores["fold"].nunique()) if len(scores) else 0, "min_gain": min_gain,
            "protocol": "leave one seen GPU out, inside the configured training rows, primary feature set"}
