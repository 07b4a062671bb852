"""Unmodelled inputs are refused or dropped-and-counted, and decomposers model the kernel that actually runs.

Kind 2 (labels, tables and columns the code does not model) and kind 4 (tiles that do not fit, cached
prefixes, local expert counts, cuBLAS tile names) of the bad-input review.
"""


import numpy as np
import pandas as pd
import pytest

from synperf.api import predict
from synperf.data.implementations import IMPLEMENTATIONS, implementation_model
from synperf.data.ingest import aiconfigurator, neusight, vidur
from synperf.data.io import InputError
from synperf.data.schema import conform
from synperf.model.kernels import attention, fused_moe, gemm


def rows(kernel, gpu="a100_sxm4_80gb", **params):
    n = max(len(v) if isinstance(v, list) else 1 for v in params.values())
    base = {"gpu": gpu, "kernel": kernel, "implementation": "cublas", "latency_us": 1.0,
            "latency_stat": "mean", "source": "t", "source_version": "t"}
    return conform(pd.DataFrame({**base, **params}, index=range(n)))


def prefill(gpu, head_dim=128, seq_len=512, kv_len=None, implementation="vllm_flash_attn", window_size=0,
            num_heads=32, num_kv_heads=8):
    return rows("attention_prefill", gpu=gpu, implementation=implementation, dtype="bfloat16", batch_size=1,
                seq_len=seq_len, kv_len=seq_len if kv_len is None else kv_len, num_heads=num_heads,
                num_kv_heads=num_kv_heads, head_dim=head_dim, kv_cache_dtype="bfloat16", window_size=window_size)


# ------------------------------------------------------------------------------------------------------------
# Kind 2: every label maps through one table; unknown labels, tables and columns are counted or refused
# ------------------------------------------------------------------------------------------------------------

_AIC_ATTN = {"framework": "VLLM", "version": "0.24.0", "op_name": "context_attention", "batch_size": 1,
             "isl": 1024, "step": 0, "num_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
             "attn_dtype": "bfloat16", "kv_cache_dtype": "bfloat16", "beam_width": 1, "latency": 0.1}


def _aic_tree(root, gpu_folder, device, labels, extra_tables=()):
    d = root / "aiconfigurator" / gpu_folder / "attention" / "vllm" / "0.24.0"
    d.mkdir(parents=True)
    pd.DataFrame([{**_AIC_ATTN, "device": device, "kernel_source": ks} for ks in labels]).to_parquet(
        d / "context_attention_perf.parquet")
    for name, n in extra_tables:
        pd.DataFrame({"device": [device] * n, "latency": [0.1] * n, "kv_lora_rank": [512] * n}).to_parquet(d / name)
    return root


def test_fa4_label_is_dropped_and_counted_not_modelled_as_fa3(tmp_path, registry):
    """vLLM 0.24's ``vllm_flash_attn_fa4`` is not FA3 on H100, though its name contains ``flash_attn``."""
    _aic_tree(tmp_path, "h100_sxm", "NVIDIA H100 80GB HBM3", ["vllm_flash_attn"] * 3 + ["vllm_flash_attn_fa4"] * 2)
    res = aiconfigurator.ingest(tmp_path, registry)
    assert len(res.table) == 3 and set(res.table["implementation"]) == {"vllm_flash_attn"}
    assert res.dropped["unsupported_implementation:attention_prefill:vllm_flash_attn_fa4"] == 2


def test_fa4_label_on_b200_is_dropped_too(tmp_path, registry):
    """On B200 the same label is not FA2 either."""
    _aic_tree(tmp_path, "b200_sxm", "NVIDIA B200", ["vllm_flash_attn_fa4"] * 4 + ["vllm_flashinfer"])
    res = aiconfigurator.ingest(tmp_path, registry)
    assert res.table["implementation"].tolist() == ["vllm_flashinfer"]
    assert res.dropped["unsupported_implementation:attention_prefill:vllm_flash_attn_fa4"] == 4


def test_a_table_without_a_reader_is_counted(tmp_path, registry):
    """An MLA table has no reader: its rows are counted under its file name."""
    _aic_tree(tmp_path, "h100_sxm", "NVIDIA H100 80GB HBM3", ["vllm_flash_attn"],
              extra_tables=[("mla_context_perf.parquet", 7), ("mla_generation_perf.parquet", 5)])
    res = aiconfigurator.ingest(tmp_path, registry)
    assert res.dropped["unsupported_table:aiconfigurator:mla_context_perf.parquet"] == 7
    assert res.dropped["unsupported_table:aiconfigurator:mla_generation_perf.parquet"] == 5
    assert len(res.table) == 1


