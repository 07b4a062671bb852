"""Seen / unseen GPU split with held-out shapes (evaluation protocol of the configured split).

Rows on an experiment's unseen GPUs are ``unseen``; rows on its seen GPUs are
``test_seen`` when their shape falls in the held-out share and ``train``
otherwise; rows on other GPUs are ``unused``. The held-out decision depends only
on the shape (every key column but the GPU) and the seed, so one shape is held
out on all seen GPUs at once and a shape never leaks from training to test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .schema import KEY_COLUMNS

SHAPE_COLUMNS = [c for c in KEY_COLUMNS if c != "gpu"]
_BUCKETS = 1_000_000


def shape_key(df: pd.DataFrame, seed: int = 0) -> pd.Series:
    """uint64 hash of a row's shape (key columns except ``gpu``), salted with ``seed``."""
    key = f"synperf{int(seed):09d}"[:16]
    cols = [c for c in SHAPE_COLUMNS if c in df.columns]
    return pd.util.hash_pandas_object(df[cols].astype("string"), index=False, hash_key=key)


def assign_split(df: pd.DataFrame, seen: list[str], unseen: list[str], heldout_frac: float,
                 seed: int = 0) -> pd.Series:
    """Split label per row: ``train``, ``test_seen``, ``unseen`` or ``unused``.

    Raises:
        ValueError: a GPU is both seen and unseen, or ``heldout_frac`` is outside [0, 1).
    """
    both = set(seen) & set(unseen)
    if both:
        raise ValueError(f"GPU(s) {sorted(both)} are both seen and unseen")
    if not 0 <= heldout_frac < 1:
        raise ValueError(f"heldout_frac must be in [0, 1), got {heldout_frac}")
    bucket = (shape_key(df, seed).to_numpy() % np.uint64(_BUCKETS)).astype("int64")
    held = bucket < int(heldout_frac * _BUCKETS)
    gpu = df["gpu"].astype(str)
    out = np.where(gpu.isin(unseen), "unseen",
                   np.where(gpu.isin(seen), np.where(held, "test_seen", "train"), "unused"))
    return pd.Series(out, index=df.index, name="split")
