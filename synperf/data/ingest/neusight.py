"""Adapter for NeuSight's FP32 linear and bmm measurements (github.com/sitar-lab/NeuSight).

``Latency`` is in milliseconds: the mean of the 5 fastest of 25 single calls,
launch overhead included. ``linear.csv``: ``torch.nn.Linear(N, K)`` on an input
[B, M, N], i.e. a GEMM with m = B*M, k = N, n = K. ``bmm.csv``: [B, M, N] x [B, N, K],
a batched GEMM with batch = B, m = M, k = N, n = K. Training files are
``train/collect/{linear,bmm}/p2.1.0/<device>.csv``; test files ``test/{linear,bmm}.csv``
(the upstream split is kept in ``source_file``).

The tile of each row is read from ``Kernel Name`` by
:data:`synperf.data.implementations.TILE_NAME_PATTERNS`; a row whose name no pattern matches is dropped and
counted as ``unsupported_kernel_name:neusight`` (none in the shipped files).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from synperf.data.ingest.common import MS_TO_US, IngestResult, check_latency, find_files, finish, load, rel

UPSTREAM_COMMIT = "6945927"
COLUMNS = ["OPName", "Latency", "Device", "B", "M", "N", "K"]


def ingest(data_dir: Path, registry, cfg: dict | None = None) -> IngestResult:
    """Read NeuSight's linear and bmm CSVs (train and test).

    Raises:
        InputError: unknown device, missing column, bad latency.
    """
    data_dir = Path(data_dir)
    files = find_files(data_dir, "neusight/dataset/train/collect/*/p2.1.0/*.csv", "neusight")
    files += [p for p in (data_dir / "neusight/dataset/test/linear.csv", data_dir / "neusight/dataset/test/bmm.csv")
              if p.exists()]
    from synperf.data.implementations import parse_tile_name

    frames, dropped = [], Counter()
    for path in files:
        df = load(path, COLUMNS)
        if "Kernel Name" in df.columns:
            names = df["Kernel Name"]
            parsed = {nm: parse_tile_name(nm) for nm in names.dropna().astype(str).unique()}
            unmatched = names.notna() & names.astype(str).map(lambda nm: parsed.get(nm) is None)
            dropped["unsupported_kernel_name:neusight"] += int(unmatched.sum())
            df = df[~unmatched]
        check_latency(df["Latency"], path, "Latency")
        gpu = df["Device"].map(lambda n: registry.id_for_device_name(n, str(path)))
        is_bmm = df["OPName"].astype(str).str.lower().eq("bmm")
        B, M, N, K = (df[c].astype("int64") for c in ("B", "M", "N", "K"))
        out = pd.DataFrame({
            "gpu": gpu,
            "kernel": "gemm",
            "implementation": "cublas",
            "dtype": "float32",
            "m": M.where(is_bmm, B * M),
            "n": K,
            "k": N,
            "batch": B.where(is_bmm, 1),
            "latency_us": df["Latency"].astype(float) * MS_TO_US,
            "latency_stat": "mean_of_5_fastest",
            "n_samples": 5,
            "kernel_name": df["Kernel Name"] if "Kernel Name" in df.columns else pd.NA,
            "grid_ctas": (df["Grid x"] * df["Grid y"] * df["Grid z"]) if "Grid x" in df.columns else pd.NA,
            "source": "neusight",
            "source_version": f"neusight@{UPSTREAM_COMMIT} torch 2.1.0 cu121",
            "source_file": rel(path, data_dir),
        })
        frames.append(out)
    return IngestResult(finish(frames, registry, "neusight"), dropped, [rel(p, data_dir) for p in files])
