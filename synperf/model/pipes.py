"""Spec-sheet pipe times of a launch on its GPU: the terms the fingerprint predictor's constants multiply
(:mod:`synperf.model.fingerprint`), and the GPU class that decides which GPUs' constants a new GPU takes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.data.hardware import class_label
from synperf.data.launches import TENSOR_FAMILIES
from synperf.model.roofline import BASELINE_COLUMNS, add_baseline_columns

#: spec-sheet pipe times of the fingerprint, microseconds (see :func:`pipe_times`)
PIPES = ("compute_us", "dram_us", "l2_us", "smem_us")
#: lower bound of each fitted constant ``[floor_us, *multipliers]``: 0, except the DRAM multiplier, bounded by 1
#: because the spec-sheet DRAM time (bytes / peak bandwidth) is a lower bound of the time to move those bytes from
#: DRAM; launches whose bytes an earlier launch left in L2 can beat it, and the correction carries them. Without
#: the bound the fit trades the DRAM multiplier against the floor and the other pipes (collinear on GPUs whose
#: rows are mostly memory-bound), and a predicted GPU inherits that trade.
LOWER_BOUNDS = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
#: as-is columns of the correction (feature set v2)
LINEAR = ("wave_efficiency", "l2_footprint_log2")
#: feature set v2's cycles of the most-loaded SM per compute pipe (our SM simulator: per-SM rates from the registry,
#: wave quantization included); their maximum is the compute time of a Tensor Core family's launch
SM_COMPUTE_CYCLES = ("tensor_sm_max_cycle", "fma_sm_max_cycle", "xu_sm_max_cycle")
#: the feature set v2 columns the predictor reads (built from the key columns where a table lacks them)
V2_COLUMNS = ("l2_cycle", "sm_max_smem_cycle", "waves", "num_tasks", "ctas_per_sm", "sm_max_tasks") + LINEAR \
    + SM_COMPUTE_CYCLES


def with_spec_columns(rows: pd.DataFrame, registry) -> pd.DataFrame:
    """``rows`` with the ``bl_*`` work and spec columns (added when any is missing; row order kept)."""
    if all(c in rows.columns for c in BASELINE_COLUMNS):
        return rows
    return add_baseline_columns(rows.drop(columns=[c for c in BASELINE_COLUMNS if c in rows.columns]), registry,
                                tiles=False)


def gpu_class(spec) -> tuple[int, str]:
    """``(compute capability major, "HBM" or "GDDR")`` of a registry :class:`synperf.data.hardware.GPUSpec`: the
    key of :meth:`synperf.data.hardware.GPUSpec.same_class` (``compute_capability`` and the family of
    ``memory_type``, :attr:`synperf.data.hardware.GPUSpec.memory_family`, both from ``config/gpus.yaml``)."""
    return spec.sm_generation, spec.memory_family


def class_text(cls: tuple[int, str]) -> str:
    """``"sm_9x HBM"`` for ``(9, "HBM")`` (:func:`synperf.data.hardware.class_label`)."""
    return class_label(*cls)


def class_pool(gpu: str, training: list[str], registry) -> tuple[list[str], str]:
    """The training GPUs that inform ``gpu``'s predicted constants: those of its class (:func:`gpu_class`), else
    every training GPU; and the source text (``"class sm_8x GDDR (a40)"`` or ``"all training GPUs (no sm_8x GDDR
    GPU trained: a100_sxm4_80gb, h100_sxm)"``)."""
    cls = gpu_class(registry[gpu])
    same = sorted(g for g in training if g != gpu and registry[g].same_class(registry[gpu]))
    if same:
        return same, f"class {class_text(cls)} ({', '.join(same)})"
    pool = sorted(g for g in training if g != gpu)
    return pool, f"all training GPUs (no {class_text(cls)} GPU trained: {', '.join(pool)})"


#: terms of :func:`spec_distance` added for a different memory family (HBM/GDDR) and SM generation
DISTANCE_MEMORY_FAMILY = 1.0
DISTANCE_SM_GENERATION = 0.5


def _spec_vector(spec) -> np.ndarray:
    """Natural logs of DRAM bandwidth (GB/s), dense tensor peak (bf16, else fp16, else the FP32 CUDA-core peak,
    TFLOP/s), L2 size (MB) and SM count x boost clock (MHz), all from the registry row."""
    peak = spec.dense_bf16_tflops or spec.dense_fp16_tflops or spec.fp32_tflops
    return np.log([spec.dram_bw_gbps, peak, spec.l2_cache_mb, spec.sm_count * spec.boost_clock_mhz])


