"""Attention prefill (causal, FlashAttention style) and decode over a paged KV cache.

Shapes per row: ``batch_size`` sequences, ``num_heads`` query heads sharing
``num_kv_heads`` KV heads (GQA), ``head_dim``; prefill attends causally over
``seq_len = kv_len`` tokens, decode has one query per sequence over ``kv_len``
cached tokens. ``window_size > 0`` limits each query to the last ``window_size`` keys.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: query tile of the v1 parallelism proxy (FlashAttention-2's 128-row Q tile)
V1_TILE_Q = 128


def causal_pairs(seq_len: pd.Series, window: pd.Series) -> pd.Series:
    """(query, key) pairs per head and sequence under a causal mask with an optional window.

    Full causal: S(S+1)/2. Window w < S: w(w+1)/2 + (S-w)·w. Exact integer counts.
    """
    s = seq_len.astype("float64")
    w = window.astype("float64").fillna(0.0)
    w = w.where((w > 0) & (w < s), s)
    return w * (w + 1) / 2 + (s - w) * w


def _kv_bytes(df: pd.DataFrame) -> pd.Series:
    from . import dtype_bytes

    return dtype_bytes(df["kv_cache_dtype"])


def work_prefill(df: pd.DataFrame) -> pd.DataFrame:
    """FLOPs = 4·B·H·pairs·D (QKᵀ and PV); XU ops = B·H·pairs (one exp per score);
    DRAM bytes = Q + O (2 B) + K + V (KV dtype) read once."""
    from . import dtype_bytes

    B, S, H, Hkv, D = (df[c].astype("float64") for c in ("batch_size", "seq_len", "num_heads", "num_kv_heads",
                                                          "head_dim"))
    pairs = causal_pairs(df["seq_len"], df["window_size"])
    act_b = dtype_bytes(df["dtype"])
    return pd.DataFrame({
        "flops": 4.0 * B * H * pairs * D,
        "dram_bytes": B * S * (2.0 * H * D * act_b + 2.0 * Hkv * D * _kv_bytes(df)),
        "xu_ops": B * H * pairs,
        "parallel_units": B * H * np.ceil(S / V1_TILE_Q),
    }, index=df.index)


def work_decode(df: pd.DataFrame) -> pd.DataFrame:
    """One query per sequence: FLOPs = 4·B·H·L·D, XU = B·H·L, DRAM bytes dominated by
    the KV cache B·L·2·Hkv·D·kv_bytes, with L = min(kv_len, window) (window 0 = full)."""
    from . import dtype_bytes

    B, H, Hkv, D = (df[c].astype("float64") for c in ("batch_size", "num_heads", "num_kv_heads", "head_dim"))
    L = df["kv_len"].astype("float64").clip(lower=1.0)
    w = df["window_size"].astype("float64").fillna(0.0)
    L = L.where(~((w > 0) & (w < L)), w)
    act_b = dtype_bytes(df["dtype"])
    return pd.DataFrame({
        "flops": 4.0 * B * H * L * D,
        "dram_bytes": B * L * 2.0 * Hkv * D * _kv_bytes(df) + 2.0 * B * H * D * act_b,
        "xu_ops": B * H * L,
        "parallel_units": B * Hkv,
    }, index=df.index)
