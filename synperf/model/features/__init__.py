"""Feature sets: from canonical measurement rows and the GPU registry to model inputs.

A feature set is a function ``build(df, registry) -> FeatureFrame``. The rest of the
pipeline (training, evaluation, ``api.predict``) only sees its output, so the
analytical core (decomposer, scheduler, per-pipeline analyzer) replaces v1 by
registering another set here, with no change elsewhere.

Every feature set returns, row-aligned with its input:

* numeric model inputs (listed in ``FeatureFrame.numeric``; fed as ``log1p`` unless
  listed in ``FeatureFrame.linear``),
* categorical inputs (``FeatureFrame.categorical``, one-hot encoded by the estimator),
* ``theoretical_time_us``: the time the efficiency is measured against,
  ``latency_us = theoretical_time_us / efficiency``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from synperf.model.features import v1, v2


@dataclass
class FeatureFrame:
    """Features for a set of rows.

    Attributes:
        frame: one row per input row (same index) with every feature column and
            ``theoretical_time_us``.
        numeric: numeric feature names, fed as log1p(x) (x >= 0).
        linear: numeric feature names fed as they are (ratios around 1).
        categorical: categorical feature names.
    """

    frame: pd.DataFrame
    numeric: list[str]
    linear: list[str]
    categorical: list[str]


FEATURE_SETS = {"v1": v1.build, "v2": v2.build, "v2_paper": v2.build_paper, "v2_launch": v2.build_launch}
#: feature sets built on the analytical core's decomposition (:func:`synperf.model.features.v2.decompose`)
DECOMPOSED_SETS = ("v2", "v2_paper", "v2_launch")
#: feature sets with ablation groups: name -> f(group) -> (numeric, linear) feature names
FEATURE_GROUPS = {"v2": v2.feature_columns, "v2_paper": v2.feature_columns, "v2_launch": v2.feature_columns}


def build_features(df: pd.DataFrame, registry, feature_set: str = "v1") -> FeatureFrame:
    """Compute feature set ``feature_set`` for canonical rows ``df`` (one kernel family or several).

    Raises:
        KeyError: unknown feature set, or a row whose GPU lacks the dtype's peak.
    """
    try:
        fn = FEATURE_SETS[feature_set]
    except KeyError:
        raise KeyError(f"unknown feature set {feature_set!r}; known: {sorted(FEATURE_SETS)}") from None
    numeric, linear, categorical, frame = fn(df, registry)
    return FeatureFrame(frame=frame, numeric=numeric, linear=linear, categorical=categorical)


def build_feature_sets(df: pd.DataFrame, registry, feature_sets) -> dict[str, FeatureFrame]:
    """:func:`build_features` for several feature sets of the same rows; the sets in :data:`DECOMPOSED_SETS`
    share one decomposition and scheduling of the rows.

    Returns:
        ``{feature_set: FeatureFrame}`` in the order given.

    Raises:
        KeyError: as :func:`build_features`.
    """
    unknown = [fs for fs in feature_sets if fs not in FEATURE_SETS]
    if unknown:
        raise KeyError(f"unknown feature set(s) {unknown}; known: {sorted(FEATURE_SETS)}")
    demands = v2.decompose(df, registry) if any(fs in DECOMPOSED_SETS for fs in feature_sets) else None
    out = {}
    for fs in feature_sets:
        extra = {"demands": demands} if fs in DECOMPOSED_SETS else {}
        numeric, linear, categorical, frame = FEATURE_SETS[fs](df, registry, **extra)
        out[fs] = FeatureFrame(frame=frame, numeric=numeric, linear=linear, categorical=categorical)
    return out


def primary_feature_set(exp: dict, configured: str | None) -> str | None:
    """An experiment's primary feature set: its config entry's ``feature_set``, else the top-level ``configured``
    one (None when neither is set)."""
    return exp.get("feature_set") or configured


def check_feature_set_names(config: dict) -> None:
    """Check every feature-set name the pipeline config uses against :data:`FEATURE_SETS`, the one list of them
    (``feature_set``, ``compare_feature_sets``, ``selection.candidates``, ``experiments.<name>.feature_set``). An
    experiment's own ``feature_set`` must also be one the pipeline trains for every experiment (``feature_set`` or
    one of ``compare_feature_sets``) and one the selection scores (``selection.candidates``, when given), so that
    its choice can be checked.

    Raises:
        InputError: naming the config key, the unknown name and the known ones.
    """
    from synperf.data.io import InputError

    own = [(f"experiments.{n}.feature_set", [e["feature_set"]])
           for n, e in sorted((config.get("experiments") or {}).items()) if (e or {}).get("feature_set")]
    uses = [("feature_set", [config.get("feature_set")]),
            ("compare_feature_sets", config.get("compare_feature_sets") or []),
            ("selection.candidates", (config.get("selection") or {}).get("candidates") or [])] + own
    for key, names in uses:
        for name in names:
            if name is not None and name not in FEATURE_SETS:
                raise InputError(f"config key {key}: unknown feature set {name!r}; known: {sorted(FEATURE_SETS)}")
    trained = [config.get("feature_set"), *(config.get("compare_feature_sets") or [])]
    candidates = (config.get("selection") or {}).get("candidates")
    for key, (name,) in own:
        if name not in trained:
            raise InputError(f"config key {key}: {name!r} is not trained; use `feature_set` or one of "
                             f"compare_feature_sets {trained[1:]}")
        if candidates and name not in candidates:
            raise InputError(f"config key {key}: {name!r} is not scored; add it to selection.candidates")
