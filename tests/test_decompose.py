"""Hand-computed decompositions, vectorised paths against explicit task sets, and properties."""

import numpy as np
import pandas as pd
import pytest

from synperf.data.schema import conform
from synperf.model.features import build_features
from synperf.model.features.v2 import analyze
from synperf.model.kernels import attention, fused_moe, gemm, norm_act


def rows(kernel, gpu="a100_sxm4_80gb", **params):
    n = max(len(v) if isinstance(v, list) else 1 for v in params.values())
    base = {"gpu": gpu, "kernel": kernel, "implementation": "cublas", "latency_us": 1.0,
            "latency_stat": "mean", "source": "t", "source_version": "t"}
    return conform(pd.DataFrame({**base, **params}, index=range(n)))


def test_gemm_256_cubed_on_a100(registry):
    """256x256x256 bf16 on A100 with 128x128 tiles: 4 CTAs, one partial wave; the busiest SM runs one
    tile: 2*128*128*256 FLOP and (128+128)*256*2 B of loads."""
    df = rows("gemm", dtype="bfloat16", m=256, n=256, k=256, batch=1)
    d = gemm.decompose(df, registry).iloc[0]
    assert d["num_tasks"] == 4 and d["tile_m"] == 128 and d["tile_n"] == 128 and d["split_k"] == 1
    assert d["tensor_all_ops"] == 2 * 256**3
    assert d["sm_max_tensor_ops"] == 2 * 128 * 128 * 256
    assert d["sm_max_load_bytes"] == (128 + 128) * 256 * 2
    assert d["dram_bytes"] == (256 * 256 + 256 * 256) * 2
    f = analyze(df, registry).iloc[0]
    assert f["waves"] == pytest.approx(4 / (108 * 2))       # 2 CTAs/SM: 64 KiB smem each on 164 KiB
    assert f["tensor_all_cycle"] == pytest.approx(2 * 256**3 / (2048 * 108))
    assert f["tensor_sm_max_cycle"] == pytest.approx(2 * 128 * 128 * 256 / 2048)


def test_gemm_split_k_for_small_mn_large_k(registry):
    d = gemm.decompose(rows("gemm", gpu="h100_sxm", dtype="bfloat16", m=1, n=4096, k=8192, batch=1),
                       registry).iloc[0]
    # 32 tiles of 64x128 on 132 SMs: split = min(132 // 32, 8192 // 1024) = 4
    assert d["split_k"] == 4 and d["num_tasks"] == 128 and d["persistent"] == 0
    assert d["tensor_all_ops"] == 2 * 64 * 4096 * 8192       # padded to the 64-row tile


def test_neusight_tile_from_kernel_name(registry):
    df = rows("gemm", gpu="a100_pcie_40gb", dtype="float32", m=26, n=2431, k=8, batch=1,
              kernel_name="ampere_sgemm_128x32_tn", grid_ctas=19)
    d = gemm.decompose(df, registry).iloc[0]
    assert (d["tile_m"], d["tile_n"]) == (32, 128)          # grid 19 = ceil(2431/128) * ceil(26/32)
    assert d["num_tasks"] == 19 and d["tensor_all_ops"] == 0 and d["fma_all_ops"] == 19 * 32 * 128 * 8


@pytest.mark.parametrize("gpu", ["a100_sxm4_80gb", "h100_sxm", "b200", "l40s"])
def test_vectorised_prefill_equals_explicit_tasks(registry, gpu):
    df = rows("attention_prefill", gpu=gpu, implementation=["vllm_flash_attn", "vllm_flashinfer", "vllm_flash_attn"],
              dtype="bfloat16", batch_size=[2, 1, 4], seq_len=[1000, 300, 8], kv_len=[1000, 300, 8],
              num_heads=[32, 64, 8], num_kv_heads=[8, 8, 8], head_dim=[128, 128, 64],
              kv_cache_dtype=["bfloat16", "fp8", "bfloat16"], window_size=[0, 128, 0])
    vec = attention.decompose_prefill(df, registry)
    for i, r in df.iterrows():
        s = attention.prefill_tasks(r.to_dict(), registry[gpu]).summary(registry[gpu], "bfloat16")
        for k, v in s.items():
            assert vec.loc[i, k] == pytest.approx(v), (gpu, i, k)


def test_causal_prefill_work_halves(registry):
    """Causal FA2 on A100: q-tile i reads i+1 KV tiles pairs of 64; total MMA work ~ half the square."""
    S = 4096
    ts = attention.prefill_tasks({"batch_size": 1, "seq_len": S, "num_heads": 1, "num_kv_heads": 1, "head_dim": 128,
                                  "window_size": 0, "kv_cache_dtype": "bfloat16",
                                  "implementation": "vllm_flash_attn"}, registry["a100_sxm4_80gb"])
    n_q = S // 128
    assert len(ts.counts) == n_q
    assert ts.tensor_ops.sum() == pytest.approx(4 * 128 * 128 * 128 * n_q * (n_q + 1) / 2)


