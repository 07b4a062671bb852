"""Backend choice shared by the row-wise launchers (RMSNorm, SiLU&Mul): FlashInfer, else our Triton kernel."""

from __future__ import annotations

from synperf.gpu.profiling.launchers import Context, Unsupported
from synperf.gpu.profiling.triton_kernels import ensure_interpreter_on_cpu, triton_available


def pick_backend(point: dict, ctx: Context) -> tuple[str, dict]:
    """``("flashinfer" | "triton", details)`` for the point's ``backend`` request (``auto``: FlashInfer when
    importable, else Triton).

    Raises:
        Unsupported: the requested backend (or both, for ``auto``) is unavailable.
    """
    want = point.get("backend", "auto")
    details: dict = {}
    if want in ("auto", "flashinfer"):
        if ctx.flashinfer is not None:
            return "flashinfer", details
        if want == "flashinfer":
            raise Unsupported(ctx.flashinfer_error)
        details["fallback_reason"] = ctx.flashinfer_error
    if want not in ("auto", "triton"):
        raise Unsupported(f"backend {want!r} does not exist for {point['kernel']}")
    ok, why = triton_available()
    if not ok:
        raise Unsupported(f"neither FlashInfer nor Triton is available: {details.get('fallback_reason', '')}; {why}")
    ensure_interpreter_on_cpu(ctx.device)
    return "triton", details
