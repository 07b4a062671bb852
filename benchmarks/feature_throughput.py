"""Benchmark: feature extraction (decomposer + scheduler + analyzer) rows per second.

    python3 benchmarks/feature_throughput.py [--data ../shared/public-data] [--feature-set v2] [--config FILE]

Ingests the public data (not timed), then times ``build_features`` per kernel family and in total.
The issue's target: the whole public data set in under 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from synperf.data.hardware import load_registry  # noqa: E402
from synperf.data.ingest import ADAPTERS  # noqa: E402
from synperf.data.schema import reduce_duplicates  # noqa: E402
from synperf.model.features import build_features  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "public-data"))
    ap.add_argument("--feature-set", default="v2")
    ap.add_argument("--registry", default=str(Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"))
    ap.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config" / "config.yaml"),
                    help="pipeline config whose ingest.<source> blocks (GPU name maps) the adapters get")
    args = ap.parse_args()
    registry = load_registry(args.registry)
    ingest_cfg = yaml.safe_load(Path(args.config).read_text())["ingest"]
    df = pd.concat([fn(Path(args.data), registry, ingest_cfg.get(source) or {}).table
                    for source, fn in ADAPTERS.items()], ignore_index=True)
    df, _ = reduce_duplicates(df)
    rows = []
    t_all = time.perf_counter()
    for kernel, g in df.groupby("kernel"):
        t0 = time.perf_counter()
        build_features(g, registry, args.feature_set)
        dt = time.perf_counter() - t0
        rows.append({"kernel": kernel, "rows": len(g), "seconds": round(dt, 2), "rows_per_s": round(len(g) / dt)})
    total = time.perf_counter() - t_all
    print(pd.DataFrame(rows).to_string(index=False))
    print(f"total: {len(df):,} rows in {total:.1f} s = {len(df) / total:,.0f} rows/s (feature set {args.feature_set})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
