"""Per-row work, spec-sheet peaks and roofline terms: the ``bl_*`` columns the baselines and the fingerprint's
pipe times read (:func:`add_baseline_columns`).

Work per launch from :func:`synperf.model.kernels.work`; peaks from the registry through
:func:`synperf.model.features.v1.gpu_columns` (each with its source in the registry); the roofline is feature set
v1's ``theoretical_time_us``.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from synperf.model.features.v1 import gpu_columns
from synperf.model.kernels import work

#: per-row columns shared by the baselines (see :func:`add_baseline_columns`)
BASELINE_COLUMNS = (
    "bl_flops", "bl_dram_bytes", "bl_xu_ops",
    "bl_peak_flops_per_s", "bl_xu_ops_per_s", "bl_dram_bytes_per_s", "bl_l2_bytes", "bl_sm_count", "bl_clock_hz",
    "bl_compute_us", "bl_xu_us", "bl_memory_us", "bl_roofline_us",
)
#: the NeuSight tile count (only ``neusight`` needs it; computing it runs the decomposer)
TILE_COLUMN = "bl_tiles"



def add_baseline_columns(df: pd.DataFrame, registry, tiles: bool = True) -> pd.DataFrame:
    """Return a copy of ``df`` with the ``bl_*`` columns every baseline reads (row order and index kept).

    Columns: ``bl_flops``, ``bl_dram_bytes``, ``bl_xu_ops`` (work of the launch, :func:`synperf.model.kernels.work`),
    ``bl_tiles`` (tasks of our decomposer, ``num_tasks``: taken from ``df`` when it carries feature set v2,
    else computed with :func:`synperf.model.features.v2.decompose`), per-row specs ``bl_peak_flops_per_s`` (dense
    peak of the dtype, FP32 CUDA-core peak for RMSNorm/SiLU&Mul), ``bl_xu_ops_per_s``,
    ``bl_dram_bytes_per_s``, ``bl_l2_bytes``, ``bl_sm_count``, ``bl_clock_hz``, and the roofline terms in
    microseconds ``bl_compute_us``, ``bl_xu_us``, ``bl_memory_us`` and ``bl_roofline_us`` (their max; equal
    to feature set v1's ``theoretical_time_us``). ``bl_tiles`` only when ``tiles`` is true.

    Raises:
        KeyError: a row's GPU lacks the dtype's peak, or a kernel without a work model.
        InputError: a GPU id not in the registry.
    """
    if len(df) == 0:
        out = df.copy()
        for c in BASELINE_COLUMNS + ((TILE_COLUMN,) if tiles else ()):
            out[c] = np.zeros(0)
        return out
    w = work(df)
    hw = gpu_columns(df["gpu"], df["dtype"], df["kernel"], registry)
    new = {c: w[k].to_numpy(dtype="float64") for c, k in (("bl_flops", "flops"), ("bl_dram_bytes", "dram_bytes"),
                                                          ("bl_xu_ops", "xu_ops"))}
    if tiles and TILE_COLUMN not in df.columns:
        if "num_tasks" in df.columns and df["num_tasks"].notna().all():
            n = df["num_tasks"].to_numpy(dtype="float64")
        else:
            from synperf.model.features.v2 import decompose

            n = decompose(df, registry)["num_tasks"].to_numpy(dtype="float64")
        new[TILE_COLUMN] = np.maximum(n, 1.0)
    for src, dst in (("peak_flops_per_s", "bl_peak_flops_per_s"), ("xu_ops_per_s", "bl_xu_ops_per_s"),
                     ("dram_bytes_per_s", "bl_dram_bytes_per_s"), ("l2_bytes", "bl_l2_bytes"),
                     ("sm_count", "bl_sm_count"), ("clock_hz", "bl_clock_hz")):
        new[dst] = hw[src].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        new["bl_compute_us"] = new["bl_flops"] / new["bl_peak_flops_per_s"] * 1e6
        new["bl_xu_us"] = new["bl_xu_ops"] / new["bl_xu_ops_per_s"] * 1e6
        new["bl_memory_us"] = new["bl_dram_bytes"] / new["bl_dram_bytes_per_s"] * 1e6
    # the largest of the three, NaN only where all three are (as DataFrame.max(axis=1) skips NaN)
    new["bl_roofline_us"] = np.fmax(np.fmax(new["bl_compute_us"], new["bl_xu_us"]), new["bl_memory_us"])
    if any(c in df.columns for c in new):  # replaced in place, where they stand
        out = df.copy()
        for c, v in new.items():
            out[c] = v
        return out
    out = pd.concat([df, pd.DataFrame(new, index=df.index)], axis=1)
    out.attrs = copy.deepcopy(df.attrs)
    return out


def with_baseline_columns(df: pd.DataFrame, registry, tiles: bool = False) -> pd.DataFrame:
    """``df`` itself when it carries the ``bl_*`` columns (and ``bl_tiles`` with ``tiles``), else
    :func:`add_baseline_columns` of it."""
    if all(c in df.columns for c in BASELINE_COLUMNS) and (not tiles or TILE_COLUMN in df.columns):
        return df
    if all(c in df.columns for c in BASELINE_COLUMNS):  # only the tiles are missing
        return add_baseline_columns(df.drop(columns=list(BASELINE_COLUMNS)), registry, tiles=True)
    return add_baseline_columns(df, registry, tiles=tiles)


def training_latency_us(train: pd.DataFrame, method: str) -> np.ndarray:
    """The ``latency_us`` of ``train`` as float64, microseconds.

    Raises:
        ValueError: no rows, or a latency that is not finite and > 0 (naming ``method``).
    """
    if len(train) == 0:
        raise ValueError(f"baseline {method!r}: no training rows")
    y = train["latency_us"].to_numpy(dtype="float64")
    if not (np.isfinite(y) & (y > 0)).all():
        raise ValueError(f"baseline {method!r}: training latency_us must be finite and > 0")
    return y


def roofline_shift(latency_src, roofline_src, roofline_tgt) -> np.ndarray:
    """``latency_src - roofline_src + roofline_tgt`` floored at ``1e-3 * latency_src``: a measured latency with its
    excess over the source GPU's roofline carried to the target GPU (arrays of one shape, microseconds)."""
    lat = np.asarray(latency_src, dtype="float64")
    return np.maximum(lat - np.asarray(roofline_src, dtype="float64") + np.asarray(roofline_tgt, dtype="float64"),
                      1e-3 * lat)
