"""The workload generator against the SynPerf authors' own operator lists (pipeweave e2e/workload/*.json):
every one of the 25 files must be reproduced exactly from the HF config, the trace CSV and the parameters in
the file name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from synperf.e2e._deps import InputError
from synperf.e2e.model_config import load_model_config, parse_config
from synperf.e2e.workload import Request, generate, read_trace, schedule, to_oracle_format

# the authors' short names for a whole trace served as one merged sequence (policy "merged")
MERGED = {"vllm_a8": "arxiv_8", "vllm_a16": "arxiv_16", "vllm_s32": "splitwise_32"}
NAME = re.compile(r"^(?P<model>.+?)_(?P<trace>(vllm_)?[a-z]+_?\d+)_(?P<impl>fa[23])_tp(?P<tp>\d+)_pp(?P<pp>\d+)$")


def _oracle_files(public_data):
    files = sorted((public_data / "pipeweave/e2e/workload").glob("*.json"))
    assert len(files) == 25
    return files


def _case(public_data, path):
    m = NAME.match(path.stem)
    assert m, path.stem
    trace = m["trace"]
    policy = "merged" if trace in MERGED else "static"
    trace_file = public_data / "pipeweave/workload" / f"{MERGED.get(trace, trace)}.csv"
    model = load_model_config(public_data / "pipeweave/config" / f"{m['model']}.json")
    return model, read_trace(trace_file), policy, m["impl"], int(m["tp"]), int(m["pp"])


def _qk_norm_style(path):
    """The authors' two file versions: Qwen3 q/k norms lumped into rmsnorm (arxiv_16, splitwise_64) or omitted."""
    return "lump" if path.stem.startswith("Qwen3") and ("_arxiv_16_" in path.stem or "_splitwise_64_" in path.stem) \
        else "omit"


def test_all_25_oracles_exact(public_data):
    mismatches = []
    for path in _oracle_files(public_data):
        oracle = json.loads(path.read_text())
        model, reqs, policy, impl, tp, pp = _case(public_data, path)
        assert (oracle["tp_size"], oracle["pp_size"]) == (tp, pp)
        assert oracle["model"] == model.architecture
        assert oracle["model_params"] == {
            "hidden_size": model.hidden_size, "num_attention_heads": model.num_heads,
            "num_key_value_heads": model.num_kv_heads, "head_dim": model.head_dim,
            "intermediate_size": model.intermediate_size, "vocab_size": model.vocab_size,
            "num_hidden_layers": model.num_layers}
        wl = generate(model, reqs, tp=tp, pp=pp, policy=policy, prefill_impl=impl)
        got = [to_oracle_format(it, _qk_norm_style(path)) for it in wl.iterations]
        if len(got) != len(oracle["iterations"]):
            mismatches.append((path.name, "iterations", len(got), len(oracle["iterations"])))
            continue
        for g, o in zip(got, oracle["iterations"]):
            if g != o:
                mismatches.append((path.name, g["iteration"]))
                break
    assert mismatches == []


def test_oracle_spot_values(public_data):
    """Hand-read values of two files, so that a wrong rule cannot hide behind a wrong comparison."""
    path = public_data / "pipeweave/e2e/workload/Llama-3.1-70B_arxiv_16_fa3_tp8_pp1.json"
    model, reqs, policy, impl, tp, pp = _case(public_data, path)
    wl = generate(model, reqs, tp=tp, pp=pp, policy=policy, prefill_impl=impl)
    pre = to_oracle_format(wl.iterations[0])["operators"]
    gemm = {g["name"]: (g["M"], g["N"], g["K"], g["count"]) for g in pre["gemm"]}
    assert gemm["qkv_proj"] == (35152, (8 + 2 * 1) * 128, 8192, 80)  # 8 KV heads over 8 GPUs: 1 each
    assert gemm["lm_head"] == (16, 128256, 8192, 1)
    assert pre["communication"] == [{"name": "all_reduce", "type": "collective", "volume_bytes": 35152 * 8192 * 2,
                                     "count": 160}]
    assert len(wl.iterations) == 41 and wl.iterations[-1].kv_lengths[0] == 3846 + 40
    merged = public_data / "pipeweave/e2e/workload/Llama-3.1-70B_vllm_a16_fa3_tp4_pp2.json"
    model, reqs, policy, impl, tp, pp = _case(public_data, merged)
    wl = generate(model, reqs, tp=tp, pp=pp, policy=policy, prefill_impl=impl)
    assert wl.iterations[0].q_lengths == (35152,)
    send = [op for op in wl.iterations[1].ops if op.name == "send_recv"][0]
    assert (send.params["volume_bytes"], send.count) == (32768, 1)


