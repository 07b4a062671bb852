"""``synperf gpus``: the GPU registry as a table, with where each GPU has measurements."""

from __future__ import annotations

from pathlib import Path

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