def test_unknown_gemm_kernel_source_is_dropped_and_counted(tmp_path, registry):
    """Constructed: a GEMM table with a cutlass label next to ``vllm_default`` (the dtype alone does not say which
    kernel ran)."""
    d = tmp_path / "aiconfigurator" / "h100_sxm" / "gemm" / "vllm" / "0.24.0"
    d.mkdir(parents=True)
    base = {"framework": "VLLM", "version": "0.24.0", "device": "NVIDIA H100 80GB HBM3", "op_name": "gemm",
            "gemm_dtype": "bfloat16", "n": 4096, "k": 4096, "latency": 0.05}
    pd.DataFrame([{**base, "m": m, "kernel_source": ks} for m, ks in
                  [(1, "vllm_default"), (2, "vllm_default"), (1, "vllm_cutlass_scaled_mm"), (4, "vllm_default")]]
                 ).to_parquet(d / "gemm_perf.parquet")
    res = aiconfigurator.ingest(tmp_path, registry)
    assert sorted(res.table["m"]) == [1, 2, 4]
    assert res.dropped["unsupported_implementation:gemm:vllm_cutlass_scaled_mm"] == 1


@pytest.mark.xdist_group("aiconfigurator_ingest")
def test_real_aiconfigurator_labels_are_all_listed(aiconfigurator_ingest):
    """On the shipped tables every attention label is modelled and no table lacks a reader."""
    res = aiconfigurator_ingest
    assert not [k for k in res.dropped if k.startswith("unsupported_table:")]
    assert not [k for k in res.dropped if k.startswith("unsupported_implementation:attention")]
    # MoE labels other than the Triton kernel stay dropped and counted (public-data README row counts)
    assert res.dropped["unsupported_implementation:fused_moe:vllm_marlin_int4_moe"] == 10206 * 3 + 14121


def test_attention_decomposer_refuses_an_unlisted_label(registry):
    with pytest.raises(InputError,
                       match=r"implementation = 'vllm_flash_attn_fa4'.*expected one of .*'vllm_flash_attn'"):
        attention.decompose_prefill(prefill("h100_sxm", implementation="vllm_flash_attn_fa4"), registry)
    with pytest.raises(InputError, match="torch_sdpa_efficient"):
        attention.attention_path("torch_sdpa_efficient", registry["a100_sxm4_80gb"], "attention_decode")


def test_label_table_maps_each_path(registry):
    h100, b200, a100 = registry["h100_sxm"], registry["b200"], registry["a100_sxm4_80gb"]
    assert attention.attention_path("vllm_flash_attn", h100) == "fa3"
    assert attention.attention_path("vllm_flash_attn", b200) == "fa2"
    assert attention.attention_path("torch_sdpa_flash", h100) == "fa2"   # PyTorch vendors FA2 on every arch
    assert attention.attention_path("flashinfer", a100) == "flashinfer"
    assert implementation_model("gemm_fp8", "vllm_fp8_block") == "fp8_scaled_mm"
    # the labels the ingest adapters and the profiler write are all listed
    assert {"vllm_flash_attn", "vllm_flashinfer", "flashinfer"} <= set(IMPLEMENTATIONS["attention_decode"])
    assert {"cublas"} == set(IMPLEMENTATIONS["gemm"])
    assert {"torch_scaled_mm", "vllm_fp8_per_tensor", "vllm_fp8_block"} <= set(IMPLEMENTATIONS["gemm_fp8"])
    assert {"vllm_rms_norm", "flashinfer_rmsnorm", "triton_rmsnorm"} <= set(IMPLEMENTATIONS["rmsnorm"])


def test_predict_refuses_an_unknown_label(tmp_path):
    p = {"batch_size": 1, "seq_len": [128, 256], "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
         "dtype": "bfloat16", "implementation": ["vllm_flash_attn", "vllm_flash_attn_fa4"]}
    with pytest.raises(InputError, match=r"^params row 1: implementation = 'vllm_flash_attn_fa4' is not modelled "
                                         r"for attention_prefill \(did you mean 'vllm_flash_attn'\?\); expected one of "
                                         r"\['flashinfer', "):
        predict("attention_prefill", p, "h100_sxm", models_dir=tmp_path)


