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
    from synperf.model.kernels.dtypes import dtype_bytes

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
    from synperf.model.kernels.dtypes import dtype_bytes

    T, F = df["num_tokens"].astype("float64"), df["hidden_size"].astype("float64")
    b = dtype_bytes(df["dtype"])
    return pd.DataFrame({
        "flops": 3.0 * T * F,
        "dram_bytes": 3.0 * T * F * b,
        "xu_ops": 2.0 * T * F,
        "parallel_units": T,
    }, index=df.index)


# --------------------------------------------------------------------------------------------------
# Decomposition (analytical core). vLLM's ``rms_norm_kernel`` and ``act_and_mul_kernel``
# (csrc/layernorm_kernels.cu, csrc/activation_kernels.cu): grid = num_tokens (one CTA per token row),
# block = min(width, 1024) threads; the hardware block scheduler spreads the rows over the SMs.
# Per element in FP32 (FMA pipe): RMSNorm 3 ops (square-accumulate, scale by rsqrt, multiply by the
# weight) and one rsqrt per row on the XU pipe; SiLU&Mul x / (1 + exp(-x)) * y: 3 FMA-pipe ops (negate-
# multiply, add 1, two multiplies minus the fused one) and 2 XU ops (ex2, rcp) per output element.
# --------------------------------------------------------------------------------------------------
import numpy as np  # noqa: E402

from synperf.model.kernels.tasks import TaskSet, uniform_summary  # noqa: E402

RMSNORM_FMA_PER_ELEM, RMSNORM_XU_PER_ROW = 3.0, 1.0
SILU_FMA_PER_ELEM, SILU_XU_PER_ELEM = 3.0, 2.0


def _row_kernel(df: pd.DataFrame, registry, kernel: str) -> pd.DataFrame:
    from synperf.model.kernels.dtypes import DTYPE_BYTES

    out = []
    for gpu, g in df.groupby("gpu", sort=False):
        spec = registry[gpu]
        T = g["num_tokens"].astype("float64")
        E = g["hidden_size"].astype("float64")
        b = g["dtype"].astype(str).map(DTYPE_BYTES).astype("float64")
        threads = np.minimum(E, 1024.0)
        warps = np.ceil(threads / 32.0)
        slots = np.minimum(spec.max_ctas_per_sm, np.floor(spec.max_warps_per_sm / warps)).clip(lower=1)
        if kernel == "rmsnorm":
            per = {"fma_ops": RMSNORM_FMA_PER_ELEM * E, "xu_ops": RMSNORM_XU_PER_ROW + 0 * E, "tensor_ops": 0.0,
                   "load_bytes": 2.0 * E * b}            # the row and the weight (the weight mostly from L2)
            dram, store = T * E * b + E * b, T * E * b
        else:
            per = {"fma_ops": SILU_FMA_PER_ELEM * E, "xu_ops": SILU_XU_PER_ELEM * E, "tensor_ops": 0.0,
                   "load_bytes": 2.0 * E * b}            # gate and up halves of the row
            dram, store = 2.0 * T * E * b, T * E * b
        s = uniform_summary(T, pd.Series(float(spec.sm_count), index=g.index), per, dram, store,
                            pd.Series(slots, index=g.index), pd.Series(False, index=g.index))
        out.append(s)
    return pd.concat(out).loc[df.index]


def decompose_rmsnorm(df: pd.DataFrame, registry) -> pd.DataFrame:
    """Vectorised RMSNorm decomposition + scheduling summary (one CTA per token row)."""
    return _row_kernel(df, registry, "rmsnorm")


def decompose_silu_mul(df: pd.DataFrame, registry) -> pd.DataFrame:
    """Vectorised SiLU&Mul decomposition + scheduling summary (one CTA per token row)."""
    return _row_kernel(df, registry, "silu_mul")


def tasks(row: dict, spec) -> TaskSet:
    """Explicit task set of one RMSNorm or SiLU&Mul row: ``num_tokens`` identical row tasks."""
    from synperf.model.kernels.dtypes import DTYPE_BYTES
    from synperf.model.schedule import ctas_per_sm

    T, E, b = int(row["num_tokens"]), float(row["hidden_size"]), DTYPE_BYTES[str(row["dtype"])]
    rms = row["kernel"] == "rmsnorm"
    return TaskSet(counts=np.array([T]),
                   tensor_ops=np.array([0.0]),
                   fma_ops=np.array([(RMSNORM_FMA_PER_ELEM if rms else SILU_FMA_PER_ELEM) * E]),
                   xu_ops=np.array([RMSNORM_XU_PER_ROW if rms else SILU_XU_PER_ELEM * E]),
                   load_bytes=np.array([2.0 * E * b]),
                   dram_bytes=(T * E * b + E * b) if rms else 2.0 * T * E * b, store_bytes=T * E * b,
                   ctas_per_sm=ctas_per_sm(spec, int(min(E, 1024))), dims=[{"threads": int(min(E, 1024))}])
