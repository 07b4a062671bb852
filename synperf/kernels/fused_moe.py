"""Fused MoE (Triton): routed tokens grouped per expert, w13 GEMM, SiLU&Mul, w2 GEMM.

Per GPU: ``E_local = num_experts / moe_ep_size`` experts of intermediate size
``I_local = inter_size / moe_tp_size``. A token picks ``topk`` experts; on one GPU
the expected routed (token, expert) pairs are ``num_tokens·topk / moe_ep_size``.
The w13 weight of an expert is [2·I_local, hidden], w2 is [hidden, I_local].
``moe_stage`` selects the whole layer (``full``) or one grouped GEMM (``w13``, ``w2``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: BLOCK_SIZE_M of the v1 proxy when the row has no config (vLLM's default for large batches is 64)
V1_BLOCK_M = 64


def routing_alpha(distribution: pd.Series) -> pd.Series:
    """Power-law exponent of the routing (``power_law_<alpha>``), 0 for balanced/random."""
    s = distribution.astype("string").fillna("")
    alpha = pd.to_numeric(s.str.extract(r"power_law_([0-9.]+)")[0], errors="coerce")
    return alpha.fillna(0.0).astype("float64")


def expected_active_experts(pairs: pd.Series, num_experts: pd.Series, experts_local: pd.Series) -> pd.Series:
    """Expected local experts hit by ``pairs`` uniform routing draws: E_l·(1 - (1 - 1/E)^(pairs·E/E_l))."""
    E = num_experts.astype("float64")
    draws = pairs * E / experts_local
    return experts_local * (1.0 - np.power(1.0 - 1.0 / E, draws))


def work(df: pd.DataFrame) -> pd.DataFrame:
    """FLOPs = 2·pairs·H·(2·I_l) [w13] + 2·pairs·I_l·H [w2]; DRAM bytes = weights of the
    experts hit (weight dtype) + routed activations in and out (2 B); XU = 2·pairs·I_l (SiLU)."""
    from . import dtype_bytes

    T = df["num_tokens"].astype("float64")
    H = df["hidden_size"].astype("float64")
    I_l = df["inter_size"].astype("float64") / df["moe_tp_size"].astype("float64")
    E_l = df["num_experts"].astype("float64") / df["moe_ep_size"].astype("float64")
    pairs = T * df["topk"].astype("float64") / df["moe_ep_size"].astype("float64")
    active = expected_active_experts(pairs, df["num_experts"], E_l)
    wb = dtype_bytes(df["dtype"])
    stage = df["moe_stage"].astype(str)
    w13 = stage.isin(["full", "w13"]).astype(float)
    w2 = stage.isin(["full", "w2"]).astype(float)
    act = stage.eq("full").astype(float)
    flops = w13 * 2.0 * pairs * H * 2.0 * I_l + w2 * 2.0 * pairs * I_l * H
    weight_bytes = active * (w13 * 2.0 * I_l * H + w2 * I_l * H) * wb
    act_bytes = (w13 * (T * H * 2.0 + pairs * 2.0 * I_l * 2.0) + w2 * (pairs * I_l * 2.0 + pairs * H * 2.0))
    block_m = df["block_size_m"].astype("float64").fillna(V1_BLOCK_M)
    padded_blocks = np.ceil(pairs / active.clip(lower=1.0) / block_m) * active
    return pd.DataFrame({
        "flops": flops,
        "dram_bytes": weight_bytes + act_bytes,
        "xu_ops": act * 2.0 * pairs * I_l,
        "parallel_units": padded_blocks * np.ceil(2.0 * I_l / 128.0),
    }, index=df.index)
