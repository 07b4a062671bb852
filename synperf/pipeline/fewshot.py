"""Pipeline stage: the rows the few-shot calibration simulation calibrates (:mod:`synperf.evaluation.fewshot`).

:func:`fewshot_rows`, per experiment, writes every unseen-GPU row predicted by the experiment's chosen path exactly
as :func:`synperf.api.predict` predicts it (``models/<exp>/path.json`` with the primary MLP; ``role`` ``unseen``),
and every seen GPU's training rows predicted by that path refitted on the other seen GPUs' training rows (leave one
seen GPU out, ``role`` ``seen_losgo``), the only rows the calibration choice reads.
:func:`synperf.pipeline.fewshot_summary.fewshot_summary` chooses the calibration per k on the ``seen_losgo`` rows of
every experiment, then scores it on the ``unseen`` rows.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from synperf.data.io import read_table, write_parquet

#: columns of :func:`fewshot_rows`'s output
ROWS_COLUMNS = ["experiment", "kernel", "gpu", "role", "latency_us", "predicted_latency_us", "theoretical_time_us",
                "prediction_path"]


def _frame(rows: pd.DataFrame, pred: pd.DataFrame, exp_name: str, role: str) -> pd.DataFrame:
    return pd.DataFrame({"experiment": exp_name, "kernel": rows["kernel"].astype(str).to_numpy(),
                         "gpu": rows["gpu"].astype(str).to_numpy(), "role": role,
                         "latency_us": rows["latency_us"].to_numpy(dtype="float64"),
                         "predicted_latency_us": pred["predicted_latency_us"].to_numpy(dtype="float64"),
                         "theoretical_time_us": rows["theoretical_time_us"].to_numpy(dtype="float64"),
                         "prediction_path": pred["prediction_path"].astype(str).to_numpy()})


def fewshot_rows(features: str, features_meta: str, model_dir: str, exp_name: str, registry_path: str,
                 training: dict, seed: int, threads: int, out: str, measured_dir: str | None = None,
                 recipe: str | None = None) -> None:
    """Predicted and measured latency (microseconds) of one experiment's unseen rows and leave-one-seen-GPU-out rows.

    Args:
        features, features_meta: the experiment's primary feature table (with ``split``) and its sidecar.
        model_dir: the experiment's model folder (``models/<exp>``, holding ``path.json``).
        training: MLP budget of the leave-one-seen-GPU-out fits (as the path choice's folds); ``recipe`` the
            experiment's recipe choice JSON whose overrides apply on top.
        out: Parquet with :data:`ROWS_COLUMNS`.

    Raises:
        InputError: the model folder has no ``path.json``.
    """
    from synperf.data.hardware import load_registry
    from synperf.data.io import InputError
    from synperf.evaluation.path_selection import fit_paths, load_choice, predict_path, predict_with_choice
    from synperf.model.estimator import TrainConfig, TrainedModel
    from synperf.pipeline.train import recipe_overrides

    log = logging.getLogger(__name__)
    choice = load_choice(model_dir)
    if choice is None:
        raise InputError(f"{model_dir}: no path.json (run the train rule first)")
    path = choice["path"]
    meta = json.loads(Path(features_meta).read_text())
    table = read_table(features)
    registry = load_registry(registry_path, measured_dir)
    split = table["split"].astype(str).to_numpy()
    parts = []

    unseen = table[split == "unseen"].reset_index(drop=True)
    if len(unseen):
        mlp = TrainedModel.load(str(Path(model_dir) / choice["mlp_dir"])) if choice.get("mlp_dir") else None
        pred = predict_with_choice(choice, model_dir, unseen, registry, mlp)
        parts.append(_frame(unseen, pred, exp_name, "unseen"))
        log.info("%s: %d unseen rows predicted with path %s", exp_name, len(unseen), path)

    train = table[split == "train"].reset_index(drop=True)
    gpus = sorted(train["gpu"].astype(str).unique())
    overrides = recipe_overrides(recipe)
    overrides.pop("recipe", None)
    cfg = TrainConfig.from_dict({**training, **overrides, "seed": seed, "threads": threads})
    for gpu in gpus if len(gpus) > 1 else []:
        held = train["gpu"].astype(str).to_numpy() == gpu
        try:
            fitted = fit_paths(train[~held], meta, registry, cfg, paths=[path])
        except ValueError as e:  # too few rows on the other GPUs for an MLP validation split
            log.info("%s: leave out %s skipped (%s)", exp_name, gpu, e)
            continue
        va = train[held].reset_index(drop=True)
        parts.append(_frame(va, predict_path(fitted, path, va, registry), exp_name, "seen_losgo"))
        log.info("%s: leave out %s: %d rows predicted with path %s", exp_name, gpu, len(va), path)
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ROWS_COLUMNS)
    write_parquet(rows[ROWS_COLUMNS], out)
