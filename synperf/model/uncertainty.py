"""How sure a prediction is: an empirical interval per prediction path, from leave-one-seen-GPU-out errors.

The selection stage predicts every training row of each seen GPU with models fitted on the other seen GPUs
(:func:`synperf.evaluation.path_selection.score_paths`, per-row output ``path_rows.parquet``). For the path an
experiment chose, the ratio ``measured / predicted`` of those rows, grouped by the label each row was predicted
with (``prediction_path``: the path itself, or its zero-shot fallback where no sibling measured the launch), gives
the interval: ``[predicted * q_low, predicted * q_high]`` with ``q_low``/``q_high`` the ratio's
:data:`INTERVAL_QUANTILES`. It says how far a prediction on a GPU the models never saw tends to be off, measured on
GPUs the models never saw, without reading a held-out problem or an unseen GPU.

Rows on the GPUs the models were trained on take the seen path
(:func:`synperf.evaluation.path_selection.choose_seen_path`); their interval comes the same way from the rows that
chose it, the problems the MLP held out of its fit (``seen_intervals``).

:func:`cross_fold_coverage` checks the claim on the same rows: the interval fitted on all but one validation GPU
covers what share of the remaining GPU's rows (nominal: ``INTERVAL_QUANTILES[1] - INTERVAL_QUANTILES[0]``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

#: quantiles of ``measured / predicted`` that bound the interval (an 80% central interval)
INTERVAL_QUANTILES = (0.1, 0.9)
#: a label with fewer validation rows takes the quantiles of all the chosen path's rows
MIN_ROWS = 30
#: file of a model folder holding the intervals (JSON)
INTERVALS_FILE = "intervals.json"


def _quantiles(ratio: np.ndarray, gpu: np.ndarray) -> dict:
    """The widest of the per-GPU quantile ranges: a GPU's errors share a bias (its specs, its memory type), so
    pooling the rows of several GPUs would give an interval none of them is covered by."""
    q = np.array([np.quantile(ratio[gpu == g], INTERVAL_QUANTILES) for g in np.unique(gpu)])
    return {"low_ratio": float(q[:, 0].min()), "high_ratio": float(q[:, 1].max()), "n_rows": int(len(ratio))}


def _path_ratios(path_rows: pd.DataFrame, path: str, fallback: str | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``measured / predicted``, the label :func:`synperf.api.predict` would give and the GPU of each validation
    row.

    The rows of ``path`` keep their ``prediction_path`` label; with ``fallback``, a row ``path`` predicted with
    another model (no sibling measured it) takes ``fallback``'s prediction of the same fold and row instead.
    """
    rows = path_rows[path_rows["path"].astype(str).to_numpy() == path]
    if fallback is not None and len(rows):
        own = rows["prediction_path"].astype(str).to_numpy() == path
        keys = rows.loc[~own, ["fold", "row"]]
        fb = path_rows[path_rows["path"].astype(str).to_numpy() == fallback]
        fb = keys.merge(fb, on=["fold", "row"], how="inner").assign(prediction_path=fallback)
        if len(fb) != len(keys):
            raise ValueError(f"intervals of path {path!r}: {len(keys) - len(fb)} rows lack a {fallback!r} prediction")
        rows = pd.concat([rows[own], fb[rows.columns]], ignore_index=True)
    y = rows["latency_us"].to_numpy(dtype="float64")
    p = rows["predicted_latency_us"].to_numpy(dtype="float64")
    if not (np.isfinite(y) & (y > 0) & np.isfinite(p) & (p > 0)).all():
        raise ValueError(f"intervals of path {path!r}: latency_us and predicted_latency_us must be finite and > 0")
    return y / p, rows["prediction_path"].astype(str).to_numpy(), rows["gpu"].astype(str).to_numpy()


def fit_intervals(path_rows: pd.DataFrame, path: str, fallback: str | None = None) -> dict:
    """Interval ratios per prediction label of ``path`` from its leave-one-seen-GPU-out rows.

    Args:
        path_rows: :data:`synperf.evaluation.path_selection.PATH_ROW_COLUMNS` rows (``latency_us`` and
            ``predicted_latency_us`` in microseconds, > 0); rows of ``path`` (and of ``fallback``) are read.
        path: the experiment's chosen path.
        fallback: the zero-shot path that predicts the rows of a transfer ``path`` no sibling measured (as
            recorded in ``path.json``); None: every row keeps its own label.

    Returns:
        ``{label: {"low_ratio", "high_ratio", "n_rows"}}`` (``measured / predicted`` quantiles
        :data:`INTERVAL_QUANTILES`) for each label, plus ``"*"`` over all rows; a label with fewer than
        :data:`MIN_ROWS` rows gets the ``"*"`` ratios (its own ``n_rows`` kept). Empty when no row has ``path``
        (an experiment with one seen GPU).

    Raises:
        ValueError: a latency or prediction that is not finite and > 0, or a row without its fallback prediction.
    """
    ratio, labels, gpu = _path_ratios(path_rows, path, fallback)
    if len(ratio) == 0:
        return {}
    out = {"*": _quantiles(ratio, gpu)}
    for label in sorted(np.unique(labels)):
        m = labels == label
        out[label] = _quantiles(ratio[m], gpu[m]) if m.sum() >= MIN_ROWS else {**out["*"], "n_rows": int(m.sum())}
    return out


