"""Hardware characterization: measure the local GPU's own ceilings and write ``data/hardware/<gpu>.json``.

Datasheets give peak compute and DRAM bandwidth but neither L2 nor shared-memory bandwidth, and achievable
rates differ from datasheet ones. This package measures, on the local NVIDIA GPU, with small
microbenchmarks (``snakemake --cores all characterize_local``, ``rules/characterize.smk``):

* ``dram_bw`` (GB/s -> ``dram_bw_gbps``): STREAM-style copy, ``torch.Tensor.copy_`` of a buffer 8x the L2;
  bytes read + written;
* ``l2_bw`` (GB/s -> ``l2_bw_gbps``): CuPy RawKernel ``l2_read``, repeated ``__ldcg`` float4 reads of a
  buffer a quarter of the L2;
* ``smem_bw`` (B/clk/SM -> ``smem_bw_bytes_per_clk_per_sm``): CuPy RawKernel ``smem_read``, a
  conflict-free LDS.128 loop; bytes per ``clock64`` cycle per SM, median over SMs;
* ``fp32_fma`` (TFLOP/s -> ``fp32_tflops``): CuPy RawKernel ``fma_fp32``, 8 independent ``fmaf`` chains;
* ``gemm_bf16``, ``gemm_fp16``, ``gemm_tf32`` (TFLOP/s -> ``dense_*_tflops``): cuBLAS ``torch.mm`` of
  8192^3, 2mnk FLOP; ``gemm_fp8`` (-> ``dense_fp8_tflops``): ``torch._scaled_mm`` e4m3 -> bf16, SM 8.9+;
* ``gemm_fp32`` (TFLOP/s, informational, replaces nothing): fp32 ``torch.mm`` with TF32 off.

Each value comes with its unit, method, implementation, work per launch, per-launch times, the rate per
SM clock per SM, the datasheet value and ratio, and the SM (and memory) clock NVML observed while it ran
(sampled on a host thread; :mod:`synperf.gpu.profiling.nvml`). Timing is the profiling harness's
(:mod:`synperf.gpu.profiling.timing`, settings ``characterize.settings.timing``): the rate is the best of 15
samples, each a batch of launches of about 5 ms (BabelStream's convention); the median is kept. The whole run
takes well under a minute.

:func:`synperf.data.hardware.load_registry` merges these files over the datasheet values (see
:data:`synperf.data.hardware.MEASURED_FIELDS`); ``workflow/schemas/hardware.schema.yaml`` is the file format.

Modules: :mod:`.kernels` (CUDA sources, compiled by NVRTC through ``cupy.RawKernel``), :mod:`.arithmetic`
(work counts, rates, clock bookkeeping: pure functions), :mod:`.benchmarks` (what each benchmark measures, the
settings), :mod:`.device` (the local GPU and its preparers), :mod:`.records` (the output document: records,
validation, writing), :mod:`.run` (clock sampling, orchestration, the command line).
torch, CuPy and NVML are imported lazily, so this package imports on a CPU-only machine.
"""

from __future__ import annotations

from synperf.gpu.characterize.benchmarks import (
    BENCHMARKS,
    CHARACTERIZE_TIMING,
    BenchmarkInfo,
    BenchmarkSkipped,
    CharacterizeSettings,
    Prepared,
    characterize_timing,
)
from synperf.gpu.characterize.records import build_document, build_record, write_document
from synperf.gpu.characterize.run import ClockSampler, characterize, run_benchmarks

__all__ = ["BENCHMARKS", "CHARACTERIZE_TIMING", "BenchmarkInfo", "BenchmarkSkipped", "CharacterizeSettings",
           "ClockSampler", "Prepared", "build_document", "build_record", "characterize", "characterize_timing",
           "run_benchmarks", "write_document"]
