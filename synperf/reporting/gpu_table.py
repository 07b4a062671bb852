"""The GPU registry as tables: ``synperf gpus`` (with where each GPU has measurements) and the report's provenance of
measured hardware values."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

#: registry fields ``synperf gpus`` lists after the id, in order: the class (compute capability, memory family HBM
#: or GDDR, :attr:`synperf.data.hardware.GPUSpec.gpu_class`), memory in GB, DRAM bandwidth in GB/s, the dense
#: Tensor Core peaks in TFLOP/s (None where the GPU lacks the format)
GPU_COLUMNS = ("architecture", "compute_capability", "memory_family", "memory_gb", "memory_type", "sm_count",
               "dram_bw_gbps",
               "dense_fp16_tflops", "dense_bf16_tflops", "dense_fp8_tflops", "dense_tf32_tflops")


def gpu_table(registry, config: dict, root: str | Path) -> pd.DataFrame:
    """One row per registry GPU (the registry's order): ``id``, the datasheet values of :data:`GPU_COLUMNS`
    (``config/gpus.yaml``, also where a measured hardware file replaced one) and where the GPU has measurements:

    * ``experiments``: how many experiments of the config's ``experiments`` name the GPU as seen or unseen (their
      ``sources``, mostly the public data, measured it);
    * ``own_kernels``: the kernel families of our own profiler under the config's ``measurements_dir``
      (``<gpu>/<kernel>.parquet``), ``+``-joined, empty when none;
    * ``hardware_measured``: a measured hardware file (the registry's ``measured_files``) replaced datasheet values.

    Args:
        registry: the loaded :class:`synperf.data.hardware.Registry`.
        config: the pipeline config (``experiments``, ``measurements_dir``).
        root: the folder relative config paths start from (the checkout).
    """
    exps = config.get("experiments") or {}
    named = [g for e in exps.values() for g in {*(e.get("seen") or []), *(e.get("unseen") or [])}]
    meas = Path(root, config.get("measurements_dir") or "data/measurements")
    rows = []
    for gid, spec in registry.gpus.items():
        sheet = spec.datasheet()
        row = {"id": gid, **{c: getattr(sheet, c) for c in GPU_COLUMNS}}
        kernels = sorted(f.stem for f in (meas / gid).glob("*.parquet")) if (meas / gid).is_dir() else []
        rows.append({**row, "experiments": named.count(gid), "own_kernels": "+".join(kernels),
                     "hardware_measured": gid in registry.measured_files})
    return pd.DataFrame(rows)


def registry_provenance(registry, fields: Iterable[str] | None = None,
                        gpus: Iterable[str] | None = None, measured_only: bool = False):
    """Which value of which GPU came from where, as a table the report can print.

    Args:
        registry: a registry from :func:`synperf.data.hardware.load_registry`.
        fields: registry fields to list; default :data:`synperf.data.hardware.MEASURABLE_FIELDS`.
        gpus: GPU ids to list; default every GPU (sorted).
        measured_only: list only the GPUs with at least one measured value
            (:attr:`synperf.data.hardware.Registry.measured_gpus`).

    Returns:
        pandas.DataFrame with one row per (gpu, field): ``gpu``, ``field``, ``value`` (what the registry
        uses), ``unit``, ``source`` (``"datasheet"`` or ``"measured: <file> (<method>, <date>)"``),
        ``datasheet_value`` and ``measured_over_datasheet`` (value / datasheet value; NaN where either
        is missing).
    """
    from synperf.data.hardware import MEASURABLE_FIELDS, MEASURED_FIELDS

    fields = list(fields) if fields is not None else list(MEASURABLE_FIELDS)
    ids = sorted(gpus) if gpus is not None else sorted(registry.gpus)
    if measured_only:
        keep = set(registry.measured_gpus)
        ids = [g for g in ids if g in keep]
    units = {f: u for f, u in MEASURED_FIELDS.values()}
    rows = []
    for gid in ids:
        spec = registry[gid]
        for f in fields:
            value, ds = getattr(spec, f), spec.datasheet_value(f)
            ratio = float(value) / float(ds) if value is not None and ds else float("nan")
            rows.append({"gpu": gid, "field": f, "value": None if value is None else float(value),
                         "unit": units.get(f, _unit_from_name(f)), "source": spec.value_source(f),
                         "datasheet_value": None if ds is None else float(ds), "measured_over_datasheet": ratio})
    cols = ["gpu", "field", "value", "unit", "source", "datasheet_value", "measured_over_datasheet"]
    return pd.DataFrame(rows, columns=cols)


def _unit_from_name(name: str) -> str:
    for suffix, unit in (("_gbps", "GB/s"), ("_tflops", "TFLOP/s"), ("_mhz", "MHz"), ("_mb", "MiB"),
                         ("_kb", "KiB"), ("_gb", "GB")):
        if name.endswith(suffix):
            return unit
    return ""
