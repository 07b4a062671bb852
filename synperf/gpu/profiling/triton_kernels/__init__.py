"""Our own Triton kernels, profiled where no library kernel is available or as the implementation itself.

* :mod:`.rmsnorm`: RMSNorm, one program (CTA) per token row;
* :mod:`.silu_mul`: SiLU&Mul (``silu(x[:, :H]) * x[:, H:]``), a 2-D grid over rows and column blocks;
* :mod:`.fused_moe`: fused mixture-of-experts: top-k routing sorted and padded per expert to
  ``BLOCK_SIZE_M``, a grouped w13 GEMM, SiLU&Mul, a grouped w2 GEMM with the routing weight, and the
  top-k sum.

Each module imports ``triton`` when it is imported, so import them only where Triton exists. On a CPU
the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``, set before ``triton`` is
imported): :func:`ensure_interpreter_on_cpu` does that for CPU tensors.
"""

from __future__ import annotations

import os


def triton_available() -> tuple[bool, str]:
    """Whether ``import triton`` works here, and the reason when it does not."""
    try:
        import triton  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install raising at import
        return False, f"triton is not importable ({type(exc).__name__}: {exc})"
    return True, ""


def ensure_interpreter_on_cpu(device) -> None:
    """Set ``TRITON_INTERPRET=1`` when the kernels will run on CPU tensors.

    Must happen before the kernel modules are first imported (``triton.jit`` reads it at decoration).
    """
    if getattr(device, "type", str(device)) == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= ``n`` (``n >= 1``); Triton block sizes must be powers of two."""
    return 1 << max(0, int(n) - 1).bit_length()
