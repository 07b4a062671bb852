"""CUDA C++ sources of the characterization microbenchmarks, compiled at run time by NVRTC through
``cupy.RawKernel`` (CuPy is imported only on the GPU, in :mod:`synperf.gpu.characterize.device`).

Each kernel does a known amount of work per launch (counted on the host by
:mod:`synperf.gpu.characterize.arithmetic`) and ends with a store that depends on every loaded or computed
value but never happens (``if (sum == -1.0f)``: the inputs make the sum positive), so the compiler cannot
remove the work (the "sink" idiom of microbenchmark suites such as Jia et al., "Dissecting the NVIDIA Volta
GPU Architecture via Microbenchmarking", arXiv 1804.06826, and gpu-benches).

* :data:`L2_READ` (``l2_read``): grid-stride ``float4`` loads through ``__ldcg`` (cache-global: served by
  L2, not L1) of a buffer a quarter of the L2 size, ``passes`` times. Bytes per launch =
  ``passes x buffer bytes`` (loads only).
* :data:`SMEM_READ` (``smem_read``): every thread reads ``float4`` words of a 16 KiB shared-memory tile
  in a bank-conflict-free pattern (8 consecutive 16-byte words per quarter warp, 128 B per shared-memory
  cycle), ``iters x SMEM_UNROLL`` times. Thread 0 of each block records ``%smid`` and ``clock64()`` (SM
  cycles) before and after the loop, so the host computes bytes per *SM clock* per SM without knowing the
  clock (:func:`synperf.gpu.characterize.arithmetic.smem_bytes_per_clk`).
* :data:`FMA_FP32` (``fma_fp32``): ``FMA_CHAINS`` independent ``fmaf`` dependency chains per thread,
  unrolled ``FMA_UNROLL`` times per iteration, with runtime coefficients (no constant folding). FLOP per
  launch = ``2 x threads x iters x FMA_UNROLL x FMA_CHAINS`` (an FMA counts as 2 FLOP, as datasheets do).

DRAM bandwidth and GEMM throughput need no custom kernel: torch's ``Tensor.copy_`` (a device-to-device
copy) and cuBLAS through ``torch.mm`` / ``torch._scaled_mm`` are used (:mod:`synperf.gpu.characterize.device`).
"""

from __future__ import annotations

import re

#: threads per block of every RawKernel here (``__launch_bounds__`` and the launches agree on it)
BLOCK_THREADS = 256

#: loads per inner iteration of ``smem_read``
SMEM_UNROLL = 8
#: float4 words in the shared-memory tile of ``smem_read`` (16 KiB; a power of two: the index wraps by mask)
SMEM_TILE_VEC = 1024
#: independent FMA chains per thread and FMAs per chain per iteration of ``fma_fp32``
FMA_CHAINS = 8
FMA_UNROLL = 16

L2_READ = r"""
extern "C" __global__ void __launch_bounds__(256)
l2_read(const float4* __restrict__ buf, long long n_vec, int passes, float* __restrict__ sink)
{
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int p = 0; p < passes; ++p) {
#pragma unroll 4
        for (long long i = start; i < n_vec; i += stride) {
            const float4 v = __ldcg(buf + i);   // cache-global: L2, bypassing L1
            acc0 += v.x + v.y;
            acc1 += v.z + v.w;
        }
    }
    if (acc0 + acc1 == -1.0f) {                 // never true (inputs >= 0): keeps the loads alive
        sink[start] = acc0 + acc1;
    }
}
"""

SMEM_READ = r"""
#define SMEM_UNROLL 8
extern "C" __global__ void __launch_bounds__(256, 4)
smem_read(int iters, int tile_mask, long long* __restrict__ stamps, float* __restrict__ sink)
{
    extern __shared__ float4 tile[];
    const int t = threadIdx.x;
    for (int i = t; i <= tile_mask; i += blockDim.x) {
        tile[i] = make_float4((float)i, 1.0f, 2.0f, 3.0f);
    }
    __syncthreads();
    long long t0 = 0;
    if (t == 0) {
        t0 = clock64();
    }
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int idx = t & tile_mask;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < SMEM_UNROLL; ++u) {
            const float4 v = tile[idx];        // a quarter warp reads 8 consecutive float4: no bank conflict
            acc.x += v.x;
            acc.y += v.y;
            acc.z += v.z;
            acc.w += v.w;
            idx = (idx + 32) & tile_mask;
        }
    }
    __syncthreads();
    if (t == 0) {
        const long long t1 = clock64();
        unsigned int smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        stamps[3 * blockIdx.x + 0] = (long long)smid;
        stamps[3 * blockIdx.x + 1] = t0;
        stamps[3 * blockIdx.x + 2] = t1;
    }
    if (acc.x + acc.y + acc.z + acc.w == -1.0f) {   // never true: keeps the loads alive
        sink[blockIdx.x * blockDim.x + t] = acc.x;
    }
}
"""

FMA_FP32 = r"""
#define FMA_UNROLL 16
extern "C" __global__ void __launch_bounds__(256)
fma_fp32(int iters, float a, float b, float* __restrict__ sink)
{
    const int gid = blockIdx.x * blockDim.x + threadIdx.x;
    float x0 = 1e-3f * (float)threadIdx.x;
    float x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < FMA_UNROLL; ++u) {   // 8 independent chains hide the FMA latency
            x0 = fmaf(x0, a, b);
            x1 = fmaf(x1, a, b);
            x2 = fmaf(x2, a, b);
            x3 = fmaf(x3, a, b);
            x4 = fmaf(x4, a, b);
            x5 = fmaf(x5, a, b);
            x6 = fmaf(x6, a, b);
            x7 = fmaf(x7, a, b);
        }
    }
    const float s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    if (s == -1.0f) {                               // never true for 0 < a < 1, b > 0: keeps the FMAs
        sink[gid] = s;
    }
}
"""