def interval_bounds(predicted_us: np.ndarray, labels: np.ndarray, intervals: dict) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bound per row, microseconds, shape ``(n,)`` each.

    ``predicted_us`` times the ``low_ratio``/``high_ratio`` of the row's label in ``intervals`` (``"*"`` for a
    label it lacks); NaN where ``intervals`` is empty.
    """
    pred = np.asarray(predicted_us, dtype="float64")
    lo, hi = np.full(len(pred), np.nan), np.full(len(pred), np.nan)
    if not intervals:
        return lo, hi
    labels = np.asarray(labels).astype(str)
    for label in np.unique(labels):
        q = intervals.get(label, intervals["*"])
        m = labels == label
        lo[m], hi[m] = pred[m] * q["low_ratio"], pred[m] * q["high_ratio"]
    return lo, hi


def cross_fold_coverage(path_rows: pd.DataFrame, path: str, fallback: str | None = None) -> pd.DataFrame:
    """Share of each validation GPU's rows inside the interval fitted on the other validation GPUs' rows.

    Returns:
        One row per validation GPU (``gpu``, ``n_rows``, ``coverage``, ``nominal``); empty with fewer than two
        validation GPUs.
    """
    # only the rows of the path and its fallback are read: select them once, not once per GPU
    path_rows = path_rows[np.isin(path_rows["path"].astype(str).to_numpy(), [path, fallback or path])]
    gpus = sorted(path_rows.loc[path_rows["path"].astype(str).to_numpy() == path, "gpu"].astype(str).unique())
    gpu = path_rows["gpu"].astype(str).to_numpy()
    out = []
    for g in gpus if len(gpus) > 1 else []:
        held = gpu == g
        iv = fit_intervals(path_rows[~held], path, fallback)
        ratio, labels, _ = _path_ratios(path_rows[held], path, fallback)
        lo, hi = interval_bounds(np.ones(len(ratio)), labels, iv)
        out.append({"gpu": g, "n_rows": int(len(ratio)), "coverage": float(np.mean((ratio >= lo) & (ratio <= hi))),
                    "nominal": INTERVAL_QUANTILES[1] - INTERVAL_QUANTILES[0]})
    return pd.DataFrame(out, columns=["gpu", "n_rows", "coverage", "nominal"])


def save_intervals(directory, path: str, path_rows: pd.DataFrame, fallback: str | None = None,
                   seen_path: str | None = None, seen_rows: pd.DataFrame | None = None) -> dict:
    """Write :data:`INTERVALS_FILE` in ``directory`` (an experiment's model folder) and return its record.

    The record: ``path``, ``fallback``, ``quantiles``, ``intervals`` (:func:`fit_intervals` of ``path`` on the
    leave-one-seen-GPU-out ``path_rows``), ``cross_fold_coverage`` (:func:`cross_fold_coverage`, records), and for
    the rows on the training GPUs ``seen_path`` with ``seen_intervals``: :func:`fit_intervals` of ``seen_path`` on
    ``seen_rows`` (the held-out training problems that chose it,
    :func:`synperf.evaluation.path_selection.score_seen_paths`'s ``rows_out``); empty without them.
    """
    from synperf.data.io import write_text

    seen = (fit_intervals(seen_rows, seen_path) if seen_path is not None and seen_rows is not None
            and len(seen_rows) else {})
    rec = {"path": path, "fallback": fallback, "quantiles": list(INTERVAL_QUANTILES),
           "intervals": fit_intervals(path_rows, path, fallback),
           "cross_fold_coverage": cross_fold_coverage(path_rows, path, fallback).to_dict(orient="records"),
           "seen_path": seen_path, "seen_intervals": seen}
    write_text(json.dumps(rec, indent=1), Path(directory) / INTERVALS_FILE)
    return rec


def load_intervals(directory) -> dict | None:
    """The record :func:`save_intervals` wrote in ``directory`` (None when it has none).

    Raises:
        InputError: the file is not valid JSON or has no ``intervals`` (:func:`synperf.data.io.read_artefact`).
    """
    from synperf.data.io import read_artefact

    f = Path(directory) / INTERVALS_FILE
    return read_artefact(f, keys=("intervals",)) if f.exists() else None
