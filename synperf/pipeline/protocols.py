"""Pipeline stage: every method (our MLP and the baselines) under the evaluation protocols."""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import read_table
from synperf.evaluation.split import experiment_split
from synperf.model.estimator import TrainConfig, TrainedModel
from synperf.pipeline.common import as_predict_sees, select_rows


def evaluate_protocols(measurements: str, exp_name: str, exp: dict, registry_path: str, feature_set: str,
                       seed: int, training: dict, protocols: list[str], methods: list[str] | None, threads: int,
                       out_table: str, out_cdf: str | None = None, model_dir: str | None = None, *,
                       measured_dir: str | None = None) -> None:
    """All methods (our MLP and every baseline) under the evaluation protocols, for one experiment.

    ``protocols`` from ``configured``, ``logo`` (leave one GPU out), ``loao`` (leave one architecture out); every
    GPU of the experiment (seen and unseen) takes part in the leave-one-out protocols. With ``model_dir`` (the
    experiment's primary model, trained on the configured split's training rows) that model is ``synperf_mlp`` on
    the configured fold, so the configured numbers equal the main table's; the leave-one-out folds train their
    own MLP with ``training``.

    Writes ``out_table``: one row per (protocol, fold, method, gpu, split, scope) with MAPE, median and p90 APE
    and coverage; ``scope`` is ``all`` (every row the method covers) or ``nearest_covered`` (only the rows
    nearest-GPU transfer covers, a paired comparison; present when ``nearest_gpu_roofline`` is evaluated).
    ``out_cdf``: :func:`synperf.evaluation.protocols.error_cdf` of the same predictions.
    """
    from synperf.evaluation.protocols import error_cdf, feature_table, make_folds, predict_protocol, summarize_predictions

    registry = load_registry(registry_path, measured_dir)
    rows = select_rows(read_table(measurements), exp)
    gpus = list(exp["seen"]) + list(exp.get("unseen", []))
    rows = rows[rows["gpu"].isin(gpus)].reset_index(drop=True)
    split = experiment_split(rows, exp, seed).to_numpy()
    rows = as_predict_sees(rows)
    table, meta = feature_table(rows, registry, feature_set, seed)
    table["split"] = split
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    pretrained = {"configured": TrainedModel.load(model_dir)} if model_dir else None
    summaries, cdfs = [], []
    for protocol in protocols:
        folds = make_folds(protocol, table, registry, gpus=gpus, heldout_frac=exp.get("heldout_frac", 0.2), seed=seed,
                           heldout_source_files=exp.get("heldout_source_files"))
        preds = predict_protocol(table, folds, methods, registry, cfg, meta, max_train_rows=cfg.max_train_rows,
                                 seed=seed, log=lambda line: print(line, flush=True), pretrained=pretrained)
        summaries.append(summarize_predictions(preds).assign(scope="all"))
        if "nearest_gpu_roofline" in set(preds["method"]):
            summaries.append(summarize_predictions(preds, on_rows_covered_by="nearest_gpu_roofline")
                             .assign(scope="nearest_covered"))
        cdfs.append(error_cdf(preds))
    from synperf.data.io import write_csv
    write_csv(pd.concat(summaries, ignore_index=True).assign(experiment=exp_name, kernel=exp["kernel"]), out_table)
    if out_cdf:
        write_csv(pd.concat(cdfs, ignore_index=True).assign(experiment=exp_name, kernel=exp["kernel"]), out_cdf)
