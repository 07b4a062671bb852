"""Pipeline stage: the primary feature set chosen on the seen GPUs (leave one seen GPU out)."""

from __future__ import annotations

import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import categorical_strings, read_artefact, read_table, write_json
from synperf.model.training import TrainConfig


def score_selection(candidates: list[tuple[str, str, str]], exp_name: str, registry_path: str, seed: int,
                    training: dict, threads: int, *, measured_dir: str | None = None,
                    recipes: dict | None = None, recipe_features: tuple[str, str] | None = None,
                    out_recipes: str | None = None, out_recipe: str | None = None) -> None:
    """Leave-one-seen-GPU-out score of each candidate feature set of one experiment
    (:func:`synperf.evaluation.selection.score_feature_set`) on its configured training rows; one row per fold
    (an empty table for a single seen GPU). Then, with ``recipes``, the training recipes on the primary feature
    set, and the experiment's recipe chosen from those scores alone.

    Args:
        candidates: ``(feature table, its meta JSON, output CSV)`` per candidate feature set, each trained with
            ``training`` (the configured one under the selection budget).
        recipes: ``{name: overrides of training}``, scored on ``recipe_features`` (the primary feature set's table
            and meta); ``out_recipes`` gets their scores (CSV, column ``recipe``), ``out_recipe`` the choice
            (JSON: ``chosen``, its ``overrides``, the mean validation MAPE per recipe,
            :func:`synperf.evaluation.selection.choose_recipe`).
    """
    import logging

    from synperf.data.io import write_csv
    from synperf.evaluation.selection import score_feature_set

    log = logging.getLogger(__name__)
    cfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    registry = load_registry(registry_path, measured_dir)
    done, fold_models = {}, {}  # scores by feature table; fold MLPs by (feature table, training config)
    for features, features_meta, out_table in candidates:
        meta = read_artefact(features_meta, "features")
        models = fold_models.setdefault((features, repr(cfg)), {})
        table = categorical_strings(read_table(features))
        done[features] = score_feature_set(table, meta, exp_name, registry, cfg, seed, log=log.info, models_out=models)
        write_csv(done[features], out_table)
    primary = recipe_features
    if primary is None and recipes:
        raise ValueError("selection: recipes need recipe_features (the primary feature table)")
    if recipes:
        from synperf.evaluation.selection import choose_recipe

        table, meta = categorical_strings(read_table(primary[0])), read_artefact(primary[1], "features")
        parts = []
        for name, overrides in recipes.items():
            rcfg = TrainConfig.from_dict({**training, **overrides, "seed": seed, "threads": threads})
            if rcfg == cfg and primary[0] in done:  # the recipe is the candidates' own training: same scores
                parts.append(done[primary[0]].assign(recipe=name))
                continue
            models = fold_models.setdefault((primary[0], repr(rcfg)), {})
            parts.append(score_feature_set(table, meta, exp_name, registry, rcfg, seed, log=log.info,
                                           models_out=models).assign(recipe=name))
        scores = pd.concat(parts, ignore_index=True)
        write_csv(scores, out_recipes)
        choice = choose_recipe(scores, recipes)
        write_json(choice, out_recipe)


def informed_choice(scores: pd.DataFrame, exp_name: str, experiments: dict[str, dict], test_gpus, configured: str,
                    *, own: bool = True) -> str | None:
    """The feature-set rule (:func:`synperf.evaluation.selection.choose`, ``configured`` kept within the noise
    margin) over only the scores that may inform ``exp_name``'s choice when it tests ``test_gpus``
    (:func:`synperf.evaluation.evidence.informing_experiments`; ``own``: whether its own scores count). ``scores``:
    :data:`synperf.evaluation.selection.SCORE_COLUMNS` rows of many experiments. None when none of them scored every
    candidate (no evidence either way)."""
    from synperf.evaluation.evidence import informing_experiments
    from synperf.evaluation.selection import choose

    frames = {str(n): g for n, g in scores.groupby("experiment")}
    keep = informing_experiments(exp_name, experiments, test_gpus,
                                 scores={n: g for n, g in frames.items() if n in experiments}, own=own)
    try:
        return choose(scores[scores["experiment"].isin(keep)], configured)[0]
    except ValueError:
        return None


def choose_feature_set(score_tables: list[str], configured: str, training: dict, out_table: str,
                       out_choice: str, experiments: dict[str, dict] | None = None) -> None:
    """Pick the primary feature set from the leave-one-seen-GPU-out scores
    (:func:`synperf.evaluation.selection.choose`: ``configured`` stays within the noise margin of the lowest); write
    the selection table (CSV) and the choice (JSON: chosen, lowest, min_gain, configured, agrees, experiments,
    budget).

    With ``experiments`` (config entries: ``seen``, ``unseen``, optional ``feature_set``) the choice also holds,
    per experiment, ``per_experiment``: the same rule over only the scores that may inform that experiment's choice
    (:func:`informed_choice` of its configured unseen GPUs), with its configured primary set
    (:func:`synperf.model.features.primary_feature_set`) as the one kept within the margin; ``primary``: that
    configured set; and
    ``disagree``: the experiments whose ``per_experiment`` choice is not their primary set (they train with a set
    the evidence without their test GPUs does not pick; the report names them).
    """
    from synperf.data.io import write_csv
    from synperf.evaluation.selection import MIN_RELATIVE_GAIN, choose
    from synperf.model.features import primary_feature_set

    scores = pd.concat([pd.read_csv(p) for p in score_tables], ignore_index=True)
    chosen, table = choose(scores, configured)
    means = table.set_index("experiment").drop(columns="best").loc["geometric mean"].astype(float)
    write_csv(table, out_table)
    experiments = experiments or {}
    primary = {n: primary_feature_set(e, configured) for n, e in sorted(experiments.items())}
    per_experiment = {n: informed_choice(scores, n, experiments, e.get("unseen") or [], primary[n])
                      for n, e in sorted(experiments.items())}
    write_json({"chosen": chosen, "lowest": str(means.idxmin()), "min_gain": MIN_RELATIVE_GAIN,
                "configured": configured, "agrees": chosen == configured,
                "primary": primary, "per_experiment": per_experiment,
                "disagree": sorted(n for n, c in per_experiment.items() if c not in (None, primary[n])),
                "experiments": sorted(table["experiment"].iloc[:-1]),
                "candidates": sorted(scores["feature_set"].unique()), "folds": int(len(scores)),
                "budget": {k: training[k] for k in ("max_epochs", "max_train_rows") if k in training},
                "protocol": "leave one seen GPU out, inside the configured training rows"}, out_choice)
