"""Seen / unseen GPU split with held-out problems (evaluation protocol of the configured split).

Rows on an experiment's unseen GPUs are ``unseen``; rows on its seen GPUs are
``test_seen`` when their launch problem falls in the held-out share and ``train``
otherwise; rows on other GPUs are ``unused``. The held-out decision depends only
on the problem key (:func:`problem_key`: the family's
:data:`synperf.data.schema.PROBLEM_COLUMNS`, e.g. GEMM m, n, k and batch, never the
implementation, KV-cache dtype, routing or tuning config) and the seed, so a
problem is held out on all seen GPUs at once, with every variant of it.

An experiment may instead keep its data source's own train/test files
(``heldout_source_files``, e.g. NeuSight's ``dataset/test/`` or pipeweave's
``gemm_fp8_test``): on seen GPUs the rows read from a file whose path contains
that string are ``test_seen``, the others ``train``, except training rows whose
problem key is also held out, which become ``unused`` (:func:`experiment_split`).

:func:`shape_key` (every key column but the GPU) identifies one exact launch
variant; the nearest-GPU baselines use it to find the same launch on another GPU.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.data.io import InputError
from synperf.data.schema import KEY_COLUMNS, PROBLEM_COLUMNS

SHAPE_COLUMNS = [c for c in KEY_COLUMNS if c != "gpu"]
_BUCKETS = 1_000_000


def shape_key(df: pd.DataFrame, seed: int = 0) -> pd.Series:
    """uint64 hash of a row's shape (key columns except ``gpu``, each value as a string), salted with ``seed``;
    one value per row, aligned with ``df.index``.

    Each column's distinct values are turned into strings once (a category column of their string forms), which
    hashes row by row exactly as the string column would.
    """
    key = f"synperf{int(seed):09d}"[:16]
    cols = {}
    for c in (c for c in SHAPE_COLUMNS if c in df.columns):
        codes, uniques = pd.factorize(df[c], use_na_sentinel=True)
        cols[c] = pd.Categorical.from_codes(codes, categories=pd.Index(uniques).astype("string"))
    return pd.util.hash_pandas_object(pd.DataFrame(cols, index=df.index), index=False, hash_key=key)


def problem_key(df: pd.DataFrame, seed: int = 0) -> pd.Series:
    """uint64 hash of a row's launch problem (``kernel`` and the family's :data:`PROBLEM_COLUMNS`), salted
    with ``seed``; one value per row, aligned with ``df.index``.

    Raises:
        InputError: ``df`` lacks the ``kernel`` column or a problem column of one of its kernels, or holds a
            kernel without a declared problem key.
    """
    if "kernel" not in df.columns:
        raise InputError("problem_key: the table has no 'kernel' column")
    key = f"synperf{int(seed):09d}"[:16]
    out = pd.Series(np.zeros(len(df), dtype="uint64"), index=df.index, name="problem_key")
    kernel = df["kernel"].astype(str)
    for name in kernel.unique():
        if name not in PROBLEM_COLUMNS:
            raise InputError(f"problem_key: kernel {name!r} has no problem key; known: {sorted(PROBLEM_COLUMNS)}")
        cols = ["kernel", *PROBLEM_COLUMNS[name]]
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise InputError(f"problem_key: kernel {name!r} rows lack column(s) {missing}")
        mask = (kernel == name).to_numpy()
        out.iloc[np.flatnonzero(mask)] = pd.util.hash_pandas_object(
            df.loc[mask, cols].astype("string"), index=False, hash_key=key).to_numpy()
    return out


def assign_split(df: pd.DataFrame, seen: list[str], unseen: list[str], heldout_frac: float,
                 seed: int = 0) -> pd.Series:
    """Split label per row: ``train``, ``test_seen``, ``unseen`` or ``unused``.

    A row is held out when its problem key (:func:`problem_key`) falls in the ``heldout_frac`` share of
    hash buckets, on every seen GPU at once.

    Raises:
        ValueError: a GPU is both seen and unseen, or ``heldout_frac`` is outside [0, 1).
        InputError: as :func:`problem_key`.
    """
    both = set(seen) & set(unseen)
    if both:
        raise ValueError(f"GPU(s) {sorted(both)} are both seen and unseen")
    if not 0 <= heldout_frac < 1:
        raise ValueError(f"heldout_frac must be in [0, 1), got {heldout_frac}")
    bucket = (problem_key(df, seed).to_numpy() % np.uint64(_BUCKETS)).astype("int64")
    held = bucket < int(heldout_frac * _BUCKETS)
    gpu = df["gpu"].astype(str)
    out = np.where(gpu.isin(unseen), "unseen",
                   np.where(gpu.isin(seen), np.where(held, "test_seen", "train"), "unused"))
    return pd.Series(out, index=df.index, name="split")


def experiment_split(df: pd.DataFrame, exp: dict, seed: int = 0) -> pd.Series:
    """Split label per row for an experiment's config block (``seen``, ``unseen``, ``heldout_frac``,
    optional ``heldout_source_files``).

    Without ``heldout_source_files`` this is :func:`assign_split` (held-out share of problems by seeded hash).
    With it, seen-GPU rows whose ``source_file`` contains that string are ``test_seen`` and the other seen
    rows ``train``: the data source's own train/test files decide (NeuSight's ``dataset/train`` vs
    ``dataset/test``, pipeweave's ``gemm_fp8_train`` vs ``gemm_fp8_test``). A training-file row whose
    problem key is also among the held-out rows becomes ``unused``, so no held-out problem is trained on.

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
    pk = problem_key(df, seed).to_numpy()
    heldout_problems = np.unique(pk[out == "test_seen"])
    out[(out == "train") & np.isin(pk, heldout_problems)] = "unused"
    if not (out == "train").any() or not (out == "test_seen").any():
        raise ValueError(f"heldout_source_files={pattern!r}: seen-GPU rows give {int((out == 'train').sum())} train "
                         f"and {int((out == 'test_seen').sum())} held-out rows; both must be > 0")
    return pd.Series(out, index=df.index, name="split")
