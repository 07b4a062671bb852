"""Pipeline stage: train an experiment's efficiency MLPs (primary, comparison and ablation) and score each, and fit
its fingerprint predictor (:mod:`synperf.model.fingerprint`)."""

from __future__ import annotations

import json
import logging
import time

from synperf.data.io import read_artefact, read_table
from synperf.data.schema import KEY_COLUMNS
from synperf.model.estimator import TrainConfig, data_hash, train
from synperf.pipeline.common import _feature_frame

log = logging.getLogger(__name__)


def select_group(meta: dict, group: str) -> dict:
    """Restrict a feature meta (numeric/linear lists) to an ablation group of its feature set.

    Groups other than ``all`` exist for feature sets that define them (v2: ``math``, ``memory``).

    Raises:
        KeyError: the feature set has no such group.
    """
    if group == "all":
        return meta
    from synperf.model.features import FEATURE_GROUPS

    fs = meta["feature_set"]
    if fs not in FEATURE_GROUPS:
        raise KeyError(f"feature set {fs!r} has no feature groups; only 'all' can be trained")
    numeric, linear = FEATURE_GROUPS[fs](group)
    keep_lin = [c for c in meta["linear"] if c in linear or c == "routing_alpha"]
    from synperf.model.features.v2 import SHAPE_PREFIX

    keep_num = [c for c in meta["numeric"] if c in numeric or c.startswith(SHAPE_PREFIX)]  # shape parameters stay
    return {**meta, "numeric": keep_num, "linear": keep_lin}


def train_experiment(features: str, features_meta: str, exp_name: str, exp: dict, training: dict, seed: int,
                     threads: int, out_dir: str, group: str = "all", table=None, recipe: str | None = None):
    """Train one experiment's MLP on its ``train`` rows (features of ``group``) and save it under ``out_dir``.

    ``table`` is the feature table already read from ``features`` (read here when None). Returns the
    :class:`synperf.model.estimator.TrainedModel`.

    Raises:
        LeakError: the model's training GPUs are not all seen GPUs of the experiment (nothing is saved).
    """
    meta = select_group(read_artefact(features_meta, "features"), group)
    table = read_table(features) if table is None else table
    tr = table[table["split"] == "train"].reset_index(drop=True)
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    t0 = time.time()
    model = train(_feature_frame(tr, meta), tr["latency_us"], tr["problem_key"], cfg, extra_meta={
        "experiment": exp_name, "kernel": exp["kernel"], "feature_set": meta["feature_set"], "feature_group": group,
        "train_gpus": sorted(tr["gpu"].unique()), "seen_gpus": exp["seen"], "unseen_gpus": exp.get("unseen", []),
        "sources": exp.get("sources"), "data_sha256": data_hash(tr[list(KEY_COLUMNS) + ["latency_us"]]),
        "recipe": recipe,
    })
    model.meta["train_seconds"] = round(time.time() - t0, 1)
    from synperf.evaluation.leak_check import check_model_meta

    check_model_meta(model.meta, exp_name, exp)
    model.save(out_dir)
    log.info("%s %s-%s: %d rows, %d epochs, %.1f s", exp_name, meta["feature_set"], group, model.meta["n_train_rows"],
             model.meta["epochs_run"], model.meta["train_seconds"])
    return model


def recipe_overrides(recipe: str | None) -> dict:
    """The ``overrides`` of a recipe choice JSON (:func:`synperf.evaluation.selection.choose_recipe`) plus its name
    under ``recipe``; ``{}`` without one."""
    if not recipe:
        return {}
    choice = read_artefact(recipe, "selection")
    return {**choice["overrides"], "recipe": choice["chosen"]}


def deploy_experiment(exp: dict, table):
    """The experiment entry and feature table a deploy model trains on: every GPU of ``table`` seen (the entry's
    ``seen`` and ``unseen`` GPUs and any other in the table), none unseen, and every row, held-out problems and
    unseen-GPU rows included, a ``train`` row. Returns ``(entry, table)``; ``table`` is not modified."""
    gpus = sorted({*map(str, exp.get("seen") or []), *map(str, exp.get("unseen") or []),
                   *table["gpu"].astype(str).unique()})
    return {**exp, "seen": gpus, "unseen": []}, table.assign(split="train")


