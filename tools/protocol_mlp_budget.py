#!/usr/bin/env python3
"""Choose the training budget of the leave-one-out folds' MLP on the seen GPUs only (the choice behind
``protocols.training`` in ``config/config.yaml``).

    python3 tools/protocol_mlp_budget.py [--results results] [--out budgets.csv]

Needs the main job's feature tables (``<results>/features/<feature_set>/<experiment>.parquet`` and ``.json``) and
training recipes (``<results>/selection/<experiment>/recipe.json``). For every experiment of
``protocols.experiments`` with two or more seen GPUs: leave one seen GPU out over its configured training rows
(``split == "train"``: no held-out problem, no unseen GPU is read), the MLP trained with each budget of
:data:`BUDGETS` (the experiment's recipe over ``training``, as the protocol folds train it) on the other GPUs and
scored on the left-out GPU. Prints the per-experiment MAPE (mean over folds), the geometric mean over
experiments, the fit seconds per budget, and the choice: the cheapest budget (by fit seconds) whose geometric mean
is within :data:`WITHIN` of the lowest.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synperf.data.io import read_table  # noqa: E402
from synperf.evaluation.metrics import ape  # noqa: E402
from synperf.evaluation.selection import MIN_RELATIVE_GAIN, losgo_folds  # noqa: E402
from synperf.model.estimator import TrainConfig, train  # noqa: E402
from synperf.model.features import FeatureFrame  # noqa: E402
from synperf.pipeline.train import recipe_overrides  # noqa: E402

#: candidate budgets: name -> the ``training`` keys they set
BUDGETS = {"40x10000": {"max_epochs": 40, "max_train_rows": 10000},
           "25x10000": {"max_epochs": 25, "max_train_rows": 10000},
           "40x5000": {"max_epochs": 40, "max_train_rows": 5000},
           "25x5000": {"max_epochs": 25, "max_train_rows": 5000}}
#: a budget within this relative margin of the lowest geometric-mean MAPE counts as equal: the margin of every other
#: choice of the pipeline (retraining with another seed moves a MAPE by more)
WITHIN = MIN_RELATIVE_GAIN


def score(results: Path, config: dict) -> pd.DataFrame:
    """One row per (experiment, left-out seen GPU, budget): MAPE (percent) and fit seconds."""
    fs = config["feature_set"]
    seed = int(config["seed"])
    out = []
    for name in config["protocols"]["experiments"]:
        table = read_table(results / "features" / fs / f"{name}.parquet")
        meta = json.loads((results / "features" / fs / f"{name}.json").read_text())
        recipe = results / "selection" / name / "recipe.json"
        overrides = recipe_overrides(str(recipe) if recipe.exists() else None)
        overrides.pop("recipe", None)
        for fold in losgo_folds(table):
            tr, va = table[fold.train_mask], table[fold.test_mask]
            for budget, keys in BUDGETS.items():
                cfg = TrainConfig.from_dict({**config["training"], **overrides, **keys, "seed": seed, "threads": 1})
                t0 = time.perf_counter()
                model = train(FeatureFrame(tr, meta["numeric"], meta["linear"], meta["categorical"]),
                              tr["latency_us"], tr["problem_key"], cfg, log=lambda *_: None)
                fit_s = time.perf_counter() - t0
                pred = model.predict_latency_us(FeatureFrame(va, meta["numeric"], meta["linear"],
                                                             meta["categorical"]))
                out.append({"experiment": name, "validation_gpu": fold.unseen_gpus[0], "budget": budget,
                            "mape_pct": float(np.mean(ape(pred, va["latency_us"].to_numpy(dtype="float64")))),
                            "fit_s": fit_s, "epochs_run": model.meta["epochs_run"]})
                print(out[-1], flush=True)
    return pd.DataFrame(out)


def choose(scores: pd.DataFrame) -> tuple[str, pd.Series, pd.Series]:
    """``(chosen budget, geometric mean MAPE per budget, fit seconds per budget)`` from :func:`score`'s rows."""
    return cheapest_within(scores.groupby(["experiment", "budget"])["mape_pct"].mean().unstack(),
                           scores.groupby("budget")["fit_s"].sum())


def cheapest_within(per: pd.DataFrame, secs: pd.Series) -> tuple[str, pd.Series, pd.Series]:
    """``(chosen budget, geometric mean MAPE per budget, secs)`` from a MAPE table (experiments x budgets) and the
    fit seconds per budget: the cheapest budget whose geometric mean is within :data:`WITHIN` of the lowest."""
    geo = np.exp(np.log(per).mean())
    ok = geo[geo <= geo.min() * (1 + WITHIN)].index
    return str(secs.loc[ok].idxmin()), geo, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--out", help="CSV of the per-fold scores")
    args = ap.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    scores = score(Path(args.results), config)
    if args.out:
        scores.to_csv(args.out, index=False)
    chosen, geo, secs = choose(scores)
    print(scores.groupby(["experiment", "budget"])["mape_pct"].mean().unstack().round(2).to_string())
    print("geometric mean MAPE (%):", geo.round(3).to_dict())
    print("fit seconds:", secs.round(1).to_dict())
    print(f"chosen: {chosen} {BUDGETS[chosen]} (cheapest within {WITHIN:.0%} of the lowest)")


if __name__ == "__main__":
    main()
