"""Pipeline stage: few-shot calibration simulated on the public data (:mod:`synperf.evaluation.fewshot`).

Two steps. :func:`fewshot_rows`, per experiment, writes the rows the simulation calibrates: every unseen-GPU row
predicted by the experiment's chosen path exactly as :func:`synperf.api.predict` predicts it (``models/<exp>/path.json``
with the primary MLP; ``role`` ``unseen``), and every seen GPU's training rows predicted by that path refitted on
the other seen GPUs' training rows (leave one seen GPU out, ``role`` ``seen_losgo``), the only rows the calibration
choice reads. :func:`fewshot_summary` chooses the calibration per k on the ``seen_losgo`` rows of every experiment,
then scores it on the ``unseen`` rows.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from synperf.data.io import read_table, write_csv, write_parquet

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


def fewshot_summary(row_files: list[str], out_table: str, out_choice: str, out_figure: str,
                    ks=None, seeds=None, figure_experiments: list[str] | None = None) -> None:
    """Choose the calibration per k on the ``seen_losgo`` rows of every experiment, score it on the ``unseen`` rows.

    Args:
        row_files: :func:`fewshot_rows` outputs.
        out_table: CSV, one row per (experiment, unseen GPU, k) (:func:`synperf.evaluation.fewshot.evaluate_unseen`
            plus ``kernel``).
        out_choice: CSV, the choice table (:func:`synperf.evaluation.fewshot.choose_calibrations`).
        out_figure: PNG, MAPE against k per experiment (``figure_experiments``, default all).
    """
    from synperf.evaluation.fewshot import KS, SEEDS, choose_calibrations, evaluate_unseen
    from synperf.reporting.fewshot_report import fewshot_figure

    ks = tuple(ks or KS)
    seeds = tuple(seeds or SEEDS)
    rows = pd.concat([pd.read_parquet(p) for p in row_files], ignore_index=True)
    role = rows["role"].astype(str).to_numpy()
    chosen, choice_table = choose_calibrations(rows[role == "seen_losgo"], ks, seeds)
    table = evaluate_unseen(rows[role == "unseen"], chosen, ks, seeds)
    kernels = rows.drop_duplicates("experiment").set_index("experiment")["kernel"]
    table.insert(1, "kernel", table["experiment"].map(kernels))
    write_csv(choice_table, out_choice)
    write_csv(table, out_table)
    fewshot_figure(table, out_figure, figure_experiments)
    logging.getLogger(__name__).info("calibration per k: %s; mean unseen MAPE per k: %s", chosen,
                                     table.groupby("k")["mape_pct"].mean().round(2).to_dict())


def mean_unseen_mape(table: pd.DataFrame, k: int, experiments: list[str]) -> float:
    """Mean over ``experiments`` of each one's mean MAPE (percent) over its unseen GPUs at ``k``; NaN when none."""
    t = table[(table["k"] == k) & table["experiment"].isin(experiments)]
    return float(t.groupby("experiment")["mape_pct"].mean().mean()) if len(t) else float(np.nan)
