"""Seen / unseen GPU split with held-out shapes (evaluation protocol of the configured split).

Rows on an experiment's unseen GPUs are ``unseen``; rows on its seen GPUs are
``test_seen`` when their shape falls in the held-out share and ``train``
otherwise; rows on other GPUs are ``unused``. The held-out decision depends only
on the shape (every key column but the GPU) and the seed, so one shape is held
out on all seen GPUs at once and a shape never leaks from training to test.

An experiment may instead keep its data source's own train/test files
(``heldout_source_files``, e.g. NeuSight's ``dataset/test/``): on seen GPUs the
rows read from a file whose path contains that string are ``test_seen``, all
others ``train`` (:func:`experiment_split`).
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


def experiment_split(df: pd.DataFrame, exp: dict, seed: int = 0) -> pd.Series:
    """Split label per row for an experiment's config block (``seen``, ``unseen``, ``heldout_frac``,
    optional ``heldout_source_files``).

    Without ``heldout_source_files`` this is :func:`assign_split` (held-out share of shapes by seeded hash).
    With it, seen-GPU rows whose ``source_file`` contains that string are ``test_seen`` and the other seen
    rows ``train``: the data source's own train/test files decide (NeuSight's ``dataset/train`` vs
    ``dataset/test``).

    Raises:
        ValueError: as :func:`assign_split`; ``heldout_source_files`` set but the rows lack ``source_file``,
            or no seen-GPU row falls on either side.
    """
    split = assign_split(df, exp["seen"], exp.get("unseen", []), exp.get("heldout_frac", 0.2), seed)
    pattern = exp.get("heldout_source_files")
    if not pattern:
        return split
    if "source_file" not in df.columns:
        raise ValueError(f"heldout_source_files={pattern!r} needs a 'source_file' column in the measurements")
    seen = split.isin(["train", "test_seen"]).to_numpy()
    held = df["source_file"].astype("string").str.contains(pattern, regex=False).fillna(False).to_numpy(dtype=bool)
    out = split.to_numpy().copy()
    out[seen] = np.where(held[seen], "test_seen", "train")
    if not (out == "train").any() or not (out == "test_seen").any():
        raise ValueError(f"heldout_source_files={pattern!r}: seen-GPU rows give {int((out == 'train').sum())} train "
                         f"and {int((out == 'test_seen').sum())} held-out rows; both must be > 0")
    return pd.Series(out, index=df.index, name="split")
