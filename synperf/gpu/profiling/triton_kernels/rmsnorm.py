"""RMSNorm in Triton: ``y = x / sqrt(mean(x^2) + eps) * w`` over the last dimension.

One program (CTA) per token row. The row is read in chunks of ``BLOCK_N`` columns twice: once to
accumulate the sum of squares in fp32, once to normalise, scale and store (for hidden sizes up to
``BLOCK_N`` both passes read the same chunk, which the second pass finds in L1/L2). The launch
heuristic follows Triton's layer-norm tutorial (``python/tutorials/05-layer-norm.py``): ``BLOCK_N`` is
the next power of two of the hidden size (capped), ``num_warps = clamp(BLOCK_N / 256, 1, 8)``.

Numerics as vLLM's ``rms_norm`` CUDA kernel: statistics in fp32, output cast to the input dtype.
"""

from __future__ import annotations

import triton
import triton.language as tl

from synperf.gpu.profiling.triton_kernels import next_power_of_2

#: largest column chunk one program handles per pass
MAX_BLOCK_N = 8192


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_out, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        v = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += v * v
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        v = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (v * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def launch_config(hidden_size: int) -> dict[str, int]:
    """``BLOCK_N`` and ``num_warps`` for a hidden size (see the module docstring)."""
    block = min(next_power_of_2(hidden_size), MAX_BLOCK_N)
    return {"BLOCK_N": block, "num_warps": min(max(block // 256, 1), 8)}


def rmsnorm(x, weight, eps: float = 1e-6, out=None, config: dict | None = None):
    """RMSNorm of ``x`` [tokens, hidden] with ``weight`` [hidden]; writes into ``out`` if given.

    Args:
        x: 2-D tensor, last dimension contiguous.
        weight: 1-D tensor of the hidden size.
        eps: added to the mean square (model config ``rms_norm_eps``, 1e-5 or 1e-6).
        out: output tensor like ``x`` (allocated if None).
        config: ``BLOCK_N``/``num_warps`` override (default :func:`launch_config`).
    """
    assert x.dim() == 2 and x.stride(-1) == 1 and weight.shape == (x.shape[1],)
    if out is None:
        out = x.new_empty(x.shape)
    cfg = config or launch_config(x.shape[1])
    _rmsnorm_kernel[(x.shape[0],)](x, weight, out, x.stride(0), out.stride(0), x.shape[1], eps,
                                   BLOCK_N=cfg["BLOCK_N"], num_warps=cfg["num_warps"])
    return out
