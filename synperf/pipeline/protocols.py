"""Pipeline stage: every method (our MLP and the baselines) under the evaluation protocols."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import categorical_strings, read_artefact, read_table
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
                       experiments: dict[str, dict] | None = None,
                       feature_tables: dict[str, tuple[str, str]] | None = None,
                       feature_scores: list[str] | None = None, configured_feature_set: str | None = None,
                       serving_launches: str | None = None, out_launches: str | None = None,
                       logo_gpus: list[str] | None = None) -> None:
    """All methods (our MLP and every baseline) under the evaluation protocols, for one experiment.

    ``features``/``features_meta``: the experiment's feature table of the configured top-level ``feature_set``
    (:func:`synperf.pipeline.features.experiment_features`: every row of its seen and unseen GPUs with the configured
    split label); the baselines read it in every fold. ``feature_tables`` (feature set -> (table, meta), the same
    rows in the same order) holds the tables the MLP methods may read instead: on the configured fold the primary
    model's own (its meta's ``feature_set``); on a leave-one-out fold, with ``feature_scores`` (the
    leave-one-seen-GPU-out feature-set score CSVs of every experiment) and ``experiments``, the set
    :func:`synperf.pipeline.selection.informed_choice` picks from the other experiments' scores without the fold's
    tested GPUs (``configured_feature_set`` kept within the noise margin); without them ``features``.
    ``protocols`` from ``configured``, ``logo`` (leave one GPU out), ``loao`` (leave one architecture out); every
    GPU of the experiment (seen and unseen) takes part in the leave-one-out protocols. With
    ``model_dir`` (the experiment's primary model, trained on the configured split's training rows) that model is
    ``synperf_mlp`` on the configured fold, so the configured numbers equal the main table's; the leave-one-out
    folds train their own MLP with ``training``. The ``synperf`` method (the fingerprint predictor) reads the
    configured table and chooses its options inside every fold by leaving each of the fold's training GPUs out.
    A fold whose train/test labels equal an
    earlier fold's (a leave-one-architecture-out fold of an architecture with one GPU is that GPU's
    leave-one-GPU-out fold) reuses its predictions. The leave-one-out folds train with ``training`` as it is, not
    with the experiment's chosen recipe: that recipe was chosen by leave one seen GPU out over the configured seen
    GPUs, which a leave-one-out fold may test.

    Writes ``out_table``: one row per (protocol, fold, method, gpu, split, scope) with MAPE, median and p90 APE
    and coverage; ``scope`` is ``all`` (every row the method covers) or ``nearest_covered`` (only the rows
    nearest-GPU transfer covers, a paired comparison; present when ``nearest_gpu_roofline`` is evaluated).
    ``out_cdf``: :func:`synperf.evaluation.protocols.error_cdf` of the same predictions. ``out_rows``: Parquet of
    the configured fold's per-row ``synperf`` predictions (:data:`ROW_COLUMNS`), empty when that method did not run.
    ``serving_launches`` (Parquet of
    :func:`synperf.serving.logo.record_launches`): the experiment's launches on its GPUs are appended to every
    feature table and predicted in the leave-one-GPU-out fold of their GPU
    (:mod:`synperf.evaluation.fold_launches`), never scored; ``out_launches``: Parquet of the ``synperf`` method's
    predictions of them in the ``logo`` folds (:data:`synperf.evaluation.fold_launches.PREDICTION_COLUMNS`).
    ``logo_gpus``: only the ``logo`` folds that leave one of these GPUs out (None: every fold).
    """
    import logging

    from synperf.evaluation import fold_launches
    from synperf.evaluation.protocols import (
        METHODS,
        MLP,
        SYNPERF,
        error_cdf,
        make_folds,
        predict_protocol,
        summarize_predictions,
    )

    log = logging.getLogger(__name__)
    registry = load_registry(registry_path, measured_dir)
    table = categorical_strings(read_table(features).reset_index(drop=True))
    meta = read_artefact(features_meta, "features")
    configured_fs = configured_feature_set or meta.get("feature_set")
    gpus = list(exp["seen"]) + list(exp.get("unseen", []))
    # the serving launches predicted beside the measured rows (appended after them; never scored)
    launches = (fold_launches.launch_rows(read_table(serving_launches), exp_name, gpus) if serving_launches
                else pd.DataFrame(columns=["gpu"]))
    n_table, launch_gpus = len(table), launches["gpu"].astype(str).to_numpy()

    def appended(t: pd.DataFrame, m: dict) -> pd.DataFrame:
        return fold_launches.with_launches(t, launches, registry, m.get("feature_set"), seed)

    tables = {meta.get("feature_set"): (appended(table, meta), meta)}

    def feature_table(fs: str) -> tuple[pd.DataFrame, dict]:
        """The experiment's table and meta of feature set ``fs`` (read once), row-aligned with ``table``."""
        if fs not in tables:
            t_path, m_path = (feature_tables or {})[fs]
            t = categorical_strings(read_table(t_path).reset_index(drop=True))
            if len(t) != len(table) or not t["problem_key"].equals(table["problem_key"]):
                raise ValueError(f"{t_path}: rows differ from {features}; rebuild the features stage")
            m = read_artefact(m_path, "features")
            tables[fs] = (appended(t, m), m)
        return tables[fs]

    fs_scores = (pd.concat([pd.read_csv(f) for f in feature_scores], ignore_index=True)
                 if feature_scores and experiments else None)
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    pretrained = {"configured": TrainedModel.load(model_dir)} if model_dir else None
    summaries, cdfs, done, configured_preds, launch_preds = [], [], {}, None, []
    for protocol in protocols:
        folds = make_folds(protocol, table, registry, gpus=gpus, heldout_frac=exp.get("heldout_frac", 0.2), seed=seed,
                           heldout_source_files=exp.get("heldout_source_files"))
        if protocol == "logo" and logo_gpus is not None:
            folds = [f for f in folds if set(f.unseen_gpus) & {str(g) for g in logo_gpus}]
        fold_methods = list(methods or METHODS)
        folds = [fold_launches.extend_fold(f, launch_gpus) for f in folds]
        parts = []
        for fold in folds:
            tested = tested_gpus(fold, registry)
            if pretrained and fold.name in pretrained:
                fs = pretrained[fold.name].meta.get("feature_set", configured_fs)
            elif fs_scores is not None:
                from synperf.pipeline.selection import informed_choice

                fs = informed_choice(fs_scores, exp_name, experiments, tested, configured_fs, own=False) \
                    or configured_fs
                log.info("%s: feature set %s (chosen without the fold's tested GPUs)", fold.name, fs)
            else:
                fs = configured_fs
            # two folds share predictions only when their rows (the table's own) and the feature set their tested
            # GPUs may not inform agree; an earlier fold's predictions serve when they hold every launch this one
            # predicts (a leave-one-architecture-out fold of one GPU reuses that GPU's logo fold, launches and all)
            key = (hashlib.sha256(np.asarray(fold.labels[:n_table], dtype=str).tobytes()).hexdigest(),
                   tuple(fold_methods), fs)
            needs_launches = (fold.labels[n_table:] == "unseen").any()
            if key in done and (not needs_launches or (done[key]["row"] >= n_table).any()):
                log.info("%s: same rows and choices as %s, predictions reused", fold.name, done[key]["fold"].iloc[0])
                parts.append(done[key].assign(protocol=fold.protocol, fold=fold.name))
                continue
            # the MLP reads the fold's feature set; the baselines and the synperf method the configured table
            mlp_methods = [m for m in fold_methods if m == MLP]
            groups = ([(fs, fold_methods)] if fs == configured_fs else
                      [(configured_fs, [m for m in fold_methods if m not in mlp_methods]), (fs, mlp_methods)])
            p = []
            for group_fs, group_methods in groups:
                if not group_methods:
                    continue
                t, m = feature_table(group_fs)
                p.append(predict_protocol(t, [fold], group_methods, registry, cfg, m,
                                          max_train_rows=cfg.max_train_rows, seed=seed, log=log.info,
                                          pretrained=pretrained))
            p = pd.concat(p, ignore_index=True)
            if len(groups) > 1:  # the methods in their usual order
                order = {m: i for i, m in enumerate(fold_methods)}
                p = p.sort_values("method", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)
            done[key] = p
            parts.append(p)
        if not parts:  # no fold (e.g. leave-one-architecture-out over GPUs of one architecture)
            log.info("%s: no fold", protocol)
            continue
        preds = pd.concat(parts, ignore_index=True)
        launch_preds.append(fold_launches.launch_predictions(preds, {f.name: f for f in folds}, launches, n_table,
                                                             exp_name, SYNPERF))
        preds = fold_launches.table_predictions(preds, n_table)
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
            tt = feature_table(configured_fs)[0]["theoretical_time_us"].to_numpy(dtype="float64")
            tt = tt[p["row"].to_numpy(dtype="int64")]
            rows = p.assign(experiment=exp_name, theoretical_time_us=tt)[ROW_COLUMNS].reset_index(drop=True)
        write_parquet(rows, out_rows)
    if out_launches:
        write_parquet(pd.concat(launch_preds, ignore_index=True) if launch_preds else
                      pd.DataFrame(columns=fold_launches.PREDICTION_COLUMNS), out_launches)
    if out_cdf:
        write_csv(pd.concat(cdfs, ignore_index=True).assign(experiment=exp_name, kernel=exp["kernel"]), out_cdf)
