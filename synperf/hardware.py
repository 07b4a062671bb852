"""GPU spec registry, read from ``config/gpus.yaml``.

Each entry carries datasheet numbers with their sources (``sources.specs``) and
an L2 bandwidth that is either measured (the SynPerf authors' hardware files) or
estimated from a measured sibling, as ``sources.l2_bw_gbps`` states. Units are in
the key names: ``*_mhz``, ``*_gbps`` (1e9 B/s), ``*_tflops`` (1e12 FLOP/s, dense),
``*_mb`` (MiB), ``*_kb`` (KiB).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .io import InputError

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "gpus.schema.yaml"
DEFAULT_REGISTRY = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"

# compute dtype -> registry peak column (dense tensor-core peak; fp32 uses the CUDA cores, TF32 off,
# as in NeuSight's data)
_PEAK_COLUMN = {
    "bfloat16": "dense_bf16_tflops",
    "float16": "dense_fp16_tflops",
    "fp8": "dense_fp8_tflops",
    "fp8_block": "dense_fp8_tflops",
    "float32": "fp32_tflops",
}


@dataclass(frozen=True)
class GPUSpec:
    """One GPU of the registry. Numbers are datasheet values unless ``sources`` says otherwise."""

    id: str
    name: str
    architecture: str
    compute_capability: str
    sm_count: int
    boost_clock_mhz: float
    dram_bw_gbps: float
    l2_bw_gbps: float
    l2_cache_mb: float
    smem_per_sm_kb: float
    smem_bw_bytes_per_clk_per_sm: float
    max_warps_per_sm: int
    max_ctas_per_sm: int
    regs_per_sm: int
    fp32_cores_per_sm: int
    sfu_per_sm: int
    fp32_tflops: float
    dense_fp16_tflops: float | None
    dense_bf16_tflops: float | None
    dense_fp8_tflops: float | None
    dense_tf32_tflops: float | None
    memory_gb: float
    device_names: tuple[str, ...]
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def peak_tflops(self, dtype: str) -> float:
        """Dense peak for a compute dtype, TFLOP/s.

        float16 falls back to bf16 and vice versa where one is missing (Volta and
        Turing have fp16 only); on GPUs without Tensor Cores (Pascal) half precision
        takes the FP32 CUDA-core peak (P100's 2x packed-fp16 rate is not modelled).

        Raises:
            KeyError: the dtype is unknown or this GPU has no such tensor format
                (e.g. fp8 on Ampere).
        """
        col = _PEAK_COLUMN.get(dtype)
        if col is None:
            raise KeyError(f"unknown compute dtype {dtype!r}; expected one of {sorted(_PEAK_COLUMN)}")
        val = getattr(self, col)
        if val is None and dtype in ("bfloat16", "float16"):
            val = self.dense_fp16_tflops if dtype == "bfloat16" else self.dense_bf16_tflops
            if val is None and int(self.raw.get("tensor_cores_per_sm", 0) or 0) == 0:
                val = self.fp32_tflops  # no Tensor Cores (Pascal): half precision runs on the CUDA cores
        if val is None:
            raise KeyError(f"GPU {self.id} has no {dtype} tensor peak in config/gpus.yaml")
        return float(val)

    def tensor_ops_per_clk_per_sm(self, dtype: str) -> float:
        """Dense Tensor Core FLOP per clock per SM for a dtype (for float32: FP32 CUDA-core FLOP).

        The architectural power-of-two value nearest ``peak_tflops / (sm_count * boost clock)``,
        the convention of gpu_specs_SOURCES.md section 1 (e.g. 4096 bf16 on H100, 2048 on A100,
        1024 on H20 and L40S); datasheet TFLOPS are often quoted at a lower clock than the boost.

        Raises:
            KeyError: as :meth:`peak_tflops`.
        """
        raw = self.peak_tflops(dtype) * 1e12 / (self.sm_count * self.clock_hz)
        return float(2 ** round(math.log2(raw)))

    @property
    def fma_ops_per_clk_per_sm(self) -> float:
        """FP32 FMA instructions per clock per SM (one per FP32 lane)."""
        return float(self.fp32_cores_per_sm)

    @property
    def xu_ops_per_clk_per_sm(self) -> float:
        """MUFU (XU pipe: exp2, rcp, rsqrt, log2) results per clock per SM."""
        return float(self.sfu_per_sm)

    @property
    def clock_hz(self) -> float:
        """Spec-sheet SM clock in Hz (``boost_clock_mhz``), used for every cycle count."""
        return self.boost_clock_mhz * 1e6


class Registry:
    """All GPUs of ``config/gpus.yaml``, validated against ``workflow/schemas/gpus.schema.yaml``."""

    def __init__(self, gpus: dict[str, GPUSpec], path: Path):
        self.gpus = gpus
        self.path = path
        self._by_name: dict[str, str] = {}
        for gid, spec in gpus.items():
            for name in spec.device_names:
                if name in self._by_name:
                    raise InputError(
                        f"{path}: device name {name!r} is listed under both "
                        f"{self._by_name[name]!r} and {gid!r}"
                    )
                self._by_name[name] = gid

    @property
    def ids(self) -> set[str]:
        return set(self.gpus)

    def __getitem__(self, gpu_id: str) -> GPUSpec:
        try:
            return self.gpus[gpu_id]
        except KeyError:
            raise InputError(
                f"unknown GPU id {gpu_id!r}: not in {self.path}; known ids: {sorted(self.gpus)}. "
                "Add it to config/gpus.yaml (see README, 'Adding a GPU')."
            ) from None

    def id_for_device_name(self, device_name: str, where: str) -> str:
        """Map a device string (NVML name or a data file's ``device`` value) to a registry id.

        Raises:
            InputError: the name is not listed under any GPU's ``device_names``.
        """
        gid = self._by_name.get(str(device_name).strip())
        if gid is None:
            raise InputError(
                f"{where}: unknown GPU {device_name!r}; add it to the `device_names` of a GPU in "
                f"{self.path} (or add a new GPU there, see README 'Adding a GPU')"
            )
        return gid


def load_registry(path: str | os.PathLike | None = None) -> Registry:
    """Load and validate the GPU registry.

    Raises:
        InputError: the file is missing, not YAML, or fails the schema; the
            message names the file and the offending key.
    """
    path = Path(path) if path is not None else DEFAULT_REGISTRY
    if not path.exists():
        raise InputError(f"{path}: GPU registry not found")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({exc})") from exc
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as exc:
        key = "/".join(str(p) for p in exc.absolute_path)
        raise InputError(f"{path}: at key {key!r}: {exc.message}") from exc
    gpus = {}
    for gid, e in doc["gpus"].items():
        gpus[gid] = GPUSpec(
            id=gid,
            name=e["name"],
            architecture=e["architecture"],
            compute_capability=str(e["compute_capability"]),
            sm_count=int(e["sm_count"]),
            boost_clock_mhz=float(e["boost_clock_mhz"]),
            dram_bw_gbps=float(e["dram_bw_gbps"]),
            l2_bw_gbps=float(e["l2_bw_gbps"]),
            l2_cache_mb=float(e["l2_cache_mb"]),
            smem_per_sm_kb=float(e["smem_per_sm_kb"]),
            smem_bw_bytes_per_clk_per_sm=float(e["smem_bw_bytes_per_clk_per_sm"]),
            max_warps_per_sm=int(e["max_warps_per_sm"]),
            max_ctas_per_sm=int(e["max_ctas_per_sm"]),
            regs_per_sm=int(e["regs_per_sm"]),
            fp32_cores_per_sm=int(e["fp32_cores_per_sm"]),
            sfu_per_sm=int(e["sfu_per_sm"]),
            fp32_tflops=float(e["fp32_tflops"]),
            dense_fp16_tflops=e.get("dense_fp16_tflops"),
            dense_bf16_tflops=e.get("dense_bf16_tflops"),
            dense_fp8_tflops=e.get("dense_fp8_tflops"),
            dense_tf32_tflops=e.get("dense_tf32_tflops"),
            memory_gb=float(e["memory_gb"]),
            device_names=tuple(e.get("device_names") or ()),
            raw=e,
        )
    return Registry(gpus, path)
