"""The local CUDA device of the characterization (torch passed in, CuPy on first use): one preparer per benchmark."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from synperf.gpu.characterize import arithmetic as ar
from synperf.gpu.characterize import kernels as K
from synperf.gpu.characterize.benchmarks import MIB, BenchmarkSkipped, CharacterizeSettings, Prepared


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