def fit_fingerprint_model(exp_name: str, exp: dict, spec: dict, seed: int, deploy: bool = False,
                          table=None) -> None:
    """Fit an experiment's fingerprint predictor on the ``train`` rows of its feature table (every row of every GPU
    with ``deploy``, :func:`deploy_experiment`), its options chosen by leaving each training GPU out
    (:func:`synperf.model.fingerprint_choice.fit_chosen`, with the out-of-fold residuals its intervals need), and
    write it to ``spec["out"]`` (:meth:`synperf.model.fingerprint.FingerprintModel.save`).

    ``spec``: ``table`` and ``meta`` (the feature table and sidecar), ``registry`` and ``measured_dir`` (the GPU
    registry), ``max_train_rows`` (the correction's row cap, as the protocols' configured fold uses), ``out``.
    """
    from synperf.data.hardware import load_registry
    from synperf.model.fingerprint_choice import fit_chosen
    from synperf.model.roofline import add_baseline_columns

    t0 = time.time()
    registry = load_registry(spec["registry"], spec.get("measured_dir"))
    table = read_table(spec["table"]) if table is None else table
    if deploy:
        _, table = deploy_experiment(exp, table)
    rows = table[table["split"].astype(str).to_numpy() == "train"].reset_index(drop=True)
    rows = add_baseline_columns(rows, registry, tiles=False)
    model = fit_chosen(rows, read_artefact(spec["meta"], "features"), registry,
                       max_train_rows=int(spec.get("max_train_rows") or 0), seed=seed, oof=True)
    model.save(spec["out"])
    log.info("%s: fingerprint predictor (%s; interval %s) on %d rows of %s in %.0f s: %s; constants %s", exp_name,
             model.choice["option"], model.choice.get("interval", "none"), len(rows), sorted(model.fitted),
             time.time() - t0, spec["out"],
             json.dumps({g: [round(float(c), 4) for c in fp.constants] for g, fp in model.fitted.items()}))


def train_models(exp_name: str, exp: dict, models: list[dict], seed: int, threads: int,
                 recipe: str | None = None, deploy: bool = False, fingerprint: dict | None = None) -> None:
    """Train and score every model of one experiment, one after the other, each feature table read once.

    ``fingerprint`` (optional): also fit the experiment's fingerprint predictor (:func:`fit_fingerprint_model`,
    that function's ``spec``).

    ``recipe``: the experiment's chosen training recipe (JSON of :func:`synperf.evaluation.selection.choose_recipe`);
    its overrides apply over every model's ``training`` (the budget keys stay the model's).

    ``deploy``: train the deploy models instead (the ``deploy`` target, ``models/deploy/<experiment>/``): the same
    recipe, feature set and training settings, but on every GPU and row of the feature table
    (:func:`deploy_experiment`); nothing is scored (no row is held out), so ``predictions`` and ``mape`` are not
    needed.

    Args:
        models: one dict per model: ``feature_set``, ``group``, ``training`` (the model's budget), ``table`` and
            ``meta`` (its feature table and sidecar), ``model_dir``, ``predictions`` and ``mape`` (the outputs of
            :func:`synperf.pipeline.evaluate.evaluate_experiment`).
    """
    from synperf.pipeline.evaluate import evaluate_experiment

    overrides = recipe_overrides(recipe)
    name = overrides.pop("recipe", None)
    tables: dict[str, object] = {}
    trained_exp = exp
    for m in models:
        if m["table"] not in tables:
            tables[m["table"]] = read_table(m["table"])
            if deploy:
                trained_exp, tables[m["table"]] = deploy_experiment(exp, tables[m["table"]])
                log.info("%s deploy: training on every GPU of the table: %s", exp_name, trained_exp["seen"])
        table = tables[m["table"]]
        model = train_experiment(m["table"], m["meta"], exp_name, trained_exp, {**m["training"], **overrides}, seed,
                                 threads, m["model_dir"], group=m["group"], table=table, recipe=name)
        if not deploy:
            evaluate_experiment(m["table"], m["meta"], m["model_dir"], exp_name, m["predictions"], m["mape"],
                                table=table, model=model)
    if fingerprint:
        fit_fingerprint_model(exp_name, exp, fingerprint, seed, deploy=deploy, table=tables.get(fingerprint["table"]))
