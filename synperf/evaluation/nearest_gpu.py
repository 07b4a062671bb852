"""Nearest-GPU baselines: the latency measured for the same shape on the most similar training GPU, carried to
the target GPU (signature and conventions: :mod:`synperf.evaluation.baselines`).

``nearest_gpu_scaled`` (variant a)
    The latency measured in ``train`` for the same shape (every key column but ``gpu`` equal:
    kernel, implementation, dtype and all parameters) on the most similar GPU, times the ratio of the
    bounding roofline term: the target's roofline terms (v1 compute, XU, memory time) pick the bound
    ``b`` (compute-bound: tensor/FP32 peak; memory-bound: DRAM bandwidth) and the source latency is
    scaled by ``time_b(target) / time_b(source)`` (= ``peak_src / peak_tgt`` or ``bw_src / bw_tgt``).
``nearest_gpu_roofline`` (variant b)
    The same measured latency with its roofline time replaced by the target's:
    ``latency_src - roofline_src + roofline_tgt`` (the excess over the roofline carried over), floored
    at ``1e-3 * latency_src`` where the source ran faster than its spec-sheet roofline by more than the
    target's roofline.
Nearest-GPU similarity (documented choice): among the GPUs of ``train`` that measured the shape,
first those of the target's class (:meth:`synperf.data.hardware.GPUSpec.same_class`: the same compute capability
major version and memory family, HBM or GDDR, both from the registry), then the smallest Euclidean
distance of ``(ln peak, ln DRAM bandwidth)`` (peak of the row's dtype and pipe), then the GPU id
(alphabetical) to break ties. The target GPU itself is a valid source (distance 0); under the
protocols of :mod:`synperf.evaluation.protocols` it never holds the test shape in ``train``. Rows without any
source are NaN. Only ``train`` rows are sources, so on the configured split a shape held out on the
seen GPUs (``test_seen``) is uncovered everywhere: coverage of ``unseen`` rows is about
``1 - heldout_frac`` of the rows whose shape the seen GPUs measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.evaluation.split import SHAPE_COLUMNS, shape_key
from synperf.model.features.v1 import gpu_columns
from synperf.model.roofline import (  # noqa: F401  (roofline_shift is part of this interface)
    roofline_shift,
    training_latency_us,
    with_baseline_columns,
)


def coverage(pred) -> float:
    """Share of predictions that are finite (not NaN), in [0, 1]; NaN for an empty array."""
    p = np.asarray(pred, dtype="float64")
    return float(np.isfinite(p).mean()) if len(p) else float("nan")


def shape_hash(df: pd.DataFrame) -> np.ndarray:
    """The shape key (:func:`synperf.evaluation.split.shape_key`, seed 0) of each row, uint64, shape ``(len(df),)``.

    Raises:
        ValueError: ``df`` lacks a canonical key column.
    """
    missing = [c for c in SHAPE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"nearest-GPU baselines need the canonical key columns; missing {missing}")
    return shape_key(df[SHAPE_COLUMNS], 0).to_numpy()


def nearest_sources(train: pd.DataFrame, test: pd.DataFrame, registry, train_keys: np.ndarray | None = None
                    ) -> pd.DataFrame:
    """For each ``test`` row, the ``train`` row with the same shape on the most similar GPU.

    Similarity: the test row's GPU class first (:meth:`synperf.data.hardware.GPUSpec.same_class`: same compute
    capability major version and memory family), then the smallest Euclidean
    distance of ``(ln peak FLOP/s of the row's dtype and pipe, ln DRAM B/s)``, then GPU id (alphabetical).

    ``train_keys``: the shape hash of each ``train`` row (:func:`shape_hash`, shape ``(len(train),)``), computed
    here when None; a caller matching many test sets against the same rows passes it once.

    Returns:
        DataFrame with one row per ``test`` row (positional, index ``0..len(test)-1``): ``src_pos``
        (position in ``train``, -1 where no GPU of ``train`` measured the shape), ``src_gpu`` (or <NA>),
        ``same_class`` (bool) and ``distance`` (NaN where uncovered).

    Raises:
        ValueError: a frame lacks a canonical key column, or ``train_keys`` is not one key per ``train`` row.
    """
    out = pd.DataFrame({"src_pos": np.full(len(test), -1, dtype="int64"),
                        "src_gpu": pd.Series([pd.NA] * len(test), dtype="string"),
                        "same_class": np.zeros(len(test), dtype=bool),
                        "distance": np.full(len(test), np.nan)})
    if len(test) == 0 or len(train) == 0:
        return out
    if train_keys is None:
        train_keys = shape_hash(train)
    elif len(train_keys) != len(train):
        raise ValueError(f"train_keys: {len(train_keys)} keys for {len(train)} train rows")
    test_keys = shape_hash(test)
    # only train rows whose shape some test row has can pair (order kept, so "first" below is unchanged)
    cand = np.flatnonzero(np.isin(np.asarray(train_keys), test_keys))
    tr = pd.DataFrame({"key": np.asarray(train_keys)[cand], "src_gpu": train["gpu"].iloc[cand].astype(str).to_numpy(),
                       "src_pos": cand})
    tr = tr.drop_duplicates(["key", "src_gpu"], keep="first")
    te = pd.DataFrame({"key": test_keys, "gpu": test["gpu"].astype(str).to_numpy(),
                       "dtype": test["dtype"].astype(str).to_numpy(), "kernel": test["kernel"].astype(str).to_numpy()})
    # test rows of one (shape, GPU, dtype, kernel) have one source: each distinct one is matched once
    code = te.groupby(list(te.columns), sort=False, dropna=False).ngroup().to_numpy()
    te = te.iloc[np.unique(code, return_index=True)[1]].reset_index(drop=True)
    te["pos"] = np.arange(len(te))
    pairs = te.merge(tr, on="key", how="inner")
    if pairs.empty:
        return out
    out = out.iloc[:len(te)].copy()
    combos = pairs[["gpu", "src_gpu", "dtype", "kernel"]].drop_duplicates().reset_index(drop=True)
    tgt = gpu_columns(combos["gpu"], combos["dtype"], combos["kernel"], registry)
    src = gpu_columns(combos["src_gpu"], combos["dtype"], combos["kernel"], registry)
    combos["same_class"] = [registry[a].same_class(registry[b]) for a, b in zip(combos["gpu"], combos["src_gpu"])]
    combos["distance"] = np.hypot(np.log(tgt["peak_flops_per_s"].to_numpy() / src["peak_flops_per_s"].to_numpy()),
                                  np.log(tgt["dram_bytes_per_s"].to_numpy() / src["dram_bytes_per_s"].to_numpy()))
    pairs = pairs.merge(combos, on=["gpu", "src_gpu", "dtype", "kernel"], how="left")
    pairs["other_class"] = ~pairs["same_class"]
    best = (pairs.sort_values(["pos", "other_class", "distance", "src_gpu"], kind="mergesort")
            .drop_duplicates("pos", keep="first"))
    pos = best["pos"].to_numpy()
    out.loc[pos, "src_pos"] = best["src_pos"].to_numpy()
    out.loc[pos, "src_gpu"] = best["src_gpu"].to_numpy()
    out.loc[pos, "same_class"] = best["same_class"].to_numpy(dtype=bool)
    out.loc[pos, "distance"] = best["distance"].to_numpy()
    return out.iloc[code].reset_index(drop=True)


def _nearest(train, test, registry):
    training_latency_us(train, "nearest_gpu")
    src = nearest_sources(train, test, registry)
    ok = src["src_pos"].to_numpy() >= 0
    tr = with_baseline_columns(train, registry)
    te = with_baseline_columns(test, registry)
    s = tr.iloc[src["src_pos"].to_numpy()[ok]]
    t = te.iloc[np.flatnonzero(ok)]
    return ok, s, t


def nearest_gpu_scaled(train: pd.DataFrame, test: pd.DataFrame, registry, *, seed: int = 0,
                       feature_meta: dict | None = None, cfg=None) -> np.ndarray:
    """Variant (a): the nearest GPU's measured latency scaled by the target's bounding roofline term.

    ``latency_src * time_b(target) / time_b(source)`` where ``b`` is the largest of the target's v1
    roofline terms (compute: ``peak_src / peak_tgt``; memory: ``bw_src / bw_tgt``; XU: XU rate ratio).
    Microseconds; NaN where no ``train`` GPU measured the shape (:func:`nearest_sources`). Deterministic.
    """
    pred = np.full(len(test), np.nan)
    ok, s, t = _nearest(train, test, registry)
    if not ok.any():
        return pred
    terms = ["bl_compute_us", "bl_xu_us", "bl_memory_us"]
    tt = t[terms].to_numpy(dtype="float64")
    st = s[terms].to_numpy(dtype="float64")
    b = tt.argmax(axis=1)
    r = np.arange(len(b))
    pred[ok] = s["latency_us"].to_numpy(dtype="float64") * tt[r, b] / st[r, b]
    return pred


def nearest_gpu_roofline(train: pd.DataFrame, test: pd.DataFrame, registry, *, seed: int = 0,
                         feature_meta: dict | None = None, cfg=None) -> np.ndarray:
    """Variant (b): ``latency_src - roofline_src + roofline_tgt`` (excess over the roofline carried over).

    Floored at ``1e-3 * latency_src``. Microseconds; NaN where uncovered (:func:`nearest_sources`).
    With the target GPU itself as source it returns the measured latency exactly.
    """
    pred = np.full(len(test), np.nan)
    ok, s, t = _nearest(train, test, registry)
    if not ok.any():
        return pred
    pred[ok] = roofline_shift(s["latency_us"], s["bl_roofline_us"], t["bl_roofline_us"])
    return pred