def test_predict_refuses_an_unknown_gemm_label(tmp_path):
    """Constructed: a GEMM label that no decomposer models (the GEMM tile rules are cuBLAS's)."""
    with pytest.raises(InputError, match=r"implementation = 'cutlass_fp8'.*expected one of \['cublas'\]"):
        predict("gemm", {"m": 16, "n": 4096, "k": 4096, "dtype": "bfloat16", "implementation": "cutlass_fp8"},
                "h100_sxm", models_dir=tmp_path)


def _vidur_copy(public_data, tmp_path, rename):
    src = public_data / "vidur" / "compute" / "a100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"
    dst = tmp_path / "vidur" / "compute" / "a100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"
    dst.parent.mkdir(parents=True)
    df = pd.read_csv(src)
    df.columns = [c.replace(a, b) for c in df.columns for a, b in [rename]]
    df.to_csv(dst, index=False)
    return len(df)


def test_vidur_renamed_activation_column_is_an_error(public_data, tmp_path, registry, ingest_config):
    """A renamed ``mlp_act`` column would otherwise lose every SiLU&Mul row of the file."""
    _vidur_copy(public_data, tmp_path, ("time_stats.mlp_act.", "time_stats.mlp_activation."))
    with pytest.raises(InputError, match=r"mlp\.csv: missing column\(s\) \['time_stats\.mlp_act\.median'\]"):
        vidur.ingest(tmp_path, registry, ingest_config["vidur"])


def test_vidur_renamed_norm_column_is_an_error(public_data, tmp_path, registry, ingest_config):
    _vidur_copy(public_data, tmp_path, ("time_stats.post_attention_layernorm.", "time_stats.post_attn_norm."))
    with pytest.raises(InputError, match=r"missing column\(s\) \['time_stats\.post_attention_layernorm\.median'\]"):
        vidur.ingest(tmp_path, registry, ingest_config["vidur"])


def test_vidur_unknown_and_unmodelled_ops_are_counted(public_data, tmp_path, registry, ingest_config):
    """Constructed: an extra op column no table lists is counted, as are the known unmodelled ops."""
    src = public_data / "vidur" / "compute" / "a100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"
    dst = tmp_path / "vidur" / "compute" / "a100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"
    dst.parent.mkdir(parents=True)
    df = pd.read_csv(src)
    df["time_stats.mlp_gate_norm.median"] = 0.01
    df.to_csv(dst, index=False)
    res = vidur.ingest(tmp_path, registry, ingest_config["vidur"])
    assert res.dropped["unsupported_op:vidur:mlp_gate_norm"] == len(df)
    assert res.dropped["unsupported_op:vidur:attn_rope"] == len(df)
    assert set(res.table["kernel"]) == {"gemm", "rmsnorm", "silu_mul"}
    assert (res.table["kernel"] == "silu_mul").sum() == len(df)
    assert (res.table["kernel"] == "rmsnorm").sum() == 2 * len(df)


# ------------------------------------------------------------------------------------------------------------
# Kind 4 (a): tiles that do not fit the GPU's shared memory
# ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu", ["l40s", "rtx_pro_6000_blackwell_server"])
def test_fa2_head_dim_256_on_100kb_smem_uses_the_64x64_tile(registry, gpu):
    """flash_fwd_launch_template.h run_mha_fwd_hdim256: 99 KB per CTA < 2*256*(128+128) B -> 64 x 64, 4 warps,
    (64 + 2*64)*256*2 = 96 KiB of shared memory: one CTA per SM (the 128 x 64 tile needs 128 KiB)."""
    assert attention.fa2_tile(256, registry[gpu]) == (64, 64, 4, 256)
    d = attention.decompose_prefill(prefill(gpu, head_dim=256), registry).iloc[0]
    assert d["tile_q"] == 64 and d["ctas_per_sm"] == 1
    # 32 heads x 8 q-tiles of 64 rows; causal: q-tile i reads i + 1 key tiles of 64
    assert d["num_tasks"] == 32 * 8
    assert d["tensor_all_ops"] == 32 * 4.0 * 64 * 256 * 64 * sum(range(1, 9))


