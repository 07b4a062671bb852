"""SiLU&Mul launcher: ``out[t, :] = silu(x[t, :H]) * x[t, H:]``, x [num_tokens, 2H], H = ``hidden_size``.

FlashInfer's ``flashinfer.activation.silu_and_mul`` (implementation ``flashinfer_silu_and_mul``) when
importable and the point allows it, else our Triton kernel (``triton_silu_mul``,
:mod:`synperf.gpu.profiling.triton_kernels.silu_mul`). Reference: fp32 torch.
"""

from __future__ import annotations

from synperf.gpu.profiling.grids import point_key
from synperf.gpu.profiling.launchers import Case, Context, assert_close, check_first, generator, randn, torch_dtype
from synperf.gpu.profiling.launchers._rowwise import pick_backend


def prepare(point: dict, ctx: Context) -> Case:
    import torch

    t, hd = int(point["num_tokens"]), int(point["hidden_size"])
    dt = torch_dtype(point["dtype"])
    gen = generator(ctx, point_key(point))
    backend, details = pick_backend(point, ctx)
    if backend == "flashinfer":
        act = ctx.flashinfer.activation.silu_and_mul

        def launcher(x, y):
            return lambda: act(x, out=y)

        impl = "flashinfer_silu_and_mul"
        details["call"] = "flashinfer.activation.silu_and_mul(x, out=y)"
    else:
        from synperf.gpu.profiling.triton_kernels.silu_mul import launch_config, silu_mul

        cfg = launch_config(hd)

        def launcher(x, y):
            return lambda: silu_mul(x, out=y, config=cfg)

        impl = "triton_silu_mul"
        details.update({"call": "synperf triton silu_mul", **{f"triton_{k}": v for k, v in cfg.items()}})

    def buffers():
        return randn((t, 2 * hd), dt, ctx, gen), torch.empty((t, hd), dtype=dt, device=ctx.device)

    x, y = buffers()
    fn = launcher(x, y)

    def compare() -> None:
        xf = x.float()
        ref = torch.nn.functional.silu(xf[:, :hd]) * xf[:, hd:]
        assert_close(y, ref, rtol=2e-2, atol=2e-2, what=f"{impl} t={t} h={hd}")

    def rotate(n: int):
        return [fn] + [launcher(*buffers()) for _ in range(n - 1)]

    return Case(fn=fn, implementation=impl, check=check_first(fn, compare), details=details, rotate=rotate,
                input_bytes=3 * t * hd * x.element_size())