def spec_distance(gpu: str, others, registry) -> float:
    """How far ``gpu`` is from the nearest GPU of ``others`` (registry ids, ``gpu`` itself skipped) on the spec
    sheet: the Euclidean distance of :func:`_spec_vector` plus :data:`DISTANCE_MEMORY_FAMILY` where the memory
    families differ and :data:`DISTANCE_SM_GENERATION` where the compute capability majors differ (the two halves
    of :func:`gpu_class`). Dimensionless; 0 for a GPU with a spec twin among ``others``.

    Raises:
        ValueError: ``others`` holds no GPU but ``gpu``.
    """
    spec = registry[gpu]
    v, cls = _spec_vector(spec), gpu_class(spec)
    ds = [float(np.linalg.norm(v - _spec_vector(registry[o])))
          + DISTANCE_MEMORY_FAMILY * (gpu_class(registry[o])[1] != cls[1])
          + DISTANCE_SM_GENERATION * (gpu_class(registry[o])[0] != cls[0]) for o in others if o != gpu]
    if not ds:
        raise ValueError(f"spec distance of {gpu}: no other GPU to compare with")
    return min(ds)


def with_v2_columns(rows: pd.DataFrame, registry) -> pd.DataFrame:
    """``rows`` with the feature set v2 columns the predictor reads (:data:`V2_COLUMNS`), built from the canonical
    key columns (:func:`synperf.model.features.build_features`) when any is missing (row order kept)."""
    if all(c in rows.columns for c in V2_COLUMNS):
        return rows
    from synperf.data.schema import KEY_COLUMNS
    from synperf.model.features import build_features

    frame = build_features(rows[list(KEY_COLUMNS)].reset_index(drop=True), registry, "v2").frame
    frame.index = rows.index
    return pd.concat([rows, frame[[c for c in frame.columns if c not in rows.columns]]], axis=1)


def pipe_times(rows: pd.DataFrame, registry) -> np.ndarray:
    """Spec-sheet pipe times of each row on its GPU, shape ``(len(rows), len(PIPES))``, microseconds.

    ``compute_us``: for the Tensor Core families (:data:`synperf.data.launches.TENSOR_FAMILIES`) the most-loaded
    SM's compute cycles (the largest of :data:`SM_COMPUTE_CYCLES`) / clock, so a partial last wave and a GPU's
    per-SM Tensor Core rate (H20's quarter rate) are in it; for RMSNorm and SiLU&Mul ``bl_compute_us`` (FLOPs / FP32
    CUDA-core peak). ``dram_us = bl_memory_us`` (:func:`synperf.evaluation.baselines.add_baseline_columns`, added
    when absent), ``l2_us = l2_cycle / clock``, ``smem_us = sm_max_smem_cycle / clock`` (feature set v2's columns,
    built when absent, at the registry's boost clock ``bl_clock_hz``).
    """
    r = with_spec_columns(with_v2_columns(rows, registry), registry)
    clock = r["bl_clock_hz"].to_numpy(dtype="float64")
    comp = r["bl_compute_us"].to_numpy(dtype="float64").copy()
    tensor = r["kernel"].astype(str).isin(TENSOR_FAMILIES).to_numpy()
    if tensor.any():
        cyc = np.column_stack([r[c].to_numpy(dtype="float64", na_value=0.0)[tensor] for c in SM_COMPUTE_CYCLES])
        comp[tensor] = np.nan_to_num(cyc, nan=0.0).max(axis=1) / clock[tensor] * 1e6
    cols = [comp, r["bl_memory_us"].to_numpy(dtype="float64")]
    cols += [r[c].to_numpy(dtype="float64", na_value=0.0) / clock * 1e6 for c in ("l2_cycle", "sm_max_smem_cycle")]
    return np.nan_to_num(np.column_stack(cols), nan=0.0)


def at_compute_bound(bound_us: np.ndarray, pred_us: np.ndarray, low_us: np.ndarray | None = None,
                     high_us: np.ndarray | None = None) -> tuple:
    """Predictions no faster than the spec-sheet FLOP time ``bound_us`` (``bl_compute_us``: the launch's FLOPs at
    its GPU's dense peak for the dtype, from the registry; no measured public row is more than 7% below it):
    where ``pred_us`` is below the bound, the prediction and its interval move up by ``bound / pred`` (the
    interval keeps its width in log space) and the low bound is held at the bound. All arrays shape ``(n,)``,
    microseconds; a NaN or non-positive bound leaves the row as it is.

    Returns:
        ``(pred, low, high, raised)``: ``low``/``high`` None when not given; ``raised`` the rows moved up.
    """
    bound = np.nan_to_num(np.asarray(bound_us, dtype="float64"), nan=0.0)
    pred = np.asarray(pred_us, dtype="float64")
    raised = bound > pred
    factor = np.where(raised, bound / np.where(pred > 0, pred, 1.0), 1.0)
    low = None if low_us is None else np.where(raised, np.maximum(np.asarray(low_us) * factor, bound), low_us)
    high = None if high_us is None else np.asarray(high_us, dtype="float64") * factor
    return pred * factor, low, high, raised