def test_fa2_head_dim_256_on_a100_uses_128x64_with_8_warps(registry):
    """163 KB per CTA >= 128 KiB and 164 KB per SM < 192 KiB -> 128 x 64, 8 warps (256 threads)."""
    assert attention.fa2_tile(256, registry["a100_sxm4_80gb"]) == (128, 64, 8, 256)
    d = attention.decompose_prefill(prefill("a100_sxm4_80gb", head_dim=256), registry).iloc[0]
    assert d["tile_q"] == 128 and d["ctas_per_sm"] == 1   # 128 KiB of 164 KiB


def test_fa2_head_dim_256_on_hopper_through_sdpa_uses_64x64(registry):
    """Constructed: 228 KB per SM >= 4*256*(64+128) B, so FA2 (PyTorch SDPA flash) picks 64 x 64 on H100."""
    assert attention.fa2_tile(256, registry["h100_sxm"]) == (64, 64, 4, 256)
    d = attention.decompose_prefill(prefill("h100_sxm", head_dim=256, implementation="torch_sdpa_flash"),
                                    registry).iloc[0]
    assert d["tile_q"] == 64 and d["ctas_per_sm"] == 2


def test_fa2_head_dim_128_causal_on_sm8x_uses_64x64(registry):
    """Constructed: L40S (8.9) runs the sm8x causal tile 64 x 64; A100 (8.0) 128 x 64."""
    assert attention.fa2_tile(128, registry["l40s"]) == (64, 64, 4, 128)
    assert attention.fa2_tile(128, registry["l40s"], causal=False) == (128, 32, 4, 128)
    assert attention.fa2_tile(128, registry["a100_sxm4_80gb"]) == (128, 64, 4, 128)
    assert attention.fa2_tile(80, registry["a100_sxm4_80gb"])[3] == 96   # head dims round up to a template


def test_head_dim_512_on_a100_is_an_input_error(registry):
    with pytest.raises(InputError, match=r"^attention head_dim = 512 on GPU 'a100_sxm4_80gb': FlashAttention \(FA2\) "
                                         r"is built for head_dim <= 256"):
        attention.decompose_prefill(prefill("a100_sxm4_80gb", head_dim=512), registry)


@pytest.mark.parametrize("head_dim", [7, 100, 125])
def test_a_head_dim_no_kernel_runs_is_an_input_error(registry, head_dim):
    """FlashAttention runs head dims that are multiples of 8 (vLLM's backend); 100 or 125 would be priced as if."""
    with pytest.raises(InputError, match=rf"^attention head_dim = {head_dim} on GPU 'a100_sxm4_80gb': the modelled "
                                         r"kernels run head dims that are multiples of 8"):
        attention.decompose_prefill(prefill("a100_sxm4_80gb", head_dim=head_dim), registry)


def test_head_dim_512_is_refused_by_predict_and_decode(registry, tmp_path):
    """Constructed: FlashInfer decode on B200 and a predict() call name the row, head_dim and GPU."""
    dec = rows("attention_decode", gpu="b200", implementation="vllm_flashinfer", dtype="bfloat16", batch_size=1,
               seq_len=1, kv_len=4096, num_heads=32, num_kv_heads=8, head_dim=512, kv_cache_dtype="bfloat16",
               window_size=0)
    with pytest.raises(InputError, match="head_dim = 512 on GPU 'b200': FlashInfer"):
        attention.decompose_decode(dec, registry)
    p = {"batch_size": 1, "seq_len": 512, "num_heads": 32, "num_kv_heads": 8, "head_dim": [128, 512],
         "dtype": "bfloat16"}
    with pytest.raises(InputError, match=r"^params row 1: attention head_dim = 512 on GPU 'a100_sxm4_80gb'"):
        predict("attention_prefill", p, "a100_sxm4_80gb", models_dir=tmp_path)


def test_flash_attention_on_volta_is_refused(registry):
    """Constructed: FlashAttention needs compute capability 8.0+."""
    with pytest.raises(InputError, match=r"GPU 'v100_pcie_32gb' \(compute capability 7.0\): FlashAttention \(FA2\) "
                                         r"needs compute capability 8.0"):
        attention.decompose_prefill(prefill("v100_pcie_32gb"), registry)


# ------------------------------------------------------------------------------------------------------------
# Kind 4 (b): prefill with a cached prefix attends over kv_len
# ------------------------------------------------------------------------------------------------------------

