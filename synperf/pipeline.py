"""The pipeline's steps as plain functions; Snakemake rule scripts only call these.

Each step reads its inputs, validates them, and writes its outputs atomically.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from .estimator import TrainConfig, TrainedModel, data_hash, train
from .features import FeatureFrame, build_features
from .hardware import load_registry
from .ingest import ADAPTERS
from .io import InputError, read_table, write_json, write_parquet
from .metrics import ape, summarize
from .schema import KEY_COLUMNS, LAUNCH_COLUMNS, conform, reduce_duplicates, validate
from .split import experiment_split, problem_key


def ingest_source(source: str, data_dir: str, registry_path: str, source_cfg: dict | None,
                  out_table: str, out_summary: str) -> None:
    """Run one ingest adapter; write its canonical table and a summary (rows, dropped by reason)."""
    registry = load_registry(registry_path)
    t0 = time.time()
    res = ADAPTERS[source](Path(data_dir), registry, source_cfg or {})
    write_parquet(res.table, out_table)
    write_json({"source": source, "rows": len(res.table), "dropped": dict(res.dropped), "files": res.files,
                "seconds": round(time.time() - t0, 2)}, out_summary)


def merge_measurements(tables: list[str], summaries: list[str], own_measurements: list[str], registry_path: str,
                       out_table: str, out_summary: str) -> None:
    """Concatenate source tables and our own measurements, reduce duplicate keys to their median.

    Raises:
        InputError: a table (e.g. a profiled Parquet under data/measurements) is unreadable or not canonical.
    """
    registry = load_registry(registry_path)
    frames = []
    for path in list(tables) + list(own_measurements):
        df = read_table(path)
        if path in own_measurements:
            df = conform(df)
        frames.append(validate(df, str(path), registry.ids))
    df = pd.concat(frames, ignore_index=True)
    rows_in = len(df)
    df, removed = reduce_duplicates(df)
    dropped: Counter = Counter()
    for s in summaries:
        dropped.update(json.loads(Path(s).read_text())["dropped"])
    counts = df.groupby(["source", "kernel", "gpu"]).size().reset_index(name="rows")
    write_parquet(df, out_table)
    write_json({
        "rows_in": rows_in, "rows_out": len(df), "duplicate_rows_merged": removed,
        "duplicate_keys": int((df["n_duplicates"] > 1).sum()),
        "dropped": dict(dropped), "own_measurement_files": list(own_measurements),
        "row_counts": counts.to_dict(orient="records"),
    }, out_summary)


def select_rows(df: pd.DataFrame, exp: dict) -> pd.DataFrame:
    """Rows of one experiment: its kernel, optionally restricted to sources and dtypes."""
    sel = df["kernel"] == exp["kernel"]
    if exp.get("sources"):
        sel &= df["source"].isin(exp["sources"]) | (df["source"] == "synperf_profiler")
    if exp.get("dtypes"):
        sel &= df["dtype"].isin(exp["dtypes"])
    return df[sel]


def as_predict_sees(df: pd.DataFrame, rows) -> pd.DataFrame:
    """``df`` with the measured launch columns (:data:`synperf.schema.LAUNCH_COLUMNS`: kernel name, grid) blanked
    on ``rows`` (boolean mask): rows of a GPU treated as unseen carry only what a caller of
    :func:`synperf.api.predict` has, the launch parameters, never what only a profile of that GPU records."""
    rows = np.asarray(rows, dtype=bool)
    cols = [c for c in LAUNCH_COLUMNS if c in df.columns]
    if not rows.any() or not cols:
        return df
    out = df.copy()
    for c in cols:
        out.loc[rows, c] = pd.NA
    return out


def experiment_features(measurements: str, exp_name: str, exp: dict, registry_path: str, feature_set: str,
                        seed: int, out_table: str, out_meta: str) -> None:
    """Features, split label and target for one experiment's rows (seen and unseen GPUs only)."""
    registry = load_registry(registry_path)
    df = select_rows(read_table(measurements), exp)
    split = experiment_split(df, exp, seed)
    df = df[split != "unused"]
    split = split[split != "unused"]
    df = as_predict_sees(df, (split == "unseen").to_numpy())
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


def check_leaks(features: str, exp_name: str, exp: dict, registry_path: str, training: dict, seed: int,
                out_report: str) -> None:
    """Check one experiment's feature table against the split contract (:func:`synperf.leak_check.check_split`)
    and write its report (leak counts, all zero, and the twin share per unseen GPU) as JSON.

    Raises:
        LeakError: a check fails (nothing is written).
    """
    from .leak_check import check_split

    report = check_split(read_table(features), exp_name, exp, load_registry(registry_path), training, seed)
    write_json(report, out_report)


