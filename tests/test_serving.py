"""Serving simulator: vLLM scheduling rules, pricing arithmetic, TTFT/TPOT, silicon-row classification."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synperf.data.io import InputError
from synperf.e2e.model_config import load_model_config, parse_config
from synperf.serving.metrics import kv_cache_tokens, request_times, summarize
from synperf.serving.price import price_schedule
from synperf.serving.scheduler import SchedulerConfig, simulate
from synperf.serving.silicon import counts_by_reason, read_silicon

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 3, "intermediate_size": 512, "vocab_size": 1000,
        "max_position_embeddings": 4096}


def test_mixed_iteration_chunked_prefill_by_hand():
    # budget 150: req0's prompt (100) and 50 tokens of req1's; then req0 decodes while req1 finishes its prompt
    s = simulate([100, 100], [3, 3], 2, SchedulerConfig(max_num_batched_tokens=150, max_num_seqs=128), start="burst")
    assert s.num_tokens.tolist() == [150, 51, 2, 1]
    assert s.num_seqs.tolist() == [2, 2, 2, 1]
    assert s.num_decode.tolist() == [0, 1, 2, 1]
    assert s.decode_kv_sum.tolist() == [0, 101, 203, 102]
    assert s.chunks.tolist() == [[0, 100, 100], [0, 50, 50], [1, 50, 100]]
    assert s.first_token.tolist() == [0, 1] and s.finish.tolist() == [2, 3]


def test_long_prompt_is_chunked_and_running_requests_go_first():
    s = simulate([20000, 10], [2, 2], 2, SchedulerConfig(max_num_batched_tokens=8192), start="burst")
    # the long prompt takes the whole budget for two iterations; the short one waits behind it (FCFS)
    assert s.num_tokens[:3].tolist() == [8192, 8192, 3616 + 10]
    assert s.first_token.tolist() == [2, 2]


def test_closed_loop_replaces_finished_requests():
    s = simulate([10] * 3, [5] * 3, 1)
    assert s.iterations == 15          # one prefill + 4 decodes per request, one at a time
    assert s.arrival.tolist() == [-1, 4, 9]
    assert s.first_token.tolist() == [0, 5, 10]
    assert s.finish.tolist() == [4, 9, 14]


def test_max_num_seqs_limits_running_requests():
    s = simulate([10] * 4, [3] * 4, 4, SchedulerConfig(max_num_seqs=2), start="burst")
    assert s.num_seqs.max() == 2
    assert s.first_token.tolist() == [0, 0, 3, 3]


def test_kv_cache_shortage_preempts_the_last_request_and_recomputes():
    p, o = np.full(6, 64), np.full(6, 200)
    s = simulate(p, o, 6, SchedulerConfig(block_size=16, kv_cache_tokens=800), start="burst")
    assert s.preemptions.sum() > 0
    assert (s.finish >= s.first_token).all() and (s.finish >= 0).all()
    # every request's prompt and outputs are computed at least once; preemption adds recomputed tokens
    assert s.num_tokens.sum() > (p + o - 1).sum()
    # the first-admitted request is never the victim under FCFS while others run after it
    assert s.preemptions[0] == 0


def test_decode_runs_match_step_by_step():
    # the fast path (runs of decode steps) against a budget that forbids it (one token per request per step is
    # the same schedule, but the run skipping is bypassed when len(running) > budget is false; compare with a
    # by-hand total instead): 2 requests, prompt 8, outputs 50 and 30, concurrency 2
    s = simulate([8, 8], [50, 30], 2, start="burst")
    assert s.iterations == 50
    assert s.num_decode.tolist() == [0] + [2] * 29 + [1] * 20
    assert s.decode_kv_sum[1] == 9 + 9 and s.decode_kv_sum[29] == 37 + 37 and s.decode_kv_sum[30] == 38


def test_steady_start_spreads_the_first_wave_and_marks_the_warm_up():
    # concurrency 2, outputs of 10: the second request arrives before iteration 10 / 2 = 5, so the two never share
    # a prefill; the replacements (requests 2, 3) are the measured ones
    s = simulate([8] * 4, [10] * 4, 2)
    assert s.arrival.tolist()[:2] == [-1, 4]
    assert s.first_token.tolist() == [0, 5, 10, 15]
    assert s.chunks[:, 0].tolist() == [0, 5, 10, 15]
    assert s.measured.tolist() == [False, False, True, True]
    assert simulate([8], [10], 2).measured.tolist() == [True]


def test_random_start_is_seeded_and_within_one_lifetime():
    a = simulate([8] * 40, [100] * 40, 8, start="random", seed=3)
    b = simulate([8] * 40, [100] * 40, 8, start="random", seed=3)
    first_wave = a.arrival[:8] + 1
    assert first_wave[0] == 0 and (np.diff(first_wave) >= 0).all() and first_wave.max() < 100
    assert a.arrival.tolist() == b.arrival.tolist()
    assert a.arrival.tolist() != simulate([8] * 40, [100] * 40, 8, start="random", seed=4).arrival.tolist()


def test_client_delay_makes_a_replacement_miss_the_next_iteration():
    # concurrency 2: request 0 finishes at iteration 9; its replacement cannot run in iteration 10 (already under
    # way with request 1's decode), only in 11
    s = simulate([8] * 4, [10] * 4, 2, client_delay=True)
    assert s.arrival.tolist() == [-1, 4, 9, 14] and s.first_token.tolist() == [0, 5, 11, 16]
    assert s.num_tokens[10] == 1 and s.num_tokens[11] == 9
    # alone, the engine idles (a zero-token iteration, priced at 0) until the replacement arrives
    one = simulate([10] * 2, [5] * 2, 1, client_delay=True)
    assert one.num_tokens.tolist() == [10, 1, 1, 1, 1, 0, 10, 1, 1, 1, 1]
    ttft, _ = request_times(one, np.where(one.num_tokens > 0, 0.01, 0.0))
    assert ttft == pytest.approx([10.0, 10.0])


def test_simulate_refuses_bad_input():
    with pytest.raises(InputError, match="concurrency"):
        simulate([10], [1], 0)
    with pytest.raises(InputError, match="start"):
        simulate([10], [1], 1, start="later")
    with pytest.raises(InputError, match="KV blocks"):
        simulate([1000], [10], 1, SchedulerConfig(kv_cache_tokens=512))


def test_request_times_and_summary():
    s = simulate([10] * 2, [3] * 2, 1)   # iterations: 0 prefill, 1-2 decode, 3 prefill, 4-5 decode
    ttft, tpot = request_times(s, np.array([0.1, 0.01, 0.01, 0.2, 0.02, 0.02]))
    assert ttft == pytest.approx([100.0, 200.0])
    assert tpot == pytest.approx([10.0, 20.0])
    assert summarize(ttft, "ttft")["ttft_median_ms"] == pytest.approx(150.0)


def test_weighted_summary_counts_each_value_by_its_weight():
    v = np.array([100.0, 200.0, 400.0])
    # weight 2 on 100: the mean is (2 * 100 + 200 + 400) / 4; the median lies between the two 100s and the 200
    out = summarize(v, "ttft", np.array([2.0, 1.0, 1.0]))
    assert out["ttft_mean_ms"] == pytest.approx(200.0)
    assert out["ttft_median_ms"] == pytest.approx(150.0)
    assert summarize(v, "ttft", np.ones(3))["ttft_p90_ms"] == pytest.approx(np.percentile(v, 90))
    with pytest.raises(InputError, match="weights"):
        summarize(v, "ttft", np.ones(2))


def test_benchmark_rounds_weigh_one_burst_wave_against_the_steady_state():
    from synperf.e2e._deps import default_registry
    from synperf.serving.simulate import serve

    m = parse_config(TINY, "tiny")
    kw = dict(registry=default_registry(), predict_fn=_unit_predict, num_requests=40)
    steady = serve(m, "h100_sxm", 1, 100, 10, 4, benchmark_rounds=None, **kw)
    one = serve(m, "h100_sxm", 1, 100, 10, 4, benchmark_rounds=1, **kw)      # the burst wave alone
    twenty = serve(m, "h100_sxm", 1, 100, 10, 4, **kw)
    # 20 rounds: 1 burst wave + 19 steady ones, by weight
    assert twenty["ttft_mean_ms"] == pytest.approx((one["ttft_mean_ms"] + 19 * steady["ttft_mean_ms"]) / 20)
    assert twenty["tpot_mean_ms"] == pytest.approx((one["tpot_mean_ms"] + 19 * steady["tpot_mean_ms"]) / 20)
    assert twenty["ttft_low_ms"] == pytest.approx((one["ttft_low_ms"] + 19 * steady["ttft_low_ms"]) / 20)
    with pytest.raises(InputError, match="benchmark_rounds"):
        serve(m, "h100_sxm", 1, 100, 10, 4, benchmark_rounds=0, **kw)


def test_kv_cache_counts_an_fp8_moe_checkpoints_experts_at_one_byte_and_vllm_limits_hold():
    """Qwen3-235B-A22B-FP8 (bf16 dense layers, fp8 routed experts) at TP 4 on H100: its weights are about 59 GB
    per GPU, so the cache holds tokens; at 2 bytes per expert weight they would not fit. serve refuses a token
    budget below max_num_seqs, as vLLM does."""
    from synperf.e2e._deps import default_registry
    from synperf.serving.simulate import serve

    reg = default_registry()
    m = load_model_config(Path(__file__).resolve().parents[1] / "examples" / "models" / "qwen3-235b-a22b-fp8.json")
    assert m.is_moe and m.moe_dtype and m.dtype == "bfloat16"
    fp8 = kv_cache_tokens(m, 4, "h100_sxm", reg)
    all_bf16 = kv_cache_tokens(dataclasses.replace(m, moe_dtype=""), 4, "h100_sxm", reg)
    experts = m.num_layers * m.num_experts * 3 * m.hidden_size * m.moe_intermediate_size / 4   # weights per GPU
    per_token = 2 * m.num_layers * m.shard(4, 1).num_kv_heads * m.head_dim * 2
    assert all_bf16 < 0 < fp8 and fp8 - all_bf16 == pytest.approx(experts / per_token, abs=1)
    with pytest.raises(InputError, match=r"max_num_batched_tokens \(512\) must be greater than or equal to "
                                         r"max_num_seqs \(1024\)"):
        serve(parse_config(TINY, "tiny"), "h100_sxm", 1, 100, 10, 4, registry=reg, predict_fn=_unit_predict,
              max_num_batched_tokens=512)


def test_vllm_batch_defaults_follow_memory_and_the_a100_exception():
    """vLLM's OpenAI server defaults: 8192 tokens and 1024 sequences from 70 GiB of device memory, except on an
    A100; 2048 and 256 below (48 GB GDDR parts) and on the A100 80GB."""
    from synperf.e2e._deps import default_registry
    from synperf.serving.metrics import vllm_batch_defaults

    reg = default_registry()
    got = {g: vllm_batch_defaults(g, reg) for g in ("h100_sxm", "b200", "h20", "rtx_pro_6000_blackwell_server",
                                                    "a100_sxm4_80gb", "l40s", "a40", "l4")}
    assert got == {"h100_sxm": (8192, 1024), "b200": (8192, 1024), "h20": (8192, 1024),
                   "rtx_pro_6000_blackwell_server": (8192, 1024), "a100_sxm4_80gb": (2048, 256),
                   "l40s": (2048, 256), "a40": (2048, 256), "l4": (2048, 256)}


def _unit_predict(family, params, gpu, **kw):
    return pd.DataFrame({"predicted_latency_us": np.ones(len(params)), "predicted_latency_low_us": 0.5,
                         "predicted_latency_high_us": 2.0})


def test_price_counts_every_launch():
    m = parse_config(TINY, "tiny")
    s = simulate([100, 100], [3, 3], 2, SchedulerConfig(max_num_batched_tokens=150, max_num_seqs=128), start="burst")
    p = price_schedule(s, m, "h100_sxm", 1, predict_fn=_unit_predict)
    L = 3
    base = 4 * L + 1 + (2 * L + 1) + L            # GEMMs, LM head, RMSNorms, SiLU&Mul (1 us each)
    expected = [base + 2 * L, base + L + L, base + L, base + L]   # + prefill chunks / decode attention
    assert p.latency_s * 1e6 == pytest.approx(expected)
    assert p.low_s * 1e6 == pytest.approx(np.array(expected) * 0.5)
    assert p.high_s * 1e6 == pytest.approx(np.array(expected) * 2.0)
    # per kernel model, each iteration's change with that model's launches at their bound: the bf16 linears and
    # the LM head share the gemm model (4 L + 1 launches), each launch moves by -0.5 / +1 us
    assert sorted(p.family_low_s) == ["attention_decode", "attention_prefill", "gemm", "rmsnorm", "silu_mul"]
    assert p.family_low_s["gemm"] * 1e6 == pytest.approx([-0.5 * (4 * L + 1)] * 4)
    assert p.family_high_s["rmsnorm"] * 1e6 == pytest.approx([2 * L + 1] * 4)
    assert p.family_high_s["attention_prefill"] * 1e6 == pytest.approx([2 * L, L, 0, 0])
    assert sum(p.family_high_s.values()) == pytest.approx(p.high_s - p.latency_s)


def test_price_gives_per_model_deltas_for_an_moe_model():
    from tests.test_e2e_moe import SMALL

    m = parse_config(SMALL, "small-moe")
    s = simulate([100, 100], [3, 3], 2, SchedulerConfig(max_num_batched_tokens=150, max_num_seqs=128), start="burst")
    p = price_schedule(s, m, "h100_sxm", 1, predict_fn=_unit_predict)
    L = SMALL["num_hidden_layers"]
    # one fused-MoE launch per layer (+1 us at its upper bound); no SiLU&Mul launch (no shared expert)
    assert "silu_mul" not in p.family_high_s
    assert p.family_high_s["fused_moe"] * 1e6 == pytest.approx([L] * len(p.latency_s))
    assert sum(p.family_high_s.values()) == pytest.approx(p.high_s - p.latency_s)
    assert sum(p.family_low_s.values()) == pytest.approx(p.low_s - p.latency_s)


def test_serving_intervals_add_family_shifts_in_quadrature():
    from synperf.serving._deps import quadrature_bounds

    lat = np.array([1.0, 2.0])
    deltas = {"a": (np.array([-0.3, -0.1]), np.array([0.3, 0.0])), "b": (np.array([0.0, -0.3]), np.array([0.0, 0.4]))}
    # sum: a shifts -0.4 / +0.3, b -0.3 / +0.4 -> 3 - 0.5, 3 + 0.5 (a 3-4-5 triangle), not 3 -/+ 0.7 at once
    assert quadrature_bounds(np.sum, lat, deltas) == pytest.approx((2.5, 3.5))
    # max: a moves it -0.1 / 0, b -0.3 / +0.4 -> 2 - sqrt(0.1), 2 + 0.4
    assert quadrature_bounds(np.max, lat, deltas) == pytest.approx((2.0 - np.sqrt(0.1), 2.4))


def test_seen_flags_come_from_the_models_training_gpus(tmp_path):
    # a model folder without a recorded path (no attrs["training_gpus"]): its meta.json's train_gpus decide
    import json

    (tmp_path / "meta.json").write_text(json.dumps({"train_gpus": ["h100_sxm", "a100_sxm4_80gb"]}))

    def from_meta(family, params, gpu, **kw):
        out = _unit_predict(family, params, gpu)
        out.attrs["model_dir"] = str(tmp_path)
        return out

    def recorded(family, params, gpu, **kw):
        out = _unit_predict(family, params, gpu)
        out.attrs["training_gpus"] = ["b200"] if family == "rmsnorm" else ["h100_sxm"]
        return out

    m = parse_config(TINY, "tiny")
    s = simulate([10], [2], 1)
    assert set(price_schedule(s, m, "h100_sxm", 1, predict_fn=from_meta).seen.values()) == {True}
    assert set(price_schedule(s, m, "l40s", 1, predict_fn=from_meta).seen.values()) == {False}
    seen = price_schedule(s, m, "h100_sxm", 1, predict_fn=recorded).seen
    assert seen["rmsnorm"] is False and seen["gemm"] is True
    # a predictor that names no training GPUs: unknown, never counted as unseen
    assert set(price_schedule(s, m, "h100_sxm", 1, predict_fn=_unit_predict).seen.values()) == {None}


def test_unknown_seen_flags_are_in_neither_scope():
    from synperf.serving.score import mape_table

    row = {"model": "m", "gemm_dtype": "fp8", "gpu": "h200_sxm", "tp": 1, "concurrency": 4, "isl": 128, "osl": 8,
           "measured_ttft_ms": 10.0, "measured_tpot_ms": 1.0, "ttft_mean_ms": 11.0, "tpot_mean_ms": 1.0,
           "aic_ttft_ms": np.nan, "aic_tpot_ms": np.nan}
    s = pd.DataFrame([{**row, "seen_gemm": None, "seen_rmsnorm": None},
                      {**row, "gpu": "h100_sxm", "seen_gemm": True, "seen_rmsnorm": True},
                      {**row, "gpu": "l40s", "seen_gemm": False, "seen_rmsnorm": False},
                      {**row, "gpu": "b200", "seen_gemm": False, "seen_rmsnorm": None},
                      {**row, "gpu": "h200_sxm", "seen_gemm": False, "seen_rmsnorm": False, "seen_fused_moe": False}])
    t = mape_table(s).set_index("scope")
    assert t.loc["fp8 rows, GPU seen by every family", "rows"] == 1
    # the dense l40s row has no fused_moe flag (a family it does not launch): unseen by every family it launches
    assert t.loc["fp8 rows, GPU unseen by every family", "rows"] == 2


def test_price_refuses_unmodelled_dtype_and_missing_collectives():
    m = parse_config(TINY, "tiny")
    s = simulate([10], [2], 1)
    with pytest.raises(InputError, match="gemm_dtype"):
        price_schedule(s, m, "h100_sxm", 1, gemm_dtype="nvfp4", predict_fn=_unit_predict)
    with pytest.raises(InputError, match="collective"):
        price_schedule(s, m, "h100_sxm", 2, predict_fn=_unit_predict)


def test_kv_cache_tokens_fp8_weights_and_fp8_cache_leave_more_room():
    from synperf.e2e._deps import default_registry

    m = parse_config({**TINY, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                      "num_hidden_layers": 80, "intermediate_size": 28672, "vocab_size": 128256}, "l70")
    reg = default_registry()
    bf16, fp8 = kv_cache_tokens(m, 2, "h100_sxm", reg), kv_cache_tokens(m, 2, "h100_sxm", reg, "fp8")
    # fp8 halves the ~34 GB of linear weights per GPU: ~34e9 more bytes, and its fp8 KV cache halves the
    # 2*80*4*128*2 = 163840 bytes a token of a bf16 cache
    assert 2 * (bf16 + 150_000) < fp8 < 2 * (bf16 + 260_000)
    assert 0 < bf16 < 30_000    # a bf16 70B model leaves ~3 GB of two 80 GB GPUs at a 0.9 utilization
    # the engine's share of memory sizes the cache: 0.1 x 80 GiB (H100 is HBM: its "80 GB" counts GiB) more at 1.0
    per_token = 2 * 80 * (8 // 2) * 128 * 2
    full = kv_cache_tokens(m, 2, "h100_sxm", reg, "bfloat16", 1.0)
    assert abs((full - bf16) - 0.1 * 80 * 2 ** 30 / per_token) <= 1


def test_usable_memory_reads_the_datasheet_figure_by_memory_family():
    from synperf.e2e._deps import default_registry
    from synperf.e2e.plan import usable_memory_gb

    reg = default_registry()
    # HBM: the datasheet's GB are GiB (nvidia-smi shows 81,559 MiB on an 80 GB H100); GDDR with ECC: 1e9 bytes
    # (46,068 MiB = 48.3e9 bytes on a 48 GB L40S)
    assert usable_memory_gb(reg, "h100_sxm") == pytest.approx(0.9 * 80 * 2 ** 30 / 1e9)
    assert usable_memory_gb(reg, "l40s", 1.0) == pytest.approx(48.0)


def test_an_fp8_checkpoint_prices_its_attention_on_an_fp8_kv_cache():
    m = parse_config(TINY, "tiny")
    s = simulate([100, 100], [3, 3], 2, SchedulerConfig(max_num_batched_tokens=150, max_num_seqs=128), start="burst")
    seen = {}

    def recording(family, params, gpu, **kw):
        if family.startswith("attention"):
            seen.setdefault(family, set()).update(params["kv_cache_dtype"])
        return _unit_predict(family, params, gpu)

    price_schedule(s, m, "h100_sxm", 1, gemm_dtype="fp8", predict_fn=recording)
    assert seen == {"attention_decode": {"fp8"}, "attention_prefill": {"fp8"}}
    seen.clear()
    price_schedule(s, m, "h100_sxm", 1, predict_fn=recording)
    assert seen == {"attention_decode": {"bfloat16"}, "attention_prefill": {"bfloat16"}}
    # vLLM's --kv-cache-dtype, given: fp8 linear layers over a bf16 cache (a bf16 checkpoint quantized at load time)
    seen.clear()
    price_schedule(s, m, "h100_sxm", 1, gemm_dtype="fp8", predict_fn=recording, kv_cache_dtype="bfloat16")
    assert seen == {"attention_decode": {"bfloat16"}, "attention_prefill": {"bfloat16"}}
    with pytest.raises(InputError, match="kv_cache_dtype 'fp4'"):
        price_schedule(s, m, "h100_sxm", 1, gemm_dtype="fp8", predict_fn=recording, kv_cache_dtype="fp4")


def test_kv_cache_tokens_follow_the_given_cache_dtype():
    from synperf.e2e._deps import default_registry

    m = parse_config({**TINY, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                      "num_hidden_layers": 80, "intermediate_size": 28672, "vocab_size": 128256}, "l70")
    reg = default_registry()
    fp8 = kv_cache_tokens(m, 2, "h100_sxm", reg, "fp8")
    bf16_cache = kv_cache_tokens(m, 2, "h100_sxm", reg, "fp8", kv_cache_dtype="bfloat16")
    # the same fp8 weights, a cache of 2 bytes an element instead of 1: half the tokens (floor division)
    assert bf16_cache in (fp8 // 2, fp8 // 2 - 1)
    with pytest.raises(InputError, match="kv_cache_dtype"):
        kv_cache_tokens(m, 2, "h100_sxm", reg, "fp8", kv_cache_dtype="int8")


def test_read_silicon_counts_every_row(tmp_path):
    rows = [("vllm", "meta-llama/Llama-3.1-70B", "h100_sxm", "fp8", "fp8", "agg", 1),
            ("vllm", "meta-llama/Llama-3.1-70B", "b200_sxm", "fp4", "nvfp4", "agg", 1),
            ("sglang", "meta-llama/Llama-3.1-70B", "h100_sxm", "fp8", "fp8", "agg", 1),
            ("vllm", "openai/gpt-oss-120b", "h100_sxm", "fp4", "nvfp4", "agg", 1),
            ("vllm", "Qwen/Qwen3-32B", "h100_sxm", None, None, "agg", 1),
            ("vllm", "Qwen/Qwen3-32B", "h100_sxm", "fp8", "fp8", "disagg", 1),
            ("vllm", "some/Unknown-7B", "h100_sxm", "fp8", "fp8", "agg", 1)]
    df = pd.DataFrame(rows, columns=["backend", "model_path", "system", "precision", "gemm_quant_mode", "mode",
                                     "pp_size"])
    df = df.assign(isl=1024, osl=128, batch_size=8, tp_size=2, silicon_ttft_ms=100.0, silicon_tpot_ms=10.0)
    f = tmp_path / "s.csv"
    df.to_csv(f, index=False)
    r = read_silicon(f)
    assert r["reason"].tolist() == ["", "fp4 weights", "other framework", "fp4 weights", "", "disaggregated serving",
                                    "unsupported model (no shipped config)"]
    assert r.loc[4, "gemm_dtype"] == "bfloat16" and r.loc[0, "gpu"] == "h100_sxm"
    c = counts_by_reason(r)
    assert c["rows"].sum() == len(df) and c.iloc[0].tolist() == ["priced", 2]
    df.drop(columns="osl").to_csv(f, index=False)
    with pytest.raises(InputError, match="osl"):
        read_silicon(f)


def test_a_measurement_the_file_carries_twice_is_priced_once_and_counted(tmp_path):
    from synperf.serving.silicon import DUPLICATE

    base = {"backend": "vllm", "model_path": "meta-llama/Llama-3.1-70B", "system": "h100_sxm", "precision": "fp8",
            "gemm_quant_mode": "fp8", "mode": "agg", "isl": 1024, "osl": 128, "batch_size": 8, "tp_size": 2,
            "pp_size": 1, "silicon_ttft_ms": 100.0, "silicon_tpot_ms": 10.0}
    df = pd.DataFrame([{**base, "id": "a", "silicon_data_source": "source_file=2026-03-25.csv"},
                       {**base, "id": "b", "silicon_data_source": "source_file=2026-04-06.csv"},   # the same run
                       {**base, "id": "c", "silicon_data_source": "db-dump", "silicon_ttft_ms": 101.0},  # a repeat
                       {**base, "id": "d", "silicon_data_source": "db-dump", "batch_size": 16}])
    f = tmp_path / "s.csv"
    df.to_csv(f, index=False)
    r = read_silicon(f)
    assert r["reason"].tolist() == ["", DUPLICATE, "", ""]
    c = counts_by_reason(r).set_index("reason")["rows"]
    assert c["priced"] == 3 and c[DUPLICATE] == 1


def test_score_silicon_writes_tables_and_mape_beside_the_baseline(tmp_path):
    from synperf.e2e._deps import default_registry
    from synperf.serving.score import score_silicon

    rows = pd.DataFrame({"backend": "vllm", "model_path": "meta-llama/Llama-3.1-70B", "system": "h200_sxm",
                         "precision": "fp8", "gemm_quant_mode": "fp8", "mode": "agg", "isl": [1024, 2048],
                         "osl": 64, "batch_size": 4, "tp_size": 1, "pp_size": 1, "silicon_ttft_ms": 100.0,
                         "silicon_tpot_ms": 10.0})
    rows = pd.concat([rows, rows.assign(backend="sglang")], ignore_index=True)
    f = tmp_path / "silicon.csv"
    rows.to_csv(f, index=False)
    base = tmp_path / "aic.csv"
    base.write_text("# aiconfigurator test\nmodel,gemm_dtype,gpu,tp,concurrency,isl,osl,aic_ttft_ms,aic_tpot_ms\n"
                    "llama-3.1-70b,fp8,h200_sxm,1,4,1024,64,150.0,12.0\n")
    seen = []

    def fake(family, params, gpu, **kw):
        seen.append((family, kw.get("experiment")))
        return pd.DataFrame({"predicted_latency_us": np.full(len(params), 10.0)})

    examples = Path(__file__).resolve().parents[1] / "examples" / "models"
    tabs = score_silicon(f, examples, tmp_path / "out", registry=default_registry(), collectives=None,
                         baseline_csv=base, predict_fn=fake)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "serving_error.json", "serving_mape.csv", "serving_rows.csv", "serving_scatter.png", "serving_scores.csv"]
    # two rows are too few for an 80% quantile (rank ceil(3 x 0.8) = 3 of 2): the shipped error is 0
    err = json.loads((tmp_path / "out" / "serving_error.json").read_text())
    assert err["serving_log_half_width"] == {"ttft": 0.0, "tpot": 0.0} and err["rows"] == 2
    # one predict per family over both rows; fp8 linear layers go to the vLLM FP8 experiment
    assert ("gemm_fp8", "gemm_fp8_aiconfigurator") in seen and len(seen) == len(set(seen))
    s = tabs["serving_scores"]
    assert len(s) == 2 and s["aic_ttft_ms"].notna().sum() == 1
    m = tabs["serving_mape"].set_index("scope")
    expected = ((s["ttft_mean_ms"] - 100).abs() / 100 * 100).mean()
    assert m.loc["all rows", "ttft_mape_pct"] == pytest.approx(expected)
    assert m.loc["all rows", "aic_ttft_mape_pct"] == pytest.approx(50.0)
    assert m.loc["all rows", "aic_rows"] == 1
    # this predictor gives no intervals: coverage is not computed, not 0
    assert s["ttft_low_ms"].isna().all() and np.isnan(m.loc["all rows", "ttft_coverage_pct"])
    assert tabs["serving_rows"].set_index("reason")["rows"].to_dict() == {"priced": 2, "other framework": 2}

    # the deploy models (trained on every measured GPU) never price a scored row
    def deploy(family, params, gpu, **kw):
        out = fake(family, params, gpu)
        out.attrs["model_set"] = "deploy" if family == "rmsnorm" else "evaluation"
        return out

    with pytest.raises(InputError, match=r"serving evaluation: the deploy models .*rmsnorm on h200_sxm"):
        score_silicon(f, examples, tmp_path / "out2", registry=default_registry(), collectives=None,
                      predict_fn=deploy)
    assert not (tmp_path / "out2").exists()


def test_serving_section_renders_the_tables(tmp_path):
    from synperf.reporting.serving_section import serving_lines

    assert serving_lines(str(tmp_path / "report.md")) == []
    d = tmp_path / "serving"
    d.mkdir()
    pd.DataFrame([{"scope": "all rows", "model": None, "gemm_dtype": None, "gpu": None, "tp": None, "rows": 3,
                   "ttft_mape_pct": 12.34, "tpot_mape_pct": 5.0, "aic_rows": 2, "aic_ttft_mape_pct": 20.0},
                  {"scope": "model/gpu/tp", "model": "m", "gemm_dtype": "fp8", "gpu": "h200_sxm", "tp": 2.0,
                   "rows": 3, "ttft_mape_pct": 12.34, "tpot_mape_pct": 5.0, "aic_rows": 0}]
                 ).to_csv(d / "serving_mape.csv", index=False)
    pd.DataFrame({"reason": ["priced", "MoE model"], "rows": [3, 7]}).to_csv(d / "serving_rows.csv", index=False)
    pd.DataFrame({"gpu": ["h200_sxm"], "seen_gemm": [False], "seen_rmsnorm": [False]}).to_csv(
        d / "serving_scores.csv", index=False)
    md = "\n".join(serving_lines(str(tmp_path / "report.md")))
    assert "| all rows | - | - | - | - | 3 | 12.3 | 5.0 | 2 |" in md.replace("–", "-")
    assert "| h200_sxm | unseen | unseen |" in md and "| MoE model | 7 |" in md


def test_plan_serving_adds_ttft_tpot_to_priced_single_stage_rows():
    from synperf.e2e._deps import default_registry
    from synperf.serving.simulate import plan_serving

    m = parse_config(TINY, "tiny")
    df = pd.DataFrame({"gpu": ["h100_sxm", "h100_sxm", "h200_sxm"], "tp": [1, 1, 1], "pp": [1, 2, 1],
                       "status": ["ok", "ok", "does not fit: needs 1 GB of 0 GB"]})
    out = plan_serving(df, m, 100, 10, 4, registry=default_registry(), predict_fn=_unit_predict)
    # the static batch that does not fit is served all the same (a server queues); pp 2 is not modelled
    assert out["ttft_ms"].notna().tolist() == [True, False, True]
    assert out["serving_status"].tolist()[:2] == ["ok", "not modelled: the serving simulator has no pipeline "
                                                        "parallelism (pp 1)"]
    # steady start, 40 requests of 100 + 10 tokens at concurrency 4: one request's prefill never shares an
    # iteration; every kernel model moves its launches by -0.5 / +1 us, so each family's shift up is twice its shift
    # down and so is their quadrature sum; narrower than every launch at its bound at once (x0.5 / x2)
    t, lo, hi = out.loc[0, ["ttft_ms", "ttft_low_ms", "ttft_high_ms"]]
    assert hi - t == pytest.approx(2 * (t - lo))
    assert 0.5 * t < lo < t < hi < 2 * t
    assert out.loc[0, "tpot_low_ms"] < out.loc[0, "tpot_ms"] < out.loc[0, "tpot_high_ms"]



def test_plan_serving_sizes_the_kv_cache_at_the_plans_memory_utilization(monkeypatch):
    from synperf.e2e._deps import default_registry
    from synperf.serving import simulate as S

    seen = []

    def recording(*args, **kw):
        seen.append((kw["gpu_memory_utilization"], kw["kv_cache_dtype"], kw["max_num_seqs"]))
        return {**dict.fromkeys(("ttft_mean_ms", "ttft_low_ms", "ttft_high_ms", "tpot_mean_ms", "tpot_low_ms",
                                 "tpot_high_ms"), 1.0),
                "max_num_batched_tokens": 8192, "max_num_seqs": kw["max_num_seqs"], "kv_cache_dtype": "fp8"}

    monkeypatch.setattr(S, "serve", recording)
    df = pd.DataFrame({"gpu": ["h100_sxm", "h100_sxm"], "tp": [1, 1], "pp": [1, 2], "status": ["ok", "ok"],
                       "gpu_memory_utilization": [0.7, 0.7]})
    out = S.plan_serving(df, parse_config(TINY, "tiny"), 100, 10, 4, registry=default_registry(),
                         kv_cache_dtype="fp8", max_num_seqs=3)
    assert seen == [(0.7, "fp8", 3)]     # the pp = 2 row is not served
    assert out["max_num_seqs"].tolist() == [3, pd.NA] and out["kv_cache_dtype"].tolist() == ["fp8", pd.NA]


def test_plan_serving_says_per_row_when_the_kv_cache_cannot_serve_and_stops_on_other_refusals():
    """A row whose KV cache holds nothing is "not served" on its own line; a refusal of the deployment's settings
    (vLLM's max_num_batched_tokens >= max_num_seqs) or of the predictor stops the whole plan."""
    from synperf.e2e._deps import default_registry
    from synperf.serving.scheduler import KVCapacityError
    from synperf.serving.simulate import plan_serving

    m = parse_config(TINY, "tiny")
    df = pd.DataFrame({"gpu": ["h100_sxm", "h100_sxm"], "tp": [1, 1], "pp": [1, 1], "status": ["ok", "ok"],
                       "gpu_memory_utilization": [0.9, 0.01]})    # 0.8 GB minus the 4 GB allowance: no KV block
    out = plan_serving(df, m, 100, 10, 4, registry=default_registry(), predict_fn=_unit_predict)
    assert out["serving_status"].iloc[0] == "ok"
    assert out["serving_status"].iloc[1].startswith("not served: scheduler: kv_cache_tokens = -")
    assert np.isnan(out["ttft_ms"].iloc[1])
    with pytest.raises(InputError, match=r"max_num_batched_tokens \(512\) must be greater than or equal to "
                                         r"max_num_seqs \(1024\), .*; max_num_seqs: vLLM's default on h100_sxm") as e:
        plan_serving(df, m, 100, 10, 4, registry=default_registry(), predict_fn=_unit_predict,
                     max_num_batched_tokens=512)
    assert not isinstance(e.value, KVCapacityError)

    def untrained(table, *a, **kw):
        raise InputError("no trained model for family 'gemm' under models")

    with pytest.raises(InputError, match="no trained model"):
        plan_serving(df.iloc[:1], m, 100, 10, 4, registry=default_registry(), predict_fn=untrained)


def test_score_silicon_counts_rows_the_config_cannot_price(tmp_path):
    from synperf.e2e._deps import default_registry
    from synperf.serving.score import score_silicon

    rows = pd.DataFrame({"backend": "vllm", "model_path": "meta-llama/Llama-3.1-70B", "system": "h200_sxm",
                         "precision": "fp8", "gemm_quant_mode": "fp8", "mode": "agg", "isl": [1024], "osl": 64,
                         "batch_size": 4, "tp_size": 1, "pp_size": 1, "silicon_ttft_ms": 100.0,
                         "silicon_tpot_ms": 10.0})
    f = tmp_path / "silicon.csv"
    rows.to_csv(f, index=False)
    examples = Path(__file__).resolve().parents[1] / "examples" / "models"
    exps = {k: {} for k in ("gemm", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul")}
    tabs = score_silicon(f, examples, tmp_path / "out", registry=default_registry(), collectives=None,
                         predict_fn=_unit_predict, experiments=exps)
    assert tabs["serving_scores"].empty
    assert tabs["serving_rows"]["reason"].tolist() == ["no trained model in this config (gemm_fp8_aiconfigurator)"]
    assert (tmp_path / "out" / "serving_scatter.png").exists()


def test_mape_table_interval_coverage():
    from synperf.serving.score import mape_table

    s = pd.DataFrame({"model": "m", "gemm_dtype": "fp8", "gpu": "h100_sxm", "tp": 1, "concurrency": [1, 2, 4, 8],
                      "measured_ttft_ms": [10.0, 10.0, 10.0, 10.0], "ttft_mean_ms": 10.0,
                      "ttft_low_ms": [9.0, 11.0, 8.0, np.nan], "ttft_high_ms": [12.0, 12.0, 10.0, np.nan],
                      "measured_tpot_ms": 5.0, "tpot_mean_ms": 5.0, "tpot_low_ms": 4.0, "tpot_high_ms": 4.5,
                      "aic_ttft_ms": np.nan, "aic_tpot_ms": np.nan})
    m = mape_table(s).set_index("scope")
    assert m.loc["all rows", "ttft_coverage_pct"] == pytest.approx(200 / 3)   # 2 of the 3 rows with bounds
    assert m.loc["all rows", "tpot_coverage_pct"] == 0.0


def test_serving_intervals_take_the_simulator_error_of_the_other_gpus(tmp_path):
    from synperf.serving.error import fit_serving_error, read_serving_error, widen_scores, write_serving_error

    # five rows per GPU on three GPUs; kernel bounds +-10% (log 0.0953); measured off by a GPU-specific factor
    rng = np.random.default_rng(0)
    gpus = np.repeat(["a", "b", "c"], 5)
    off = {"a": 1.05, "b": 1.3, "c": 0.6}
    pred = rng.uniform(50, 200, len(gpus))
    meas = pred * np.array([off[g] for g in gpus]) * rng.uniform(0.98, 1.02, len(gpus))
    scores = pd.DataFrame({"gpu": gpus, "ttft_mean_ms": pred, "measured_ttft_ms": meas, "ttft_low_ms": pred / 1.1,
                           "ttft_high_ms": pred * 1.1, "tpot_mean_ms": pred / 10, "measured_tpot_ms": pred / 10,
                           "tpot_low_ms": np.nan, "tpot_high_ms": np.nan})
    w = widen_scores(scores)
    assert np.allclose(w["ttft_kernel_low_ms"], pred / 1.1)
    r = np.log(meas / pred)
    need = np.sqrt(np.clip(r ** 2 - np.log(1.1) ** 2, 0, None))
    for g in "abc":
        other = np.sort(need[gpus != g])
        c = other[int(np.ceil(11 * 0.8)) - 1]           # 9th smallest of the other 10 rows
        sel = (gpus == g)
        assert np.allclose(w.loc[sel, "ttft_serving_log_hw"], c)
        assert np.allclose(w.loc[sel, "ttft_high_ms"], pred[sel] * np.exp(np.hypot(np.log(1.1), c)))
    # GPU c (measured 0.6x) is outside: the other GPUs' errors are smaller than its own
    c_rows = w[w["gpu"] == "c"]
    assert (c_rows["measured_ttft_ms"] < c_rows["ttft_low_ms"]).all()
    # exact TPOT needs no width; a second pass keeps the kernel bounds it started from
    assert np.allclose(w["tpot_serving_log_hw"], 0.0)
    assert np.allclose(widen_scores(w)["ttft_high_ms"], w["ttft_high_ms"])
    # rows read back from a widened table and fresh rows (with kernel bounds of their own) widen alike
    from synperf.serving.error import kernel_bounds_only

    mixed = widen_scores(pd.concat([kernel_bounds_only(w.iloc[:10]), scores.iloc[10:]], ignore_index=True))
    assert np.allclose(mixed["ttft_kernel_high_ms"], pred * 1.1)
    assert np.allclose(mixed["ttft_high_ms"], w["ttft_high_ms"])
    err = fit_serving_error(scores)
    assert err["ttft"] == pytest.approx(np.sort(need)[int(np.ceil(16 * 0.8)) - 1]) and err["rows"] == 15
    path = tmp_path / "serving_error.json"
    write_serving_error(err, path)
    assert read_serving_error(path) == pytest.approx({"ttft": err["ttft"], "tpot": 0.0})
    path.write_text('{"serving_log_half_width": {"ttft": 0.2}}')
    with pytest.raises(InputError, match=r"serving_error.json: serving_log_half_width lacks 'tpot'"):
        read_serving_error(path)
    path.write_text('{"serving_log_half_width": {"ttft": 0.2, "tpot": "x"}}')
    with pytest.raises(InputError, match=r"serving_log_half_width.tpot = 'x': expected a log half-width in \[0, 20\]"):
        read_serving_error(path)
    # a misspelled metric or key is refused, never passed over; a width that would overflow the bounds too
    for text, message in (('{"serving_log_half_width": {"ttft": 0.2, "tpot": 0.1, "tpott": 3}}',
                           "serving_log_half_width: unknown key 'tpott' (did you mean 'tpot'?)"),
                          ('{"serving_log_halfwidth": {"ttft": 0.2, "tpot": 0.1}}',
                           "unknown key 'serving_log_halfwidth' (did you mean 'serving_log_half_width'?)"),
                          ('{"serving_log_half_width": {"ttft": 1e300, "tpot": 0.1}}', "ttft = 1e+300: expected")):
        path.write_text(text)
        with pytest.raises(InputError, match=re.escape(message)):
            read_serving_error(path)
