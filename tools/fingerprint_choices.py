"""Choose the fingerprint predictor's options on seen GPUs only: leave one seen GPU out inside each core family's
configured training rows.

    python tools/fingerprint_choices.py --features ../main/results/features [--problems 1000] [--out choices.csv]

For every core family of the config (``protocols.experiments``) it reads the cached feature table
(``<features>/v2/<experiment>.parquet``), keeps a seeded sample of problems (:func:`synperf.lab.sample_problems`)
and only the rows labelled ``train`` by the configured split (the configured seen GPUs without their held-out
problems: never a held-out problem, never an unseen GPU). Each seen GPU is left out in turn; every candidate of
:data:`CANDIDATES` (:class:`synperf.model.fingerprint.FingerprintModel` options) is fitted on the other seen GPUs'
rows (correction capped at 5,000 rows, the protocols' cap) and scored by MAPE on the left-out GPU's rows. A family
scores the mean over its folds; a candidate the geometric mean over families. The rule of every other choice: the
first candidate (simplest first) within 5% of the lowest. Prints the table and the choice; ``--out`` writes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synperf.data.hardware import load_registry  # noqa: E402
from synperf.evaluation.baselines import add_baseline_columns  # noqa: E402
from synperf.evaluation.fewshot import fingerprint_fewshot  # noqa: E402
from synperf.lab import sample_problems  # noqa: E402
from synperf.model.fingerprint import FingerprintModel  # noqa: E402
from synperf.model.fingerprint_choice import fit_chosen  # noqa: E402

#: candidates, simplest first: (name, FingerprintModel.fit options)
CANDIDATES = [
    ("fingerprint only, mean", {"rule": "mean", "correct": False}),
    ("fingerprint only, pooled", {"rule": "pooled", "correct": False}),
    ("mean, correction 40x0.7", {"rule": "mean"}),
    ("pooled, correction 40x0.7", {"rule": "pooled"}),
    ("pooled, correction 300x0.1", {"rule": "pooled", "trees": {"max_iter": 300, "learning_rate": 0.1}}),
]
MARGIN = 0.05
#: few-shot prior weights tried (:func:`synperf.model.fingerprint.fewshot_fingerprint`), at k = 8 and 32
PRIOR_WEIGHTS = (1.0, 4.0, 16.0)


def score_fewshot(table: pd.DataFrame, meta: dict, registry, seed: int) -> dict[str, float]:
    """Mean over the left-out seen GPUs, k = 8 and 32 and seeds 0-2 of the MAPE % after the few-shot refit of
    its constants with each prior weight (the predictor as the protocols fit it, :func:`fit_chosen`)."""
    gpus = sorted(table["gpu"].astype(str).unique())
    res = []
    for h in gpus:
        model = fit_chosen(table[table["gpu"] != h], meta, registry, max_train_rows=5000, seed=seed, oof=False)
        res.append(fingerprint_fewshot(model, table[table["gpu"] == h], registry, ks=(8, 32),
                                       prior_weights=PRIOR_WEIGHTS))
    r = pd.concat(res)
    return {f"few-shot prior weight {w:g}": float(v) for w, v in r.groupby("prior_weight")["mape_pct"].mean().items()}


def score_family(table: pd.DataFrame, meta: dict, registry, seed: int) -> dict[str, float]:
    """Mean over the left-out seen GPUs of each candidate's MAPE %."""
    gpus = sorted(table["gpu"].astype(str).unique())
    out: dict[str, list] = {name: [] for name, _ in CANDIDATES}
    for h in gpus:
        tr = table[table["gpu"] != h].reset_index(drop=True)
        te = table[table["gpu"] == h].reset_index(drop=True)
        y = te["latency_us"].to_numpy(dtype="float64")
        for name, opts in CANDIDATES:
            model = FingerprintModel.fit(tr, meta, registry, max_train_rows=5000, seed=seed, oof=False, **opts)
            pred = model.predict(te, registry)
            out[name].append(float(np.mean(np.abs(pred / y - 1.0)) * 100.0))
    return {k: float(np.mean(v)) for k, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "config" / "config.yaml")
    ap.add_argument("--features", type=Path, default=ROOT / "results" / "features")
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    cfg = yaml.safe_load(args.config.read_text())
    registry = load_registry(str(ROOT / cfg["gpu_registry"]), str(ROOT / "data" / "hardware"))
    seed = int(cfg.get("seed", 0))
    rows = {}
    for name in cfg["protocols"]["experiments"]:
        exp = cfg["experiments"][name]
        t = pd.read_parquet(args.features / "v2" / f"{name}.parquet")
        meta = yaml.safe_load((args.features / "v2" / f"{name}.json").read_text())
        t = sample_problems(t, args.problems, seed)
        t = t[(t["split"] == "train") & t["gpu"].isin(exp["seen"])].reset_index(drop=True)
        if t["gpu"].nunique() < 2:
            continue
        t = add_baseline_columns(t, registry, tiles=False)
        rows[name] = {**score_family(t, meta, registry, seed), **score_fewshot(t, meta, registry, seed)}
        print(name, {k: round(v, 1) for k, v in rows[name].items()}, flush=True)
    res = pd.DataFrame(rows).T
    geo = np.exp(np.log(res).mean())
    res.loc["geometric mean"] = geo
    best = float(geo[[n for n, _ in CANDIDATES]].min())
    choice = next(n for n, _ in CANDIDATES if geo[n] <= best * (1 + MARGIN))
    weights = [f"few-shot prior weight {w:g}" for w in PRIOR_WEIGHTS]
    best_w = float(geo[weights].min())
    print(f"few-shot prior weight (first within {MARGIN:.0%} of the lowest {best_w:.2f}): "
          + next(w for w in weights if geo[w] <= best_w * (1 + MARGIN)))
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(res.T.round(2).to_string())
    print(f"choice (first within {MARGIN:.0%} of the lowest {best:.2f}): {choice}")
    if args.out:
        res.to_csv(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