def _feature_frame(table: pd.DataFrame, meta: dict) -> FeatureFrame:
    return FeatureFrame(frame=table, numeric=meta["numeric"], linear=meta["linear"],
                        categorical=meta["categorical"])


def select_group(meta: dict, group: str) -> dict:
    """Restrict a feature meta (numeric/linear lists) to an ablation group of its feature set.

    Groups other than ``all`` exist for feature sets that define them (v2: ``math``, ``memory``).

    Raises:
        KeyError: the feature set has no such group.
    """
    if group == "all":
        return meta
    from .features import FEATURE_GROUPS

    fs = meta["feature_set"]
    if fs not in FEATURE_GROUPS:
        raise KeyError(f"feature set {fs!r} has no feature groups; only 'all' can be trained")
    numeric, linear = FEATURE_GROUPS[fs](group)
    keep_lin = [c for c in meta["linear"] if c in linear or c == "routing_alpha"]
    from .features.v2 import SHAPE_PREFIX

    keep_num = [c for c in meta["numeric"] if c in numeric or c.startswith(SHAPE_PREFIX)]  # shape parameters stay
    return {**meta, "numeric": keep_num, "linear": keep_lin}


def train_experiment(features: str, features_meta: str, exp_name: str, exp: dict, training: dict, seed: int,
                     threads: int, out_dir: str, group: str = "all") -> None:
    """Train one experiment's MLP on its ``train`` rows (features of ``group``) and save it under ``out_dir``."""
    meta = select_group(json.loads(Path(features_meta).read_text()), group)
    table = read_table(features)
    tr = table[table["split"] == "train"].reset_index(drop=True)
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    t0 = time.time()
    model = train(_feature_frame(tr, meta), tr["latency_us"], tr["problem_key"], cfg, extra_meta={
        "experiment": exp_name, "kernel": exp["kernel"], "feature_set": meta["feature_set"], "feature_group": group,
        "train_gpus": sorted(tr["gpu"].unique()), "seen_gpus": exp["seen"], "unseen_gpus": exp.get("unseen", []),
        "sources": exp.get("sources"), "data_sha256": data_hash(tr[list(KEY_COLUMNS) + ["latency_us"]]),
    })
    model.meta["train_seconds"] = round(time.time() - t0, 1)
    from .leak_check import check_model_meta

    check_model_meta(model.meta, exp_name, exp)
    model.save(out_dir)


def evaluate_experiment(features: str, features_meta: str, model_dir: str, exp_name: str, out_predictions: str,
                        out_table: str) -> None:
    """Predict every row of the experiment; write predictions and MAPE per GPU and split (tagged with the
    model's feature set and group)."""
    meta = json.loads(Path(features_meta).read_text())
    table = read_table(features)
    model = TrainedModel.load(model_dir)
    pred = model.predict_latency_us(_feature_frame(table, meta))
    out = table[["gpu", "kernel", "split", "latency_us", "theoretical_time_us"]].copy()
    out["predicted_latency_us"] = pred
    out["ape_pct"] = ape(pred, out["latency_us"])
    out["experiment"] = exp_name
    write_parquet(out, out_predictions)
    tag = {"feature_set": model.meta.get("feature_set", meta["feature_set"]),
           "feature_group": model.meta.get("feature_group", "all")}
    rows = []
    for (gpu, split), g in out.groupby(["gpu", "split"]):
        rows.append({"experiment": exp_name, "kernel": out["kernel"].iloc[0], **tag, "gpu": gpu,
                     "split": split, **summarize(g["ape_pct"])})
    for split, g in out.groupby("split"):
        rows.append({"experiment": exp_name, "kernel": out["kernel"].iloc[0], **tag, "gpu": "ALL", "split": split,
                     **summarize(g["ape_pct"])})
    from .io import write_csv
    write_csv(pd.DataFrame(rows), out_table)


def score_selection(features: str, features_meta: str, exp_name: str, registry_path: str, seed: int,
                    training: dict, threads: int, out_table: str) -> None:
    """Leave-one-seen-GPU-out score of one experiment's feature set (:func:`synperf.selection.score_feature_set`)
    on its configured training rows; one row per fold (empty table for a single seen GPU)."""
    from .io import write_csv
    from .selection import score_feature_set

    meta = json.loads(Path(features_meta).read_text())
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    scores = score_feature_set(read_table(features), meta, exp_name, load_registry(registry_path), cfg, seed,
                               log=lambda line: print(line, flush=True))
    write_csv(scores, out_table)


