"""GEMM (bf16/fp16/fp32 cuBLAS, FP8 scaled-mm): ``y[batch, m, n] = x[batch, m, k] @ W[batch, n, k]^T``."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: output tile used by the v1 parallelism proxy (a common cuBLAS/CUTLASS tile on SM80+)
V1_TILE_M = V1_TILE_N = 128


def work(df: pd.DataFrame) -> pd.DataFrame:
    """FLOPs = 2·batch·m·n·k; DRAM bytes = batch·(m·k + n·k)·in_bytes + batch·m·n·out_bytes.

    Output bytes: fp8 GEMMs write bf16 (2 B), the others write their input dtype.
    ``parallel_units`` = batch·ceil(m/128)·ceil(n/128) output tiles.
    """
    from . import dtype_bytes

    m, n, k = (df[c].astype("float64") for c in ("m", "n", "k"))
    b = df["batch"].astype("float64").fillna(1.0)
    in_b = dtype_bytes(df["dtype"])
    out_b = in_b.where(in_b >= 2.0, 2.0)
    return pd.DataFrame({
        "flops": 2.0 * b * m * n * k,
        "dram_bytes": b * (m * k + n * k) * in_b + b * m * n * out_b,
        "xu_ops": 0.0,
        "parallel_units": b * np.ceil(m / V1_TILE_M) * np.ceil(n / V1_TILE_N),
    }, index=df.index)
