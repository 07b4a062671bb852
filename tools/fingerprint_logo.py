"""Few-shot curves and 80% interval coverage of the fingerprint predictor under leave-one-GPU-out.

    python tools/fingerprint_logo.py --features ../main/results/features [--problems 1000] [--out logo_fp.csv]

For every core family of the config it reads the cached feature table (``<features>/v2/<experiment>.parquet``),
keeps the seeded sample of problems of the fast accuracy loop (:func:`synperf.lab.sample_problems`), and for each
leave-one-GPU-out fold (:func:`synperf.evaluation.protocols.make_folds`) fits the predictor on the fold's training
rows with its options chosen there (:func:`synperf.model.fingerprint_choice.fit_chosen`, correction capped at
5,000 rows, the protocols' cap), then refits the left-out GPU's constants on its short sweep of ``k`` rows
(:func:`synperf.evaluation.fewshot.fingerprint_fewshot`, ``k`` in 0, 8, 32, seeds 0-2) and scores the rest: MAPE and
the share of rows inside the 80% interval. Prints one row per (family, GPU) and the mean per family.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synperf.data.hardware import load_registry  # noqa: E402
from synperf.evaluation.fewshot import fingerprint_fewshot  # noqa: E402
from synperf.evaluation.protocols import make_folds  # noqa: E402
from synperf.lab import sample_problems  # noqa: E402
from synperf.model.fingerprint_choice import fit_chosen  # noqa: E402
from synperf.model.roofline import add_baseline_columns  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "config" / "config.yaml")
    ap.add_argument("--features", type=Path, default=ROOT / "results" / "features")
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--families", help="comma-separated (default: the config's protocols.experiments)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    cfg = yaml.safe_load(args.config.read_text())
    registry = load_registry(str(ROOT / cfg["gpu_registry"]), str(ROOT / "data" / "hardware"))
    seed = int(cfg.get("seed", 0))
    families = args.families.split(",") if args.families else cfg["protocols"]["experiments"]
    parts = []
    for name in families:
        exp = cfg["experiments"][name]
        table = sample_problems(pd.read_parquet(args.features / "v2" / f"{name}.parquet"), args.problems, seed)
        meta = json.loads((args.features / "v2" / f"{name}.json").read_text())
        table = add_baseline_columns(table, registry, tiles=False)
        gpus = list(exp["seen"]) + list(exp.get("unseen", []))
        for fold in make_folds("logo", table, registry, gpus=gpus, heldout_frac=exp.get("heldout_frac", 0.2),
                               seed=seed, heldout_source_files=exp.get("heldout_source_files")):
            model = fit_chosen(table[fold.train_mask], meta, registry, max_train_rows=5000, seed=seed, local_oof=False)
            res = fingerprint_fewshot(model, table[fold.labels == "unseen"], registry, ks=(0, 8, 32))
            parts.append(res.assign(experiment=name, option=model.choice["option"]))
            print(name, fold.name, model.choice["option"], flush=True)
    res = pd.concat(parts, ignore_index=True)
    per_gpu = res.pivot_table(index=["experiment", "gpu"], columns="k", values=["mape_pct", "interval_coverage"],
                              aggfunc="mean")
    with pd.option_context("display.width", 200):
        print(per_gpu.round(3).to_string())
        print(per_gpu.groupby(level="experiment").mean().round(3).to_string())
        print("mean over families:\n" + per_gpu.groupby(level="experiment").mean().mean().round(3).to_string())
    if args.out:
        res.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