def choose_feature_set(score_tables: list[str], configured: str, training: dict, out_table: str,
                       out_choice: str) -> None:
    """Pick the primary feature set from the leave-one-seen-GPU-out scores (:func:`synperf.selection.choose`);
    write the selection table (CSV) and the choice (JSON: chosen, configured, agrees, experiments, budget)."""
    from .io import write_csv
    from .selection import choose

    scores = pd.concat([pd.read_csv(p) for p in score_tables], ignore_index=True)
    chosen, table = choose(scores)
    write_csv(table, out_table)
    write_json({"chosen": chosen, "configured": configured, "agrees": chosen == configured,
                "experiments": sorted(set(table["experiment"]) - {"mean"}),
                "candidates": sorted(scores["feature_set"].unique()), "folds": int(len(scores)),
                "budget": {k: training[k] for k in ("max_epochs", "max_train_rows") if k in training},
                "protocol": "leave one seen GPU out, inside the configured training rows"}, out_choice)


def evaluate_protocols(measurements: str, exp_name: str, exp: dict, registry_path: str, feature_set: str,
                       seed: int, training: dict, protocols: list[str], methods: list[str] | None, threads: int,
                       out_table: str, out_cdf: str | None = None, model_dir: str | None = None) -> None:
    """All methods (our MLP and every baseline) under the evaluation protocols, for one experiment.

    ``protocols`` from ``configured``, ``logo`` (leave one GPU out), ``loao`` (leave one architecture out); every
    GPU of the experiment (seen and unseen) takes part in the leave-one-out protocols. With ``model_dir`` (the
    experiment's primary model, trained on the configured split's training rows) that model is ``synperf_mlp`` on
    the configured fold, so the configured numbers equal the main table's; the leave-one-out folds train their
    own MLP with ``training``.

    Writes ``out_table``: one row per (protocol, fold, method, gpu, split, scope) with MAPE, median and p90 APE
    and coverage; ``scope`` is ``all`` (every row the method covers) or ``nearest_covered`` (only the rows
    nearest-GPU transfer covers, a paired comparison; present when ``nearest_gpu_roofline`` is evaluated).
    ``out_cdf``: :func:`synperf.protocols.error_cdf` of the same predictions.
    """
    from .protocols import error_cdf, feature_table, make_folds, predict_protocol, summarize_predictions

    registry = load_registry(registry_path)
    rows = select_rows(read_table(measurements), exp)
    gpus = list(exp["seen"]) + list(exp.get("unseen", []))
    rows = rows[rows["gpu"].isin(gpus)].reset_index(drop=True)
    split = experiment_split(rows, exp, seed).to_numpy()
    # a GPU unseen in any fold is predicted from the launch parameters alone, in every fold
    unseen_somewhere = (split == "unseen") if set(protocols) <= {"configured"} else np.ones(len(rows), dtype=bool)
    rows = as_predict_sees(rows, unseen_somewhere)
    table, meta = feature_table(rows, registry, feature_set, seed)
    table["split"] = split
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    pretrained = {"configured": TrainedModel.load(model_dir)} if model_dir else None
    summaries, cdfs = [], []
    for protocol in protocols:
        folds = make_folds(protocol, table, registry, gpus=gpus, heldout_frac=exp.get("heldout_frac", 0.2), seed=seed)
        preds = predict_protocol(table, folds, methods, registry, cfg, meta, max_train_rows=cfg.max_train_rows,
                                 seed=seed, log=lambda line: print(line, flush=True), pretrained=pretrained)
        summaries.append(summarize_predictions(preds).assign(scope="all"))
        if "nearest_gpu_roofline" in set(preds["method"]):
            summaries.append(summarize_predictions(preds, on_rows_covered_by="nearest_gpu_roofline")
                             .assign(scope="nearest_covered"))
        cdfs.append(error_cdf(preds))
    from .io import write_csv
    write_csv(pd.concat(summaries, ignore_index=True).assign(experiment=exp_name, kernel=exp["kernel"]), out_table)
    if out_cdf:
        write_csv(pd.concat(cdfs, ignore_index=True).assign(experiment=exp_name, kernel=exp["kernel"]), out_cdf)
