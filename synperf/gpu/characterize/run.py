"""Run the characterization microbenchmarks on the local GPU and write ``<out_dir>/<gpu>.json``.

The GPU side (torch, CuPy/NVRTC, NVML) is imported lazily inside the functions that need it; the
orchestration (:func:`run_benchmarks`, :func:`build_document`) takes the timer, the clock source and the
benchmark preparers as arguments, so the tests drive it on the CPU with fake timings.

Every benchmark is timed by the profiling harness, :meth:`synperf.gpu.profiling.timing.Timer.measure` on a
:class:`~synperf.gpu.profiling.timing.CudaTimer`, with the settings ``CharacterizeSettings.timing``
(defaults :data:`CHARACTERIZE_TIMING`): one untimed launch (NVRTC/cuBLAS heuristics, first touch of the
buffers), a per-launch estimate from 3 separately timed launches, warm-up by time (``warmup_ms``: clocks ramp
up, the L2 benchmark's buffer becomes resident; no L2 flush), then ``min_reps`` (= ``max_reps``) samples, each
a batch of launches lasting about ``sample_ms`` between one CUDA event pair. The rate is taken from the best
sample (BabelStream's convention, :func:`synperf.gpu.characterize.arithmetic.per_call_seconds`); the median is
recorded beside it. NVML is sampled every ``clock_period_ms`` on a host thread while the samples run
(:class:`ClockSampler`, the harness's ``during``), plus once before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import logging
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from synperf.data.hardware import MEASURED_FIELDS, validate_measured_document
from synperf.data.io import InputError, write_json
from synperf.gpu.characterize import arithmetic as ar
from synperf.gpu.characterize import kernels as K
from synperf.gpu.profiling import NoGPUError, ProfilingError
from synperf.gpu.profiling.timing import CudaTimer, Timer, TimingResult, TimingSettings

log = logging.getLogger("synperf.gpu.characterize")

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


# ------------------------------------------------------------------------------------------------
# clocks
# ------------------------------------------------------------------------------------------------

class ClockSampler:
    """Context manager: NVML snapshots on entry, every ``period_s`` on a host thread, and on exit.

    Args:
        snapshot: returns one state dict (:meth:`synperf.gpu.profiling.nvml.GPUIdentity.snapshot`), or None
            (no NVML: nothing is sampled).
        period_s: sampling period.

    The GPU runs the queued launches while the main thread waits in ``synchronize`` (which releases the
    GIL), so the thread's samples fall inside the timed work.
    """

    def __init__(self, snapshot: Callable[[], Mapping[str, Any]] | None, period_s: float = 0.005):
        self.snapshot = snapshot
        self.period_s = float(period_s)
        self.samples: list[Mapping[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _take(self) -> None:
        try:
            snap = self.snapshot()
        except Exception as exc:  # a failing NVML query must not fail the measurement
            log.debug("NVML snapshot failed: %s", exc)
            return
        if snap:
            self.samples.append(snap)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._take()

    def __enter__(self) -> "ClockSampler":
        if self.snapshot is not None:
            self._take()
            self._thread = threading.Thread(target=self._loop, name="nvml-clock-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._take()

    def summary(self) -> dict[str, Any]:
        """:func:`synperf.gpu.characterize.arithmetic.summarize_clocks` of the samples."""
        return ar.summarize_clocks(self.samples)


# ------------------------------------------------------------------------------------------------
# records (pure: tested with fake timings)
# ------------------------------------------------------------------------------------------------

def registry_field(key: str) -> str | None:
    """The registry field a measurement key replaces (None for informational ones)."""
    return MEASURED_FIELDS[key][0] if key in MEASURED_FIELDS else None


def datasheet_reference(spec, key: str) -> float | None:
    """The datasheet value a measurement is compared with: its registry field's, and ``fp32_tflops`` for
    the informational SGEMM; None without a registry entry (unknown GPU) or a datasheet value."""
    if spec is None:
        return None
    field_name = registry_field(key) or ("fp32_tflops" if key == "gemm_fp32" else None)
    if field_name is None:
        return None
    value = spec.datasheet_value(field_name)
    return None if value is None else float(value)


def build_record(info: BenchmarkInfo, prepared: Prepared, timing: TimingResult, clocks: Mapping[str, Any],
                 sm_count: int, datasheet: float | None = None, extra: Mapping[str, Any] | None = None) -> dict:
    """One measurement of the output file from a benchmark's work, its timings and the observed clocks.

    ``value``: bytes or FLOP per launch over the best per-launch time, in GB/s or TFLOP/s; for ``smem_bw``
    the median over SMs of bytes per SM clock (``extra["smem"]``, from ``clock64``). ``per_clk_per_sm``: the
    GPU-wide rate per second divided by ``sm_count x`` the median observed SM clock (B or FLOP per clock per
    SM; for ``smem_bw`` the event-timed cross-check of ``value``). ``timing``: ``best_s``, ``median_s``,
    ``p90_s`` (seconds per launch), ``n_samples``, ``calls_per_sample``, ``warmup_calls``, ``estimate_s``.

    Raises:
        ValueError: no samples or a sample that is not finite and > 0; ``smem_bw`` without ``extra["smem"]``.
    """
    times = ar.per_call_seconds(timing.stats())
    extra = dict(extra or {})
    work_unit = "B" if info.unit in ("GB/s", "B/clk/SM") else "FLOP"
    best_rate_per_s = prepared.work_per_call / times["best_s"]
    sm_clock = clocks.get("sm_clock_mhz")
    timing_out = {**times, "calls_per_sample": timing.calls_per_sample, "warmup_calls": timing.warmup_iters,
                  "estimate_s": timing.estimate_us * 1e-6}
    if info.unit == "B/clk/SM":
        smem = extra.pop("smem", None)
        if smem is None:
            raise ValueError("smem_bw needs the clock64 figures of smem_read (extra['smem'])")
        value = float(smem["value"])
        timing_out["gbps_best"] = ar.gbps(prepared.work_per_call, times["best_s"])
        extra["smem_per_sm"] = smem
    else:
        rates = ar.rate_record(prepared.work_per_call, times, info.unit)
        value = rates["value"]
        timing_out["value_median"] = rates["value_median"]
    rec = {
        "value": value,
        "unit": info.unit,
        "statistic": "best",
        "method": info.method,
        "method_detail": info.detail,
        "reference": info.reference,
        "implementation": prepared.implementation,
        "registry_field": registry_field(info.key),
        "work": {**prepared.work, "per_call": prepared.work_per_call, "unit": work_unit},
        "timing": timing_out,
        "clocks": dict(clocks),
        "per_clk_per_sm": ar.per_clk_per_sm(best_rate_per_s, sm_count, sm_clock),
        "datasheet_value": datasheet,
        "ratio_to_datasheet": ar.ratio(value, datasheet),
    }
    rec.update(extra)
    return rec


def run_benchmarks(preparers: Mapping[str, Callable[[], Prepared]], timer: Timer, *,
                   snapshot: Callable[[], Mapping[str, Any]] | None, settings: CharacterizeSettings,
                   sm_count: int, spec=None, cleanup: Callable[[], None] | None = None
                   ) -> tuple[dict[str, dict], dict[str, str]]:
    """Prepare, time and record every benchmark of ``settings.benchmarks`` that has a preparer.

    Args:
        preparers: key -> a callable returning :class:`Prepared` (raising :class:`BenchmarkSkipped` when the
            benchmark cannot run here).
        timer: the timing harness (:class:`~synperf.gpu.profiling.timing.CudaTimer` on the GPU; its
            ``measure(fn, during=...)`` is called once per benchmark with the clock sampler as ``during``).
        snapshot: NVML state reader for :class:`ClockSampler` (None: no clocks).
        sm_count: SMs of the GPU.
        spec: the GPU's datasheet :class:`~synperf.data.hardware.GPUSpec` (None: unknown GPU, no comparison).
        cleanup: called after each benchmark (free GPU memory).

    Returns:
        (measurements key -> record, skipped key -> reason). A benchmark that fails (out of memory, a
        compile error) is skipped with its reason; the others still run.
    """
    measurements: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for key in settings.benchmarks:
        info = BENCHMARKS[key]
        if key not in preparers:
            skipped[key] = "no implementation on this device"
            continue
        t0 = time.monotonic()
        prepared = None
        try:
            prepared = preparers[key]()
            ctx = prepared.context() if prepared.context is not None else contextlib.nullcontext()
            with ctx:
                sampler = ClockSampler(snapshot, settings.clock_period_ms * 1e-3)
                timing = timer.measure(prepared.fn, during=sampler)
            extra = prepared.after() if prepared.after is not None else {}
            measurements[key] = build_record(info, prepared, timing, sampler.summary(), sm_count,
                                             datasheet_reference(spec, key), extra)
            m = measurements[key]
            log.info("%-10s %10.1f %-8s (%s; SM clock %s MHz; %.1f s)", key, m["value"], m["unit"],
                     "datasheet %.4g, ratio %.3f" % (m["datasheet_value"], m["ratio_to_datasheet"])
                     if m["ratio_to_datasheet"] is not None else "no datasheet value",
                     m["clocks"].get("sm_clock_mhz"), time.monotonic() - t0)
        except BenchmarkSkipped as exc:
            skipped[key] = str(exc)
            log.info("%-10s skipped: %s", key, exc)
        except Exception as exc:  # OOM, NVRTC error, cuBLAS error: record and go on
            skipped[key] = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
            log.warning("%-10s failed: %s: %s", key, type(exc).__name__, exc)
        finally:
            del prepared
            if cleanup is not None:
                cleanup()
    return measurements, skipped


def build_document(gpu: str, measurements: Mapping[str, dict], skipped: Mapping[str, str], *,
                   device_name: str = "", uuid: str | None = None, created_utc: str | None = None,
                   compute_capability: str | None = None, sm_count: int | None = None,
                   l2_bytes: int | None = None, environment: Mapping[str, Any] | None = None,
                   settings: CharacterizeSettings | None = None, seconds: float | None = None,
                   identity_note: str = "") -> dict:
    """The ``data/hardware/<gpu>.json`` document (``workflow/schemas/hardware.schema.yaml``)."""
    doc: dict[str, Any] = {
        "version": 1,
        "gpu": gpu,
        "device_name": device_name,
        "uuid": uuid,
        "created_utc": created_utc or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "measurements": dict(measurements),
        "skipped": dict(skipped),
    }
    optional = {"compute_capability": compute_capability, "sm_count": sm_count, "l2_bytes": l2_bytes,
                "environment": dict(environment) if environment is not None else None,
                "settings": settings.as_dict() if settings is not None else None,
                "seconds": round(seconds, 2) if seconds is not None else None,
                "identity_note": identity_note or None}
    doc.update({k: v for k, v in optional.items() if v is not None})
    return doc


def write_document(doc: Mapping[str, Any], out_dir: str | Path) -> Path:
    """Validate ``doc`` against the schema and write it atomically to ``<out_dir>/<gpu>.json``.

    Raises:
        InputError: the document fails the schema (never written then).
    """
    path = Path(out_dir) / f"{doc.get('gpu')}.json"
    validate_measured_document(doc, path)
    write_json(doc, path)
    return path


# ------------------------------------------------------------------------------------------------
# the GPU side
# ------------------------------------------------------------------------------------------------

class GPU:
    """The local CUDA device as the preparers need it: torch, CuPy (imported on first use), SM count, L2
    size, compute capability, compiled RawKernels."""

    def __init__(self, torch, settings: CharacterizeSettings, index: int = 0):
        self.torch = torch
        self.s = settings
        self.device = torch.device("cuda", index)
        props = torch.cuda.get_device_properties(self.device)
        self.sm_count = int(props.multi_processor_count)
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * MIB)
        self.capability = (int(props.major), int(props.minor))
        self._cupy = None
        self._kernels: dict[str, Any] = {}

    # CuPy -----------------------------------------------------------------------------------
    @property
    def cupy(self):
        if self._cupy is None:
            try:
                import cupy
            except Exception as exc:  # ImportError, or a CUDA-version mismatch raised at import
                raise BenchmarkSkipped(f"CuPy is not usable ({type(exc).__name__}: {exc}); "
                                       "pip install cupy-cuda12x (the `gpu` extra)") from None
            self._cupy = cupy
        return self._cupy

    def kernel(self, name: str):
        """The NVRTC-compiled ``cupy.RawKernel`` of :data:`synperf.gpu.characterize.kernels.KERNELS`."""
        if name not in self._kernels:
            cp = self.cupy
            source, _params = K.KERNELS[name]
            kern = cp.RawKernel(source, name, options=("-std=c++14",))
            kern.compile()
            self._kernels[name] = kern
        return self._kernels[name]

    def launch(self, kern, grid: int, args: tuple, shared_mem: int = 0) -> None:
        """Launch a RawKernel on torch's current stream (so torch's CUDA events time it)."""
        cp = self.cupy
        with cp.cuda.ExternalStream(self.torch.cuda.current_stream(self.device).cuda_stream):
            kern((grid,), (K.BLOCK_THREADS,), args, shared_mem=shared_mem)

    def cleanup(self) -> None:
        import gc

        gc.collect()
        self.torch.cuda.synchronize(self.device)
        self.torch.cuda.empty_cache()
        if self._cupy is not None:
            self._cupy.get_default_memory_pool().free_all_blocks()

    # preparers ------------------------------------------------------------------------------
    def preparers(self) -> dict[str, Callable[[], Prepared]]:
        return {"dram_bw": self.prep_dram, "l2_bw": self.prep_l2, "smem_bw": self.prep_smem,
                "fp32_fma": self.prep_fma, "gemm_bf16": lambda: self.prep_gemm("bf16"),
                "gemm_fp16": lambda: self.prep_gemm("fp16"), "gemm_fp8": lambda: self.prep_gemm("fp8"),
                "gemm_tf32": lambda: self.prep_gemm("tf32"), "gemm_fp32": lambda: self.prep_gemm("fp32")}

    def prep_dram(self) -> Prepared:
        torch = self.torch
        free, _total = torch.cuda.mem_get_info(self.device)
        nbytes = ar.dram_buffer_bytes(self.l2_bytes, free, self.s.dram_factor, self.s.dram_min_mib * MIB,
                                      self.s.dram_max_mib * MIB)
        src = torch.ones(nbytes // 4, dtype=torch.float32, device=self.device)
        dst = torch.empty_like(src)
        return Prepared(fn=lambda: dst.copy_(src), work_per_call=ar.copy_bytes(nbytes),
                        work={"buffer_bytes": nbytes, "buffers": 2, "l2_bytes": self.l2_bytes},
                        implementation="torch.Tensor.copy_ (device-to-device, fp32 contiguous)")

    def prep_l2(self) -> Prepared:
        cp, np = self.cupy, _numpy()
        kern = self.kernel("l2_read")
        blocks = ar.grid_blocks(self.sm_count, self.s.l2_blocks_per_sm)
        threads = blocks * K.BLOCK_THREADS
        nbytes = ar.l2_buffer_bytes(self.l2_bytes, threads, self.s.l2_fraction)
        buf = cp.ones(nbytes // 4, dtype=cp.float32)
        sink = cp.zeros(threads, dtype=cp.float32)
        args = (buf, np.int64(nbytes // ar.FLOAT4_BYTES), np.int32(self.s.l2_passes), sink)
        return Prepared(fn=lambda: self.launch(kern, blocks, args),
                        work_per_call=ar.l2_read_bytes(nbytes, self.s.l2_passes),
                        work={"buffer_bytes": nbytes, "passes": self.s.l2_passes, "blocks": blocks,
                              "threads_per_block": K.BLOCK_THREADS, "l2_bytes": self.l2_bytes},
                        implementation="cupy.RawKernel l2_read (NVRTC)")

    def prep_smem(self) -> Prepared:
        cp, np = self.cupy, _numpy()
        kern = self.kernel("smem_read")
        blocks = ar.grid_blocks(self.sm_count, self.s.smem_blocks_per_sm)
        stamps = cp.zeros(3 * blocks, dtype=cp.int64)
        sink = cp.zeros(blocks * K.BLOCK_THREADS, dtype=cp.float32)
        per_block = ar.smem_read_bytes_per_block(K.BLOCK_THREADS, self.s.smem_iters, K.SMEM_UNROLL)
        args = (np.int32(self.s.smem_iters), np.int32(K.SMEM_TILE_VEC - 1), stamps, sink)
        smem_bytes = K.SMEM_TILE_VEC * ar.FLOAT4_BYTES

        def after() -> dict[str, Any]:
            self.torch.cuda.synchronize(self.device)
            return {"smem": ar.smem_bytes_per_clk(stamps.get().reshape(-1, 3).tolist(), per_block)}

        return Prepared(fn=lambda: self.launch(kern, blocks, args, shared_mem=smem_bytes),
                        work_per_call=per_block * blocks,
                        work={"blocks": blocks, "threads_per_block": K.BLOCK_THREADS, "iters": self.s.smem_iters,
                              "unroll": K.SMEM_UNROLL, "bytes_per_load": ar.FLOAT4_BYTES,
                              "tile_bytes": smem_bytes, "bytes_per_block": per_block},
                        implementation="cupy.RawKernel smem_read (NVRTC)", after=after)

    def prep_fma(self) -> Prepared:
        cp, np = self.cupy, _numpy()
        kern = self.kernel("fma_fp32")
        blocks = ar.grid_blocks(self.sm_count, self.s.fma_blocks_per_sm)
        sink = cp.zeros(blocks * K.BLOCK_THREADS, dtype=cp.float32)
        args = (np.int32(self.s.fma_iters), np.float32(0.999), np.float32(1e-3), sink)
        return Prepared(fn=lambda: self.launch(kern, blocks, args),
                        work_per_call=ar.fma_flops(blocks, K.BLOCK_THREADS, self.s.fma_iters, K.FMA_UNROLL,
                                                   K.FMA_CHAINS),
                        work={"blocks": blocks, "threads_per_block": K.BLOCK_THREADS, "iters": self.s.fma_iters,
                              "unroll": K.FMA_UNROLL, "chains": K.FMA_CHAINS},
                        implementation="cupy.RawKernel fma_fp32 (NVRTC)")

    def prep_gemm(self, kind: str) -> Prepared:
        torch = self.torch
        n = self.s.gemm_fp32_size if kind == "fp32" else self.s.gemm_size
        gen = torch.Generator(device=self.device).manual_seed(0)
        scale = n ** -0.25  # outputs about N(0, 1)
        context = None
        if kind == "fp8":
            if self.capability < (8, 9):
                raise BenchmarkSkipped(f"FP8 GEMM needs compute capability >= 8.9; this GPU has "
                                       f"{self.capability[0]}.{self.capability[1]}")
            if not hasattr(torch, "_scaled_mm"):
                raise BenchmarkSkipped(f"torch {torch.__version__} has no _scaled_mm")
            a = (torch.randn(n, n, device=self.device, generator=gen) * scale).to(torch.float8_e4m3fn)
            w = (torch.randn(n, n, device=self.device, generator=gen) * scale).to(torch.float8_e4m3fn)
            one = torch.ones((), dtype=torch.float32, device=self.device)
            wt = w.t()  # column-major, as cuBLASLt FP8 requires for the second operand

            def fn():
                torch._scaled_mm(a, wt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

            impl = "torch._scaled_mm(float8_e4m3fn, per-tensor scales 1, out bf16)"
        else:
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
                     "fp32": torch.float32}[kind]
            if kind in ("bf16", "fp16") and self.capability < (7, 0):
                raise BenchmarkSkipped(f"no Tensor Cores below compute capability 7.0 "
                                       f"(this GPU: {self.capability[0]}.{self.capability[1]})")
            if kind == "bf16" and self.capability < (8, 0):
                raise BenchmarkSkipped("bf16 Tensor Cores need compute capability >= 8.0")
            if kind == "tf32" and self.capability < (8, 0):
                raise BenchmarkSkipped("TF32 Tensor Cores need compute capability >= 8.0")
            a = torch.randn(n, n, device=self.device, generator=gen, dtype=dtype) * scale
            w = torch.randn(n, n, device=self.device, generator=gen, dtype=dtype) * scale
            wt = w.t()
            c = torch.empty(n, n, device=self.device, dtype=dtype)

            def fn():
                torch.mm(a, wt, out=c)

            impl = f"torch.mm(A, B.t(), out=C) {kind}"
            if kind in ("tf32", "fp32"):
                precision = "high" if kind == "tf32" else "highest"
                impl += f" (float32 matmul precision {precision!r})"

                @contextlib.contextmanager
                def matmul_precision() -> Iterator[None]:
                    before = torch.get_float32_matmul_precision()
                    torch.set_float32_matmul_precision(precision)
                    try:
                        yield
                    finally:
                        torch.set_float32_matmul_precision(before)

                context = matmul_precision
        return Prepared(fn=fn, work_per_call=ar.gemm_flops(n, n, n), work={"m": n, "n": n, "k": n, "layout": "NT"},
                        implementation=impl, context=context)


def _numpy():
    import numpy

    return numpy


def no_gpu_message(detection_message: str) -> str:
    """The message when characterization is asked for without a usable NVIDIA GPU, keeping the reason the
    profiling detection (:func:`synperf.gpu.profiling.nvml.require_cuda`) gave, e.g. a CPU-only torch build."""
    m = re.search(r"no NVIDIA GPU visible \((?P<why>.*)\): profiling needs one", detection_message, re.S)
    why = f" ({m.group('why')})" if m else (f" ({detection_message})" if detection_message else "")
    return (f"no NVIDIA GPU visible{why}: hardware characterization needs one; run "
            "`snakemake --cores all characterize_local` on a machine with an NVIDIA GPU, its driver, a CUDA build "
            "of torch and CuPy (pip install -e '.[gpu]'). The default target (`snakemake --cores all`) never "
            "characterizes and needs no GPU; without data/hardware/<gpu>.json the registry uses datasheet values.")


def characterize(out_dir: str | Path, *, registry_path: str | Path, gpu: str | None = None,
                 settings: CharacterizeSettings | Mapping[str, Any] | None = None,
                 allow_unknown: bool = False) -> Path:
    """Measure the local GPU (torch device 0, after ``CUDA_VISIBLE_DEVICES``) and write ``<out_dir>/<gpu>.json``.

    Args:
        out_dir: output folder (``data/hardware`` for the registry; the device smoke script uses
            ``OUT/hardware``).
        gpu: the registry id the visible GPU must have (the rule's wildcard); None: whatever it is.
        registry_path: GPU registry (the config's ``gpu_registry``); read datasheet-only.
        settings: :class:`CharacterizeSettings` or a dict of its fields.
        allow_unknown: a GPU missing from the registry is measured under a slug id (no datasheet comparison).

    Returns:
        The written file.

    Raises:
        NoGPUError: no CUDA device visible (the message says how to run it).
        ProfilingError: another GPU than ``gpu``, an unknown GPU, the GPU lock timed out, or no benchmark
            produced a value.
    """
    from synperf.data.hardware import load_registry
    from synperf.gpu.profiling.launchers import Context
    from synperf.gpu.profiling.nvml import local_gpu, require_cuda
    from synperf.gpu.profiling.runner import environment, gpu_lock

    if not isinstance(settings, CharacterizeSettings):
        settings = CharacterizeSettings.from_dict(settings)
    start = time.monotonic()
    try:
        torch = require_cuda()
    except NoGPUError as exc:
        raise NoGPUError(no_gpu_message(str(exc))) from None
    registry = load_registry(registry_path, use_measured=False)
    identity = local_gpu(registry, allow_unknown=allow_unknown)
    if gpu is not None and identity.gpu_id != gpu:
        raise ProfilingError(
            f"this job characterizes {gpu!r} but the visible GPU is {identity.name!r} ({identity.uuid}), registry "
            f"id {identity.gpu_id!r}; run it where a {gpu} is visible (CUDA_VISIBLE_DEVICES), or ask for "
            f"data/hardware/{identity.gpu_id}.json (`snakemake --cores all characterize_local` does this).")
    spec = registry.gpus.get(identity.gpu_id)
    torch.cuda.set_device(0)
    dev = GPU(torch, settings)
    snapshot = identity.snapshot if identity.nvml is not None else None
    if snapshot is None:
        log.warning("NVML unavailable: no SM clocks will be recorded (install nvidia-ml-py)")
    with gpu_lock(identity.uuid, timeout_s=settings.lock_timeout_s):
        log.info("characterizing %s (%s, %d SMs, L2 %.0f MiB, SM %d.%d)", identity.gpu_id, identity.name,
                 dev.sm_count, dev.l2_bytes / MIB, *dev.capability)
        timer = CudaTimer(settings.timing, dev.device, dev.l2_bytes, torch_module=torch)
        measurements, skipped = run_benchmarks(dev.preparers(), timer, snapshot=snapshot,
                                               settings=settings, sm_count=dev.sm_count, spec=spec,
                                               cleanup=dev.cleanup)
    if not measurements:
        raise ProfilingError(f"hardware characterization of {identity.gpu_id}: no benchmark produced a value "
                             f"({skipped})")
    ctx = Context(device=dev.device, capability=dev.capability, l2_bytes=dev.l2_bytes,
                  flashinfer_error="not used")
    env = environment(identity, ctx, None)
    env.pop("flashinfer", None)
    env["cupy"] = getattr(dev._cupy, "__version__", None) if dev._cupy is not None else None
    doc = build_document(identity.gpu_id, measurements, skipped, device_name=identity.name, uuid=identity.uuid,
                         compute_capability=f"{dev.capability[0]}.{dev.capability[1]}", sm_count=dev.sm_count,
                         l2_bytes=dev.l2_bytes, environment=env, settings=settings,
                         seconds=time.monotonic() - start, identity_note=identity.note)
    path = write_document(doc, out_dir)
    log.info("wrote %s (%d measured, %d skipped, %.0f s)", path, len(measurements), len(skipped),
             time.monotonic() - start)
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line of the ``characterize_gpu`` rule (``scripts/characterize.py``):
    ``--out data/hardware/<gpu>.json --gpu <gpu> [--registry FILE] [--settings JSON] [--log FILE]``.
    Exit 1 with the message (no traceback) when the GPU is missing or wrong."""
    import json

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--out", required=True, type=Path, help="output file <dir>/<gpu>.json")
    ap.add_argument("--gpu", default=None, help="registry id the visible GPU must have")
    ap.add_argument("--registry", default="config/gpus.yaml", help="GPU registry (default: %(default)s)")
    ap.add_argument("--settings", default="{}", help="CharacterizeSettings fields as JSON")
    ap.add_argument("--log", default=None, type=Path)
    args = ap.parse_args(argv)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log is not None:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(args.log, mode="a"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers,
                        force=True)
    gpu = args.gpu or args.out.stem
    if args.out.name != f"{gpu}.json":
        log.error("--out must be <dir>/%s.json, got %s", gpu, args.out)
        return 2
    try:
        characterize(args.out.parent, gpu=gpu, registry_path=args.registry,
                     settings=json.loads(args.settings))
    except (ProfilingError, InputError) as exc:  # a clear message instead of a traceback
        log.error("characterize %s: %s", gpu, exc)
        return 1
    return 0
