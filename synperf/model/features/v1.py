"""Feature set v1: FLOPs, bytes and roofline times from the registry.

Per row, with the GPU's spec-sheet numbers (``config/gpus.yaml``):

* ``compute_time_us = flops / peak`` (tensor peak of the dtype for GEMM, attention
  and MoE; FP32 CUDA-core peak for RMSNorm and SiLU&Mul),
* ``xu_time_us = xu_ops / (sfu_per_sm · sm_count · clock)``,
* ``memory_time_us = dram_bytes / dram_bw``, ``l2_time_us = dram_bytes / l2_bw``,
* ``theoretical_time_us = max(compute, xu, memory)`` (the roofline bound),
* the same times in cycles at the spec-sheet clock (``*_cycles``), which the model sees
  (as log1p, like the paper's cycle features),
* ``num_waves = ceil(parallel_units / sm_count)``, the wave efficiency
  ``waves / ceil(waves)`` in (0, 1], and ``l2_footprint_log2 = log2(dram_bytes / L2 size)``.

Hardware enters only through these normalisations (no raw SM count or bandwidth
is a feature), as in SynPerf (method.md, feature analyzer).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.model.kernels import work
from synperf.model.kernels.fused_moe import routing_alpha

CUDA_CORE_KERNELS = {"rmsnorm", "silu_mul"}

SHAPE_PARAMS = {
    "gemm": ["m", "n", "k", "batch"],
    "gemm_fp8": ["m", "n", "k", "batch"],
    "attention_prefill": ["batch_size", "seq_len", "num_heads", "num_kv_heads", "head_dim", "window_size"],
    "attention_decode": ["batch_size", "kv_len", "num_heads", "num_kv_heads", "head_dim", "window_size"],
    "rmsnorm": ["num_tokens", "hidden_size"],
    "silu_mul": ["num_tokens", "hidden_size"],
    "fused_moe": ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size",
                  "block_size_m", "block_size_n", "block_size_k", "group_size_m", "num_warps", "num_stages"],
}
CATEGORICAL = {
    "attention_prefill": ["kv_cache_dtype", "implementation"],
    "attention_decode": ["kv_cache_dtype", "implementation"],
    "fused_moe": ["dtype", "moe_stage"],
    "gemm": ["dtype"],
    "gemm_fp8": ["dtype"],
}
ANALYTIC = ["flops", "dram_bytes", "xu_ops", "compute_cycles", "xu_cycles", "dram_cycles", "l2_cycles",
            "theoretical_cycles", "parallel_units", "num_waves", "arithmetic_intensity"]


def gpu_columns(gpus: pd.Series, dtypes: pd.Series, kernels: pd.Series, registry) -> pd.DataFrame:
    """Per-row hardware rates: peak FLOP/s for the row's pipe, XU ops/s, DRAM and L2 B/s, SMs, L2 bytes."""
    g = gpus.astype(str).to_numpy(dtype=object)
    d = dtypes.astype(str).to_numpy(dtype=object)
    cuda = kernels.astype(str).isin(CUDA_CORE_KERNELS).to_numpy()
    keys = list(zip(g.tolist(), d.tolist(), cuda.tolist()))
    peak = {}
    for k in dict.fromkeys(keys):  # distinct (gpu, dtype, pipe) in row order
        spec = registry[k[0]]
        peak[k] = (spec.fp32_tflops if k[2] else spec.peak_tflops(k[1])) * 1e12
    ids, inv = np.unique(g, return_inverse=True)
    specs = [registry[i] for i in ids]

    def per_gpu(value) -> np.ndarray:
        return np.array([value(s) for s in specs], dtype="float64")[inv]

    return pd.DataFrame({
        "peak_flops_per_s": np.array([peak[k] for k in keys], dtype="float64"),
        "xu_ops_per_s": per_gpu(lambda s: s.sfu_per_sm * s.sm_count * s.clock_hz),
        "dram_bytes_per_s": per_gpu(lambda s: s.dram_bw_gbps * 1e9),
        "l2_bytes_per_s": per_gpu(lambda s: s.l2_bw_gbps * 1e9),
        "sm_count": per_gpu(lambda s: float(s.sm_count)),
        "l2_bytes": per_gpu(lambda s: s.l2_cache_mb * 2**20),
        "clock_hz": per_gpu(lambda s: s.clock_hz),
    }, index=gpus.index)


def build(df: pd.DataFrame, registry):
    """Return (numeric, linear, categorical, frame) for canonical rows ``df``."""
    w = work(df)
    hw = gpu_columns(df["gpu"], df["dtype"], df["kernel"], registry)
    f = pd.DataFrame(index=df.index)
    f["flops"] = w["flops"]
    f["dram_bytes"] = w["dram_bytes"]
    f["xu_ops"] = w["xu_ops"]
    f["compute_time_us"] = w["flops"] / hw["peak_flops_per_s"] * 1e6
    f["xu_time_us"] = w["xu_ops"] / hw["xu_ops_per_s"] * 1e6
    f["memory_time_us"] = w["dram_bytes"] / hw["dram_bytes_per_s"] * 1e6
    f["l2_time_us"] = w["dram_bytes"] / hw["l2_bytes_per_s"] * 1e6
    f["theoretical_time_us"] = f[["compute_time_us", "xu_time_us", "memory_time_us"]].max(axis=1)
    # model inputs in cycles at the spec-sheet clock (log1p of microseconds would squash every small kernel to ~0)
    for name, col in (("compute", "compute_time_us"), ("xu", "xu_time_us"), ("dram", "memory_time_us"),
                      ("l2", "l2_time_us"), ("theoretical", "theoretical_time_us")):
        f[f"{name}_cycles"] = f[col] * 1e-6 * hw["clock_hz"]
    f["parallel_units"] = w["parallel_units"]
    waves = (w["parallel_units"] / hw["sm_count"]).clip(lower=1e-9)
    f["num_waves"] = np.ceil(waves)
    f["wave_efficiency"] = waves / np.ceil(waves)  # share of the launch's SM slots doing work, in (0, 1]
    f["l2_footprint_log2"] = np.log2(w["dram_bytes"].clip(lower=1.0) / hw["l2_bytes"])
    f["arithmetic_intensity"] = w["flops"] / w["dram_bytes"].clip(lower=1.0)
    f["compute_memory_ratio"] = np.log2(f["compute_time_us"].clip(lower=1e-12) / f["memory_time_us"].clip(lower=1e-12))
    kernels = list(df["kernel"].unique())
    shape = sorted({p for k in kernels for p in SHAPE_PARAMS.get(k, [])})
    for p in shape:
        f[p] = df[p].astype("float64").fillna(0.0)
    if "fused_moe" in kernels:
        f["routing_alpha"] = routing_alpha(df["distribution"])
    categorical = sorted({c for k in kernels for c in CATEGORICAL.get(k, [])})
    for c in categorical:
        f[c] = df[c].astype("string").fillna("<NA>")
    numeric = ANALYTIC + shape
    linear = ["wave_efficiency", "compute_memory_ratio", "l2_footprint_log2"] + (
        ["routing_alpha"] if "fused_moe" in kernels else [])
    return numeric, linear, categorical, f
