"""GPU spec registry, read from ``config/gpus.yaml``.

Each entry carries datasheet numbers with their sources (``sources.specs``) and
an L2 bandwidth that is either measured (the SynPerf authors' hardware files) or
estimated from a measured sibling, as ``sources.l2_bw_gbps`` states. Units are in
the key names: ``*_mhz``, ``*_gbps`` (1e9 B/s), ``*_tflops`` (1e12 FLOP/s, dense),
``*_mb`` (MiB), ``*_kb`` (KiB).

Measured values. ``data/hardware/<gpu>.json``, written by the hardware characterization
(:mod:`synperf.gpu.characterize`, ``snakemake --cores all characterize_local``), holds this machine's measured
DRAM, L2 and shared-memory bandwidth, dense GEMM throughput per dtype and FP32 FMA throughput.
:func:`load_registry` merges those values over the datasheet ones (the caller passes the folder,
``hardware_measurements_dir``; ``use_measured=False`` gives the datasheet-only registry for comparison). Each
:class:`GPUSpec` says where every number came from (:meth:`GPUSpec.value_source`, :attr:`GPUSpec.sources_used`) and
keeps the datasheet value (:meth:`GPUSpec.datasheet_value`); :func:`synperf.reporting.gpu_table.registry_provenance`
tabulates it for reports. The file format is :data:`MEASURED_SCHEMA_PATH` (``workflow/schemas/hardware.schema.yaml``);
which measurement feeds which registry field is :data:`MEASURED_FIELDS`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema
import yaml

from synperf.data.io import InputError, close_match

#: the JSON schemas shipped with the code (``workflow/schemas/`` beside the package): the registry's format and
#: the format of a measured hardware file. Code assets, not configuration: the registry itself and the folder of
#: measured files are always passed in by the caller (the Snakefile, a script, :func:`synperf.api.default_paths`).
SCHEMA_DIR = Path(__file__).resolve().parents[2] / "workflow" / "schemas"
SCHEMA_PATH = SCHEMA_DIR / "gpus.schema.yaml"
#: JSON schema of a measured hardware file ``<hardware_measurements_dir>/<gpu>.json``
MEASURED_SCHEMA_PATH = SCHEMA_DIR / "hardware.schema.yaml"

#: measurement key of ``data/hardware/<gpu>.json`` -> (registry field it replaces, unit of both).
#: The unit is enforced by the schema, so a file cannot feed GB/s into a TFLOP/s field.
MEASURED_FIELDS: dict[str, tuple[str, str]] = {
    "dram_bw": ("dram_bw_gbps", "GB/s"),                           # STREAM-style copy, read + write bytes
    "l2_bw": ("l2_bw_gbps", "GB/s"),                               # repeated reads of a buffer inside L2
    "smem_bw": ("smem_bw_bytes_per_clk_per_sm", "B/clk/SM"),       # conflict-free LDS.128 loop, clock64
    "gemm_bf16": ("dense_bf16_tflops", "TFLOP/s"),                 # large cuBLAS GEMM
    "gemm_fp16": ("dense_fp16_tflops", "TFLOP/s"),
    "gemm_fp8": ("dense_fp8_tflops", "TFLOP/s"),                   # torch._scaled_mm, e4m3, SM 8.9+
    "gemm_tf32": ("dense_tf32_tflops", "TFLOP/s"),                 # fp32 GEMM with TF32 Tensor Cores
    "fp32_fma": ("fp32_tflops", "TFLOP/s"),                        # independent FFMA chains
}
#: measurement keys a file may carry that replace no registry field (reported only), -> unit
INFORMATIONAL_MEASUREMENTS: dict[str, str] = {
    "gemm_fp32": "TFLOP/s",                                        # SGEMM with TF32 off (CUDA cores)
}
#: registry fields that a measured file can replace
MEASURABLE_FIELDS: tuple[str, ...] = tuple(f for f, _ in MEASURED_FIELDS.values())
#: the ``source`` of a number that comes from ``config/gpus.yaml``
DATASHEET = "datasheet"

# compute dtype -> registry peak column (dense tensor-core peak; fp32 uses the CUDA cores, TF32 off,
# as in NeuSight's data)
_PEAK_COLUMN = {
    "bfloat16": "dense_bf16_tflops",
    "float16": "dense_fp16_tflops",
    "fp8": "dense_fp8_tflops",
    "fp8_block": "dense_fp8_tflops",
    "float32": "fp32_tflops",
}

#: DRAM technology of a registry ``memory_type`` -> its memory family, the second half of a GPU's class
#: (:attr:`GPUSpec.gpu_class`): stacked on-package HBM or board-level GDDR.
MEMORY_FAMILY: dict[str, str] = {
    "HBM2": "HBM", "HBM2e": "HBM", "HBM3": "HBM", "HBM3e": "HBM",
    "GDDR5": "GDDR", "GDDR6": "GDDR", "GDDR6X": "GDDR", "GDDR7": "GDDR",
}


def class_label(major: int, memory_family: str) -> str:
    """``"sm_9x HBM"`` for compute capability major 9 and memory family HBM: a GPU class in words."""
    return f"sm_{major}x {memory_family}"


@dataclass(frozen=True)
class GPUSpec:
    """One GPU of the registry. Numbers are datasheet values unless ``sources`` says otherwise."""

    id: str
    name: str
    architecture: str
    compute_capability: str
    memory_type: str
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
    #: registry field -> where its value came from, for the fields a measured file replaced:
    #: ``"measured: data/hardware/h100_sxm.json (STREAM copy, 2026-03-01)"``. Empty: datasheet only.
    sources_used: Mapping[str, str] = field(repr=False, compare=False, default_factory=dict)
    #: registry field -> its datasheet value (``config/gpus.yaml``), for the fields a measured file replaced
    datasheet_values: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def value_source(self, name: str) -> str:
        """Where the value of field ``name`` came from: ``"datasheet"`` (``config/gpus.yaml``, whose
        ``sources:`` cite each number, e.g. an estimated L2 bandwidth) or ``"measured: <file> (<method>,
        <date>)"`` when a ``data/hardware/<gpu>.json`` replaced it.

        Raises:
            KeyError: ``name`` is not a field of :class:`GPUSpec`.
        """
        if name not in _SPEC_FIELDS:
            raise KeyError(f"{name!r} is not a GPUSpec field; expected one of {sorted(_SPEC_FIELDS)}")
        return self.sources_used.get(name, DATASHEET)

    def is_measured(self, name: str) -> bool:
        """True when field ``name`` holds a measured value (see :meth:`value_source`)."""
        return self.value_source(name) != DATASHEET

    def datasheet_value(self, name: str) -> Any:
        """The datasheet value of field ``name`` (``config/gpus.yaml``), whether or not a measurement replaced it."""
        if name in self.datasheet_values:
            return self.datasheet_values[name]
        if name not in _SPEC_FIELDS:
            raise KeyError(f"{name!r} is not a GPUSpec field; expected one of {sorted(_SPEC_FIELDS)}")
        return getattr(self, name)

    def datasheet(self) -> "GPUSpec":
        """This GPU with every measured value put back to its datasheet value (a datasheet-only spec)."""
        if not self.sources_used:
            return self
        return replace(self, **dict(self.datasheet_values), sources_used={}, datasheet_values={})

    def _peak(self, dtype: str, value: Any) -> float:
        col = _PEAK_COLUMN.get(dtype)
        if col is None:
            raise KeyError(f"unknown compute dtype {dtype!r}; expected one of {sorted(_PEAK_COLUMN)}")
        val = value(col)
        if val is None and dtype in ("bfloat16", "float16"):
            val = value("dense_fp16_tflops" if dtype == "bfloat16" else "dense_bf16_tflops")
            if val is None and int(self.raw.get("tensor_cores_per_sm", 0) or 0) == 0:
                val = value("fp32_tflops")  # no Tensor Cores (Pascal): half precision runs on the CUDA cores
        if val is None:
            raise KeyError(f"GPU {self.id} has no {dtype} tensor peak in config/gpus.yaml")
        return float(val)

    def peak_tflops(self, dtype: str) -> float:
        """Dense peak for a compute dtype, TFLOP/s: the measured achievable rate where a
        ``data/hardware/<gpu>.json`` was merged (see :meth:`value_source`), else the datasheet peak.

        float16 falls back to bf16 and vice versa where one is missing (Volta and
        Turing have fp16 only); on GPUs without Tensor Cores (Pascal) half precision
        takes the FP32 CUDA-core peak (P100's 2x packed-fp16 rate is not modelled).

        Raises:
            KeyError: the dtype is unknown or this GPU has no such tensor format
                (e.g. fp8 on Ampere).
        """
        return self._peak(dtype, lambda col: getattr(self, col))

    def datasheet_peak_tflops(self, dtype: str) -> float:
        """As :meth:`peak_tflops`, from the datasheet values only (measured values ignored)."""
        return self._peak(dtype, self.datasheet_value)

    def tensor_ops_per_clk_per_sm(self, dtype: str) -> float:
        """Dense Tensor Core FLOP per clock per SM for a dtype (for float32: FP32 CUDA-core FLOP).

        The architectural power-of-two value nearest ``peak_tflops / (sm_count * boost clock)``,
        the convention of gpu_specs_SOURCES.md section 1 (e.g. 4096 bf16 on H100, 2048 on A100,
        1024 on H20 and L40S); datasheet TFLOPS are often quoted at a lower clock than the boost.
        Always from the *datasheet* peak: it is an architectural constant, and an achievable measured
        rate (typically 70-85 % of peak) could round to the power of two below it.

        Raises:
            KeyError: as :meth:`peak_tflops`.
        """
        raw = self.datasheet_peak_tflops(dtype) * 1e12 / (self.sm_count * self.clock_hz)
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
    def memory_family(self) -> str:
        """``"HBM"`` or ``"GDDR"``: the family of the registry ``memory_type`` (:data:`MEMORY_FAMILY`)."""
        return MEMORY_FAMILY[self.memory_type]

    @property
    def gpu_class(self) -> tuple[str, str]:
        """The GPU's class: ``(compute capability, memory family)``, e.g. ``("8.9", "GDDR")`` for L40S,
        ``("9.0", "HBM")`` for H100. Both halves come from the registry (``compute_capability``,
        ``memory_type``, each with its source in ``sources.specs``)."""
        return self.compute_capability, self.memory_family

    @property
    def sm_generation(self) -> int:
        """The compute capability's major version (8 for 8.0/8.6/8.9, 10 for 10.0/10.3, 12 for 12.0): the SM
        generation of :meth:`same_class`."""
        return int(self.compute_capability.split(".")[0])

    @property
    def class_label(self) -> str:
        """The class of :meth:`same_class` in words (:func:`class_label`), e.g. ``"sm_8x GDDR"`` for L40S."""
        return class_label(self.sm_generation, self.memory_family)

    def same_class(self, other: "GPUSpec") -> bool:
        """True when ``other`` is of this GPU's class for similarity: the same compute capability major version
        (the SM generation: 8.0/8.6/8.9 are 8, 10.0/10.3 are 10, 12.0 is 12) and the same memory family. H100
        and H20 are; H100 and L40S are not (9.0 vs 8.9), nor A100 and A40 (HBM vs GDDR), nor B200 and RTX PRO
        6000 (10.0 HBM vs 12.0 GDDR)."""
        return (self.sm_generation, self.memory_family) == (other.sm_generation, other.memory_family)

    @property
    def clock_hz(self) -> float:
        """Spec-sheet SM clock in Hz (``boost_clock_mhz``), used for every cycle count."""
        return self.boost_clock_mhz * 1e6


_SPEC_FIELDS = frozenset(f.name for f in fields(GPUSpec))


class Registry:
    """All GPUs of ``config/gpus.yaml``, validated against ``workflow/schemas/gpus.schema.yaml``,
    with measured values merged over the datasheet ones where ``load_registry`` found them.

    Attributes:
        gpus: id -> :class:`GPUSpec`.
        path: the registry file.
        use_measured: whether measured files were merged.
        measured_dir: the folder searched for ``<gpu>.json`` (None when ``use_measured`` is False).
        measured_files: id -> the measured file merged into that GPU.
    """

    def __init__(self, gpus: dict[str, GPUSpec], path: Path, *, use_measured: bool = False,
                 measured_dir: Path | None = None, measured_files: Mapping[str, Path] | None = None):
        self.gpus = gpus
        self.path = path
        self.use_measured = use_measured
        self.measured_dir = measured_dir
        self.measured_files: dict[str, Path] = dict(measured_files or {})
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

    @property
    def measured_gpus(self) -> list[str]:
        """Ids of the GPUs with at least one measured value, sorted (the GPUs a datasheet-vs-measured
        comparison is about)."""
        return sorted(gid for gid, spec in self.gpus.items() if spec.sources_used)

    def __getitem__(self, gpu_id: str) -> GPUSpec:
        try:
            return self.gpus[gpu_id]
        except KeyError:
            self._unknown(gpu_id, self.gpus)

    def _unknown(self, gpu: str, names) -> None:
        """Refuse ``gpu``, suggesting the closest of ``names``."""
        raise InputError(f"unknown GPU id {gpu!r}{close_match(gpu, names)}: not in {self.path}; known ids: "
                         f"{sorted(self.gpus)}. Add it to config/gpus.yaml (see docs/data.md, 'Adding a GPU').")

    def resolve(self, gpu: str) -> str:
        """The registry id of ``gpu``: a registry id, or a device name listed under a GPU's ``device_names``
        (``NVIDIA H100 80GB HBM3`` -> ``h100_sxm``).

        Raises:
            InputError: neither (the message of :meth:`__getitem__`).
        """
        gpu = str(gpu)
        if gpu in self.gpus:
            return gpu
        gid = self._by_name.get(gpu.strip())
        if gid is None:
            self._unknown(gpu, [*self.gpus, *self._by_name])
        return gid

    def id_for_device_name(self, device_name: str, where: str) -> str:
        """Map a device string (NVML name or a data file's ``device`` value) to a registry id.

        Raises:
            InputError: the name is not listed under any GPU's ``device_names``.
        """
        gid = self._by_name.get(str(device_name).strip())
        if gid is None:
            if is_mig_slice(device_name):
                raise InputError(f"{where}: {device_name!r} is a MIG slice: {MIG_ADVICE.format(path=self.path)}")
            raise InputError(
                f"{where}: unknown GPU {device_name!r}; add it to the `device_names` of a GPU in "
                f"{self.path} (or add a new GPU there, see docs/data.md, 'Adding a GPU')"
            )
        return gid


#: what to do with a MIG slice's name (a slice has a fraction of the GPU's SMs, L2 and DRAM bandwidth, so the full
#: GPU's entry would give it the wrong specs)
MIG_ADVICE = ("it has only part of the full GPU's SMs, L2 and DRAM bandwidth, so it must not be added to the full "
              "GPU's `device_names`; add a new GPU entry to {path} for the slice with its own SM count, L2 size and "
              "bandwidth share (docs/data.md, 'Adding a GPU'), or profile on the whole GPU")


def is_mig_slice(device_name: str) -> bool:
    """True for a MIG instance's device name (e.g. ``NVIDIA A100-SXM4-80GB MIG 3g.40gb``)."""
    import re

    return re.search(r"\bMIG\b", str(device_name)) is not None


def load_registry(path: str | os.PathLike, measured_dir: str | os.PathLike | None = None,
                  use_measured: bool = True) -> Registry:
    """Load and validate the GPU registry, with measured values merged over datasheet ones.

    Args:
        path: the registry YAML (the pipeline's ``gpu_registry``, e.g. ``config/gpus.yaml``).
        measured_dir: folder of measured files ``<gpu>.json`` (:func:`read_measured_file`), the pipeline's
            ``hardware_measurements_dir``; None: no measured files (the datasheet registry). A folder that does
            not exist holds no measurements (a fresh checkout): the registry is then the datasheet one.
        use_measured: False ignores measured files entirely (datasheet-only registry, for the
            datasheet-vs-measured comparison; the config's ``characterize.use_measured``); the folder is then
            not even read.

    Every field of :data:`MEASURED_FIELDS` present in a GPU's file replaces the datasheet value; the
    others stay datasheet values (partial files are fine). See :meth:`GPUSpec.value_source`.

    Raises:
        InputError: the registry file is missing, not YAML, lists a key twice in one mapping (a GPU id, a field),
            fails the schema, holds a non-finite number or one outside the field's plausible range, an unknown
            ``memory_type``, or a dense tensor peak per SM per clock unlike its compute capability's without a
            sourced ``tensor_fp32_accumulate_rate`` (:mod:`synperf.data.checks`; the message names the file and the
            offending key); or a
            measured file is malformed, fails its schema, or is named after a GPU id the registry does not have
            (the message names that file).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: GPU registry not found")
    from synperf.data.checks import check_gpu_numbers, check_memory_types, check_tensor_rates, load_unique_yaml

    doc = load_unique_yaml(path)
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as exc:
        key = "/".join(str(p) for p in exc.absolute_path)
        raise InputError(f"{path}: at key {key!r}: {exc.message}") from exc
    check_gpu_numbers(doc["gpus"], path)
    check_memory_types(doc["gpus"], path, MEMORY_FAMILY)
    gpus = {}
    for gid, e in doc["gpus"].items():
        gpus[gid] = GPUSpec(
            id=gid,
            name=e["name"],
            architecture=e["architecture"],
            compute_capability=str(e["compute_capability"]),
            memory_type=str(e["memory_type"]),
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
    check_tensor_rates(gpus, path)
    if not use_measured or measured_dir is None:
        return Registry(gpus, path)
    mdir = Path(measured_dir)
    files = {}
    for mf in read_measured_dir(mdir, known_ids=gpus, registry_path=path):
        gpus[mf.gpu] = apply_measured(gpus[mf.gpu], mf)
        files[mf.gpu] = mf.path
    return Registry(gpus, path, use_measured=True, measured_dir=mdir, measured_files=files)


# ------------------------------------------------------------------------------------------------
# measured hardware files (data/hardware/<gpu>.json)
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MeasuredFile:
    """One validated ``data/hardware/<gpu>.json``.

    Attributes:
        path: the file.
        gpu: registry id (the file name's stem, equal to the file's ``gpu`` key).
        created_utc: when the characterization ran (ISO 8601).
        values: registry field -> measured value (in the field's unit), for the measurements present.
        methods: registry field -> the measurement's short ``method``.
        doc: the whole parsed document.
    """

    path: Path
    gpu: str
    created_utc: str
    values: Mapping[str, float]
    methods: Mapping[str, str]
    doc: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def source(self, registry_field: str) -> str:
        """``"measured: <file> (<method>, <date>)"`` for one registry field of this file."""
        return f"measured: {display_path(self.path)} ({self.methods[registry_field]}, {self.created_utc[:10]})"


def display_path(path: str | os.PathLike) -> str:
    """``path`` relative to the working directory (the pipeline's: the checkout) when inside it
    (``data/hardware/h100_sxm.json``), else as given."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


_MEASURED_SCHEMA: dict | None = None


def measured_schema() -> dict:
    """The JSON schema of a measured hardware file (``workflow/schemas/hardware.schema.yaml``), parsed once."""
    global _MEASURED_SCHEMA
    if _MEASURED_SCHEMA is None:
        _MEASURED_SCHEMA = yaml.safe_load(MEASURED_SCHEMA_PATH.read_text())
    return _MEASURED_SCHEMA


def validate_measured_document(doc: Any, where: str | os.PathLike) -> None:
    """Check a measured hardware document against :func:`measured_schema`.

    Raises:
        InputError: ``"<where>: at key 'measurements/dram_bw/unit': ..."``, naming the file and the
            offending key (the most specific error jsonschema reports).
    """
    validator = jsonschema.Draft202012Validator(measured_schema())
    errors = list(validator.iter_errors(doc))
    if not errors:
        return
    err = jsonschema.exceptions.best_match(errors)
    # inside allOf/anyOf best_match may stop at the wrapper; descend to the deepest leaf error
    while err.context:
        err = jsonschema.exceptions.best_match(err.context)
    key = "/".join(str(p) for p in err.absolute_path) or "(top level)"
    raise InputError(f"{where}: at key {key!r}: {err.message} (schema: {display_path(MEASURED_SCHEMA_PATH)})")


def read_measured_file(path: str | os.PathLike, known_ids: Iterable[str] | None = None,
                       registry_path: str | os.PathLike | None = None) -> MeasuredFile:
    """Read and validate one measured hardware file ``<dir>/<gpu>.json``.

    Args:
        path: the file; its stem must be a registry id and equal the document's ``gpu``.
        known_ids: the registry's ids (None: not checked).
        registry_path: named in the unknown-id message.

    Raises:
        InputError: unknown GPU id in the file name, not JSON (with line and column), schema failure
            (with the key), or ``gpu`` differing from the file name; every message names the file.
    """
    path = Path(path)
    gid = path.stem
    if known_ids is not None and gid not in set(known_ids):
        raise InputError(
            f"{path}: unknown GPU id {gid!r} (the file name must be a registry id of "
            f"{registry_path or 'the GPU registry'}); rename it to <id>.json or add the GPU to the registry "
            "(docs/data.md, 'Adding a GPU')")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                         "rerun `snakemake --cores all characterize_local` or delete the file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from exc
    validate_measured_document(doc, path)
    if doc["gpu"] != gid:
        raise InputError(f"{path}: at key 'gpu': the file says {doc['gpu']!r} but its name says {gid!r}; "
                         "a measured file is named <gpu>.json after the GPU it measured")
    values, methods = {}, {}
    for key, (reg_field, _unit) in MEASURED_FIELDS.items():
        m = doc["measurements"].get(key)
        if m is not None:
            values[reg_field] = float(m["value"])
            methods[reg_field] = str(m["method"])
    return MeasuredFile(path=path, gpu=gid, created_utc=str(doc["created_utc"]), values=values, methods=methods,
                        doc=doc)


def measured_files(measured_dir: str | os.PathLike | None) -> list[Path]:
    """The measured files of a folder (``<id>.json``; hidden and temporary files skipped), sorted; [] when the
    folder does not exist or is None. Usable as a Snakemake input function: ``lambda wc: measured_files(dir)``."""
    if measured_dir is None:
        return []
    d = Path(measured_dir)
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob("*.json") if not p.name.startswith(".") and p.is_file())


def read_measured_dir(measured_dir: str | os.PathLike, known_ids: Iterable[str] | None = None,
                      registry_path: str | os.PathLike | None = None) -> list[MeasuredFile]:
    """Every measured file of ``measured_dir`` (see :func:`measured_files`), read and validated."""
    ids = set(known_ids) if known_ids is not None else None
    return [read_measured_file(p, ids, registry_path) for p in measured_files(measured_dir)]


def apply_measured(spec: GPUSpec, measured: MeasuredFile) -> GPUSpec:
    """``spec`` with the measured values of ``measured`` in place of the datasheet ones, recording the
    source of each replaced field and its datasheet value."""
    if measured.gpu != spec.id:
        raise InputError(f"{measured.path}: measures {measured.gpu!r}, not {spec.id!r}")
    if not measured.values:
        return spec
    base = spec.datasheet()
    return replace(base, **measured.values,
                   sources_used={f: measured.source(f) for f in measured.values},
                   datasheet_values={f: getattr(base, f) for f in measured.values})
