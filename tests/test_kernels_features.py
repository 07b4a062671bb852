"""Hand-computed work and v1 features."""

from pathlib import Path

import pandas as pd
import pytest

from synperf.data.schema import conform
from synperf.model.features import build_features
from synperf.model.kernels import attention, fused_moe, work


def rows(kernel, **params):
    n = max(len(v) if isinstance(v, list) else 1 for v in params.values())
    base = {"gpu": "a100_sxm4_80gb", "kernel": kernel, "implementation": "x", "latency_us": 1.0,
            "latency_stat": "mean", "source": "t", "source_version": "t"}
    return conform(pd.DataFrame({**base, **params}, index=range(n)))


def test_gemm_256_cubed_bf16():
    w = work(rows("gemm", dtype="bfloat16", m=256, n=256, k=256, batch=1)).iloc[0]
    assert w["flops"] == 2 * 256**3
    assert w["dram_bytes"] == 2 * (256 * 256 * 2) + 256 * 256 * 2   # A, B read; C written, 2 B each
    assert w["parallel_units"] == 4                                   # four 128x128 tiles


def test_fp8_gemm_reads_one_byte_and_writes_bf16():
    w = work(rows("gemm_fp8", dtype="fp8", m=128, n=256, k=512, batch=1)).iloc[0]
    assert w["dram_bytes"] == (128 * 512 + 256 * 512) * 1 + 128 * 256 * 2


def test_causal_pairs():
    s = pd.Series([4, 4, 1, 10])
    w = pd.Series([0, 2, 0, 10])
    assert attention.causal_pairs(s, w).tolist() == [10, 3 + 2 * 2, 1, 55]


def test_prefill_and_decode_counts():
    p = work(rows("attention_prefill", dtype="bfloat16", batch_size=2, seq_len=4, kv_len=4, num_heads=8,
                  num_kv_heads=2, head_dim=64, kv_cache_dtype="bfloat16", window_size=0)).iloc[0]
    assert p["flops"] == 4 * 2 * 8 * 10 * 64
    assert p["xu_ops"] == 2 * 8 * 10
    d = work(rows("attention_decode", dtype="bfloat16", batch_size=3, seq_len=1, kv_len=1000, num_heads=32,
                  num_kv_heads=8, head_dim=128, kv_cache_dtype=["bfloat16", "fp8"], window_size=[0, 128]))
    assert d["flops"].tolist() == [4 * 3 * 32 * 1000 * 128, 4 * 3 * 32 * 128 * 128]
    kv0 = 3 * 1000 * 2 * 8 * 128 * 2
    kv1 = 3 * 128 * 2 * 8 * 128 * 1
    q_o = 2 * 3 * 32 * 128 * 2
    assert d["dram_bytes"].tolist() == [kv0 + q_o, kv1 + q_o]


def test_more_tokens_never_fewer_flops():
    n = [1, 2, 16, 256, 4096]
    for kernel, params in {
        "rmsnorm": dict(dtype="float16", num_tokens=n, hidden_size=4096),
        "silu_mul": dict(dtype="float16", num_tokens=n, hidden_size=11008),
        "fused_moe": dict(dtype="bfloat16", num_tokens=n, hidden_size=4096, inter_size=14336, topk=2,
                          num_experts=8, moe_tp_size=1, moe_ep_size=1, moe_stage="full", distribution="balanced"),
    }.items():
        w = work(rows(kernel, **params))
        assert w["flops"].is_monotonic_increasing, kernel
        assert w["dram_bytes"].is_monotonic_increasing, kernel


def test_moe_active_experts_saturate():
    pairs = pd.Series([1.0, 8.0, 1e6])
    e = fused_moe.expected_active_experts(pairs, pd.Series([8.0] * 3), pd.Series([8.0] * 3))
    assert e.iloc[0] == pytest.approx(1.0)
    assert 4.0 < e.iloc[1] < 8.0
    assert e.iloc[2] == pytest.approx(8.0)


def test_routing_alpha():
    assert fused_moe.routing_alpha(pd.Series(["balanced", "power_law_1.2", None])).tolist() == [0.0, 1.2, 0.0]


