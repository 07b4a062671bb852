#!/usr/bin/env python3
"""Choose the own-GPU correction's budget on the training rows of the seen GPUs only (the choice behind
``OWN_GPU_TREES`` and ``OWN_GPU_MAX_ROWS`` in ``synperf/model/correction.py``).

    python3 tools/own_gpu_budget.py [--results results] [--models models] [--out budgets.csv] [--budgets "A;B"]

Needs the main job's feature tables (``<results>/features/<feature_set>/<experiment>.parquet`` and ``.json``) and
fitted fingerprint predictors (``<models>/<experiment>/fingerprint.joblib``, for the options they chose). For every
experiment of ``protocols.experiments``: a seeded fifth of the problems (``problem_key``) of its configured
training rows (``split == "train"``: no held-out problem, no unseen GPU is read) is set aside; the predictor is
refitted on the rest with the options it chose, without own-GPU corrections; then each budget of :data:`BUDGETS`
fits the own-GPU corrections on the same rows and scores the set-aside problems of every training GPU. Prints the
per-experiment MAPE (rows of every training GPU), the geometric mean over experiments, the fit seconds per budget,
and the choice: the cheapest budget (by fit seconds) whose geometric mean is within :data:`WITHIN` of the lowest.
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

import synperf.model.fingerprint as fingerprint  # noqa: E402
from synperf.data.hardware import load_registry  # noqa: E402
from synperf.data.io import read_table  # noqa: E402
from synperf.evaluation.metrics import ape  # noqa: E402
from synperf.model.correction import OWN_GPU_TREES  # noqa: E402
from synperf.model.fingerprint_choice import GRID  # noqa: E402
from synperf.model.pipes import pipe_times  # noqa: E402
from synperf.model.roofline import add_baseline_columns  # noqa: E402
from tools.protocol_mlp_budget import WITHIN, cheapest_within  # noqa: E402

#: candidate budgets: name -> (row cap per GPU, 0 for all rows; tree arguments over OWN_GPU_TREES)
BUDGETS = {"20000 rows, 31 leaves": (20000, {}),
           "all rows, 31 leaves": (0, {}),
           "all rows, 63 leaves": (0, {"max_leaf_nodes": 63}),
           "all rows, 63 leaves, rate 0.05": (0, {"max_leaf_nodes": 63, "learning_rate": 0.05, "max_iter": 3000})}
#: share of the training problems set aside for scoring
VALIDATION_SHARE = 0.2


def score(results: Path, models: Path, config: dict, budgets: list[str] | None = None) -> pd.DataFrame:
    """One row per (experiment, training GPU, budget of ``budgets``, default all of :data:`BUDGETS`): MAPE (percent)
    on the set-aside problems, rows, fit seconds (the budget's own-GPU corrections of every training GPU, per
    GPU), trees (the GPU's own-GPU correction) and predict seconds (the set-aside rows of every training GPU)."""
    fs, seed = config["feature_set"], int(config["seed"])
    registry = load_registry(config["gpu_registry"], config.get("hardware_measurements_dir"))
    out = []
    for name in config["protocols"]["experiments"]:
        table = read_table(results / "features" / fs / f"{name}.parquet")
        meta = json.loads((results / "features" / fs / f"{name}.json").read_text())
        chosen = fingerprint.FingerprintModel.load(models / name / "fingerprint.joblib").choice["option"]
        _, opts, rule = next(g for g in GRID if g[0] == chosen)
        rows = table[table["split"].astype(str).to_numpy() == "train"].reset_index(drop=True)
        keys = np.unique(rows["problem_key"].to_numpy())
        held = set(np.random.default_rng(seed).choice(keys, int(round(VALIDATION_SHARE * len(keys))),
                                                      replace=False))
        va_mask = rows["problem_key"].isin(held).to_numpy()
        tr = add_baseline_columns(rows[~va_mask].reset_index(drop=True), registry, tiles=False)
        va = rows[va_mask].reset_index(drop=True)
        model = fingerprint.FingerprintModel.fit(tr, meta, registry, max_train_rows=int(config["training"]
                                                 ["max_train_rows"]), seed=seed, oof=False, local=False, rule=rule,
                                                 **opts)
        prepared = fingerprint.with_spec_columns(fingerprint.with_v2_columns(tr, registry), registry)
        terms = pipe_times(prepared, registry)
        y, gpus = va["latency_us"].to_numpy(dtype="float64"), va["gpu"].astype(str).to_numpy()
        for budget in budgets or list(BUDGETS):
            cap, trees = BUDGETS[budget]
            model.local = {}
            t0 = time.perf_counter()
            model._fit_local(prepared, terms, registry, seed, sorted(model.fitted), {**OWN_GPU_TREES, **trees}, cap)
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            errors = ape(model.predict(va, registry), y)
            predict_s = time.perf_counter() - t0
            for g in sorted(set(gpus)):
                local = model.local.get(g)
                out.append({"experiment": name, "gpu": g, "budget": budget, "rows": int((gpus == g).sum()),
                            "mape_pct": float(np.mean(errors[gpus == g])), "fit_s": fit_s / len(model.fitted),
                            "trees": int(getattr(local, "n_iter_", 0)), "predict_s": predict_s})
            print(name, budget, f"{np.mean(errors):.3f}% fit {fit_s:.1f} s, predict {predict_s:.2f} s", flush=True)
    return pd.DataFrame(out)


def choose(scores: pd.DataFrame) -> tuple[str, pd.Series, pd.Series]:
    """``(chosen budget, geometric mean MAPE per budget, fit seconds per budget)`` from :func:`score`'s rows;
    an experiment's MAPE weighs its GPUs by rows."""
    scores = scores.assign(weighted=scores["mape_pct"] * scores["rows"])
    per = scores.groupby(["experiment", "budget"])[["weighted", "rows"]].sum()
    return cheapest_within((per["weighted"] / per["rows"]).unstack(), scores.groupby("budget")["fit_s"].sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--models", default="models")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--out", help="CSV of the per-GPU scores")
    ap.add_argument("--budgets", help="semicolon list of BUDGETS names to score (default all)")
    args = ap.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    budgets = list(dict.fromkeys(b.strip() for b in args.budgets.split(";"))) if args.budgets else None
    unknown = [b for b in budgets or [] if b not in BUDGETS]
    if unknown:
        ap.error(f"--budgets: unknown {unknown}; known: {list(BUDGETS)}")
    scores = score(Path(args.results), Path(args.models), config, budgets)
    if args.out:
        scores.to_csv(args.out, index=False)
    chosen, geo, secs = choose(scores)
    print(scores.pivot_table(index=["experiment", "gpu"], columns="budget", values="mape_pct").round(2).to_string())
    print("geometric mean MAPE (%):", geo.round(3).to_dict())
    print("fit seconds:", secs.round(1).to_dict())
    print("trees per GPU (mean):", scores.groupby("budget")["trees"].mean().round(0).to_dict())
    among = "" if budgets is None else f" among the {len(budgets)} budgets scored, not all of BUDGETS"
    print(f"chosen: {chosen} {BUDGETS[chosen]} (cheapest within {WITHIN:.0%} of the lowest{among})")


if __name__ == "__main__":
    main()
