#!/usr/bin/env python3
"""Choose the residual model's tree budget on the seen GPUs only (the choice behind
``synperf.model.paths.RESIDUAL_TREES``).

    python3 tools/residual_tree_budget.py [--results results] [--out budgets.csv]

Needs the main job's feature tables (``<results>/features/<feature_set>/<experiment>.parquet`` and ``.json``).
For every experiment with two or more seen GPUs: leave one seen GPU out over its configured training rows
(``split == "train"``: no held-out problem, no unseen GPU is read), the residual model fitted with each budget of
:data:`BUDGETS` on the other GPUs (5,000-row cap, the selection budget's) and scored on the left-out GPU. Prints
the per-experiment MAPE (mean over folds), the geometric mean over experiments, the fit and predict seconds per
budget, and the choice: the cheapest budget (by fit seconds) whose geometric mean is within :data:`WITHIN` of
the lowest.
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

from synperf.data.hardware import load_registry  # noqa: E402
from synperf.data.io import read_table  # noqa: E402
from synperf.evaluation.metrics import ape  # noqa: E402
from synperf.evaluation.path_selection import MIN_RELATIVE_GAIN  # noqa: E402
from synperf.evaluation.protocols import _prepare  # noqa: E402
from synperf.evaluation.selection import losgo_folds  # noqa: E402
from synperf.model.paths import ResidualModel, with_spec_columns  # noqa: E402

#: candidate budgets: name -> HistGradientBoostingRegressor arguments (31 leaves each)
BUDGETS = {"300x0.1": {"max_iter": 300, "learning_rate": 0.1}, "150x0.2": {"max_iter": 150, "learning_rate": 0.2},
           "100x0.3": {"max_iter": 100, "learning_rate": 0.3}, "60x0.5": {"max_iter": 60, "learning_rate": 0.5},
           "40x0.7": {"max_iter": 40, "learning_rate": 0.7}}
#: a budget within this relative margin of the lowest geometric-mean MAPE counts as equal: the margin of every other
#: choice of the pipeline (retraining with another seed moves a MAPE by more)
WITHIN = MIN_RELATIVE_GAIN
MAX_TRAIN_ROWS = 5000


def score(results: Path, config: dict, registry) -> pd.DataFrame:
    """One row per (experiment, left-out seen GPU, budget): MAPE (percent), fit and predict seconds."""
    fs = config["feature_set"]
    out = []
    for name in config["experiments"]:
        table = read_table(results / "features" / fs / f"{name}.parquet")
        meta = json.loads((results / "features" / fs / f"{name}.json").read_text())
        rows = table[table["split"].astype(str).to_numpy() == "train"].reset_index(drop=True)
        rows, meta = _prepare(rows, registry, meta, int(config["seed"]), ["synperf"])
        rows = with_spec_columns(rows, registry)
        for fold in losgo_folds(rows):
            tr, va = rows[fold.train_mask], rows[fold.test_mask]
            for budget, trees in BUDGETS.items():
                t0 = time.perf_counter()
                model = ResidualModel.fit(tr, meta, registry, max_train_rows=MAX_TRAIN_ROWS,
                                          seed=int(config["seed"]), trees=trees)
                t1 = time.perf_counter()
                pred = model.predict(va, registry)
                out.append({"experiment": name, "validation_gpu": fold.unseen_gpus[0], "budget": budget,
                            "mape_pct": float(np.mean(ape(pred, va["latency_us"].to_numpy(dtype="float64")))),
                            "fit_s": t1 - t0, "predict_s": time.perf_counter() - t1})
    return pd.DataFrame(out)


def choose(scores: pd.DataFrame) -> tuple[str, pd.Series, pd.DataFrame]:
    """``(chosen budget, geometric mean MAPE per budget, seconds per budget)`` from :func:`score`'s rows."""
    per = scores.groupby(["experiment", "budget"])["mape_pct"].mean().unstack()
    geo = np.exp(np.log(per).mean())
    secs = scores.groupby("budget")[["fit_s", "predict_s"]].sum()
    ok = geo[geo <= geo.min() * (1 + WITHIN)].index
    return str(secs.loc[ok, "fit_s"].idxmin()), geo, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--registry", default="config/gpus.yaml")
    ap.add_argument("--measured", default="data/hardware")
    ap.add_argument("--out", help="CSV of the per-fold scores")
    args = ap.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    scores = score(Path(args.results), config, load_registry(args.registry, args.measured))
    if args.out:
        scores.to_csv(args.out, index=False)
    chosen, geo, secs = choose(scores)
    print(scores.groupby(["experiment", "budget"])["mape_pct"].mean().unstack().round(2).to_string())
    print("geometric mean MAPE (%):", geo.round(3).to_dict())
    print(secs.round(1).to_string())
    print(f"chosen: {chosen} {BUDGETS[chosen]} (cheapest within {WITHIN:.0%} of the lowest)")


if __name__ == "__main__":
    main()