def test_shard_alignment_is_the_power_of_two_of_the_local_intermediate_size_and_reaches_the_correction(registry):
    """I_local = inter_size / moe_tp_size: 1856 / 16 = 116 = 4 x 29, 1856 / 32 = 58, 2048 / 16 = 128, 14336 (capped
    at 128), 3072 / 32 = 96 = 32 x 3, and 1 where the TP does not divide the intermediate size."""
    df = pd.DataFrame({"inter_size": pd.array([1856, 1856, 2048, 14336, 3072, 1000, None], dtype="Int64"),
                       "moe_tp_size": pd.array([16, 32, 16, 1, 32, 3, None], dtype="Int64")})
    assert fused_moe.shard_alignment(df).tolist() == [4.0, 2.0, 128.0, 128.0, 32.0, 1.0, 0.0]
    from synperf.model.correction import correction_columns

    moe = rows("fused_moe", dtype="fp8", num_tokens=[64, 64], hidden_size=4096, inter_size=[1856, 2048], topk=6,
               num_experts=128, moe_tp_size=16, moe_ep_size=1, distribution="balanced").assign(gpu="h100_sxm")
    built = build_features(moe, registry, "v2")
    assert built.frame["shard_align"].tolist() == [4.0, 128.0]
    assert "shard_align" in correction_columns({"categorical": built.categorical}, built.frame.columns)[0]


def test_v1_roofline_on_h100(registry):
    df = rows("gemm", dtype="bfloat16", m=[4096, 1], n=4096, k=4096, batch=1).assign(gpu="h100_sxm")
    f = build_features(df, registry, "v1").frame
    # compute-bound: 2*4096^3 / 989.4 TFLOP/s
    assert f["theoretical_time_us"].iloc[0] == pytest.approx(2 * 4096**3 / 989.4e12 * 1e6)
    # m = 1 is memory-bound: ~ the 32 MiB weight over 3350 GB/s
    assert f["theoretical_time_us"].iloc[1] == pytest.approx(f["memory_time_us"].iloc[1])
    assert f["memory_time_us"].iloc[1] == pytest.approx((4096 * 4096 + 4096 + 4096) * 2 / 3350e9 * 1e6)


def test_norms_use_the_cuda_core_peak(registry):
    df = rows("rmsnorm", dtype="float16", num_tokens=4096, hidden_size=8192)
    f = build_features(df, registry, "v1").frame.iloc[0]
    assert f["compute_time_us"] == pytest.approx(4 * 4096 * 8192 / 19.5e12 * 1e6)


def test_every_family_on_every_registry_gpu_with_its_dtype(registry):
    cases = [rows("gemm", dtype="float16", m=64, n=64, k=64, batch=1),
             rows("rmsnorm", dtype="float16", num_tokens=1, hidden_size=64),
             rows("silu_mul", dtype="float16", num_tokens=1, hidden_size=64),
             rows("attention_decode", dtype="float16", batch_size=1, seq_len=1, kv_len=8, num_heads=1,
                  num_kv_heads=1, head_dim=64, kv_cache_dtype="float16", window_size=0)]
    for gid in registry.ids:
        for df in cases:
            f = build_features(df.assign(gpu=gid), registry, "v1").frame
            assert (f["theoretical_time_us"] > 0).all(), gid


def test_v2_launch_adds_the_launch_floor_to_the_paper_target_only(registry):
    from synperf.model.features.v2 import LAUNCH_FLOOR_US

    df = pd.concat([rows("gemm", dtype="bfloat16", m=[1, 4096], n=4096, k=4096, batch=1),
                    rows("rmsnorm", dtype="float16", num_tokens=[1, 8192], hidden_size=4096)],
                   ignore_index=True).assign(gpu="h100_sxm")
    paper = build_features(df, registry, "v2_paper")
    launch = build_features(df, registry, "v2_launch")
    assert launch.numeric == paper.numeric and launch.categorical == paper.categorical
    diff = launch.frame["theoretical_time_us"] - paper.frame["theoretical_time_us"]
    assert diff.to_numpy() == pytest.approx([LAUNCH_FLOOR_US] * len(df))
    # the floor dominates a 1-token RMSNorm (tens of ns of work) and is noise for a 4096^3 GEMM (~140 us)
    assert paper.frame["theoretical_time_us"].iloc[2] < 0.1 * LAUNCH_FLOOR_US
    assert paper.frame["theoretical_time_us"].iloc[1] > 40 * LAUNCH_FLOOR_US
    pd.testing.assert_frame_equal(launch.frame.drop(columns="theoretical_time_us"),
                                  paper.frame.drop(columns="theoretical_time_us"))


