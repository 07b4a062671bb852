"""The one way the fingerprint predictor chooses: a grid of options scored by leaving each training GPU out.

Whether to correct the fingerprint time, with which tree budget, and how a sibling's measurement of the same launch
enters (:data:`GRID`, simplest first) are scored by leaving each training GPU out in turn: its constants are then
predicted from the other training GPUs, as for a GPU without measurements
(:func:`synperf.model.fingerprint.predict_fingerprint`), and its rows predicted; an option scores the mean over
GPUs of its MAPE %; the first option within :data:`MARGIN` (5%) of the lowest wins (:func:`choose_options`). The
chosen option's residuals on those left-out GPUs give the interval of a GPU without measurements
(:func:`unseen_quantiles`). :func:`fit_chosen` fits the predictor with the chosen option.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.model.fingerprint import SIBLING_MODES, FingerprintModel, class_pool, gpu_quantiles

#: the options chosen per training set by :func:`choose_options`, simplest first: ``(name, options of
#: FingerprintModel.fit, sibling mode)``: the fingerprint time alone, the correction with
#: :data:`synperf.model.paths.RESIDUAL_TREES`, a larger budget; each without a sibling's measurement, with its
#: ratio to its fingerprint time, with its roofline shift
GRID = tuple((f"{name}{f' + sibling {sib}' if sib else ''}", opts, sib)
             for name, opts in (("fingerprint only", {"correct": False}), ("correction 40x0.7", {}),
                                ("correction 300x0.1", {"trees": {"max_iter": 300, "learning_rate": 0.1}}))
             for sib in SIBLING_MODES)
#: the simplest option within this relative margin of the lowest score is chosen
MARGIN = 0.05


def choose_options(rows: pd.DataFrame, meta: dict, registry, *, max_train_rows: int = 0, seed: int = 0,
                   grid=GRID) -> tuple[str, dict, str | None, dict]:
    """Choose among ``grid`` by leave one training GPU out: each GPU of ``rows`` is predicted by each option
    fitted on the other GPUs' rows (its constants predicted, as for a GPU without measurements); an option scores
    the mean over GPUs of its MAPE %; the first option within :data:`MARGIN` of the lowest wins. With one GPU
    (no fold), the first option.

    Returns:
        ``(name, fit options, sibling mode, {name: score}, residuals)``: ``residuals`` has one row per row of a
        left-out GPU under the chosen option: ``gpu``, ``log_residual`` (``log(measured / predicted)``),
        ``sibling`` (sibling evidence replaced the correction there) and ``class_found`` (a training GPU of its
        class informed its constants); empty with one GPU.
    """
    gpus = rows["gpu"].astype(str).to_numpy()
    names = sorted(set(gpus))
    if len(names) < 2:
        return grid[0][0], dict(grid[0][1]), grid[0][2], {}, pd.DataFrame()
    scores: dict[str, list] = {name: [] for name, _, _ in grid}
    residuals: dict[str, list] = {name: [] for name, _, _ in grid}
    for h in names:
        tr, te = rows[gpus != h], rows[gpus == h]
        y = te["latency_us"].to_numpy(dtype="float64")
        models: dict = {}
        found = class_pool(h, sorted(set(gpus[gpus != h])), registry)[1].startswith("class")
        for name, opts, sib in grid:
            key = repr(sorted(opts.items()))
            if key not in models:
                models[key] = FingerprintModel.fit(tr, meta, registry, max_train_rows=max_train_rows, seed=seed,
                                                   oof=False, **opts)
                models[key + "evidence"] = np.isfinite(models[key].sibling_evidence(te, registry)[:, 0])
            pred = models[key].predict(te, registry, sibling=sib)
            scores[name].append(float(np.mean(np.abs(pred / y - 1.0)) * 100.0))
            used = models[key + "evidence"] & (sib is not None)
            residuals[name].append(pd.DataFrame({"gpu": h, "log_residual": np.log(y / pred), "sibling": used,
                                                 "class_found": found}))
    mean = {k: float(np.mean(v)) for k, v in scores.items()}
    best = min(mean.values())
    name, opts, sib = next(c for c in grid if mean[c[0]] <= best * (1.0 + MARGIN))
    return name, dict(opts), sib, mean, pd.concat(residuals[name], ignore_index=True)


def unseen_quantiles(residuals: pd.DataFrame) -> dict:
    """The 10% and 90% quantiles of the log residuals of GPUs predicted without their measurements (the chosen
    option's rows in :func:`choose_options`), each GPU weighing the same (:func:`gpu_quantiles`), per case
    ``(class_found, sibling)``, plus ``None`` over every row: ``{case: (q10, q90)}``."""
    out = {None: gpu_quantiles(residuals["log_residual"].to_numpy(), residuals["gpu"].to_numpy())}
    for (found, sib), g in residuals.groupby(["class_found", "sibling"]):
        out[(bool(found), bool(sib))] = gpu_quantiles(g["log_residual"].to_numpy(), g["gpu"].to_numpy())
    return out


def fit_chosen(rows: pd.DataFrame, meta: dict, registry, *, max_train_rows: int = 0, seed: int = 0,
               oof: bool = True) -> FingerprintModel:
    """:meth:`FingerprintModel.fit` on ``rows`` with the options :func:`choose_options` picks on the same rows;
    the choice and its scores are kept in :attr:`FingerprintModel.choice`."""
    name, opts, sib, scores, residuals = choose_options(rows, meta, registry, max_train_rows=max_train_rows,
                                                        seed=seed)
    model = FingerprintModel.fit(rows, meta, registry, max_train_rows=max_train_rows, seed=seed, oof=oof, **opts)
    model.use_sibling = sib
    model.choice = {"option": name, "scores_mape_pct": scores}
    if len(residuals):
        model.unseen_q = unseen_quantiles(residuals)
    return model
