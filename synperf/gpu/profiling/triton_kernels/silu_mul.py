"""SiLU&Mul in Triton: ``out = silu(x[:, :H]) * x[:, H:]`` with ``silu(g) = g * sigmoid(g)``.

The gated activation of Llama-style MLPs (vLLM ``SiluAndMul``): the input row holds the gate and up
projections side by side (``2 * H`` columns), the output has ``H``. A 2-D grid: one program per
(token row, ``BLOCK_N``-column block), so short rows still give many CTAs. Math in fp32, output cast
to the input dtype, as vLLM's ``silu_and_mul`` CUDA kernel.
"""

from __future__ import annotations

import triton
import triton.language as tl

from synperf.gpu.profiling.triton_kernels import next_power_of_2

MAX_BLOCK_N = 1024


@triton.jit
def _silu_mul_kernel(x_ptr, out_ptr, stride_x, stride_out, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + N + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch_config(hidden_size: int) -> dict[str, int]:
    """``BLOCK_N`` (next power of two of the output width, at most 1024) and ``num_warps``."""
    block = min(next_power_of_2(hidden_size), MAX_BLOCK_N)
    return {"BLOCK_N": block, "num_warps": 4 if block >= 512 else max(1, block // 128)}


def silu_mul(x, out=None, config: dict | None = None):
    """SiLU&Mul of ``x`` [rows, 2H] into ``out`` [rows, H] (allocated if None)."""
    assert x.dim() == 2 and x.shape[1] % 2 == 0 and x.stride(-1) == 1
    n = x.shape[1] // 2
    if out is None:
        out = x.new_empty((x.shape[0], n))
    cfg = config or launch_config(n)
    grid = (x.shape[0], triton.cdiv(n, cfg["BLOCK_N"]))
    _silu_mul_kernel[grid](x, out, x.stride(0), out.stride(0), n, BLOCK_N=cfg["BLOCK_N"],
                           num_warps=cfg["num_warps"])
    return out
