"""Pipeline stage: features, split label and target for one experiment, every feature set at once."""

from __future__ import annotations

import logging
import time

import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import InputError, read_table, write_json, write_parquet
from synperf.data.schema import KEY_COLUMNS
from synperf.evaluation.split import experiment_split, problem_key
from synperf.model.features import build_feature_sets
from synperf.pipeline.common import as_predict_sees, select_rows

log = logging.getLogger(__name__)


def experiment_features(measurements: str, exp_name: str, exp: dict, registry_path: str, outputs: dict[str, tuple],
                        seed: int, *, measured_dir: str | None = None) -> None:
    """Features, split label and target for one experiment's rows, for every feature set in ``outputs``.

    The rows are the experiment's kernel (and ``sources``/``dtypes``/``source_gpus``, :func:`select_rows`) on its
    seen and unseen GPUs, in the order of the measurement table, with every split label of
    :func:`synperf.evaluation.split.experiment_split` (``train``, ``test_seen``, ``unseen`` and ``unused``: a
    training-file row of a held-out problem). Training uses ``train`` rows only, the tables score
    ``test_seen``/``unseen``, and the leave-one-out protocols use every row. The decomposition is computed once and
    shared by the feature sets built on it.

    Args:
        outputs: ``{feature_set: (table_path, meta_path)}``; the table is Parquet (key columns, ``latency_us``,
            ``source``, ``source_file``, the feature columns, ``theoretical_time_us``, ``split``, ``problem_key``),
            the meta JSON (``numeric``, ``linear``, ``categorical``, row and split counts).

    Raises:
        InputError: a configured GPU, source, dtype or ``source_gpus`` GPU of the experiment selects no row, or the
            experiment has no training row (names the config key, e.g. ``experiments.gemm.unseen``, and the value).
    """
    registry = load_registry(registry_path, measured_dir)
    all_rows = read_table(measurements)
    kernel_rows = all_rows[all_rows["kernel"] == exp["kernel"]]
    for source, gpus in (exp.get("source_gpus") or {}).items():
        of_source = kernel_rows.loc[kernel_rows["source"] == source, "gpu"].astype(str)
        for g in gpus:
            if not (of_source == str(g)).any():
                raise InputError(f"experiments.{exp_name}.source_gpus.{source}: {g} has no {exp['kernel']} row of "
                                 f"{source}; remove it or add its data")
    for key, column, among in (("sources", "source", kernel_rows),
                               ("dtypes", "dtype", select_rows(all_rows, {**exp, "dtypes": None}))):
        for value in exp.get(key) or []:
            if not (among[column] == value).any():
                raise InputError(f"experiments.{exp_name}.{key}: {value!r} selects no {exp['kernel']} row of the "
                                 "measurements; remove it or add its data")
    df = select_rows(all_rows, exp)
    for key in ("seen", "unseen"):
        have = set(df["gpu"].astype(str))
        for g in exp.get(key) or []:
            if str(g) not in have:
                restricted = f", source_gpus {exp['source_gpus']}" if exp.get("source_gpus") else ""
                raise InputError(f"experiments.{exp_name}.{key}: {g} has no {exp['kernel']} rows (sources "
                                 f"{exp.get('sources') or 'any'}, dtypes {exp.get('dtypes') or 'any'}{restricted}); "
                                 "remove it or add its measurements")
    gpus = [str(g) for g in list(exp["seen"]) + list(exp.get("unseen", []))]
    split = experiment_split(df, exp, seed)
    keep = df["gpu"].astype(str).isin(gpus).to_numpy()
    df, split = df[keep], split[keep]
    if not (split == "train").any():
        raise InputError(f"experiment {exp_name}: no training rows (kernel {exp['kernel']!r}, seen GPUs "
                         f"{exp['seen']}, sources {exp.get('sources')}); check the config")
    df = as_predict_sees(df)
    t0 = time.time()
    frames = build_feature_sets(df, registry, list(outputs))
    seconds = time.time() - t0
    log.info("%s: %d rows, feature sets %s in %.1f s", exp_name, len(df), list(outputs), seconds)
    keys = df[list(KEY_COLUMNS) + ["latency_us", "source", "source_file"]].reset_index(drop=True)
    pk = problem_key(df, seed).to_numpy()
    for fs, (out_table, out_meta) in outputs.items():
        ff = frames[fs]
        out = pd.concat([keys, ff.frame.drop(columns=[c for c in ff.frame.columns if c in KEY_COLUMNS])
                         .reset_index(drop=True)], axis=1)
        out["split"] = split.to_numpy()
        out["problem_key"] = pk
        write_parquet(out, out_table)
        write_json({"experiment": exp_name, "feature_set": fs, "numeric": ff.numeric, "linear": ff.linear,
                    "categorical": ff.categorical, "rows": len(out), "feature_seconds": round(seconds, 3),
                    "split_counts": split.value_counts().to_dict()}, out_meta)
