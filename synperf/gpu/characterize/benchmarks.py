"""The characterization benchmarks: what each measures, the settings they run with, and one prepared to time."""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Mapping

from synperf.data.io import InputError
from synperf.gpu.profiling.timing import TimingSettings

MIB = 1 << 20


class BenchmarkSkipped(RuntimeError):
    """A benchmark cannot run here (no FP8 Tensor Cores, CuPy missing, ...); recorded under ``skipped``."""


@dataclass(frozen=True)
class BenchmarkInfo:
    """What one benchmark measures and how (the record's ``method``, ``method_detail``, ``reference``).

    Attributes:
        key: measurement key in the output file (:data:`synperf.data.hardware.MEASURED_FIELDS`).
        unit: unit of ``value``.
        method: short name; the registry shows it as the value's source.
        detail: what is launched and what is counted.
        reference: where the method comes from.
    """

    key: str
    unit: str
    method: str
    detail: str
    reference: str


_STREAM = ("McCalpin, STREAM benchmark, Copy kernel (https://www.cs.virginia.edu/stream/ref.html); "
           "BabelStream (Deakin et al., IJCSE 2018) for best-of-N reporting")
_UBENCH = ("Jia et al., 'Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking' (arXiv 1804.06826); "
           "CUDA C++ Programming Guide, 'Shared Memory' (banks) and 'Arithmetic Instructions' (throughput)")
_GEMM = "2*m*n*k FLOP per GEMM, as NVIDIA datasheets count dense Tensor Core TFLOPS; cuBLAS via torch"

#: every benchmark, in the order they run (memory first while the GPU is cool, GEMMs last)
BENCHMARKS: dict[str, BenchmarkInfo] = {b.key: b for b in (
    BenchmarkInfo("dram_bw", "GB/s", "STREAM copy",
                  "torch Tensor.copy_ (device-to-device copy) between two fp32 buffers of 8x L2 each; "
                  "bytes = read + written (2 x buffer)", _STREAM),
    BenchmarkInfo("l2_bw", "GB/s", "L2 read loop",
                  "CuPy RawKernel l2_read: grid-stride float4 __ldcg loads of a buffer 1/4 of the L2, "
                  "`passes` times per launch, 4 blocks x 256 threads per SM; bytes = passes x buffer", _UBENCH),
    BenchmarkInfo("smem_bw", "B/clk/SM", "shared-memory read loop",
                  "CuPy RawKernel smem_read: conflict-free LDS.128 loads of a 16 KiB tile, 4 blocks x 256 "
                  "threads per SM; per SM, bytes / clock64 cycles between its blocks' first start and "
                  "last end (median over SMs)", _UBENCH),
    BenchmarkInfo("fp32_fma", "TFLOP/s", "FP32 FMA loop",
                  "CuPy RawKernel fma_fp32: 8 independent fmaf chains x 16 unrolled per iteration per thread; "
                  "FLOP = 2 per FMA", _UBENCH),
    BenchmarkInfo("gemm_bf16", "TFLOP/s", "cuBLAS GEMM bf16",
                  "torch.mm(A, B.t(), out=C), bf16 in/out, fp32 accumulate, square gemm_size", _GEMM),
    BenchmarkInfo("gemm_fp16", "TFLOP/s", "cuBLAS GEMM fp16",
                  "torch.mm(A, B.t(), out=C), fp16 in/out, square gemm_size", _GEMM),
    BenchmarkInfo("gemm_fp8", "TFLOP/s", "cuBLASLt GEMM fp8",
                  "torch._scaled_mm(A, B.t(), scale 1, 1), float8_e4m3fn in, bf16 out, square gemm_size "
                  "(compute capability >= 8.9)", _GEMM),
    BenchmarkInfo("gemm_tf32", "TFLOP/s", "cuBLAS GEMM tf32",
                  "torch.mm on fp32 tensors with torch.set_float32_matmul_precision('high') (TF32 Tensor "
                  "Cores), square gemm_size", _GEMM),
    BenchmarkInfo("gemm_fp32", "TFLOP/s", "cuBLAS SGEMM",
                  "torch.mm on fp32 tensors with matmul precision 'highest' (TF32 off: CUDA cores), square "
                  "gemm_fp32_size; informational, replaces no registry field", _GEMM),
)}


#: the characterization's timing defaults, under ``characterize.settings.timing`` of the config: no L2 flush
#: (the L2 benchmark needs its buffer resident), 100 ms of warm-up, 15 samples of about 5 ms each
CHARACTERIZE_TIMING: dict[str, Any] = {"l2": "hot", "warmup_ms": 100.0, "sample_ms": 5.0, "min_reps": 15,
                                       "max_reps": 15}

SETTINGS_KEY = "characterize.settings"


def characterize_timing(*layers: Mapping[str, Any] | None) -> TimingSettings:
    """:class:`TimingSettings` of the characterization: :data:`CHARACTERIZE_TIMING` with ``layers`` over it.

    Raises:
        InputError: an unknown key or invalid value, naming ``characterize.settings.timing``.
    """
    return TimingSettings.from_dict(CHARACTERIZE_TIMING, *layers, key=f"{SETTINGS_KEY}.timing")


