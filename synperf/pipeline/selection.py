"""Pipeline stage: the primary feature set chosen on the seen GPUs (leave one seen GPU out)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import read_table, write_json
from synperf.model.estimator import TrainConfig


def score_selection(features: str, features_meta: str, exp_name: str, registry_path: str, seed: int,
                    training: dict, threads: int, out_table: str, *, measured_dir: str | None = None) -> None:
    """Leave-one-seen-GPU-out score of one experiment's feature set (:func:`synperf.evaluation.selection.score_feature_set`)
    on its configured training rows; one row per fold (empty table for a single seen GPU)."""
    from synperf.data.io import write_csv
    from synperf.evaluation.selection import score_feature_set

    meta = json.loads(Path(features_meta).read_text())
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    registry = load_registry(registry_path, measured_dir)
    scores = score_feature_set(read_table(features), meta, exp_name, registry, cfg, seed,
                               log=lambda line: print(line, flush=True))
    write_csv(scores, out_table)


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
