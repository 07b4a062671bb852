"""Leave-one-GPU-out serving scores: every kernel of a row priced by a model whose training left the row's GPU out.

The evaluation models (:data:`.score.EVALUATION_PREDICT`) trained on the configured split's seen GPUs, so a row on
a seen GPU (H100, B200) is priced by models that measured that GPU. Here each such row is priced instead by the
``synperf`` method of the protocols stage's leave-one-GPU-out fold of that GPU (:mod:`synperf.evaluation.protocols`:
the fold trains on the experiment's other GPUs and chooses its options without the fold's GPU):

1. :func:`record_launches` runs the scheduler's record pass of :func:`.score.score_rows` over the priced rows of
   the given GPUs (no trained model needed) and returns every distinct launch as a canonical row
   (:data:`synperf.data.schema.KEY_COLUMNS`) with the ``experiment`` whose model prices it
   (:func:`synperf.api.route_experiment`, the routing of :func:`synperf.api.predict`);
2. the protocols stage predicts those launches in each ``logo:<gpu>`` fold
   (:mod:`synperf.evaluation.fold_launches`), one table per experiment (:data:`PREDICTION_COLUMNS`);
3. :class:`LogoPredictor` answers the scheduler's pricing calls from those tables, and :func:`score_logo` scores
   the rows with it, beside aiconfigurator's estimate on the same rows.

Rows of a GPU no experiment trained on (H200 in the configured split) are already leave-one-GPU-out for every
family: they keep their scores of ``serving_scores.csv`` and are labelled so (``left_out``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ._deps import (
    KEY_COLUMNS,
    InputError,
    Registry,
    canonical_values,
    launch_table,
    read_table,
    route_experiment,
    write_csv,
)
from .error import kernel_bounds_only, widen_scores
from .score import EVALUATION_PREDICT, KEYS, add_baseline, mape_table, mark_untrained, score_rows
from .silicon import read_silicon

#: columns of a launch table of :func:`record_launches`
LAUNCH_COLUMNS = ["experiment", *KEY_COLUMNS]
#: columns of a fold's launch predictions (:func:`synperf.evaluation.fold_launches.launch_predictions`):
#: ``fold`` (``logo:<gpu>``), ``training_gpus`` (the fold's training GPUs, comma-separated) and the prediction (µs)
PREDICTION_COLUMNS = ["experiment", "fold", "training_gpus", *KEY_COLUMNS, "predicted_latency_us"]
#: ``left_out`` of a row priced by the leave-one-GPU-out folds, and of a row whose GPU no family trained on
LOGO_FOLDS, CONFIGURED_UNSEEN = "leave-one-GPU-out folds", "configured split (GPU unseen by every family)"


def launch_keys(df: pd.DataFrame) -> pd.Series:
    """One string per row of ``df`` over :data:`KEY_COLUMNS` (values as :func:`synperf.model.twins.canonical_values`
    gives them, missing values empty), equal for the same launch whatever the columns' dtypes (Int64 or float after
    a Parquet round trip, numbers in an object column after a concatenation, category or str)."""
    parts = []
    for c in KEY_COLUMNS:
        s = df[c] if c in df.columns else pd.Series(pd.NA, index=df.index)
        parts.append(canonical_values(s).astype("string").fillna(""))
    key = parts[0]
    for p in parts[1:]:
        key = key + "|" + p
    return key.reset_index(drop=True)


def record_launches(rows: pd.DataFrame, examples_dir: str | os.PathLike, *, registry: Registry, collectives,
                    experiments: dict, gpus) -> pd.DataFrame:
    """The distinct launches the scheduler prices for the priced rows of ``rows`` (:func:`.silicon.read_silicon`)
    on ``gpus``: :data:`LAUNCH_COLUMNS`, one row per (experiment, launch), each launch canonical as
    :func:`synperf.api.launch_table` makes it. ``experiments`` is the config's block, which routes a launch to its
    experiment as :func:`synperf.api.predict` does.

    Raises:
        InputError: as :func:`.score.score_rows` (the row is named), or a launch no experiment serves.
    """
    recorded = []

    def record(family, params, gpu, *, experiment=None, registry=registry, **_):
        canon = launch_table(family, params, gpu, registry)
        exp = route_experiment(family, canon["dtype"], experiment, experiments)
        recorded.append(canon[list(KEY_COLUMNS)].assign(experiment=exp))
        return pd.DataFrame({"predicted_latency_us": np.ones(len(params))})

    rows = mark_untrained(rows, experiments)
    sel = rows[rows["gpu"].astype(str).isin([str(g) for g in gpus])]
    score_rows(sel, examples_dir, registry=registry, collectives=collectives, predict_fn=record, record_only=True)
    if not recorded:
        return pd.DataFrame(columns=LAUNCH_COLUMNS)
    out = pd.concat(recorded, ignore_index=True)[LAUNCH_COLUMNS]
    return out[~pd.concat([out["experiment"].astype(str), launch_keys(out)], axis=1).duplicated()].reset_index(
        drop=True)


def read_predictions(paths) -> pd.DataFrame:
    """The fold launch predictions of every file of ``paths`` (Parquet, :data:`PREDICTION_COLUMNS`), concatenated.

    Raises:
        InputError: a file lacks a column (named with the file).
    """
    parts = []
    for p in paths:
        t = read_table(p)
        missing = [c for c in PREDICTION_COLUMNS if c not in t.columns]
        if missing:
            raise InputError(f"{p}: missing columns {missing}; expected the protocols stage's serving launch "
                             "predictions")
        parts.append(t)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=PREDICTION_COLUMNS)


class LogoPredictor:
    """A ``predict_fn`` for :func:`.score.score_rows` that answers from the folds' launch predictions.

    A call ``(family, params, gpu, experiment=)`` is routed to its experiment as :func:`synperf.api.predict` routes
    it; when ``predictions`` hold that (experiment, GPU), every launch is looked up there (columns
    ``predicted_latency_us``, ``predicted_latency_low_us``/``predicted_latency_high_us`` (NaN: the folds give no
    interval), ``prediction_path``; ``attrs["training_gpus"]`` the fold's training GPUs). Otherwise the GPU must
    not be a training GPU of the experiment's configured model (``seen`` of its config entry), which then answers
    through ``fallback`` (default the evaluation models).

    Raises (from :meth:`__call__`):
        InputError: a launch absent from the fold's predictions, or an (experiment, GPU) without fold predictions
            whose configured model trained on the GPU; the message names the family, the experiment and the GPU.
    """

    def __init__(self, predictions: pd.DataFrame, experiments: dict, fallback: Callable = EVALUATION_PREDICT):
        self.experiments, self.fallback = experiments, fallback
        self._tables = {}
        for (exp, gpu), t in predictions.groupby([predictions["experiment"].astype(str),
                                                  predictions["gpu"].astype(str)], sort=False):
            t = t.reset_index(drop=True)
            keys = launch_keys(t)
            if keys.duplicated().any():
                raise InputError(f"serving launch predictions of {exp} on {gpu}: {int(keys.duplicated().sum())} "
                                 "launch(es) predicted twice")
            self._tables[(exp, gpu)] = (pd.Series(np.arange(len(t)), index=keys.to_numpy()), t)

    def __call__(self, family: str, params: pd.DataFrame, gpu: str, *, experiment: str | None = None,
                 registry: Registry | None = None, **kw) -> pd.DataFrame:
        canon = launch_table(family, params, gpu, registry)
        gpu_id = str(canon["gpu"].iloc[0]) if len(canon) else str(gpu)
        exp = route_experiment(family, canon["dtype"], experiment, self.experiments)
        if (exp, gpu_id) not in self._tables:
            if gpu_id in {str(g) for g in (self.experiments.get(exp) or {}).get("seen", [])}:
                raise InputError(f"{family} on {gpu_id}: no leave-one-GPU-out predictions of experiment {exp}, "
                                 f"whose configured model trained on {gpu_id}")
            return self.fallback(family, params, gpu, experiment=experiment, registry=registry, **kw)
        index, table = self._tables[(exp, gpu_id)]
        pos = index.reindex(launch_keys(canon).to_numpy())
        if pos.isna().any():
            raise InputError(f"{family} on {gpu_id}: {int(pos.isna().sum())} launch(es) absent from the "
                             f"leave-one-GPU-out predictions of experiment {exp}; rerun the serving_launches rule "
                             "and the protocols stage")
        hit = table.iloc[pos.to_numpy(dtype="int64")].reset_index(drop=True)
        out = pd.DataFrame({"predicted_latency_us": hit["predicted_latency_us"].to_numpy(dtype="float64")})
        for side in ("predicted_latency_low_us", "predicted_latency_high_us"):
            out[side] = hit[side].to_numpy(dtype="float64") if side in hit.columns else np.nan
        out["prediction_path"] = [f"synperf {f} of {exp}" for f in hit["fold"].astype(str)]
        out.attrs.update(training_gpus=sorted(str(hit["training_gpus"].iloc[0]).split(",")) if len(hit) else [],
                         model_dir=f"{exp} {hit['fold'].iloc[0] if len(hit) else ''} (protocols stage)",
                         model_set="leave-one-GPU-out")
        return out


def score_logo(silicon_csv: str | os.PathLike, examples_dir: str | os.PathLike, scores_csv: str | os.PathLike,
               predictions: pd.DataFrame, out_dir: str | os.PathLike, *, registry: Registry, collectives,
               experiments: dict, models_dir: str | os.PathLike | None = None,
               baseline_csv: str | os.PathLike | None = None,
               fallback: Callable = EVALUATION_PREDICT) -> dict[str, pd.DataFrame]:
    """Leave-one-GPU-out scores of every priced row, written to ``out_dir`` as ``serving_logo_scores.csv`` (the
    columns of ``serving_scores.csv`` and ``left_out``: :data:`LOGO_FOLDS` or :data:`CONFIGURED_UNSEEN`) and
    ``serving_logo_mape.csv`` (:func:`.score.mape_table` of those rows, aiconfigurator's MAPE on the same rows).
    Rows whose kernels no experiment of ``experiments`` prices are left out, as in ``serving_scores.csv``
    (:func:`.score.mark_untrained`).

    Rows on a GPU of ``predictions`` are priced by :class:`LogoPredictor` (``fallback`` for families none of whose
    folds tested the GPU and whose configured model never trained on it); every other row is taken from
    ``scores_csv`` (the seen-GPU scores), where no ``seen_<family>`` flag may be True.

    Raises:
        InputError: a row taken from ``scores_csv`` whose GPU a family trained on (named), or as
            :class:`LogoPredictor` and :func:`.score.score_rows`.
    """
    rows = mark_untrained(read_silicon(silicon_csv), experiments)
    rows = rows[rows["reason"] == ""]
    logo_gpus = sorted(set(predictions["gpu"].astype(str)))
    fresh = score_rows(rows[rows["gpu"].astype(str).isin(logo_gpus)], examples_dir, registry=registry,
                       collectives=collectives, models_dir=models_dir,
                       predict_fn=LogoPredictor(predictions, experiments, fallback))
    seen_scores = pd.read_csv(scores_csv)
    kept = seen_scores[~seen_scores["gpu"].astype(str).isin(logo_gpus)]
    flags = kept[[c for c in kept.columns if c.startswith("seen_")]]
    bad = flags.isin([True, "True"]).any(axis=1)   # empty: the row has no kernel of that family
    if bad.any():
        r = kept[bad].iloc[0]
        raise InputError(f"{scores_csv}: row {r['model']} on {r['gpu']} (tp {r['tp']}) was priced by a model that "
                         f"trained on {r['gpu']}, and no leave-one-GPU-out fold tested that GPU")
    scores = pd.concat([fresh.assign(left_out=LOGO_FOLDS), kernel_bounds_only(kept).assign(left_out=CONFIGURED_UNSEEN)],
                       ignore_index=True)
    scores = add_baseline(scores.drop(columns=["aic_ttft_ms", "aic_tpot_ms"], errors="ignore"), baseline_csv)
    scores = widen_scores(scores.sort_values(KEYS, kind="stable").reset_index(drop=True))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = {"serving_logo_scores": scores, "serving_logo_mape": mape_table(scores)}
    for name, t in tables.items():
        write_csv(t, out / f"{name}.csv")
    return tables
