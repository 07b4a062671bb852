"""Pipeline stage: features, split label and target for one experiment."""

from __future__ import annotations

import time

import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import InputError, read_table, write_json, write_parquet
from synperf.data.schema import KEY_COLUMNS
from synperf.evaluation.split import experiment_split, problem_key
from synperf.model.features import build_features
from synperf.pipeline.common import as_predict_sees, select_rows


def experiment_features(measurements: str, exp_name: str, exp: dict, registry_path: str, feature_set: str,
                        seed: int, out_table: str, out_meta: str, *, measured_dir: str | None = None) -> None:
    """Features, split label and target for one experiment's rows (seen and unseen GPUs only)."""
    registry = load_registry(registry_path, measured_dir)
    df = select_rows(read_table(measurements), exp)
    split = experiment_split(df, exp, seed)
    df = df[split != "unused"]
    split = split[split != "unused"]
    df = as_predict_sees(df)
    if not (split == "train").any():
        raise InputError(f"experiment {exp_name}: no training rows (kernel {exp['kernel']!r}, seen GPUs "
                         f"{exp['seen']}, sources {exp.get('sources')}); check the config")
    t0 = time.time()
    ff = build_features(df, registry, feature_set)
    seconds = time.time() - t0
    out = pd.concat([df[list(KEY_COLUMNS) + ["latency_us", "source", "source_file"]].reset_index(drop=True),
                     ff.frame.drop(columns=[c for c in ff.frame.columns if c in KEY_COLUMNS]).reset_index(drop=True)],
                    axis=1)
    out["split"] = split.to_numpy()
    out["problem_key"] = problem_key(df, seed).to_numpy()
    write_parquet(out, out_table)
    write_json({"experiment": exp_name, "feature_set": feature_set, "numeric": ff.numeric, "linear": ff.linear,
                "categorical": ff.categorical, "rows": len(out), "feature_seconds": round(seconds, 3),
                "split_counts": split.value_counts().to_dict()}, out_meta)