def test_prefill_with_cached_prefix_covers_the_kv_length(registry):
    """seq 512 with kv 512, 8,192 or 65,536: more work with a longer context. Causal over the last 512 rows of the
    context: pairs = 512*(L-512) + 512*513/2."""
    df = pd.concat([prefill("h100_sxm", seq_len=512, kv_len=L) for L in (512, 8192, 65536)], ignore_index=True)
    w = attention.work_prefill(df)
    pairs = np.array([512 * (L - 512) + 512 * 513 / 2 for L in (512, 8192, 65536)])
    assert w["flops"].tolist() == (4.0 * 32 * 128 * pairs).tolist()
    assert w["dram_bytes"].tolist() == [512 * 32 * 128 * 2 * 2 + L * 2 * 8 * 128 * 2 for L in (512, 8192, 65536)]
    d = attention.decompose_prefill(df, registry)
    # FA3 128 x 128 tiles: q-tile i of 4 reads (L - 512)/128 + i + 1 key tiles
    for (i, L) in enumerate((512, 8192, 65536)):
        kvt = sum((L - 512) // 128 + j + 1 for j in range(4))
        assert d["tensor_all_ops"].iloc[i] == 32 * 4.0 * 128 * 128 * 128 * kvt
    assert d["tensor_all_ops"].is_monotonic_increasing and d["dram_bytes"].is_monotonic_increasing


def test_cached_prefix_with_sliding_window(registry):
    """Constructed: S = 5 queries at positions 1..5 of a 6-token context, window 3: 2+3+3+3+3 = 14 pairs;
    4 queries after a 6-token prefix with window 3: 12."""
    got = attention.causal_pairs(pd.Series([5, 4, 5]), pd.Series([3, 3, 0]), pd.Series([6, 10, 5]))
    assert got.tolist() == [14.0, 12.0, 15.0]
    # FA2 on A100 with the window: q-tile keys start at the window, the prefix adds no work beyond it
    a = attention.decompose_prefill(prefill("a100_sxm4_80gb", seq_len=1024, kv_len=1024, window_size=256), registry)
    b = attention.decompose_prefill(prefill("a100_sxm4_80gb", seq_len=1024, kv_len=9216, window_size=256), registry)
    assert b["tensor_all_ops"].iloc[0] > a["tensor_all_ops"].iloc[0]              # early rows now see full windows
    assert b["tensor_all_ops"].iloc[0] <= 32 * 4.0 * 128 * 128 * 8 * ((256 + 128) // 64 + 1) * 64


def test_prefill_explicit_tasks_match_the_vectorised_path_with_a_prefix(registry):
    for gpu, impl in [("h100_sxm", "vllm_flash_attn"), ("l40s", "vllm_flash_attn"), ("b200", "vllm_flashinfer")]:
        df = prefill(gpu, seq_len=300, kv_len=5000, implementation=impl)
        vec = attention.decompose_prefill(df, registry).iloc[0]
        s = attention.prefill_tasks(df.iloc[0].to_dict(), registry[gpu]).summary(registry[gpu], "bfloat16")
        for k in ("tensor_all_ops", "dram_bytes", "num_tasks", "sm_max_tensor_ops"):
            assert vec[k] == pytest.approx(s[k]), (gpu, k)


# ------------------------------------------------------------------------------------------------------------
# Kind 4 (c): fused-MoE default config from the local expert count
# ------------------------------------------------------------------------------------------------------------

def _moe(T, E, ep):
    return {"num_tokens": T, "hidden_size": 4096, "inter_size": 2048, "topk": 8, "num_experts": E, "moe_tp_size": 1,
            "moe_ep_size": ep, "distribution": "balanced", "moe_stage": "full", "dtype": "bfloat16"}


def test_moe_default_config_uses_local_experts(registry):
    """E = 256, EP 8 -> 32 local experts; 64 tokens > 32, so vLLM's default is BLOCK_M 64 (the global count,
    256 >= 64, would give 16)."""
    from synperf.gpu.profiling.triton_kernels.fused_moe import default_config as profiler_default

    s = fused_moe.summary(_moe(64, 256, 8), registry["h100_sxm"])
    assert s["block_m"] == 64 and s["block_n"] == 64
    assert profiler_default(64, 32)["BLOCK_SIZE_M"] == 64   # our profiler agrees


def test_moe_default_config_boundaries(registry):
    """Constructed: 100 tokens, 128 experts over EP 4 (32 local) -> 64; EP 1 (128 local) -> 16; 32 tokens with
    32 local experts -> 16 (M <= E)."""
    spec = registry["h100_sxm"]
    assert fused_moe.summary(_moe(100, 128, 4), spec)["block_m"] == 64
    assert fused_moe.summary(_moe(100, 128, 1), spec)["block_m"] == 16
    assert fused_moe.summary(_moe(32, 128, 4), spec)["block_m"] == 16


# ------------------------------------------------------------------------------------------------------------
# Kind 4 (d): cuBLAS tile names
# ------------------------------------------------------------------------------------------------------------

XMMA = ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_"
        "execute_kernel__5x_cublas")


def test_every_naming_scheme_is_parsed():
    assert gemm.parse_tile_name(XMMA) == (64, 128)                             # tilesize MxNxK: first = m
    assert gemm.parse_tile_name("sgemm_32x32x32_NT_vec") == (32, 32)
    assert gemm.parse_tile_name("ampere_sgemm_128x64_tn") == (64, 128)         # column-major: first = n
    assert gemm.parse_tile_name("volta_sgemm_128x32_sliced1x4_tn") == (32, 128)
    cutlass_simt = "void cutlass::Kernel<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(x::Params)"
    assert gemm.parse_tile_name(cutlass_simt) == (128, 256)
    assert gemm.parse_tile_name("gemv2T_kernel_val<int, int, float>") is None


def test_xmma_tile_from_its_name_no_invented_split_k(registry):
    """m = 256, n = 384 with the 64 x 128 xmma tile: 4 x 3 = 12 CTAs, as the grid says -> split-K 1 (a 128 x 128
    tile would give 2 x 3 = 6 tiles and an invented split-K of 2)."""
    df = rows("gemm", gpu="h100_sxm", dtype="float32", m=256, n=384, k=1024, batch=1, kernel_name=XMMA, grid_ctas=12)
    d = gemm.decompose(df, registry).iloc[0]
    assert (d["tile_m"], d["tile_n"], d["split_k"], d["num_tasks"]) == (64, 128, 1, 12)
    cfg = gemm.tile_config(256, 384, 1024, "float32", registry["h100_sxm"], XMMA, 12)
    assert (cfg["tile_m"], cfg["tile_n"], cfg["split_k"]) == (64, 128, 1)


def test_unparsed_kernel_name_is_refused(registry):
    df = rows("gemm", gpu="t4", dtype="float32", m=1, n=4096, k=4096, batch=1, kernel_name="gemv2T_kernel_val",
              grid_ctas=128)
    with pytest.raises(InputError, match=r"kernel_name = 'gemv2T_kernel_val' matches no cuBLAS tile-name pattern"):
        gemm.decompose(df, registry)


def test_neusight_unmatched_names_are_dropped_and_counted(tmp_path, registry):
    """Constructed NeuSight file: one gemv row (no tile in its name) among two sgemm rows."""
    d = tmp_path / "neusight" / "dataset" / "train" / "collect" / "linear" / "p2.1.0"
    d.mkdir(parents=True)
    base = {"OPName": "linear", "Latency": 0.05, "Device": "Tesla T4", "B": 1, "M": 128, "N": 1024, "K": 1024,
            "Grid x": 8, "Grid y": 1, "Grid z": 1}
    pd.DataFrame([{**base, "Kernel Name": "turing_sgemm_128x128_nn"}, {**base, "Kernel Name": "gemv2T_kernel_val"},
                  {**base, "M": 256, "Kernel Name": "sgemm_32x32x32_NN"}]).to_csv(d / "Tesla T4.csv", index=False)
    res = neusight.ingest(tmp_path, registry)
    assert len(res.table) == 2
    assert res.dropped["unsupported_kernel_name:neusight"] == 1


def test_real_h100_xmma_rows_get_no_invented_split_k(public_data, registry):
    """With a 128 x 128 fallback tile, 1,225 of the 3,190 H100 xmma rows would get split-K > 1."""
    res = neusight.ingest(public_data, registry)
    assert res.dropped["unsupported_kernel_name:neusight"] == 0
    t = res.table
    x = t[(t.gpu == "h100_sxm") & t["kernel_name"].astype(str).str.contains("_tilesize")]
    assert len(x) == 3190
    d = gemm.decompose(x, registry)
    assert int((d["split_k"] > 1).sum()) == 0
    # the parsed tile reproduces the recorded grid on >= 99% of them (batch > 65,535 caps grid z)
    tiles = x["batch"] * np.ceil(x["m"] / d["tile_m"]) * np.ceil(x["n"] / d["tile_n"])
    assert (tiles == x["grid_ctas"].astype(float)).mean() >= 0.99