@dataclass(frozen=True)
class CharacterizeSettings:
    """Sizes and timing of the characterization (config block ``characterize.settings``).

    Attributes:
        benchmarks: keys of :data:`BENCHMARKS` to run.
        timing: warm-up, samples and batching (:class:`~synperf.gpu.profiling.timing.TimingSettings`; a dict is
            applied over :data:`CHARACTERIZE_TIMING`); ``sample_ms`` must be > 0 (a sample is a batch of launches).
        clock_period_ms: NVML sampling period during the samples, ms.
        dram_factor, dram_min_mib, dram_max_mib: copy buffer size, x L2 clamped to [min, max] MiB.
        l2_fraction: ``l2_read`` buffer as a fraction of the L2 size.
        l2_passes: passes over the buffer per ``l2_read`` launch.
        l2_blocks_per_sm, smem_blocks_per_sm, fma_blocks_per_sm: blocks of 256 threads per SM.
        smem_iters: outer iterations of ``smem_read`` (each loads ``SMEM_UNROLL`` float4 per thread).
        fma_iters: outer iterations of ``fma_fp32``.
        gemm_size: m = n = k of the tensor-core GEMMs.
        gemm_fp32_size: m = n = k of the SGEMM.
        lock_timeout_s: give up waiting for a GPU another profiler holds after this long, s (None: wait).

    Raises:
        InputError: an unknown benchmark, timing key or invalid value, naming its ``characterize.settings`` key.
    """

    benchmarks: tuple[str, ...] = tuple(BENCHMARKS)
    timing: TimingSettings = field(default_factory=characterize_timing)
    clock_period_ms: float = 5.0
    dram_factor: float = 8.0
    dram_min_mib: int = 256
    dram_max_mib: int = 2048
    l2_fraction: float = 0.25
    l2_passes: int = 256
    l2_blocks_per_sm: int = 4
    smem_iters: int = 1024
    smem_blocks_per_sm: int = 4
    fma_iters: int = 512
    fma_blocks_per_sm: int = 16
    gemm_size: int = 8192
    gemm_fp32_size: int = 4096
    lock_timeout_s: float | None = None

    def __post_init__(self) -> None:
        unknown = [b for b in self.benchmarks if b not in BENCHMARKS]
        if unknown:
            raise InputError(f"{SETTINGS_KEY}.benchmarks: unknown {unknown}; expected some of {list(BENCHMARKS)}")
        object.__setattr__(self, "benchmarks", tuple(self.benchmarks))
        if isinstance(self.timing, Mapping):
            object.__setattr__(self, "timing", characterize_timing(self.timing))
        elif not isinstance(self.timing, TimingSettings):
            raise InputError(f"{SETTINGS_KEY}.timing: expected a mapping of timing keys, got {self.timing!r}")
        if self.timing.sample_ms <= 0:
            raise InputError(f"{SETTINGS_KEY}.timing.sample_ms: {self.timing.sample_ms} is not > 0 (a sample is a "
                             "batch of launches)")
        if self.clock_period_ms <= 0:
            raise InputError(f"{SETTINGS_KEY}.clock_period_ms: {self.clock_period_ms} is not > 0")
        if not 0 < self.l2_fraction < 1:
            raise InputError(f"{SETTINGS_KEY}.l2_fraction: {self.l2_fraction} is not in (0, 1)")

    @classmethod
    def from_dict(cls, *layers: Mapping[str, Any] | None) -> "CharacterizeSettings":
        """Settings from dicts applied in order (later ones win, ``timing`` key by key over
        :data:`CHARACTERIZE_TIMING`).

        Raises:
            InputError: an unknown key, a ``timing`` that is not a mapping, or an invalid value.
        """
        known = {f.name for f in fields(cls)}
        merged: dict[str, Any] = {}
        timing_layers: list[Mapping[str, Any]] = []
        for layer in layers:
            for key, value in (layer or {}).items():
                if key not in known:
                    raise InputError(f"{SETTINGS_KEY}: unknown key {key!r}; expected one of {sorted(known)}")
                if key == "timing":
                    if not isinstance(value, Mapping):
                        raise InputError(f"{SETTINGS_KEY}.timing: expected a mapping of timing keys, got {value!r}")
                    timing_layers.append(value)
                else:
                    merged[key] = value
        return cls(**merged, timing=characterize_timing(*timing_layers))

    def as_dict(self) -> dict[str, Any]:
        """Every field, ``benchmarks`` as a list and ``timing`` as a dict (JSON-ready)."""
        d = asdict(self)
        d["benchmarks"] = list(self.benchmarks)
        return d


@dataclass
class Prepared:
    """One benchmark ready to time.

    Attributes:
        fn: one launch, enqueued on the current stream (no host synchronisation).
        work_per_call: bytes (bandwidth benchmarks) or FLOP (throughput benchmarks) of one launch.
        work: sizes worth recording (buffer bytes, grid, m/n/k, ...).
        implementation: the library call or kernel that runs.
        after: called once after timing; returns extra results (``smem_read``'s per-SM clock64 figures).
        context: entered around the timing (e.g. TF32 on or off), or None.
    """

    fn: Callable[[], Any]
    work_per_call: float
    work: dict[str, Any]
    implementation: str
    after: Callable[[], dict[str, Any]] | None = None
    context: Callable[[], contextlib.AbstractContextManager] | None = None
