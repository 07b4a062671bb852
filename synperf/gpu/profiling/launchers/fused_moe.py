"""Fused-MoE launcher: our Triton kernel (:mod:`synperf.gpu.profiling.triton_kernels.fused_moe`).

A point is one MoE layer on one GPU of an expert-parallel (``moe_ep_size``) and tensor-parallel
(``moe_tp_size``) deployment: this GPU holds experts ``[0, E / ep)`` with intermediate size
``inter_size / tp``; ``num_tokens`` tokens are routed over all ``E`` experts by the point's
``distribution``, so on average ``num_tokens * topk / ep`` (token, expert) pairs are local. Weights are
N(0, 1/fan_in) in the point's dtype and are reused by consecutive points of the same layer shape
(the sweep orders them so). Routing and the per-expert sort are prepared once per point, outside the
timed region; ``moe_stage`` selects the timed part (``full``: w13 GEMM, SiLU&Mul, w2 GEMM, top-k sum;
``w13`` or ``w2``: one grouped GEMM). The tile config is the point's ``moe_config`` (``default``: the
documented heuristic :func:`~synperf.gpu.profiling.triton_kernels.fused_moe.default_config`) and is written
to the canonical columns block_size_m/n/k, group_size_m, num_warps, num_stages.

Reference: fp32 torch on up to 32 tokens spread over the batch.
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
from synperf.gpu.profiling.triton_kernels import ensure_interpreter_on_cpu, triton_available


def _weights(point: dict, ctx: Context, e_local: int, hd: int, inter: int, dt):
    key = ("moe_weights", e_local, hd, inter, str(dt))
    cached = ctx.cache.get("moe_weights")
    if cached is not None and cached[0] == key:
        return cached[1], cached[2]
    ctx.cache.pop("moe_weights", None)  # free the previous layer's weights before allocating
    gen = generator(ctx, repr(key))
    w13 = randn((e_local, 2 * inter, hd), dt, ctx, gen, hd ** -0.5)
    w2 = randn((e_local, hd, inter), dt, ctx, gen, inter ** -0.5)
    ctx.cache["moe_weights"] = (key, w13, w2)
    return w13, w2


def prepare(point: dict, ctx: Context) -> Case:
    ok, why = triton_available()
    if not ok:
        raise Unsupported(why)
    ensure_interpreter_on_cpu(ctx.device)
    from synperf.gpu.profiling.triton_kernels import fused_moe as fm

    t, hd = int(point["num_tokens"]), int(point["hidden_size"])
    e, topk = int(point["num_experts"]), int(point["topk"])
    tp, ep = int(point["moe_tp_size"]), int(point["moe_ep_size"])
    if point["inter_size"] % tp or e % ep:
        raise Unsupported(f"inter_size {point['inter_size']} / tp {tp} or experts {e} / ep {ep} is not whole")
    inter, e_local = int(point["inter_size"]) // tp, e // ep
    stage = point["moe_stage"]
    dt = torch_dtype(point["dtype"])
    requested = point.get("moe_config", "default")
    cfg = fm.default_config(t, e_local) if requested == "default" else dict(requested)
    try:
        cfg = fm.check_config(cfg)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None

    w13, w2 = _weights(point, ctx, e_local, hd, inter, dt)
    gen = generator(ctx, point_key(point))
    topk_ids, topk_weights = fm.route(t, e, topk, point["distribution"], gen, device=ctx.device)

    def make_inputs(w13=w13, w2=w2):
        x = randn((t, hd), dt, ctx, gen)
        ws = fm.MoEWorkspace(x, w13, w2, topk_ids, topk_weights, cfg)
        if stage == "w2":
            ws.cache2.copy_(randn(ws.cache2.shape, dt, ctx, gen))
        return x, w13, w2, ws

    x, _, _, ws = make_inputs()

    def launcher(x, w13, w2, ws):
        return lambda: fm.fused_moe(x, w13, w2, ws, stage)

    fn = launcher(x, w13, w2, ws)

    def compare() -> None:
        tokens = sample_rows(t, 32, ctx.device)
        ref = fm.reference_moe(x, w13, w2, topk_ids, topk_weights, tokens, stage=stage, act=ws.cache2)
        if stage == "full":
            got = ws.out[tokens]
        else:
            buf = ws.cache1 if stage == "w13" else ws.cache3
            got = buf.view(t, topk, -1)[tokens]
            local = (topk_ids[tokens] < e_local)[..., None]  # pairs of other GPUs' experts are not computed
            got, ref = got * local, ref * local
        assert_close(got, ref, rtol=3e-2, atol=3e-2, what=f"triton fused_moe {stage} t={t}")

    def rotate(n: int):
        fns = [fn]
        for _ in range(n - 1):
            w13_i = randn(w13.shape, dt, ctx, gen, hd ** -0.5)
            w2_i = randn(w2.shape, dt, ctx, gen, inter ** -0.5)
            fns.append(launcher(*make_inputs(w13_i, w2_i)))
        return fns

    config = {"block_size_m": cfg["BLOCK_SIZE_M"], "block_size_n": cfg["BLOCK_SIZE_N"],
              "block_size_k": cfg["BLOCK_SIZE_K"], "group_size_m": cfg["GROUP_SIZE_M"],
              "num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
    local_pairs = int((topk_ids < e_local).sum().item())
    details = {"config_source": "default_config (vLLM get_default_config heuristic)" if requested == "default"
               else "sweep file", "local_experts": e_local, "inter_size_local": inter, "local_pairs": local_pairs,
               "padded_pairs": ws.em, "blocks_m": ws.em // cfg["BLOCK_SIZE_M"]}
    weight_bytes = w13.numel() * w13.element_size() + w2.numel() * w2.element_size()
    return Case(fn=fn, implementation="triton_fused_moe", check=check_first(fn, compare), config=config,
                details=details, rotate=rotate, input_bytes=weight_bytes + x.numel() * x.element_size())