#: kernel name -> (source, the C parameter list in order as (type, name))
KERNELS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "l2_read": (L2_READ, (("const float4*", "buf"), ("long long", "n_vec"), ("int", "passes"),
                          ("float*", "sink"))),
    "smem_read": (SMEM_READ, (("int", "iters"), ("int", "tile_mask"), ("long long*", "stamps"),
                              ("float*", "sink"))),
    "fma_fp32": (FMA_FP32, (("int", "iters"), ("float", "a"), ("float", "b"), ("float*", "sink"))),
}

_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?'
                    r"(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^)]*)\)", re.S)


def entry_points(source: str) -> dict[str, list[tuple[str, str]]]:
    """The ``extern "C" __global__`` functions of a CUDA source and their parameters as (type, name),
    with ``__restrict__`` and whitespace normalised (``"const float4*"``, ``"buf"``)."""
    out = {}
    for m in _ENTRY.finditer(source):
        params = []
        for p in m.group("params").split(","):
            p = " ".join(p.replace("__restrict__", " ").split())
            if not p:
                continue
            pm = re.match(r"(?P<type>.*?[\s*&])(?P<name>[A-Za-z_]\w*)$", p)
            if pm is None:
                raise ValueError(f"cannot parse parameter {p!r} of {m.group('name')}")
            params.append((pm.group("type").replace(" *", "*").strip(), pm.group("name")))
        out[m.group("name")] = params
    return out


#: stand-ins for the CUDA built-ins the kernels use, so a host C++ compiler can syntax-check the sources
#: (``g++ -fsyntax-only``; tests only). NVRTC itself needs the CUDA driver.
HOST_SYNTAX_PRELUDE = r"""
#include <cmath>
#define __global__
#define __shared__
#define __launch_bounds__(...)
struct float4 { float x, y, z, w; };
struct uint3_ { unsigned int x, y, z; };
static uint3_ threadIdx, blockIdx, blockDim, gridDim;
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline float4 __ldcg(const float4* p) { return *p; }
static inline long long clock64() { return 0; }
static inline void __syncthreads() {}
using std::fmaf;
"""


# ------------------------------------------------------------------------------------------------
# NVRTC without CuPy (compile check): NVRTC needs no GPU and no driver, only libnvrtc
# ------------------------------------------------------------------------------------------------

def find_nvrtc() -> str | None:
    """Path or soname of an NVRTC library: ``$SYNPERF_NVRTC``, the ``nvidia-cuda-nvrtc`` wheel
    (``nvidia/cu13/lib`` or ``nvidia/cuda_nvrtc/lib``), or the system's ``libnvrtc``; None if none is found."""
    import ctypes.util
    import glob
    import importlib.util
    import os

    env = os.environ.get("SYNPERF_NVRTC")
    if env:
        return env
    for pkg in ("nvidia.cu13", "nvidia.cuda_nvrtc"):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec is not None else []:
            hits = sorted(glob.glob(os.path.join(loc, "lib", "libnvrtc.so*")))
            hits = [h for h in hits if "builtins" not in h and ".alt." not in h]
            if hits:
                return hits[0]
    return ctypes.util.find_library("nvrtc")


def nvrtc_compile(source: str, name: str, arch: str = "compute_80", lib: str | None = None,
                  options: tuple[str, ...] = ("-std=c++14",)) -> str:
    """Compile a CUDA source to PTX with NVRTC through ctypes (what ``cupy.RawKernel`` does on a GPU).

    Args:
        source: CUDA C++ source.
        name: program name (shown in the log).
        arch: virtual architecture (``--gpu-architecture``).
        lib: NVRTC library (default :func:`find_nvrtc`).

    Returns:
        The PTX text.

    Raises:
        RuntimeError: no NVRTC library, or the compile failed (with NVRTC's log).
    """
    import ctypes

    lib = lib or find_nvrtc()
    if lib is None:
        raise RuntimeError("no NVRTC library (pip install nvidia-cuda-nvrtc, or set SYNPERF_NVRTC)")
    import glob
    import os

    # libnvrtc dlopen()s libnvrtc-builtins by soname; a wheel's lib folder is not on the loader path, so load
    # the builtins beside it first (a library already loaded under that soname satisfies the dlopen)
    for builtins in sorted(glob.glob(os.path.join(os.path.dirname(lib), "libnvrtc-builtins.so*"))):
        if ".alt." not in builtins:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    nv = ctypes.CDLL(lib)
    nv.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what}: {nv.nvrtcGetErrorString(rc).decode()}")

    prog = ctypes.c_void_p()
    check(nv.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None),
          "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = nv.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        nv.nvrtcGetProgramLog(prog, buf)
        if rc != 0:
            raise RuntimeError(f"NVRTC could not compile {name} ({nv.nvrtcGetErrorString(rc).decode()}):\n"
                               f"{buf.value.decode(errors='replace')}")
        check(nv.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        ptx = ctypes.create_string_buffer(size.value)
        check(nv.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        return ptx.value.decode()
    finally:
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
