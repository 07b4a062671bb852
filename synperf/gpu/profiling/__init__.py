"""Profile LLM kernels on the local NVIDIA GPU into the canonical measurement table.

This is what ``rules/profile.smk`` runs (see ``docs/profiling.md``): one job per
(GPU, kernel) sweeps a grid of real model shapes (``config/sweeps/<kernel>.yaml``),
times every point with one timing harness and writes
``data/measurements/<gpu>/<kernel>.parquet`` in the schema of
:mod:`synperf.data.schema`, plus a provenance sidecar
``data/measurements/<gpu>/<kernel>.provenance.json``.

Modules
-------
``timing``         the timing harness: warm-up by time, cold L2, CUDA events or
                   CUDA-graph replay, median and p10/p90 (arithmetic in pure functions)
``nvml``           nvidia-ml-py (``pynvml``): device identity by UUID, clocks, temperature,
                   power, clock-event (throttle) reasons
``grids``          load, validate (``workflow/schemas/sweep.schema.yaml``) and expand sweep grids
``runner``         one (GPU, kernel) sweep end to end: settings, measuring one point, ``profile_kernel``
``sweep``          the sweep: per-point shards, resume, skip-and-continue, merge
``lock``           the per-GPU lock (one timing process per GPU)
``provenance``     environment, the resume fingerprint, the ``source_version`` column
``launchers``      one module per kernel family: inputs, the kernel call, a reference check
``triton_kernels`` our own Triton kernels (RMSNorm, SiLU&Mul, fused MoE)

GPU-only libraries (CUDA torch, ``pynvml``, ``triton``, ``flashinfer``) are imported
lazily, so the package imports on a CPU-only machine.
"""

from __future__ import annotations

from synperf.data.schema import KERNELS

#: kernels this profiler measures, in sweep order: every family of :data:`synperf.data.schema.KERNELS`
PROFILED_KERNELS: tuple[str, ...] = KERNELS

#: kernel -> launcher module under :mod:`synperf.gpu.profiling.launchers`
LAUNCHER_MODULE: dict[str, str] = {
    "gemm": "gemm",
    "gemm_fp8": "gemm",
    "attention_prefill": "attention",
    "attention_decode": "attention",
    "rmsnorm": "rmsnorm",
    "silu_mul": "silu_mul",
    "fused_moe": "fused_moe",
}

#: the ``source`` column of every row we write
SOURCE = "synperf_profiler"


class ProfilingError(RuntimeError):
    """Profiling cannot run here (no GPU, unknown GPU, wrong GPU for the job, unsupported kernel).

    The message says what is wrong and how to fix it.
    """


class NoGPUError(ProfilingError):
    """No NVIDIA GPU is visible to this process."""


def no_gpu_message(detail: str = "") -> str:
    """The message shown when profiling is asked for on a machine without a usable NVIDIA GPU."""
    why = f" ({detail})" if detail else ""
    return (
        f"no NVIDIA GPU visible{why}: profiling needs one; run the profiling target "
        "(`snakemake --cores all profile_local`) on a machine with an NVIDIA GPU, its driver and a CUDA "
        "build of torch, or submit it to a cluster with the SLURM profile "
        "(`snakemake --workflow-profile workflow/profiles/slurm profile_all`, see docs/profiling.md). "
        "The default target (`snakemake --cores all`) does not profile and needs no GPU."
    )


def supports_kernel(kernel: str, compute_capability: tuple[int, int]) -> tuple[bool, str]:
    """Whether a GPU of this compute capability (SM version) can run ``kernel``.

    FP8 GEMM (``torch._scaled_mm``) needs FP8 Tensor Cores: SM 8.9 (Ada) or newer
    (CUDA C Programming Guide, "Compute Capabilities"). Everything else runs on SM 7.0+.

    Returns:
        (supported, reason when not).
    """
    if kernel == "gemm_fp8" and tuple(compute_capability) < (8, 9):
        return False, (f"gemm_fp8 needs FP8 Tensor Cores (compute capability >= 8.9); "
                       f"this GPU has {compute_capability[0]}.{compute_capability[1]}")
    return True, ""


def parse_capability(text: str) -> tuple[int, int]:
    """``"8.9"`` (registry ``compute_capability``) -> ``(8, 9)``."""
    major, _, minor = str(text).partition(".")
    return int(major), int(minor or 0)