def test_static_policy_with_max_batch_and_ragged_outputs():
    reqs = [Request(10, 3), Request(20, 1), Request(30, 2)]
    its = schedule(reqs, max_batch=2)
    assert its == [("prefill", (10, 20), (10, 20)),
                   ("decode", (1,), (11,)), ("decode", (1,), (12,)),   # request 2 is done after its prefill
                   ("prefill", (30,), (30,)), ("decode", (1,), (31,))]
    with pytest.raises(InputError, match="max_batch"):
        schedule(reqs, max_batch=0)
    with pytest.raises(InputError, match="policy"):
        schedule(reqs, policy="continuous")


def test_unmodelled_architectures_name_the_field():
    base = {"hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 4, "intermediate_size": 4096,
            "vocab_size": 1000}
    for extra, field in (({"kv_lora_rank": 512}, "kv_lora_rank"), ({"is_encoder_decoder": True}, "is_encoder_decoder"),
                         ({"use_sliding_window": True, "sliding_window": 4096}, "use_sliding_window"),
                         ({"sliding_window": 4096, "max_position_embeddings": 32768}, "sliding_window")):
        with pytest.raises(InputError, match=field):
            parse_config({**base, **extra})
    with pytest.raises(InputError, match="vocab_size"):
        parse_config({k: v for k, v in base.items() if k != "vocab_size"})
    # Qwen2-style: a window field that is switched off is full attention
    assert parse_config({**base, "sliding_window": 4096, "use_sliding_window": False}).num_layers == 4


