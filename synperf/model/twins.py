"""Measured twins: the same launch measured on a near class-mate, carried to a GPU without measurements.

Where a training GPU of the new GPU's class whose spec sheet is close to it (:func:`twin_mates`: the same class,
:meth:`synperf.data.hardware.GPUSpec.same_class`, and a :func:`synperf.model.pipes.spec_distance` of at most
:data:`TWIN_MAX_DISTANCE`) measured the very launch (the same kernel, implementation, dtype and parameters,
:func:`launch_keys`), the predictor answers with that measurement, its time above the twin's spec-sheet roofline
carried over
(:func:`synperf.model.roofline.roofline_shift`: ``latency_twin - roofline_twin + roofline_new``, the rooflines
``bl_roofline_us`` of :func:`synperf.model.roofline.add_baseline_columns` from the registry). This is the
nearest-GPU baseline's evidence (:mod:`synperf.evaluation.nearest_gpu`) inside the one predictor, restricted to
near class-mates: a class-mate far on the spec sheet (H20 against H100: a sixth of the tensor peak) runs the same
launch with another balance of compute and memory, and its excess over the roofline does not carry. A GPU whose
constants were refitted on a few measured launches (few-shot) keeps the twins' evidence at the launches a twin
measured (a measurement of the launch itself is closer evidence than constants refitted on other launches), and
takes its own measurement where its few-shot rows have the launch (:func:`synperf.evaluation.fewshot.
fewshot_predictor` adds them as the GPU's own table); the few-shot correction applies on top of a twin's
measurement, never on top of its own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.data.schema import IDENTITY_COLUMNS, KERNEL_PARAMS, KEY_COLUMNS
from synperf.model.pipes import spec_distance, with_spec_columns
from synperf.model.roofline import roofline_shift

#: every key column but ``gpu``
LAUNCH_KEY_COLUMNS = tuple(c for c in KEY_COLUMNS if c != "gpu")
_OWN_PARAMS = {c for cols in KERNEL_PARAMS.values() for c in cols}
#: the key columns no family takes as a parameter (routing distribution, Triton tuning config)
_HOW_COLUMNS = tuple(c for c in LAUNCH_KEY_COLUMNS if c not in IDENTITY_COLUMNS and c not in _OWN_PARAMS)
#: the largest :func:`synperf.model.pipes.spec_distance` between a GPU and a class-mate whose measurements it takes
#: (H100 and H200, 1.43x the DRAM bandwidth: 0.36; B200 and GB200: about 0.1; H100 and H20: about 2)
TWIN_MAX_DISTANCE = 0.5


def key_columns(kernel: str) -> tuple[str, ...]:
    """The columns that identify a launch of ``kernel`` (without its GPU): kernel, implementation and dtype, the
    family's own parameters (:data:`synperf.data.schema.KERNEL_PARAMS`) and the columns no family takes as a
    parameter (routing distribution, Triton tuning config; missing where they do not apply). Another family's
    parameters are left out: :func:`synperf.api.launch_table` fills them with defaults (``batch=1``,
    ``window_size=0``, ...) where a feature table leaves them missing. A kernel the schema does not know keys on
    every :data:`LAUNCH_KEY_COLUMNS`."""
    if kernel not in KERNEL_PARAMS:
        return LAUNCH_KEY_COLUMNS
    return ("kernel", "implementation", "dtype", *KERNEL_PARAMS[kernel], *_HOW_COLUMNS)


def canonical_values(v: pd.Series) -> pd.Series:
    """``v`` with numbers as float64 whatever their dtype (integer, nullable, category, or objects after a
    concatenation with an all-missing column), categories as their values, other columns as they are: the same
    launch parameter compares equal from every table."""
    if v.dtype == object:   # numbers held as objects (after a concatenation with an all-missing column)
        num = pd.to_numeric(v, errors="coerce")
        if int(num.notna().sum()) == int(v.notna().sum()):
            v = num
    if isinstance(v.dtype, pd.CategoricalDtype):
        v = v.astype(v.cat.categories.dtype)
    if pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v):
        v = v.astype("float64")
    return v


def launch_keys(rows: pd.DataFrame) -> np.ndarray:
    """uint64 hash per row of its :func:`key_columns`, shape ``(len(rows),)``: numbers compared as float64 (also
    when held as objects or categories), a column ``rows`` lacks counted as missing, so the same launch hashes equal
    on every GPU and in every table (a feature table, :func:`synperf.api.launch_table`'s canonical rows).

    Raises:
        KeyError: ``rows`` has no ``kernel`` column.
    """
    kernels = rows["kernel"].astype(str).to_numpy()
    out = np.zeros(len(rows), dtype="uint64")
    for kernel in np.unique(kernels):
        on = np.flatnonzero(kernels == kernel)
        part, cols = rows.iloc[on], {}
        for c in key_columns(str(kernel)):
            if c not in part.columns:
                cols[c] = pd.Categorical.from_codes(np.full(len(on), -1), categories=pd.Index([], dtype="string"))
                continue
            codes, uniques = pd.factorize(canonical_values(part[c].reset_index(drop=True)), use_na_sentinel=True)
            cols[c] = pd.Categorical.from_codes(codes, categories=pd.Index(uniques).astype("string"))
        out[on] = pd.util.hash_pandas_object(pd.DataFrame(cols), index=False).to_numpy()
    return out


def measured_table(rows: pd.DataFrame, registry) -> pd.DataFrame:
    """One GPU's measured launches: index the :func:`launch_keys`, columns ``latency_us`` (mean of the rows of that
    launch) and ``roofline_us`` (its ``bl_roofline_us`` on that GPU), float64."""
    rows = with_spec_columns(rows, registry)
    return (pd.DataFrame({"key": launch_keys(rows), "latency_us": rows["latency_us"].to_numpy(dtype="float64"),
                          "roofline_us": rows["bl_roofline_us"].to_numpy(dtype="float64")})
            .groupby("key").mean())


def twin_mates(gpu: str, measured, registry) -> list[str]:
    """The GPUs of ``measured`` (ids) whose measurements ``gpu`` takes: its class-mates within
    :data:`TWIN_MAX_DISTANCE` on the spec sheet, nearest first (then by id)."""
    near = [(spec_distance(gpu, [m], registry), m) for m in sorted(measured)
            if m != gpu and registry[m].same_class(registry[gpu])]
    return [m for d, m in sorted(near) if d <= TWIN_MAX_DISTANCE]


def twin_latency(tables: dict, rows: pd.DataFrame, registry, exclude=()) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``rows`` (``gpu``, key columns, ``bl_roofline_us``): the nearest twin's measurement of the same
    launch carried to the row's GPU (:func:`synperf.model.roofline.roofline_shift`), microseconds, NaN where no twin
    of ``tables`` (GPU id -> :func:`measured_table`) measured it; and the twin's id (``""`` where none). Rows of
    GPUs in ``exclude`` (those that trained) get none; a GPU's own table (its few-shot measurements) answers first,
    as they are, then the nearest twin that measured the launch."""
    gpus = rows["gpu"].astype(str).to_numpy()
    pred, src = np.full(len(rows), np.nan), np.full(len(rows), "", dtype=object)
    if not tables:
        return pred, src
    for g in np.unique(gpus):
        mates = [] if g in exclude else [g] * (g in tables) + twin_mates(g, tables, registry)
        if not mates:
            continue
        on = np.flatnonzero(gpus == g)
        keys = launch_keys(rows.iloc[on])
        roof = rows["bl_roofline_us"].to_numpy(dtype="float64")[on]
        for m in mates:
            todo = np.flatnonzero(np.isnan(pred[on]))
            if not len(todo):
                break
            hit = tables[m].reindex(keys[todo])
            ok = hit["latency_us"].notna().to_numpy()
            pred[on[todo[ok]]] = roofline_shift(hit["latency_us"].to_numpy()[ok], hit["roofline_us"].to_numpy()[ok],
                                                roof[todo[ok]])
            src[on[todo[ok]]] = m
    return pred, src
