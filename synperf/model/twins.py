"""Measured twins: the same launch measured on a near class-mate, carried to a GPU without measurements.

Where a training GPU of the new GPU's class whose spec sheet is close to it (:func:`twin_mates`: the same class,
:meth:`synperf.data.hardware.GPUSpec.same_class`, and a :func:`synperf.model.pipes.spec_distance` of at most
:data:`TWIN_MAX_DISTANCE`) measured the very launch (every key column but ``gpu`` equal, :func:`launch_keys`), the
predictor answers with that measurement, its time above the twin's spec-sheet roofline carried over
(:func:`synperf.model.roofline.roofline_shift`: ``latency_twin - roofline_twin + roofline_new``, the rooflines
``bl_roofline_us`` of :func:`synperf.model.roofline.add_baseline_columns` from the registry). This is the
nearest-GPU baseline's evidence (:mod:`synperf.evaluation.nearest_gpu`) inside the one predictor, restricted to
near class-mates: a class-mate far on the spec sheet (H20 against H100: a sixth of the tensor peak) runs the same
launch with another balance of compute and memory, and its excess over the roofline does not carry.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.data.schema import KEY_COLUMNS
from synperf.model.pipes import spec_distance, with_spec_columns
from synperf.model.roofline import roofline_shift

#: the launch's identity without its GPU
LAUNCH_KEY_COLUMNS = tuple(c for c in KEY_COLUMNS if c != "gpu")
#: the largest :func:`synperf.model.pipes.spec_distance` between a GPU and a class-mate whose measurements it takes
#: (H100 and H200, 1.43x the DRAM bandwidth: 0.36; B200 and GB200: about 0.1; H100 and H20: about 2)
TWIN_MAX_DISTANCE = 0.5


def launch_keys(rows: pd.DataFrame) -> np.ndarray:
    """uint64 hash per row of its :data:`LAUNCH_KEY_COLUMNS`, shape ``(len(rows),)``: numbers compared as float64,
    a column ``rows`` lacks counted as missing, so the same launch hashes equal on every GPU and in every table
    (a feature table, a user's launch table)."""
    n, cols = len(rows), {}
    for c in LAUNCH_KEY_COLUMNS:
        if c not in rows.columns:
            cols[c] = pd.Categorical.from_codes(np.full(n, -1), categories=pd.Index([], dtype="string"))
            continue
        v = rows[c]
        if pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v):
            v = v.astype("float64")
        codes, uniques = pd.factorize(v, use_na_sentinel=True)
        cols[c] = pd.Categorical.from_codes(codes, categories=pd.Index(uniques).astype("string"))
    return pd.util.hash_pandas_object(pd.DataFrame(cols), index=False).to_numpy()


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
    GPUs in ``exclude`` (those with measurements of their own) get none."""
    gpus = rows["gpu"].astype(str).to_numpy()
    pred, src = np.full(len(rows), np.nan), np.full(len(rows), "", dtype=object)
    if not tables:
        return pred, src
    for g in np.unique(gpus):
        mates = [] if g in exclude else twin_mates(g, tables, registry)
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