@pytest.mark.parametrize("extra, message", [
    ({"model_type": "deepseek_v2", "n_routed_experts": 64, "first_k_dense_replace": 1},
     r"model_type='deepseek_v2' is not a modelled decoder family"),
    ({"n_routed_experts": 64, "n_shared_experts": 2}, r"n_routed_experts=64: this MoE layout"),
    ({"num_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 1}, r"first_k_dense_replace=1"),
    ({"num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 2}, r"decoder_sparse_step=2"),
    ({"model_type": "gpt2"}, r"model_type='gpt2'"),
    ({"architectures": ["FalconForCausalLM"]}, r"architectures\[0\]='FalconForCausalLM' is not modelled"),
    ({"model_type": "llama", "hidden_act": "gelu"}, r"hidden_act='gelu': only SiLU-gated MLPs"),
    ({"hidden_act": "gelu_pytorch_tanh"}, r"hidden_act='gelu_pytorch_tanh'"),
    ({"model_type": "llama", "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}},
     r"quantization_config \(quant_method='fp8'\): quantized models are not modelled"),
    ({"quantization_config": {"quant_method": "awq", "bits": 4}}, r"quantization_config \(quant_method='awq'\)"),
])
def test_config_fields_that_change_the_math_are_refused_by_name(extra, message):
    base = {"hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 4, "intermediate_size": 4096,
            "vocab_size": 1000}
    with pytest.raises(InputError, match=rf"^cfg: {message}"):
        parse_config({**base, **extra}, where="cfg")


def test_every_shipped_and_public_model_config_is_a_modelled_family(public_data):
    paths = sorted((public_data / "pipeweave" / "config").glob("*.json"))
    paths += sorted((Path(__file__).resolve().parent.parent / "examples" / "models").glob("*.json"))
    assert len(paths) >= 12
    for p in paths:
        m = load_model_config(p)
        assert m.architecture in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                                  "MiniMaxM2ForCausalLM"), p


def test_sharding_and_moe():
    mixtral = parse_config({"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
                            "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
                            "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2})
    assert (mixtral.num_experts, mixtral.num_experts_per_tok, mixtral.moe_intermediate_size) == (8, 2, 14336)
    sm = mixtral.shard(tp=4, pp=3)
    assert (sm.num_heads, sm.num_kv_heads, sm.moe_intermediate_size, sm.layers_per_stage) == (8, 2, 3584, (10, 11, 11))
    assert mixtral.shard(tp=16 // 2 * 2).num_kv_heads == 1
    wl = generate(mixtral, [Request(100, 2)], tp=2)
    kinds = {op.name: op for op in wl.iterations[0].ops}
    assert "gate_up_proj" not in kinds and kinds["gate"].params["N"] == 8
    assert kinds["experts"].params == {"num_tokens": 100, "hidden_size": 4096, "inter_size": 14336, "topk": 2,
                                       "num_experts": 8, "moe_tp_size": 2}
    qwen_moe = parse_config({"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16,
                             "num_hidden_layers": 24, "intermediate_size": 5632, "vocab_size": 151936,
                             "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
                             "shared_expert_intermediate_size": 5632})
    assert (qwen_moe.moe_intermediate_size, qwen_moe.shared_expert_intermediate_size) == (1408, 5632)
    with pytest.raises(InputError, match="num_attention_heads"):
        mixtral.shard(tp=3)


def test_read_trace_errors(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("num_prefill_tokens,output_tokens\n10,0\n")
    with pytest.raises(InputError, match="line 2"):
        read_trace(p)
    p.write_text("prompt,output_tokens\n10,2\n")
    with pytest.raises(InputError, match="num_prefill_tokens"):
        read_trace(p)
    # the row that is not a whole number is named, not the good row before it
    for bad in ("abc", "512.5"):
        p.write_text(f"num_prefill_tokens,output_tokens\n512,32\n{bad},32\n")
        with pytest.raises(InputError, match=rf"line 3: token counts must be integers, got \('?{bad}'?, 32\)"):
            read_trace(p)
    # rows one field longer than the header: pandas would shift every column (the first field becoming an index)
    p.write_text("num_prefill_tokens,output_tokens\n100,10,99\n200,20,98\n")
    with pytest.raises(InputError, match=rf"{p}: trace: line 2 has 3 fields, the header 2"):
        read_trace(p)
    p.write_text("num_prefill_tokens,output_tokens\n100,10\n200,20,98\n")
    with pytest.raises(InputError, match="line 3 has 3 fields, the header 2"):
        read_trace(p)
    # a repeated header name: pandas would rename the second to 'output_tokens.1' and read the first alone
    p.write_text("num_prefill_tokens,output_tokens,output_tokens\n100,10,20\n")
    with pytest.raises(InputError, match=rf"{p}: trace: column 'output_tokens' appears more than once in the header"):
        read_trace(p)
    p.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InputError, match=r"trace: not UTF-8 text \(invalid start byte\)"):
        read_trace(p)


@pytest.mark.parametrize("change, message", [
    ({"num_key_value_head": 8}, "config field 'num_key_value_head' is not read; did you mean 'num_key_value_heads'?"),
    ({"hidden_size": 1024.5}, "config field 'hidden_size' must be an integer, got 1024.5"),
    ({"sliding_window": "abc"}, "config field 'sliding_window' must be an integer, got 'abc'"),
    ({"num_local_experts": "abc"}, "config field 'num_local_experts' must be an integer, got 'abc'"),
    ({"torch_dtype": "bf16"}, "torch_dtype='bf16' (did you mean 'bfloat16'?): expected one of ['bfloat16', "
                              "'float16', 'float32']"),
    ({"torch_dtype": "bfloat16", "dtype": "float16"}, "torch_dtype='bfloat16' and dtype='float16' differ"),
    ({"hidden_size": -1024}, "config field 'hidden_size' must be >= 1, got -1024"),
    ({"num_key_value_heads": 32}, "num_key_value_heads=32 does not divide num_attention_heads=16 (grouped-query "
                                  "attention shares each KV head among a whole number of query heads)"),
    ({"num_hidden_layers": "4"}, "config field 'num_hidden_layers' must be an integer, got '4'"),
    ({"is_encoder_decoder": "false"}, "config field 'is_encoder_decoder' must be true or false, got 'false'"),
    ({"use_sliding_window": "false"}, "config field 'use_sliding_window' must be true or false, got 'false'"),
    ({"architectures": "LlamaForCausalLM"}, "config field 'architectures' must be a list of class names, got "
                                            "'LlamaForCausalLM'"),
    ({"max_position_embeddings": -1}, "config field 'max_position_embeddings' must be >= 1, got -1"),
    # an MoE config: a negative expert count is not a dense model; a Qwen-MoE expert's width is not the dense
    # intermediate_size; a share of experts per token or a shared expert's width that is not a whole count
    ({"num_experts": -4, "num_experts_per_tok": 2, "moe_intermediate_size": 512},
     "config field 'num_experts' must be >= 0, got -4"),
    ({"num_experts": 8, "num_experts_per_tok": 2}, "missing config field 'moe_intermediate_size'"),
    ({"num_experts": 8, "num_experts_per_tok": 0, "moe_intermediate_size": 512},
     "config field 'num_experts_per_tok' must be >= 1, got 0"),
    ({"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 512,
      "shared_expert_intermediate_size": 1536.7},
     "config field 'shared_expert_intermediate_size' must be an integer, got 1536.7"),
    ({"decoder_sparse_step": "abc"}, "config field 'decoder_sparse_step' must be an integer, got 'abc'"),
])
def test_config_values_that_would_be_guessed_are_refused(change, message):
    base = {"hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 4, "intermediate_size": 4096,
            "vocab_size": 1000}
    with pytest.raises(InputError) as e:
        parse_config({**base, **change}, where="cfg")
    assert str(e.value) == f"cfg: {message}"


def test_the_newer_dtype_field_names_the_weights_dtype():
    base = {"hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 4, "intermediate_size": 4096,
            "vocab_size": 1000}
    assert parse_config({**base, "dtype": "float16"}).dtype == "float16"
    assert parse_config(base).dtype == "bfloat16"
    assert parse_config({**base, "head_dim": None}).head_dim == 64   # null: the default, hidden / heads


def test_context_limit_and_qwen3_qk_norm(public_data):
    s32 = public_data / "pipeweave/e2e/workload/Qwen2.5-14B_vllm_s32_fa3_tp1_pp1.json"
    model, reqs, policy, impl, tp, pp = _case(public_data, s32)
    assert sum(r.prompt_tokens for r in reqs) == 33950
    wl = generate(model, reqs, tp=tp, pp=pp, policy=policy, prefill_impl=impl)
    assert wl.iterations[0].q_lengths == (32768 - 48,) and wl.iterations[-1].kv_lengths == (32767,)
    assert generate(model, reqs, policy=policy, max_model_len=None).iterations[0].q_lengths == (33950,)
    q3 = load_model_config(public_data / "pipeweave/config/Qwen3-32B.json")
    ops = {op.name: op for op in generate(q3, [Request(100, 2)], tp=2).iterations[0].ops}
    assert (ops["q_norm"].params == {"seq": 100 * 32, "dim": 128}
            and ops["k_norm"].params == {"seq": 100 * 4, "dim": 128})
    fmt = to_oracle_format(generate(q3, [Request(100, 2)], tp=2).iterations[0], "lump")
    assert fmt["operators"]["rmsnorm"]["count"] == 4 * 64 + 1
