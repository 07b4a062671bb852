"""Our Triton kernels (RMSNorm, SiLU&Mul, fused MoE) against torch references, on the CPU under Triton's
interpreter (TRITON_INTERPRET=1). Small random shapes; float16/float32 for the MoE GEMMs because the
interpreter mishandles bf16 ``tl.dot`` (its element-wise bf16 is fine)."""

import importlib.util
import os

import pytest
import torch

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="triton is not installed (pip install triton; it runs on CPU with "
                                       "TRITON_INTERPRET=1)")
os.environ.setdefault("TRITON_INTERPRET", "1")   # before the kernel modules import triton


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("shape,dtype", [((5, 100), torch.bfloat16), ((3, 4096), torch.float16),
                                         ((2, 9000), torch.float32)])
def test_rmsnorm_matches_torch(shape, dtype):
    from synperf.gpu.profiling.triton_kernels.rmsnorm import launch_config, rmsnorm

    g = gen()
    x = torch.randn(*shape, generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[1], generator=g)).to(dtype)
    cfg = launch_config(shape[1])
    cfg["BLOCK_N"] = min(cfg["BLOCK_N"], 4096)       # 9000 columns: the row is read in three chunks
    y = rmsnorm(x, w, 1e-6, config=cfg)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)
    assert y.dtype == dtype
    assert launch_config(100) == {"BLOCK_N": 128, "num_warps": 1}
    assert launch_config(7168) == {"BLOCK_N": 8192, "num_warps": 8}


@pytest.mark.parametrize("rows,h,dtype", [(4, 300, torch.bfloat16), (3, 1536, torch.float16)])
def test_silu_mul_matches_torch(rows, h, dtype):
    from synperf.gpu.profiling.triton_kernels.silu_mul import silu_mul

    x = torch.randn(rows, 2 * h, generator=gen(1)).to(dtype)
    y = silu_mul(x)
    ref = torch.nn.functional.silu(x[:, :h].float()) * x[:, h:].float()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2)


def test_routing_distributions():
    from synperf.gpu.profiling.triton_kernels.fused_moe import route

    ids, w = route(64, 8, 2, "balanced", gen())
    assert torch.bincount(ids.flatten().long(), minlength=8).tolist() == [16] * 8
    for dist in ("balanced", "random", "power_law_1.2"):
        ids, w = route(50, 16, 4, dist, gen(2))
        assert ids.shape == (50, 4) and ids.dtype == torch.int32
        assert all(len(set(r)) == 4 for r in ids.tolist())          # distinct experts per token
        torch.testing.assert_close(w.sum(1), torch.ones(50))
    skewed = torch.bincount(route(4000, 16, 2, "power_law_1.2", gen(3))[0].flatten().long(), minlength=16)
    assert skewed.max() > 3 * skewed.min()
    with pytest.raises(ValueError, match="unknown routing"):
        route(4, 8, 2, "zipf", gen())


def test_align_sorts_and_pads_per_expert():
    from synperf.gpu.profiling.triton_kernels.fused_moe import moe_align_block_size

    topk_ids = torch.tensor([[0, 3], [3, 1], [5, 0], [3, 4]], dtype=torch.int32)   # 8 pairs, experts 0..5
    sorted_ids, expert_ids, em = moe_align_block_size(topk_ids, 4, num_local_experts=4, expert_offset=0)
    # local experts 0..3 get pairs {0: [0, 5], 1: [3], 3: [1, 2, 6]}; expert 2 none; each run padded to 4
    assert em == 12 and expert_ids.tolist() == [0, 1, 3]
    assert sorted_ids.tolist() == [0, 5, 8, 8, 3, 8, 8, 8, 1, 2, 6, 8]           # 8 = sentinel (numel)
    _, experts_ep, em_ep = moe_align_block_size(topk_ids, 4, num_local_experts=2, expert_offset=3)
    assert em_ep == 8 and experts_ep.tolist() == [0, 1]                             # experts 3 and 4 of rank 1


def test_default_config_heuristic():
    from synperf.gpu.profiling.triton_kernels.fused_moe import check_config, default_config

    assert default_config(8, 64) == {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
                                     "num_warps": 4, "num_stages": 3}
    assert default_config(65, 64)["BLOCK_SIZE_M"] == 64 and default_config(65, 64)["GROUP_SIZE_M"] == 8
    with pytest.raises(ValueError, match="power of two"):
        check_config({**default_config(1, 1), "BLOCK_SIZE_N": 48})


@pytest.mark.parametrize("stage", ["full", "w13", "w2"])
@pytest.mark.parametrize("tokens,ep_offset,dist,cfg", [
    (37, 0, "random", None),
    (5, 2, "power_law_1.2", None),
    (40, 0, "balanced", {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2,
                         "num_warps": 2, "num_stages": 2}),
])
def test_fused_moe_matches_torch(stage, tokens, ep_offset, dist, cfg):
    from synperf.gpu.profiling.triton_kernels import fused_moe as fm

    g = gen(4)
    h, inter, experts, topk = 64, 48, 6, 2
    e_local = 3 if ep_offset else experts
    ids, w = fm.route(tokens, experts, topk, dist, g)
    x = torch.randn(tokens, h, generator=g).half()
    w13 = (torch.randn(e_local, 2 * inter, h, generator=g) / h ** 0.5).half()
    w2 = (torch.randn(e_local, h, inter, generator=g) / inter ** 0.5).half()
    ws = fm.MoEWorkspace(x, w13, w2, ids, w, cfg or fm.default_config(tokens, e_local), expert_offset=ep_offset)
    if stage == "w2":
        ws.cache2.copy_(torch.randn(ws.cache2.shape, generator=g).half())
    out = fm.fused_moe(x, w13, w2, ws, stage)
    toks = torch.arange(tokens)
    ref = fm.reference_moe(x, w13, w2, ids, w, toks, expert_offset=ep_offset, stage=stage, act=ws.cache2)
    if stage != "full":
        out = out.view(tokens, topk, -1)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
    if ep_offset:          # pairs routed to the other rank's experts contribute exactly nothing
        assert (ids.flatten() < ep_offset).any()
