"""Seed-to-seed spread of the primary models' MAPE: the measured noise behind the guard's trained tolerance.

    python3 tools/seed_spread.py [--seeds 1 2] [--jobs 2] [--results results] [--out tests/expected/seed_spread.csv]

For every experiment of ``config/config.yaml`` it retrains the primary model (``feature_set``, group ``all``) on
the same feature table and split with each training seed of ``--seeds`` (``TrainConfig.seed``: weight
initialisation, the row subsample and the early-stopping validation problems; the split's own seed is not
touched), predicts every row, and puts the MAPE per GPU and split beside the pipeline's own model (the
``seed`` of the config) from ``results/tables/mape/<experiment>/<feature_set>-all.csv``. Writes one row per (experiment,
gpu, split) with the MAPE of every seed and ``spread_pp`` = max - min, and prints the largest spreads. Needs a finished
run.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synperf.data.io import read_table, write_csv  # noqa: E402
from synperf.evaluation.metrics import ape  # noqa: E402
from synperf.model.estimator import TrainConfig, train  # noqa: E402
from synperf.model.features import FeatureFrame  # noqa: E402


def _seed_mape(res: str, fs: str, exp: str, training: dict, seed: int, threads: int) -> dict:
    """MAPE per (gpu, split), and per split over all GPUs (gpu ``ALL``), of the primary model retrained with
    training seed ``seed`` on the same feature table and split."""
    table = read_table(Path(res) / "features" / fs / f"{exp}.parquet")
    meta = json.loads((Path(res) / "features" / fs / f"{exp}.json").read_text())
    ff = lambda t: FeatureFrame(t, meta["numeric"], meta["linear"], meta["categorical"])  # noqa: E731
    tr = table[table["split"] == "train"].reset_index(drop=True)
    tcfg = TrainConfig.from_dict({**training, "seed": seed, "threads": threads})
    model = train(ff(tr), tr["latency_us"], tr["problem_key"], tcfg, log=lambda *_: None)
    e = pd.DataFrame({"gpu": table["gpu"], "split": table["split"],
                      "ape": ape(model.predict_latency_us(ff(table)), table["latency_us"])})
    out = {(gpu, split): float(g["ape"].mean()) for (gpu, split), g in e.groupby(["gpu", "split"])}
    out.update({("ALL", split): float(g["ape"].mean()) for split, g in e.groupby("split")})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--results", default="results")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per training")
    ap.add_argument("--jobs", type=int, default=1, help="trainings at once (processes)")
    ap.add_argument("--experiments", nargs="+", help="default: every experiment of the config")
    ap.add_argument("--out", default="tests/expected/seed_spread.csv")
    args = ap.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text())
    fs, res = cfg["feature_set"], Path(args.results)
    experiments = sorted(args.experiments or cfg["experiments"])
    tasks = [(exp, seed) for exp in experiments for seed in args.seeds]
    base = pd.concat([pd.read_csv(res / "tables" / "mape" / exp / f"{fs}-all.csv") for exp in experiments],
                     ignore_index=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {t: pool.submit(_seed_mape, str(res), fs, t[0], cfg["training"], t[1], args.threads) for t in tasks}
        results = {}
        for t, f in futures.items():
            results[t] = f.result()
            print(f"{t[0]} seed {t[1]}: done", flush=True)
    rows = []
    for exp in experiments:
        b = base[base["experiment"] == exp].set_index(["gpu", "split"])["mape_pct"]
        per = {key: {f"seed_{cfg['seed']}": v} for key, v in b.items()}
        for seed in args.seeds:
            for key, v in results[(exp, seed)].items():
                per.setdefault(key, {})[f"seed_{seed}"] = v
        for (gpu, split), v in per.items():
            rows.append({"experiment": exp, "gpu": gpu, "split": split, **v})
    out = pd.DataFrame(rows)
    seeds = [c for c in out.columns if c.startswith("seed_")]
    out["spread_pp"] = out[seeds].max(axis=1) - out[seeds].min(axis=1)
    out["spread_rel"] = out["spread_pp"] / out[seeds].mean(axis=1)
    write_csv(out, args.out)
    test = out[out["split"] != "train"]
    print(test.sort_values("spread_pp", ascending=False).head(12).to_string(index=False, float_format="%.2f"))
    print(f"\nspread over {len(test)} (experiment, gpu, split) values: max {test['spread_pp'].max():.2f} pp, "
          f"p90 {test['spread_pp'].quantile(0.9):.2f} pp, max relative {test['spread_rel'].max():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
