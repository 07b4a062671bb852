"""RMSNorm and SiLU&Mul: one CTA per token row.

Operation counts per element follow the kernels' arithmetic (vLLM ``rms_norm`` and
``silu_and_mul`` CUDA kernels): RMSNorm squares and accumulates (1 FMA), scales by
``rsqrt(mean + eps)`` and the weight (2 multiplies), with one rsqrt per row;
SiLU&Mul computes ``x / (1 + exp(-x)) * y``: one exp and one reciprocal (XU) and
3 FP32 operations per output element.
"""

from __future__ import annotations

import pandas as pd


def work_rmsnorm(df: pd.DataFrame) -> pd.DataFrame:
    """[T, E] -> [T, E]: FLOPs = 2·T·E (square-accumulate) + 2·T·E (two scalings);
    XU = T (one rsqrt per row); DRAM bytes = 2·T·E·b + E·b (weight)."""
    from . import dtype_bytes

    T, E = df["num_tokens"].astype("float64"), df["hidden_size"].astype("float64")
    b = dtype_bytes(df["dtype"])
    return pd.DataFrame({
        "flops": 4.0 * T * E,
        "dram_bytes": 2.0 * T * E * b + E * b,
        "xu_ops": T,
        "parallel_units": T,
    }, index=df.index)


def work_silu_mul(df: pd.DataFrame) -> pd.DataFrame:
    """[T, 2F] -> [T, F] with F = hidden_size: FLOPs = 3·T·F, XU = 2·T·F, DRAM bytes = 3·T·F·b."""
    from . import dtype_bytes

    T, F = df["num_tokens"].astype("float64"), df["hidden_size"].astype("float64")
    b = dtype_bytes(df["dtype"])
    return pd.DataFrame({
        "flops": 3.0 * T * F,
        "dram_bytes": 3.0 * T * F * b,
        "xu_ops": 2.0 * T * F,
        "parallel_units": T,
    }, index=df.index)