def test_decode_split_kv_and_gqa_packing(registry):
    df = rows("attention_decode", gpu="h100_sxm", implementation="vllm_flash_attn", dtype="bfloat16",
              batch_size=[1, 512], seq_len=1, kv_len=[16384, 1024], num_heads=32, num_kv_heads=8, head_dim=128,
              kv_cache_dtype="bfloat16", window_size=0)
    d = attention.decompose_decode(df, registry)
    assert d.loc[0, "kv_splits"] > 1            # 8 (sequence, KV head) tasks cannot fill 132 SMs
    assert d.loc[1, "kv_splits"] == 1           # 4096 tasks do
    assert d.loc[1, "num_tasks"] == 512 * 8     # 4 query heads packed per KV head
    assert d.loc[1, "dram_bytes"] == pytest.approx(512 * 1024 * 2 * 8 * 128 * 2 + 512 * 32 * 128 * 2)


def test_rmsnorm_one_cta_per_row(registry):
    d = norm_act.decompose_rmsnorm(rows("rmsnorm", dtype="float16", num_tokens=[1, 108, 109], hidden_size=4096),
                                   registry)
    assert d["num_tasks"].tolist() == [1, 108, 109]
    assert d["sm_max_tasks"].tolist() == [1, 1, 2]
    assert d["fma_all_ops"].tolist() == [3 * 4096 * t for t in (1, 108, 109)]
    assert d["xu_all_ops"].tolist() == [1, 108, 109]


def test_moe_padding_and_config(registry):
    s = fused_moe.summary({"num_tokens": 64, "hidden_size": 4096, "inter_size": 14336, "topk": 2, "num_experts": 8,
                           "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "balanced", "moe_stage": "full",
                           "dtype": "bfloat16"}, registry["h100_sxm"])
    # 128 routed pairs, 16 per expert, BLOCK_M 64 (M > E): one padded block per expert
    blocks = 8
    assert s["tensor_all_ops"] == blocks * (np.ceil(2 * 14336 / 64) * 2 * 64 * 64 * 4096
                                            + np.ceil(4096 / 64) * 2 * 64 * 64 * 14336)
    assert fused_moe.default_config(8, 64, "bfloat16")["block_size_m"] == 16
    assert sum(fused_moe.expert_loads(100, 8, 64, 1, "power_law_1.2")) == 800
    assert max(fused_moe.expert_loads(100, 8, 64, 1, "power_law_1.2")) <= 100
    assert len(fused_moe.expert_loads(100, 8, 64, 4, "balanced")) == 16


def test_more_tokens_never_fewer_ops(registry):
    t = [1, 7, 64, 512, 4096]
    cases = [rows("rmsnorm", dtype="float16", num_tokens=t, hidden_size=8192),
             rows("silu_mul", dtype="float16", num_tokens=t, hidden_size=14336),
             rows("gemm", dtype="bfloat16", m=t, n=4096, k=4096, batch=1),
             rows("fused_moe", dtype="bfloat16", num_tokens=t, hidden_size=4096, inter_size=14336, topk=2,
                  num_experts=8, moe_tp_size=1, moe_ep_size=1, distribution="balanced", moe_stage="full"),
             rows("attention_prefill", implementation="vllm_flash_attn", dtype="bfloat16", batch_size=1, seq_len=t,
                  kv_len=t, num_heads=32, num_kv_heads=8, head_dim=128, kv_cache_dtype="bfloat16", window_size=0)]
    for df in cases:
        f = analyze(df, registry)
        for col in ("tensor_all_ops", "fma_all_ops", "dram_bytes"):
            assert f[col].is_monotonic_increasing, (df["kernel"].iloc[0], col)


def _one_of_each(gpu):
    return [
        rows("gemm", gpu=gpu, dtype="float16", m=300, n=700, k=900, batch=1),
        rows("gemm", gpu=gpu, dtype="float32", m=300, n=700, k=900, batch=2),
        rows("rmsnorm", gpu=gpu, dtype="float16", num_tokens=33, hidden_size=5120),
        rows("silu_mul", gpu=gpu, dtype="float16", num_tokens=33, hidden_size=13824),
        rows("attention_prefill", gpu=gpu, implementation="vllm_flash_attn", dtype="float16", batch_size=2,
             seq_len=700, kv_len=700, num_heads=16, num_kv_heads=4, head_dim=128, kv_cache_dtype="float16",
             window_size=0),
        rows("attention_decode", gpu=gpu, implementation="vllm_flashinfer", dtype="float16", batch_size=3,
             seq_len=1, kv_len=5000, num_heads=16, num_kv_heads=4, head_dim=64, kv_cache_dtype="float16",
             window_size=0),
        rows("fused_moe", gpu=gpu, dtype="float16", num_tokens=100, hidden_size=2048, inter_size=1024, topk=8,
             num_experts=64, moe_tp_size=2, moe_ep_size=2, distribution="power_law_1.01", moe_stage="full"),
    ]


