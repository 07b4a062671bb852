"""Benchmark: bulk ``predict`` throughput (launches per second) and peak memory on N launches.

    python3 benchmarks/predict_memory.py N [--families gemm attention_decode] [--models-dir models]
                                           [--gpu h200_sxm] [--chunk-rows ROWS]

Each family runs in its own process (so each peak is its own): the launches (random shapes, one GPU) are built
untimed, then one :func:`synperf.api.predict` call is timed. Printed per family: launches, seconds, launches per
second, the process's resident memory before the call and its peak (``resource.getrusage`` ``ru_maxrss``, MiB).
The target size is N = 10,000,000 launches: the chunked predict (:data:`synperf.api.CHUNK_ROWS` rows at a time)
should keep the peak to the output columns plus one chunk's working set, within a 24 GB machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def params(kernel: str, n: int, seed: int = 0) -> dict:
    """``n`` bfloat16 launches of ``kernel`` with random shapes (numpy columns)."""
    rng = np.random.default_rng(seed)
    pick = lambda xs: np.asarray(xs)[rng.integers(0, len(xs), n)]  # noqa: E731
    if kernel == "gemm":
        return {"m": rng.integers(1, 16385, n), "n": pick([1024, 4096, 5120, 8192, 14336, 28672]),
                "k": pick([1024, 4096, 5120, 8192, 14336]), "dtype": "bfloat16"}
    if kernel == "attention_decode":
        heads = pick([8, 16, 32, 64])
        return {"batch_size": rng.integers(1, 257, n), "kv_len": rng.integers(1, 32769, n), "num_heads": heads,
                "num_kv_heads": heads // pick([1, 2, 4, 8]), "head_dim": 128, "dtype": "bfloat16"}
    if kernel == "fused_moe":
        return {"num_tokens": rng.integers(1, 8193, n), "hidden_size": pick([2048, 4096, 7168]),
                "inter_size": pick([1408, 2048, 14336]), "topk": pick([2, 8]), "num_experts": pick([64, 256]),
                "dtype": "bfloat16"}
    raise SystemExit(f"no launch generator for {kernel!r}; use gemm, attention_decode or fused_moe")


def rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(kernel: str, n: int, models_dir: str, gpu: str, chunk_rows: int | None) -> dict:
    from synperf.api import predict

    p = params(kernel, n)
    before = rss_mib()
    t0 = time.perf_counter()
    out = predict(kernel, p, gpu, models_dir=models_dir, chunk_rows=chunk_rows, progress=True)
    dt = time.perf_counter() - t0
    assert len(out) == n
    return {"kernel": kernel, "launches": n, "seconds": round(dt, 1), "launches_per_s": round(n / dt),
            "rss_before_mib": round(before), "peak_rss_mib": round(rss_mib()),
            "output_mib": round(out.memory_usage(deep=True).sum() / 2**20)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="launches per family (target: 10000000)")
    ap.add_argument("--families", nargs="+", default=["gemm", "attention_decode"])
    ap.add_argument("--models-dir", default=str(REPO / "models"))
    ap.add_argument("--gpu", default="h200_sxm")
    ap.add_argument("--chunk-rows", type=int, default=None, help="predict's chunk_rows (default its CHUNK_ROWS)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # run one family in this process
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.n, args.models_dir, args.gpu, args.chunk_rows)))
        return 0
    rows = []
    for kernel in args.families:
        cmd = [sys.executable, __file__, str(args.n), "--one", kernel, "--models-dir", args.models_dir,
               "--gpu", args.gpu] + (["--chunk-rows", str(args.chunk_rows)] if args.chunk_rows else [])
        res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if res.returncode != 0:
            print(f"{kernel}: failed (exit {res.returncode})", file=sys.stderr)
            return res.returncode
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
