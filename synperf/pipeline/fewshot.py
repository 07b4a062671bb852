"""Pipeline stage: the rows the few-shot calibration simulation calibrates (:mod:`synperf.evaluation.fewshot`).

Nothing is trained or predicted here: both kinds of rows already exist.

* ``seen_losgo`` rows (the only rows the calibration choice reads): every seen GPU's training rows predicted by the
  experiment's chosen path fitted on the other seen GPUs, i.e. the selection stage's leave-one-seen-GPU-out path
  predictions (``results/selection/<exp>/path_rows.parquet``,
  :func:`synperf.evaluation.path_selection.score_paths`) of the path recorded in ``models/<exp>/path.json``, its
  fallback on the rows no sibling measured.
* ``unseen`` rows: the configured split's unseen-GPU rows predicted by that path as :func:`synperf.api.predict`
  predicts them, i.e. the protocol stage's per-row ``synperf`` predictions (``results/protocols/<exp>_rows.parquet``).

:func:`synperf.pipeline.fewshot_summary.fewshot_summary` then chooses the calibration per k on the ``seen_losgo``
rows of every experiment and scores it on the ``unseen`` rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: columns of :func:`fewshot_rows`'s output
ROWS_COLUMNS = ["experiment", "kernel", "gpu", "role", "latency_us", "predicted_latency_us", "theoretical_time_us",
                "prediction_path"]


def fewshot_rows(path_rows: pd.DataFrame, protocol_rows: pd.DataFrame, choice: dict, experiment: str) -> pd.DataFrame:
    """The ``seen_losgo`` and ``unseen`` rows of one experiment (:data:`ROWS_COLUMNS`, latencies in microseconds).

    Args:
        path_rows: the selection stage's per-row path predictions
            (:data:`synperf.evaluation.path_selection.PATH_ROW_COLUMNS`).
        protocol_rows: the protocol stage's per-row configured ``synperf`` predictions
            (:data:`synperf.pipeline.protocols.ROW_COLUMNS`).
        choice: the experiment's recorded path (:func:`synperf.evaluation.path_selection.load_choice`).

    Raises:
        ValueError: ``path_rows`` lack the chosen path (or its fallback) while holding other paths.
    """
    path = choice["path"]
    fallback = choice.get("fallback") or choice.get("base") or path
    parts = []
    if len(path_rows):
        mine = path_rows[path_rows["path"] == path].reset_index(drop=True).astype({"prediction_path": str})
        if mine.empty:
            raise ValueError(f"{experiment}: the path rows hold no prediction of the chosen path {path!r}")
        uncovered = mine["prediction_path"].astype(str).to_numpy() != path
        if uncovered.any() and fallback != path:
            fb = path_rows[path_rows["path"] == fallback].set_index(["fold", "row"])["predicted_latency_us"]
            keys = pd.MultiIndex.from_frame(mine.loc[uncovered, ["fold", "row"]])
            if not keys.isin(fb.index).all():
                raise ValueError(f"{experiment}: the path rows hold no prediction of the fallback {fallback!r}")
            mine.loc[uncovered, "predicted_latency_us"] = fb.reindex(keys).to_numpy()
            mine.loc[uncovered, "prediction_path"] = fallback
        parts.append(mine.assign(role="seen_losgo")[ROWS_COLUMNS])
    unseen = protocol_rows[protocol_rows["split"].astype(str) == "unseen"]
    if len(unseen):
        parts.append(unseen.assign(role="unseen", prediction_path=path)[ROWS_COLUMNS])
    if not parts:
        return pd.DataFrame(columns=ROWS_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["experiment"] = experiment
    return out.astype({"latency_us": "float64", "predicted_latency_us": "float64",
                       "theoretical_time_us": "float64"}).replace([np.inf, -np.inf], np.nan)