def test_every_family_on_every_registry_gpu(registry):
    from synperf.data.io import InputError

    for gpu in sorted(registry.ids):
        parts = _one_of_each(gpu)
        if int(registry[gpu].compute_capability.split(".")[0]) < 8:
            # FlashAttention needs compute capability 8.0+: the FA prefill row is refused, naming the GPU
            fa = [p for p in parts if p["kernel"].iloc[0] == "attention_prefill"]
            with pytest.raises(InputError, match=f"GPU '{gpu}'.*compute capability 8.0"):
                build_features(fa[0], registry, "v2")
            parts = [p for p in parts if p["kernel"].iloc[0] != "attention_prefill"]
        df = pd.concat(parts, ignore_index=True)
        ff = build_features(df, registry, "v2")
        t = ff.frame["theoretical_time_us"]
        assert (t > 0).all() and np.isfinite(t).all(), gpu
        assert (ff.frame["tensor_sm_max_ops"] <= ff.frame["tensor_all_ops"]).all(), gpu


@pytest.mark.parametrize("gpu", ["a100_sxm4_80gb", "h100_sxm", "l40s", "b200"])
def test_vectorised_gemm_equals_explicit_tasks(registry, gpu):
    df = rows("gemm", gpu=gpu, dtype=["bfloat16", "bfloat16", "bfloat16", "fp8", "float16"],
              m=[1, 300, 8192, 108, 64], n=[4096, 700, 8192, 8192, 14336], k=[8192, 900, 4096, 1024, 4096], batch=1)
    if not registry[gpu].dense_fp8_tflops:
        df = df[df["dtype"] != "fp8"]
    vec = gemm.decompose(df, registry)
    for i, r in df.iterrows():
        s = gemm.tasks(r.to_dict(), registry[gpu]).summary(registry[gpu], r["dtype"])
        for k, v in s.items():
            assert vec.loc[i, k] == pytest.approx(v), (gpu, i, k)


def test_prefill_blocks_and_joint_schedule_sweep_equal_one_set_at_a_time(registry, monkeypatch):
    """Many launches taken in small q-tile blocks, their schedules simulated up front in one sweep over time,
    give bit for bit what one block and per-set simulations give; and a few rows match their explicit task sets."""
    from synperf.model import schedule

    rng = np.random.default_rng(3)
    n = 400
    heads = [(32, 8), (64, 8), (8, 8), (16, 16), (28, 4)]
    h = [heads[i] for i in rng.integers(0, len(heads), n)]
    S = rng.integers(1, 3000, n)
    df = rows("attention_prefill", gpu=[["h100_sxm", "a100_sxm4_80gb", "l40s"][i] for i in rng.integers(0, 3, n)],
              implementation=[["vllm_flash_attn", "vllm_flashinfer"][i] for i in rng.integers(0, 2, n)],
              dtype="bfloat16", batch_size=rng.integers(1, 6, n).tolist(), seq_len=S.tolist(),
              kv_len=(S + rng.integers(0, 2, n) * rng.integers(0, 2000, n)).tolist(),
              num_heads=[a for a, _ in h], num_kv_heads=[b for _, b in h],
              head_dim=[[64, 128][i] for i in rng.integers(0, 2, n)],
              kv_cache_dtype=[["bfloat16", "fp8"][i] for i in rng.integers(0, 2, n)],
              window_size=(rng.integers(0, 2, n) * 256).tolist())
    monkeypatch.setattr(schedule, "_CACHE", {})
    monkeypatch.setattr(attention, "Q_TILE_BLOCK", 2048)
    fast = attention.decompose_prefill(df, registry)
    monkeypatch.setattr(schedule, "_CACHE", {})
    monkeypatch.setattr(schedule, "BATCH_MIN_SETS", 10**9)
    monkeypatch.setattr(attention, "Q_TILE_BLOCK", 10**9)
    ref = attention.decompose_prefill(df, registry)
    assert list(fast.columns) == list(ref.columns)
    np.testing.assert_array_equal(fast.to_numpy(), ref.to_numpy())
    assert (fast["persistent"] == 1).any() and (fast["persistent"] == 0).any()  # both schedulers
    for i in range(0, n, 40):
        r = df.iloc[i]
        s = attention.prefill_tasks(r.to_dict(), registry[r["gpu"]]).summary(registry[r["gpu"]], "bfloat16")
        for k, v in s.items():
            assert ref.loc[i, k] == pytest.approx(v), (i, k)


def test_split_kv_rule_of_repeated_launches_equals_the_rule_per_launch():
    # many launches, most repeated: each distinct (tasks, KV tiles) pair is ruled on once and spread back
    rng = np.random.default_rng(5)
    base = rng.integers(1, 300, 5000).astype(float)
    kvt = rng.integers(1, 200, 5000).astype(float)
    base[::2], kvt[::2] = base[1::2], kvt[1::2]
    got = attention.num_splits(base, kvt, 132)
    one = np.array([attention.num_splits(base[i:i + 1], kvt[i:i + 1], 132)[0] for i in range(len(base))])
    np.testing.assert_array_equal(got, one)
    assert len(np.unique(got)) > 3
