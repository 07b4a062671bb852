"""Pipeline stage: every method (our MLP and the baselines) under the evaluation protocols."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import read_table
from synperf.model.estimator import TrainConfig, TrainedModel

#: columns of ``evaluate_protocols``'s ``out_rows``: one row per configured test row predicted by ``synperf``
ROW_COLUMNS = ["experiment", "kernel", "gpu", "split", "row", "latency_us", "predicted_latency_us",
               "theoretical_time_us"]


def tested_gpus(fold, registry) -> list[str]:
    """The GPUs a leave-one-out fold tests, for what may not inform its choices: its test GPUs, and for a
    leave-one-architecture-out fold every registry GPU of the held-out architecture(s) (another experiment's
    measurements on a sibling of that architecture would carry it into the fold)."""
    tested = {str(g) for g in fold.unseen_gpus}
    if fold.protocol == "loao":
        archs = {registry[g].architecture for g in tested}
        tested |= {str(g) for g, spec in registry.gpus.items() if spec.architecture in archs}
    return sorted(tested)


def evaluate_protocols(features: str, features_meta: str, exp_name: str, exp: dict, registry_path: str, seed: int,
                       training: dict, protocols: list[str], methods: list[str] | None, threads: int,
                       out_table: str, out_cdf: str | None = None, model_dir: str | None = None, *,
                       measured_dir: str | None = None, out_rows: str | None = None,
                       path_scores: dict[str, str] | None = None, experiments: dict[str, dict] | None = None) -> None:
    """All methods (our MLP and every baseline) under the evaluation protocols, for one experiment.

    ``features``/``features_meta``: the experiment's feature table of the primary feature set
    (:func:`synperf.pipeline.features.experiment_features`: every row of its seen and unseen GPUs with the configured
    split label). ``protocols`` from ``configured``, ``logo`` (leave one GPU out), ``loao`` (leave one architecture
    out); every GPU of the experiment (seen and unseen) takes part in the leave-one-out protocols. With
    ``model_dir`` (the experiment's primary model, trained on the configured split's training rows) that model is
    ``synperf_mlp`` on the configured fold, so the configured numbers equal the main table's, and the prediction
    path recorded beside it (``path.json`` in its parent folder, chosen by leave one seen GPU out inside the
    configured training rows) is the ``synperf`` method there; the leave-one-out folds train their own MLP with
    ``training``, and the ``synperf`` method chooses its path inside each of them by leave one seen GPU out over the
    fold's training rows. A fold whose train/test labels equal an
    earlier fold's (a leave-one-architecture-out fold of an architecture with one GPU is that GPU's
    leave-one-GPU-out fold) reuses its predictions. The leave-one-out folds train with ``training`` as it is, not
    with the experiment's chosen recipe: that recipe was chosen by leave one seen GPU out over the configured seen
    GPUs, which a leave-one-out fold may test. ``path_scores`` (experiment -> its ``paths.csv`` of
    leave-one-seen-GPU-out path scores on the configured training rows) with ``experiments`` (their config
    entries): the ``synperf`` method's default path in each leave-one-out fold is
    :func:`synperf.pipeline.selection.path_default` of the other experiments' scores, leaving out every experiment
    trained on one of the fold's test GPUs (for a leave-one-architecture-out fold: on any GPU of the held-out
    architecture); without them ``mlp``.

    Writes ``out_table``: one row per (protocol, fold, method, gpu, split, scope) with MAPE, median and p90 APE
    and coverage; ``scope`` is ``all`` (every row the method covers) or ``nearest_covered`` (only the rows
    nearest-GPU transfer covers, a paired comparison; present when ``nearest_gpu_roofline`` is evaluated).
    ``out_cdf``: :func:`synperf.evaluation.protocols.error_cdf` of the same predictions. ``out_rows``: Parquet of
    the configured fold's per-row ``synperf`` predictions (:data:`ROW_COLUMNS`; the rows the few-shot calibration
    simulation calibrates), empty when that method did not run.
    """
    import json
    import logging
    from pathlib import Path

    from synperf.evaluation.protocols import (
        METHODS,
        SYNPERF,
        error_cdf,
        make_folds,
        predict_protocol,
        summarize_predictions,
    )

    log = logging.getLogger(__name__)
    registry = load_registry(registry_path, measured_dir)
    table = read_table(features).reset_index(drop=True)
    meta = json.loads(Path(features_meta).read_text())
    gpus = list(exp["seen"]) + list(exp.get("unseen", []))
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    pretrained = {"configured": TrainedModel.load(model_dir)} if model_dir else None
    chosen_paths = None
    if model_dir:  # the path recorded beside the primary model, chosen on the configured training rows alone
        from synperf.evaluation.path_selection import load_choice

        choice = load_choice(Path(model_dir).parent)
        chosen_paths = ({"configured": (choice["path"], choice.get("fallback") or choice["base"],
                                        choice.get("seen_path"))}
                        if choice else None)
    summaries, cdfs, done, configured_preds = [], [], {}, None
    fit_cache: dict = {}  # the synperf method's inner leave-one-seen-GPU-out models, shared across folds
    for protocol in protocols:
        folds = make_folds(protocol, table, registry, gpus=gpus, heldout_frac=exp.get("heldout_frac", 0.2), seed=seed,
                           heldout_source_files=exp.get("heldout_source_files"))
        # the chosen-path method runs its own leave-one-seen-GPU-out inside every fold
        fold_methods = list(methods or METHODS)
        parts = []
        for fold in folds:
            key = (hashlib.sha256(np.asarray(fold.labels, dtype=str).tobytes()).hexdigest(), tuple(fold_methods))
            if key in done:
                log.info("%s: same rows as %s, predictions reused", fold.name, done[key]["fold"].iloc[0])
                parts.append(done[key].assign(protocol=fold.protocol, fold=fold.name))
                continue
            defaults = None
            if path_scores and SYNPERF in fold_methods and fold.name not in (chosen_paths or {}):
                from synperf.pipeline.selection import path_default

                d = path_default(exp_name, experiments, path_scores, tested_gpus(fold, registry), own_scores=False)
                defaults = {fold.name: d["default"]}
                log.info("%s: default path %s (pooled geometric means %s over %d experiments)", fold.name,
                         d["default"], json.dumps(d["geometric_mean"]), len(d["experiments"]))
            p = predict_protocol(table, [fold], fold_methods, registry, cfg, meta, max_train_rows=cfg.max_train_rows,
                                 seed=seed, log=log.info, pretrained=pretrained, chosen_paths=chosen_paths,
                                 fit_cache=fit_cache, defaults=defaults)
            done[key] = p
            parts.append(p)
        if not parts:  # no fold (e.g. leave-one-architecture-out over GPUs of one architecture)
            log.info("%s: no fold", protocol)
            continue
        preds = pd.concat(parts, ignore_index=True)
        if protocol == "configured":
            configured_preds = preds
        summaries.append(summarize_predictions(preds).assign(scope="all"))
        if preds["method"].eq("nearest_gpu_roofline").any():
            summaries.append(summarize_predictions(preds, on_rows_covered_by="nearest_gpu_roofline")
                             .assign(scope="nearest_covered"))
        cdfs.append(error_cdf(preds))
    from synperf.data.io import write_csv, write_parquet

    write_csv(pd.concat(summaries, ignore_index=True).assign(experiment=exp_name, kernel=exp["kernel"]), out_table)
    if out_rows:
        rows = pd.DataFrame(columns=ROW_COLUMNS)
        if configured_preds is not None:
            p = configured_preds[configured_preds["method"] == SYNPERF]
            tt = table["theoretical_time_us"].to_numpy(dtype="float64")[p["row"].to_numpy(dtype="int64")]
            rows = p.assign(experiment=exp_name, theoretical_time_us=tt)[ROW_COLUMNS].reset_index(drop=True)
        write_parquet(rows, out_rows)
    if out_cdf:
        write_csv(pd.concat(cdfs, ignore_index=True).assign(experiment=exp_name, kernel=exp["kernel"]), out_cdf)
