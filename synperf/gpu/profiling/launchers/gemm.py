"""GEMM launchers: ``y[m, n] = x[m, k] @ W[n, k]^T`` as a linear layer computes it.

* ``gemm`` (bf16, fp16): ``torch.mm(x, W.t(), out=y)``, which dispatches to cuBLAS/cuBLASLt
  (implementation ``cublas``, as aiconfigurator's bf16 rows; the BLAS library torch prefers is recorded).
* ``gemm_fp8``: ``torch._scaled_mm`` on ``float8_e4m3fn`` inputs with per-tensor fp32 scales and a bf16
  output (implementation ``torch_scaled_mm``, dtype ``fp8``); cuBLASLt FP8 needs compute capability
  >= 8.9 (Ada, Hopper, Blackwell).

Inputs are N(0, 1) scaled by ``k^-1/4`` so outputs are about N(0, 1) for every k; the reference check
compares up to 64 rows spread over m with an fp32 matmul of the same (rounded) inputs.
"""

from __future__ import annotations

from synperf.gpu.profiling.grids import point_key
from synperf.gpu.profiling.launchers import (
    Case,
    Context,
    Unsupported,
    assert_close,
    check_first,
    generator,
    randn,
    sample_rows,
    torch_dtype,
)

#: ``torch._scaled_mm`` (cuBLASLt FP8) needs k (``mat1.size(1)``, ``mat2.size(0)``) and n (``mat2.size(1)``) to be
#: multiples of 16 (torch ``_meta_registrations.py``, ``meta_scaled_mm``); m is free.
FP8_DIM_MULTIPLE = 16


def fp8_shape_problem(n: int, k: int) -> str:
    """Why an FP8 GEMM of this shape cannot run on ``torch._scaled_mm``, or ``""`` when it can.

    ``n``, ``k``: output features and reduction length (elements). The rule is :data:`FP8_DIM_MULTIPLE`.
    """
    bad = [f"{name}={v}" for name, v in (("n", n), ("k", k)) if v % FP8_DIM_MULTIPLE]
    if not bad:
        return ""
    return (f"FP8 GEMM needs n and k to be multiples of {FP8_DIM_MULTIPLE} (torch._scaled_mm / cuBLASLt FP8), "
            f"got {', '.join(bad)}")


def prepare(point: dict, ctx: Context) -> Case:
    """Inputs and launch of one GEMM point.

    Raises:
        Unsupported: FP8 on a GPU below compute capability 8.9, a torch without ``_scaled_mm``, or an FP8 shape
            whose n or k is not a multiple of 16 (:func:`fp8_shape_problem`); raised before any input is
            allocated, so the point is skipped with that reason and nothing is launched.
    """
    import torch

    m, n, k = int(point["m"]), int(point["n"]), int(point["k"])
    if point["kernel"] == "gemm_fp8" and (why := fp8_shape_problem(n, k)):
        raise Unsupported(why)
    gen = generator(ctx, point_key(point))
    scale = k ** -0.25
    if point["kernel"] == "gemm_fp8":
        if ctx.is_cuda and tuple(ctx.capability) < (8, 9):
            raise Unsupported(f"FP8 GEMM needs compute capability >= 8.9, this GPU has "
                              f"{ctx.capability[0]}.{ctx.capability[1]}")
        if not hasattr(torch, "_scaled_mm"):
            raise Unsupported(f"torch {torch.__version__} has no _scaled_mm")
        in_dtype, out_dtype = torch.float8_e4m3fn, torch.bfloat16
    else:
        in_dtype = out_dtype = torch_dtype(point["dtype"])

    def make():
        x = randn((m, k), in_dtype, ctx, gen, scale)
        w = randn((n, k), in_dtype, ctx, gen, scale)
        return x, w

    x, w = make()
    if point["kernel"] == "gemm_fp8":
        one = torch.ones((), dtype=torch.float32, device=ctx.device)

        def launcher(x, w):
            wt = w.t()  # column-major [k, n], the layout cuBLASLt FP8 requires for the second operand
            return lambda: torch._scaled_mm(x, wt, scale_a=one, scale_b=one, out_dtype=out_dtype)

        impl, call = "torch_scaled_mm", "torch._scaled_mm(x_fp8, w_fp8.t(), scale_a=1, scale_b=1, out_dtype=bf16)"
        tol = dict(rtol=3e-2, atol=3e-2)
        out_holder: dict = {}
        fn_raw = launcher(x, w)

        def fn():
            out_holder["y"] = fn_raw()

        def output():
            return out_holder["y"]
    else:
        y = torch.empty((m, n), dtype=out_dtype, device=ctx.device)

        def launcher(x, w, y=y):
            wt = w.t()
            return lambda: torch.mm(x, wt, out=y)

        impl, call = "cublas", "torch.mm(x, w.t(), out=y)"
        tol = dict(rtol=2e-2, atol=2e-2) if point["dtype"] == "bfloat16" else dict(rtol=1e-2, atol=1e-2)
        fn = launcher(x, w)

        def output():
            return y

    def compare() -> None:
        rows = sample_rows(m, 64, ctx.device)
        ref = x[rows].float() @ w.float().t()
        assert_close(output()[rows], ref, what=f"{point['kernel']} m={m} n={n} k={k}", **tol)

    def rotate(count: int):
        fns = [fn]
        for _ in range(count - 1):
            xi, wi = make()
            if point["kernel"] == "gemm_fp8":
                fns.append(launcher(xi, wi))
            else:
                fns.append(launcher(xi, wi, torch.empty((m, n), dtype=out_dtype, device=ctx.device)))
        return fns

    elem = 1 if point["kernel"] == "gemm_fp8" else 2
    details = {"call": call}
    if ctx.is_cuda:
        try:
            details["blas_library"] = str(torch.backends.cuda.preferred_blas_library())
        except Exception:  # older torch
            pass
    return Case(fn=fn, implementation=impl, check=check_first(fn, compare), details=details, rotate=rotate,
                input_bytes=(m * k + n * k) * elem + m * n * 2)
