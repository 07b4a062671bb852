"""The one way the fingerprint predictor chooses: a grid of options scored by leaving each training GPU out.

Whether to correct the fingerprint time and with which tree budget, and how a GPU without measurements gets its
constants from its pool (:data:`synperf.model.fingerprint.RULES`) form one grid (:data:`GRID`, simplest first). Each
training GPU in turn is left out: its constants are then predicted from the other training GPUs, as for a GPU without
measurements (:func:`synperf.model.fingerprint.predict_fingerprint`), its class-mates' correction added (a fixed
part of the predictor, not an option), and its rows predicted; an option scores the
mean over GPUs of its MAPE %; the first option within :data:`MARGIN` (5%) of the lowest wins
(:func:`choose_options`). The chosen option's residuals on those left-out GPUs give the interval of a GPU without
measurements, its rule (:data:`INTERVALS`) chosen the same way by how close each left-out GPU's coverage comes to
80% when the others set its bounds (:func:`choose_interval`). The few-shot prior weight (:data:`PRIOR_WEIGHTS`) is
chosen the same way: each left-out GPU's constants are refitted on its short sweeps (``k`` in :data:`PRIOR_KS`) and
its other rows scored (:func:`choose_prior_weight`), and so is whether a few-shot fit borrows other training GPUs'
own-GPU corrections, per ``k`` (:func:`choose_fewshot_borrow`). :func:`fit_chosen` fits the predictor with the
chosen options.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.model.fingerprint import (
    FEWSHOT_PRIOR_WEIGHT,
    RULES,
    FingerprintModel,
    class_pool,
    gpu_quantiles,
    rule_bounds,
)
from synperf.model.pipes import spec_distance

#: correction options of :meth:`FingerprintModel.fit`, simplest first: the fingerprint time alone, the correction
#: with :data:`synperf.model.correction.RESIDUAL_TREES`, a larger budget
CORRECTIONS = (("fingerprint only", {"correct": False}), ("correction 40x0.7", {}),
               ("correction 300x0.1", {"trees": {"max_iter": 300, "learning_rate": 0.1}}))
#: the options chosen per training set by :func:`choose_options`, simplest first: ``(name, options of
#: FingerprintModel.fit, rule)``
GRID = tuple((f"{name}; rule {rule}", opts, rule) for name, opts in CORRECTIONS for rule in RULES)
#: the simplest option within this relative margin of the lowest score is chosen
MARGIN = 0.05
#: few-shot prior weights, simplest (the module default) first, and the short-sweep sizes that score them
PRIOR_WEIGHTS = (FEWSHOT_PRIOR_WEIGHT, 0.3, 3.0)
PRIOR_KS = (8, 32)


def choose_options(rows: pd.DataFrame, meta: dict, registry, *, max_train_rows: int = 0, seed: int = 0,
                   grid=GRID) -> tuple:
    """Choose among ``grid`` by leave one training GPU out: each GPU of ``rows`` is predicted by each option
    fitted on the other GPUs' rows (its constants predicted, as for a GPU without measurements); an option scores
    the mean over GPUs of its MAPE %; the first option within :data:`MARGIN` of the lowest wins. With one GPU
    (no fold), the first option.

    Returns:
        ``(name, fit options, rule, {name: score}, residuals, folds)``: ``residuals`` has one row per row of a
        left-out GPU under the chosen option: ``gpu``, ``log_residual`` (``log(measured / predicted)``) and
        ``class_found`` (a training GPU of its class informed its constants and correction); ``folds``:
        ``[(left-out GPU, its rows, the model fitted without it)]`` under the chosen fit options (own-GPU
        corrections of the left-out GPU's class-mates only; :func:`with_own_corrections` adds the others). Both
        empty with one GPU.
    """
    gpus = rows["gpu"].astype(str).to_numpy()
    names = sorted(set(gpus))
    if len(names) < 2:
        name, opts, rule = grid[0]
        return name, dict(opts), rule, {}, pd.DataFrame(), []
    scores: dict[str, list] = {c[0]: [] for c in grid}
    residuals: dict[str, list] = {c[0]: [] for c in grid}
    fold_models: dict[str, list] = {}
    for h in names:
        tr, te = rows[gpus != h], rows[gpus == h]
        y = te["latency_us"].to_numpy(dtype="float64")
        models: dict = {}
        found = class_pool(h, sorted(set(gpus[gpus != h])), registry)[1].startswith("class")
        mates = [g for g in sorted(set(gpus[gpus != h])) if registry[g].same_class(registry[h])]
        for name, opts, rule in grid:
            key = repr(sorted(opts.items()))
            if key not in models:
                # only the left-out GPU's class-mates' own-GPU corrections reach its predictions
                models[key] = FingerprintModel.fit(tr, meta, registry, max_train_rows=max_train_rows, seed=seed,
                                                   oof=False, local=mates, **opts)
                fold_models.setdefault(key, []).append((h, te, models[key]))
            pred = models[key].predict(te, registry, rule=rule)
            scores[name].append(float(np.mean(np.abs(pred / y - 1.0)) * 100.0))
            residuals[name].append(pd.DataFrame({"gpu": h, "log_residual": np.log(y / pred), "class_found": found}))
    mean = {k: float(np.mean(v)) for k, v in scores.items()}
    name, opts, rule = next(c for c in grid if mean[c[0]] <= min(mean.values()) * (1.0 + MARGIN))
    folds = fold_models[repr(sorted(opts.items()))]
    return name, dict(opts), rule, mean, pd.concat(residuals[name], ignore_index=True), folds


def with_own_corrections(folds: list, rows: pd.DataFrame, registry, seed: int = 0) -> list:
    """``folds`` of :func:`choose_options` (on ``rows``) with every training GPU's own-GPU correction fitted in each
    fold model (:meth:`FingerprintModel.fit_local`), which a few-shot fit may borrow
    (:meth:`FingerprintModel.fewshot_fit`); the models are changed in place and the list returned."""
    gpus = rows["gpu"].astype(str).to_numpy()
    for h, _, model in folds:
        model.fit_local(rows[gpus != h], registry, sorted(model.fitted), seed)
    return folds


def choose_prior_weight(folds: list, registry, rule: str, *, weights=PRIOR_WEIGHTS,
                        ks=PRIOR_KS, seed: int = 0) -> tuple[float, dict]:
    """The few-shot prior weight: each left-out training GPU of ``folds`` (:func:`choose_options`) gets its
    predicted constants refitted on its short sweep of ``k`` rows (:func:`synperf.evaluation.fewshot.short_sweep`,
    ``k`` in ``ks``; :meth:`FingerprintModel.calibrated`) with each weight of ``weights``, and its other rows are
    scored (MAPE %); a weight scores the mean over (GPU, k); the first within :data:`MARGIN` of the lowest wins.
    Without folds, or without ``theoretical_time_us`` (the sweep's order), the first weight.

    Returns:
        ``(weight, {weight: score})``.
    """
    scores: dict[float, list] = {w: [] for w in weights}
    for _, _, w, mape in _fewshot_draws(folds, registry, rule, ks, (seed,), weights):
        scores[w].append(mape)
    mean = {w: float(np.mean(v)) for w, v in scores.items() if v}
    if not mean:
        return weights[0], {}
    return next(w for w in weights if w in mean and mean[w] <= min(mean.values()) * (1.0 + MARGIN)), mean


def _fewshot_draws(folds: list, registry, rule: str, ks, seeds, weights, borrow=False):
    """Per (left-out GPU of ``folds``, k, seed, prior weight): the short sweep refits its constants
    (:meth:`FingerprintModel.fewshot_fit`, borrowing own-GPU corrections where ``borrow``: a bool, or ``{k: bool}``).
    Yields ``(gpu, k, weight, MAPE % on the sweep's other rows)``. Nothing without ``theoretical_time_us`` (the
    sweep's order)."""
    from synperf.evaluation.fewshot import short_sweep

    for h, te, model in folds:
        if "theoretical_time_us" not in te.columns:
            continue
        te = te.reset_index(drop=True)
        y = te["latency_us"].to_numpy(dtype="float64")
        for k in ks:
            if len(te) <= k:
                continue
            for seed in seeds:
                cal = short_sweep(te, k, seed)
                rest = np.ones(len(te), dtype=bool)
                rest[cal] = False
                b = bool(borrow.get(k, False)) if isinstance(borrow, dict) else bool(borrow)
                for w in weights:
                    fp, mates = model.fewshot_fit(h, te.iloc[cal], registry, prior_weight=w, rule=rule, borrow=b)
                    model.overrides[h] = fp
                    if mates is not None:
                        model.borrowed[h] = mates
                    pred = model.predict(te, registry, rule=rule)
                    model.overrides.pop(h, None)
                    model.borrowed.pop(h, None)
                    yield h, int(k), w, float(np.mean(np.abs(pred[rest] / y[rest] - 1.0)) * 100.0)


def choose_fewshot_borrow(folds: list, registry, rule: str, weight: float, *, ks=None, seeds=None
                          ) -> tuple[dict, dict]:
    """Per ``k``, whether a few-shot fit chooses the own-GPU corrections its rows take
    (:meth:`FingerprintModel.fewshot_fit` with ``borrow``) or keeps its class-mates': each left-out training GPU of
    ``folds`` (:func:`with_own_corrections`) is refitted on its short sweeps both ways (prior ``weight``, no
    calibration after) and its other rows scored; the mean over (GPU, seed) of the MAPE % per way, and the simpler
    (keeping) unless borrowing is lower by more than :data:`MARGIN`.

    Returns:
        ``({k: borrow}, {k: {"keep": MAPE %, "borrow": MAPE %}})``; empty without folds.
    """
    from synperf.evaluation.fewshot import KS, SEEDS

    ks = tuple(k for k in (KS if ks is None else ks) if k > 0)
    seeds = SEEDS if seeds is None else seeds
    scores: dict[int, dict[str, list]] = {}
    for b, name in ((False, "keep"), (True, "borrow")):
        for _, k, _, mape in _fewshot_draws(folds, registry, rule, ks, seeds, (weight,), borrow=b):
            scores.setdefault(k, {}).setdefault(name, []).append(mape)
    mean = {k: {n: float(np.mean(v)) for n, v in d.items()} for k, d in scores.items()}
    return {k: bool(d["borrow"] * (1.0 + MARGIN) < d["keep"]) for k, d in mean.items()}, mean


#: interval rules for a GPU without measurements, simplest first: ``(name, kind, parameter)``. ``case``: the
#: quantiles ``(1 - p) / 2`` and ``(1 + p) / 2`` of the left-out GPUs' log residuals of the same case (a GPU of its
#: class trained or not; :func:`case_quantiles`). ``distance``: each left-out GPU's log residuals divided by
#: ``p + d`` (``d``: its :func:`synperf.model.pipes.spec_distance` to the GPUs that trained without it), their 10%
#: and 90% quantiles, times ``p + d`` of the new GPU (:func:`distance_quantiles`): an interval that widens with how
#: far the new GPU is from every GPU that trained
INTERVALS = (("case 80%", "case", 0.8), ("case 90%", "case", 0.9), ("distance 0.4", "distance", 0.4),
             ("distance 0.2", "distance", 0.2), ("distance 0.1", "distance", 0.1))
#: the per-GPU share of rows an 80% interval is to cover
INTERVAL_TARGET = 0.8


def case_quantiles(residuals: pd.DataFrame, level: float = 0.8) -> dict:
    """The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the log residuals of GPUs predicted without
    their measurements (the chosen option's rows in :func:`choose_options`), each GPU weighing the same
    (:func:`gpu_quantiles`), per case ``class_found`` (a training GPU of its class or not), plus ``None`` over
    every row: ``{case: (low, high)}``."""
    q = ((1.0 - level) / 2.0, (1.0 + level) / 2.0)
    out = {None: gpu_quantiles(residuals["log_residual"].to_numpy(), residuals["gpu"].to_numpy(), q)}
    for found, g in residuals.groupby("class_found"):
        out[bool(found)] = gpu_quantiles(g["log_residual"].to_numpy(), g["gpu"].to_numpy(), q)
    return out


def distance_quantiles(residuals: pd.DataFrame, training: list[str], registry, offset: float) -> tuple:
    """The 10% and 90% quantiles (each GPU weighing the same) of ``log_residual / (offset + d)`` over the left-out
    GPUs of ``residuals``, ``d`` each GPU's :func:`synperf.model.pipes.spec_distance` to the other GPUs of
    ``training`` (those its residuals were predicted from)."""
    parts, gpus = [], []
    for g, rows in residuals.groupby("gpu", sort=True):
        d = spec_distance(str(g), [t for t in training if t != g], registry)
        parts.append(rows["log_residual"].to_numpy() / (offset + d))
        gpus += [str(g)] * len(rows)
    return gpu_quantiles(np.concatenate(parts), np.array(gpus))


def interval_rule(residuals: pd.DataFrame, training: list[str], registry, kind: str, parameter: float) -> dict:
    """One rule of :data:`INTERVALS` fitted on the left-out GPUs' ``residuals``: ``{"kind": "case", "q": {case:
    (low, high)}}`` or ``{"kind": "distance", "offset": p, "q": (low, high)}`` (the scaled residuals' quantiles);
    :func:`synperf.model.fingerprint_interval.log_bounds` reads it."""
    if kind == "case":
        return {"kind": "case", "q": case_quantiles(residuals, parameter)}
    return {"kind": "distance", "offset": parameter,
            "q": distance_quantiles(residuals, training, registry, parameter)}


def choose_interval(residuals: pd.DataFrame, training: list[str], registry, intervals=INTERVALS
                    ) -> tuple[str, dict, dict]:
    """The interval rule of a GPU without measurements, chosen on the training GPUs alone: each left-out GPU of
    ``residuals`` (:func:`choose_options`) gets the bounds each rule of ``intervals`` fits on the other left-out
    GPUs' residuals (its own distance taken to the training GPUs but itself, as its residuals were predicted); a
    rule scores the mean over GPUs of ``|share of the GPU's rows inside - INTERVAL_TARGET|``; the first within
    :data:`MARGIN` of the lowest wins. With fewer than two left-out GPUs, the first rule.

    Returns:
        ``(name, rule fitted on every left-out GPU's residuals, {name: score})``.
    """
    gpus = sorted(set(residuals["gpu"].astype(str)))
    scores: dict[str, float] = {}
    if len(gpus) >= 2:
        for name, kind, parameter in intervals:
            errors = []
            for h in gpus:
                own = residuals[residuals["gpu"] == h]["log_residual"].to_numpy()
                rule = interval_rule(residuals[residuals["gpu"] != h], training, registry, kind, parameter)
                lo, hi = rule_bounds(rule, h, [t for t in training if t != h], registry)
                errors.append(abs(float(np.mean((own >= lo) & (own <= hi))) - INTERVAL_TARGET))
            scores[name] = float(np.mean(errors))
    if scores:
        name, kind, parameter = next(c for c in intervals if scores[c[0]] <= min(scores.values()) * (1.0 + MARGIN))
    else:
        name, kind, parameter = intervals[0]
    return name, interval_rule(residuals, training, registry, kind, parameter), scores


def fit_chosen(rows: pd.DataFrame, meta: dict, registry, *, max_train_rows: int = 0, seed: int = 0,
               oof: bool = True, fewshot: bool = True, local_oof: bool | None = None) -> FingerprintModel:
    """:meth:`FingerprintModel.fit` on ``rows`` with the options :func:`choose_options` picks on the same rows,
    and with ``fewshot`` the prior weight (:func:`choose_prior_weight`) and, per ``k``, whether a few-shot refit
    borrows own-GPU corrections (:func:`choose_fewshot_borrow`); the choices and their scores are kept in
    :attr:`FingerprintModel.choice`. ``oof``, ``local_oof``: as :meth:`FingerprintModel.fit`."""
    name, opts, rule, scores, residuals, folds = choose_options(rows, meta, registry, max_train_rows=max_train_rows,
                                                                seed=seed)
    weight, weight_scores = choose_prior_weight(folds, registry, rule, seed=seed) if fewshot else (
        FEWSHOT_PRIOR_WEIGHT, {})
    borrow, borrow_scores = ((choose_fewshot_borrow(with_own_corrections(folds, rows, registry, seed), registry, rule,
                                                    weight)) if fewshot else ({}, {}))
    model = FingerprintModel.fit(rows, meta, registry, max_train_rows=max_train_rows, seed=seed, oof=oof,
                                 local_oof=local_oof, rule=rule, **opts)
    model.prior_weight = weight
    model.choice = {"option": name, "scores_mape_pct": scores, "prior_weight": weight,
                    "prior_weight_scores_mape_pct": weight_scores, "fewshot_borrow": borrow,
                    "fewshot_borrow_scores_mape_pct": borrow_scores}
    if len(residuals):
        name, rule, interval_scores = choose_interval(residuals, sorted(model.fitted), registry)
        model.unseen_q = rule
        model.choice.update({"interval": name, "interval_scores": interval_scores})
    return model
