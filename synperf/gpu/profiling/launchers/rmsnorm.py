"""RMSNorm launcher: ``y = x / sqrt(mean(x^2) + eps) * w`` over [num_tokens, hidden_size].

FlashInfer's ``flashinfer.norm.rmsnorm`` (implementation ``flashinfer_rmsnorm``) when importable and the
point allows it, else our Triton kernel (``triton_rmsnorm``,
:mod:`synperf.gpu.profiling.triton_kernels.rmsnorm`; its BLOCK_N and num_warps are recorded). ``eps`` is 1e-6
(Qwen; Llama uses 1e-5: no effect on speed). Reference: fp32 torch.
"""

from __future__ import annotations

from synperf.gpu.profiling.grids import point_key
from synperf.gpu.profiling.launchers import Case, Context, assert_close, check_first, generator, randn, torch_dtype
from synperf.gpu.profiling.launchers._rowwise import pick_backend

EPS = 1e-6


def prepare(point: dict, ctx: Context) -> Case:
    import torch

    t, hd = int(point["num_tokens"]), int(point["hidden_size"])
    dt = torch_dtype(point["dtype"])
    gen = generator(ctx, point_key(point))
    w = (1.0 + 0.1 * torch.randn(hd, generator=gen, device=ctx.device)).to(dt)
    backend, details = pick_backend(point, ctx)
    if backend == "flashinfer":
        norm = ctx.flashinfer.norm.rmsnorm

        def launcher(x, y):
            return lambda: norm(x, w, EPS, out=y)

        impl = "flashinfer_rmsnorm"
        details["call"] = "flashinfer.norm.rmsnorm(x, w, eps, out=y)"
    else:
        from synperf.gpu.profiling.triton_kernels.rmsnorm import launch_config, rmsnorm

        cfg = launch_config(hd)

        def launcher(x, y):
            return lambda: rmsnorm(x, w, EPS, out=y, config=cfg)

        impl = "triton_rmsnorm"
        details.update({"call": "synperf triton rmsnorm", **{f"triton_{k}": v for k, v in cfg.items()}})

    def buffers():
        return randn((t, hd), dt, ctx, gen), torch.empty((t, hd), dtype=dt, device=ctx.device)

    x, y = buffers()
    fn = launcher(x, y)

    def compare() -> None:
        xf = x.float()
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()
        assert_close(y, ref, rtol=2e-2, atol=2e-2, what=f"{impl} t={t} h={hd}")

    def rotate(n: int):
        return [fn] + [launcher(*buffers()) for _ in range(n - 1)]

    return Case(fn=fn, implementation=impl, check=check_first(fn, compare), details=details, rotate=rotate,
                input_bytes=2 * t * hd * x.element_size())
