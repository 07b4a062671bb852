"""How much a trained model's MAPE moves with the CPU code path and the thread count, at a fixed seed.

    python3 tools/cpu_spread.py [--experiments silu_mul rmsnorm] [--results results] [--out FILE]

Retrains each experiment's primary model (the configured ``feature_set``, the config's ``training``, seed of the
config) on the cached feature table and split of a finished run, once per variant below, each in a fresh process
with its own environment, and writes the MAPE per (experiment, gpu, split) of every variant and the largest
difference from ``pinned_1_thread``:

* ``pinned_1_thread``, ``pinned_2_threads``: the code paths synperf pins (``synperf.PINNED_CPU_KERNELS``) with 1 and
  2 torch threads;
* ``cpu_default``: MKL and ATen pick their kernels by this CPU (``MKL_CBWR=AUTO``, ``ATEN_CPU_CAPABILITY`` the
  best this CPU has), what every run did before the pin: another CPU picks other kernels;
* ``generic``: MKL's and ATen's CPU-independent paths (``MKL_CBWR=COMPATIBLE``, ``ATEN_CPU_CAPABILITY=default``), the
  paths of a CPU without AVX2.

The spread between the variants is the size of what differs between machines when the code paths differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
VARIANTS = {
    "pinned_1_thread": ({}, 1),
    "pinned_2_threads": ({}, 2),
    "cpu_default": ({"MKL_CBWR": "AUTO", "ATEN_CPU_CAPABILITY": "avx512"}, 1),
    "generic": ({"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default"}, 1),
}
CHILD = """
import json, sys
sys.path.insert(0, {repo!r}); sys.path.insert(0, {tools!r})
from seed_spread import _seed_mape
out = _seed_mape({res!r}, {fs!r}, {exp!r}, json.loads({training!r}), {seed}, {threads})
print(json.dumps([[g, s, v] for (g, s), v in out.items()]))
"""


def run_variant(res: str, fs: str, exp: str, training: dict, seed: int, variant: str) -> dict:
    """MAPE per (gpu, split) of the primary model retrained under ``variant`` (a fresh process)."""
    env_set, threads = VARIANTS[variant]
    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "ATEN_CPU_CAPABILITY")} | env_set
    code = CHILD.format(repo=str(REPO), tools=str(REPO / "tools"), res=res, fs=fs, exp=exp,
                        training=json.dumps(training), seed=seed, threads=threads)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return {(g, s): v for g, s, v in json.loads(out.stdout.strip().splitlines()[-1])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", nargs="+", default=["silu_mul", "rmsnorm", "gemm_fp8"])
    ap.add_argument("--results", default="results")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--jobs", type=int, default=2, help="trainings at once")
    ap.add_argument("--out", default="results/tables/cpu_spread.csv")
    args = ap.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text())
    fs, seed = cfg["feature_set"], int(cfg["seed"])
    tasks = [(e, v) for e in args.experiments for v in VARIANTS]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {t: pool.submit(run_variant, args.results, fs, t[0], cfg["training"], seed, t[1]) for t in tasks}
        results = {t: f.result() for t, f in futures.items()}
    rows = []
    for exp in args.experiments:
        keys = results[(exp, "pinned_1_thread")]
        for gpu, split in keys:
            rows.append({"experiment": exp, "gpu": gpu, "split": split,
                         **{v: results[(exp, v)].get((gpu, split)) for v in VARIANTS}})
    out = pd.DataFrame(rows)
    for v in list(VARIANTS)[1:]:
        out[f"{v}_diff_pp"] = out[v] - out["pinned_1_thread"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(args.out, index=False)
    test = out[out["split"] != "train"]
    print(test.to_string(index=False, float_format="%.3f"))
    for v in list(VARIANTS)[1:]:
        d = test[f"{v}_diff_pp"].abs()
        rel = (d / test["pinned_1_thread"]).max()
        print(f"{v} vs pinned_1_thread: max |diff| {d.max():.3f} pp, max relative {rel:.3f}, "
              f"{int((d == 0).sum())}/{len(d)} values identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
