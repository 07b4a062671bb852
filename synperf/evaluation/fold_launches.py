"""Extra launches predicted in the protocol folds: the serving simulator's launches on the GPU a fold leaves out.

The protocols stage (:func:`synperf.pipeline.protocols.evaluate_protocols`) appends the launches of
:func:`synperf.serving.logo.record_launches` (canonical rows, no measurement) to the experiment's feature tables
(:func:`with_launches`) and labels each of them ``unseen`` in the leave-one-GPU-out fold of its GPU, ``unused`` in
every other fold (:func:`extend_fold`): the methods of such a fold predict them beside the fold's own
unseen rows, with the models and their options chosen without that GPU. :func:`launch_predictions`
keeps the ``synperf`` method's predictions (the fingerprint predictor, what :func:`synperf.api.predict` serves) of
the ``logo`` folds (:data:`synperf.serving.logo.PREDICTION_COLUMNS`);
:func:`table_predictions` gives the rows the stage's tables score (the measured ones only).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from synperf.data.schema import KEY_COLUMNS
from synperf.evaluation.split import problem_key
from synperf.model.features import build_features

#: ``source`` of an appended launch row
SOURCE = "serving_launch"
#: columns of :func:`launch_predictions` (as :data:`synperf.serving.logo.PREDICTION_COLUMNS`)
PREDICTION_COLUMNS = ["experiment", "fold", "training_gpus", *KEY_COLUMNS, "predicted_latency_us"]


def launch_rows(launches: pd.DataFrame, experiment: str, gpus) -> pd.DataFrame:
    """The launches of ``experiment`` (column ``experiment``) on ``gpus`` (the experiment's GPUs: a launch on
    another GPU has no fold that leaves its GPU out), canonical key columns only, index ``0..n-1``."""
    sel = (launches["experiment"].astype(str) == experiment) & launches["gpu"].astype(str).isin([str(g) for g in gpus])
    return launches.loc[sel, list(KEY_COLUMNS)].reset_index(drop=True)


def with_launches(table: pd.DataFrame, rows: pd.DataFrame, registry, feature_set: str, seed: int) -> pd.DataFrame:
    """``table`` (a feature table of ``feature_set``) with ``rows`` appended: their features built as
    :func:`synperf.api.predict` builds them (:func:`synperf.model.features.build_features`), ``latency_us`` NaN,
    ``source`` :data:`SOURCE`, ``split`` ``unused`` and their ``problem_key``; columns those of ``table``."""
    if rows.empty:
        return table
    ff = build_features(rows, registry, feature_set)
    features = ff.frame.drop(columns=[c for c in ff.frame.columns if c in rows.columns]).reset_index(drop=True)
    extra = pd.concat([rows.reset_index(drop=True), features], axis=1)
    extra = extra.assign(latency_us=np.nan, source=SOURCE, split="unused",
                         problem_key=problem_key(rows, seed).to_numpy())
    missing = [c for c in table.columns if c not in extra.columns and c not in ("source_file",)]
    if missing:
        raise ValueError(f"feature set {feature_set}: the launch rows lack column(s) {missing} of the feature table")
    extra = extra.reindex(columns=table.columns)
    return pd.concat([table, extra], ignore_index=True)


def extend_fold(fold, launch_gpus: np.ndarray):
    """``fold`` (:class:`synperf.evaluation.protocols.Fold`) with one label per appended launch: ``unseen`` where
    the launch's GPU (``launch_gpus``, in row order) is the unseen GPU of a ``logo`` fold, ``unused`` elsewhere
    (never ``train`` or ``test_seen``: a launch has no measurement)."""
    left_out = np.isin(np.asarray(launch_gpus, dtype=str), list(fold.unseen_gpus)) & (fold.protocol == "logo")
    return replace(fold, labels=np.concatenate([np.asarray(fold.labels, dtype=object).astype(str),
                                                np.where(left_out, "unseen", "unused")]))


def table_predictions(preds: pd.DataFrame, n_table: int) -> pd.DataFrame:
    """The rows of ``preds`` (:func:`synperf.evaluation.protocols.predict_protocol`) of the table's own
    ``n_table`` rows, without the appended launches."""
    return preds[preds["row"].to_numpy(dtype="int64") < n_table]


def launch_predictions(preds: pd.DataFrame, folds: dict, rows: pd.DataFrame, n_table: int, experiment: str,
                       method: str = "synperf") -> pd.DataFrame:
    """``method``'s predictions of the appended launches in the ``logo`` folds of ``preds``: one row per launch
    and fold, :data:`PREDICTION_COLUMNS` (``training_gpus`` the fold's seen GPUs, comma-separated). ``folds``
    maps a fold name to its :class:`synperf.evaluation.protocols.Fold`; ``rows`` are the appended launches (key
    columns, in the order appended)."""
    p = preds[(preds["method"] == method) & (preds["protocol"] == "logo")
              & (preds["row"].to_numpy(dtype="int64") >= n_table)]
    if p.empty:
        return pd.DataFrame(columns=PREDICTION_COLUMNS)
    out = rows.iloc[p["row"].to_numpy(dtype="int64") - n_table].reset_index(drop=True)
    fold = p["fold"].astype(str).to_numpy()
    out = out.assign(experiment=experiment, fold=fold,
                     training_gpus=[",".join(folds[f].seen_gpus) for f in fold],
                     predicted_latency_us=p["predicted_latency_us"].to_numpy(dtype="float64"))
    return out[PREDICTION_COLUMNS]
