"""The one way the fingerprint predictor chooses: a grid of options scored by leaving each training GPU out.

Whether to correct the fingerprint time and with which tree budget, and how a GPU without measurements gets its
constants from its pool (:data:`synperf.model.fingerprint.RULES`) form one grid (:data:`GRID`, simplest first). Each
training GPU in turn is left out: its constants are then predicted from the other training GPUs, as for a GPU without
measurements (:func:`synperf.model.fingerprint.predict_fingerprint`), its class-mates' correction added (a fixed
part of the predictor, not an option), and its rows predicted; an option scores the
mean over GPUs of its MAPE %; the first option within :data:`MARGIN` (5%) of the lowest wins
(:func:`choose_options`). The chosen option's residuals on those left-out GPUs give the interval of a GPU without
measurements (:func:`unseen_quantiles`). The few-shot prior weight (:data:`PRIOR_WEIGHTS`) is chosen the same way:
each left-out GPU's constants are refitted on its short sweeps (``k`` in :data:`PRIOR_KS`) and its other rows scored
(:func:`choose_prior_weight`). :func:`fit_chosen` fits the predictor with the chosen options.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.model.fingerprint import (
    FEWSHOT_PRIOR_WEIGHT,
    RULES,
    FingerprintModel,
    class_pool,
    fewshot_fingerprint,
    gpu_quantiles,
    pipe_times,
)

#: correction options of :meth:`FingerprintModel.fit`, simplest first: the fingerprint time alone, the correction
#: with :data:`synperf.model.paths.RESIDUAL_TREES`, a larger budget
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
        ``[(left-out GPU, its rows, the model fitted without it)]`` under the chosen fit options. Both empty with
        one GPU.
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
        for name, opts, rule in grid:
            key = repr(sorted(opts.items()))
            if key not in models:
                models[key] = FingerprintModel.fit(tr, meta, registry, max_train_rows=max_train_rows, seed=seed,
                                                   oof=False, **opts)
                fold_models.setdefault(key, []).append((h, te, models[key]))
            pred = models[key].predict(te, registry, rule=rule)
            scores[name].append(float(np.mean(np.abs(pred / y - 1.0)) * 100.0))
            residuals[name].append(pd.DataFrame({"gpu": h, "log_residual": np.log(y / pred), "class_found": found}))
    mean = {k: float(np.mean(v)) for k, v in scores.items()}
    name, opts, rule = next(c for c in grid if mean[c[0]] <= min(mean.values()) * (1.0 + MARGIN))
    folds = fold_models[repr(sorted(opts.items()))]
    return name, dict(opts), rule, mean, pd.concat(residuals[name], ignore_index=True), folds


def choose_prior_weight(folds: list, registry, rule: str, *, weights=PRIOR_WEIGHTS,
                        ks=PRIOR_KS, seed: int = 0) -> tuple[float, dict]:
    """The few-shot prior weight: each left-out training GPU of ``folds`` (:func:`choose_options`) gets its
    predicted constants refitted on its short sweep of ``k`` rows (:func:`synperf.evaluation.fewshot.short_sweep`,
    ``k`` in ``ks``) with each weight of ``weights``, and its other rows are scored (MAPE %); a weight scores the
    mean over (GPU, k); the first within :data:`MARGIN` of the lowest wins. Without folds, or without
    ``theoretical_time_us`` (the sweep's order), the first weight.

    Returns:
        ``(weight, {weight: score})``.
    """
    from synperf.evaluation.fewshot import short_sweep

    if not folds or any("theoretical_time_us" not in te.columns for _, te, _ in folds):
        return weights[0], {}
    scores: dict[float, list] = {w: [] for w in weights}
    for h, te, model in folds:
        te = te.reset_index(drop=True)
        prior = model.fingerprint(h, registry, rule)
        terms, y = pipe_times(te, registry), te["latency_us"].to_numpy(dtype="float64")
        for k in ks:
            if len(te) <= k:
                continue
            cal = short_sweep(te, k, seed)
            rest = np.ones(len(te), dtype=bool)
            rest[cal] = False
            for w in weights:
                model.overrides[h] = fewshot_fingerprint(prior, terms[cal], y[cal], prior_weight=w)
                pred = model.predict(te[rest], registry, rule=rule)
                scores[w].append(float(np.mean(np.abs(pred / y[rest] - 1.0)) * 100.0))
            model.overrides.pop(h, None)
    mean = {w: float(np.mean(v)) for w, v in scores.items() if v}
    if not mean:
        return weights[0], {}
    return next(w for w in weights if w in mean and mean[w] <= min(mean.values()) * (1.0 + MARGIN)), mean


def unseen_quantiles(residuals: pd.DataFrame) -> dict:
    """The 10% and 90% quantiles of the log residuals of GPUs predicted without their measurements (the chosen
    option's rows in :func:`choose_options`), each GPU weighing the same (:func:`gpu_quantiles`), per case
    ``class_found`` (a training GPU of its class or not), plus ``None`` over every row: ``{case: (q10, q90)}``."""
    out = {None: gpu_quantiles(residuals["log_residual"].to_numpy(), residuals["gpu"].to_numpy())}
    for found, g in residuals.groupby("class_found"):
        out[bool(found)] = gpu_quantiles(g["log_residual"].to_numpy(), g["gpu"].to_numpy())
    return out


def fit_chosen(rows: pd.DataFrame, meta: dict, registry, *, max_train_rows: int = 0, seed: int = 0,
               oof: bool = True) -> FingerprintModel:
    """:meth:`FingerprintModel.fit` on ``rows`` with the options :func:`choose_options` and the prior weight
    :func:`choose_prior_weight` pick on the same rows; the choice and its scores are kept in
    :attr:`FingerprintModel.choice`."""
    name, opts, rule, scores, residuals, folds = choose_options(rows, meta, registry, max_train_rows=max_train_rows,
                                                                seed=seed)
    weight, weight_scores = choose_prior_weight(folds, registry, rule, seed=seed)
    model = FingerprintModel.fit(rows, meta, registry, max_train_rows=max_train_rows, seed=seed, oof=oof,
                                 rule=rule, **opts)
    model.prior_weight = weight
    model.choice = {"option": name, "scores_mape_pct": scores, "prior_weight": weight,
                    "prior_weight_scores_mape_pct": weight_scores}
    if len(residuals):
        model.unseen_q = unseen_quantiles(residuals)
    return model
