"""Pipeline stage: the primary feature set chosen on the seen GPUs (leave one seen GPU out)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import read_table, write_json
from synperf.model.estimator import TrainConfig


def score_selection(candidates: list[tuple[str, str, str]], exp_name: str, registry_path: str, seed: int,
                    training: dict, threads: int, *, measured_dir: str | None = None) -> None:
    """Leave-one-seen-GPU-out score of each candidate feature set of one experiment
    (:func:`synperf.evaluation.selection.score_feature_set`) on its configured training rows; one row per fold
    (an empty table for a single seen GPU).

    Args:
        candidates: ``(feature table, its meta JSON, output CSV)`` per candidate feature set.
    """
    import logging

    from synperf.data.io import write_csv
    from synperf.evaluation.selection import score_feature_set

    log = logging.getLogger(__name__)
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    registry = load_registry(registry_path, measured_dir)
    for features, features_meta, out_table in candidates:
        meta = json.loads(Path(features_meta).read_text())
        write_csv(score_feature_set(read_table(features), meta, exp_name, registry, cfg, seed, log=log.info),
                  out_table)


def choose_feature_set(score_tables: list[str], configured: str, training: dict, out_table: str,
                       out_choice: str) -> None:
    """Pick the primary feature set from the leave-one-seen-GPU-out scores (:func:`synperf.evaluation.selection.choose`);
    write the selection table (CSV) and the choice (JSON: chosen, configured, agrees, experiments, budget)."""
    from synperf.data.io import write_csv
    from synperf.evaluation.selection import choose

    scores = pd.concat([pd.read_csv(p) for p in score_tables], ignore_index=True)
    chosen, table = choose(scores)
    write_csv(table, out_table)
    write_json({"chosen": chosen, "configured": configured, "agrees": chosen == configured,
                "experiments": sorted(table["experiment"].iloc[:-1]),
                "candidates": sorted(scores["feature_set"].unique()), "folds": int(len(scores)),
                "budget": {k: training[k] for k in ("max_epochs", "max_train_rows") if k in training},
                "protocol": "leave one seen GPU out, inside the configured training rows"}, out_choice)