def test_feature_set_names_come_from_one_list():
    """Config feature-set names are checked against FEATURE_SETS (the Snakefile's wildcard constraint uses it too)."""
    from synperf.data.io import InputError
    from synperf.model.features import FEATURE_SETS, check_feature_set_names

    check_feature_set_names({"feature_set": "v2", "compare_feature_sets": ["v1", "v2_paper"],
                             "selection": {"candidates": sorted(FEATURE_SETS)}})
    for cfg, key in (({"feature_set": "v3"}, "feature_set"),
                     ({"feature_set": "v2", "compare_feature_sets": ["v2", "v2_paperr"]}, "compare_feature_sets"),
                     ({"feature_set": "v2", "selection": {"candidates": ["v1", "V2"]}}, "selection.candidates")):
        with pytest.raises(InputError, match=rf"config key {key}: unknown feature set"):
            check_feature_set_names(cfg)
    # an experiment's own primary set: known, trained for every experiment and scored by the selection
    base = {"feature_set": "v2", "compare_feature_sets": ["v1"], "selection": {"candidates": ["v2", "v1"]}}
    check_feature_set_names({**base, "experiments": {"rmsnorm": {"feature_set": "v1"}, "gemm": {}}})
    for own, candidates, match in (("v9", ["v2", "v1"], "unknown feature set 'v9'"),
                                   ("v2_paper", ["v2", "v1", "v2_paper"], "'v2_paper' is not trained"),
                                   ("v1", ["v2", "v2_paper"], "'v1' is not scored")):
        cfg = {**base, "selection": {"candidates": candidates}, "experiments": {"rmsnorm": {"feature_set": own}}}
        with pytest.raises(InputError, match=f"config key experiments.rmsnorm.feature_set: {match}"):
            check_feature_set_names(cfg)
    snakefile = (Path(__file__).resolve().parent.parent / "Snakefile").read_text()
    assert 'feature_set="|".join(FEATURE_SETS)' in snakefile


def test_gpu_columns_match_each_rows_own_registry_entry(registry):
    from synperf.model.features.v1 import gpu_columns

    # mixed GPUs, dtypes and pipes in an interleaved order, on a non-default index
    gpus = ["h100_sxm", "a40", "h100_sxm", "b200", "a40", "h100_sxm"]
    dtypes = ["bfloat16", "float16", "fp8", "bfloat16", "bfloat16", "bfloat16"]
    kernels = ["gemm", "gemm", "gemm_fp8", "rmsnorm", "silu_mul", "attention_decode"]
    idx = pd.Index([50, 3, 17, 9, 4, 1])
    hw = gpu_columns(pd.Series(gpus, index=idx, dtype="string"), pd.Series(dtypes, index=idx),
                     pd.Series(kernels, index=idx), registry)
    assert list(hw.index) == list(idx)
    for (g, d, k), (_, row) in zip(zip(gpus, dtypes, kernels), hw.iterrows()):
        spec = registry[g]
        peak = spec.fp32_tflops if k in ("rmsnorm", "silu_mul") else spec.peak_tflops(d)
        assert row["peak_flops_per_s"] == peak * 1e12
        assert row["dram_bytes_per_s"] == spec.dram_bw_gbps * 1e9
        assert row["sm_count"] == spec.sm_count
        assert row["l2_bytes"] == spec.l2_cache_mb * 2**20
        assert row["xu_ops_per_s"] == spec.sfu_per_sm * spec.sm_count * spec.clock_hz
    assert gpu_columns(pd.Series([], dtype="string"), pd.Series([], dtype="string"), pd.Series([], dtype="string"),
                       registry).shape == (0, 7)


def test_v2_cycles_of_interleaved_gpus_and_dtypes_equal_each_row_alone(registry):
    # the rates are looked up once per distinct (gpu, dtype) pair and taken per row by its code
    gpus = ["h100_sxm", "a40", "b200", "h100_sxm", "a40", "b200", "h100_sxm"]
    dtypes = ["bfloat16", "float16", "bfloat16", "float16", "bfloat16", "float16", "bfloat16"]
    df = rows("gemm", dtype=dtypes, m=[64, 512, 4096, 64, 512, 4096, 1024], n=4096, k=4096, batch=1)
    df["gpu"] = pd.Series(gpus, dtype="string")
    cols = ["tensor_all_cycle", "dram_cycle", "l2_cycle", "sm_max_smem_cycle", "waves", "theoretical_time_us"]
    mixed = build_features(df, registry, "v2").frame[cols].to_numpy()
    for i in range(len(df)):
        alone = build_features(df.iloc[[i]].reset_index(drop=True), registry, "v2").frame[cols].to_numpy()[0]
        assert mixed[i] == pytest.approx(alone, rel=1e-12), (gpus[i], dtypes[i])
