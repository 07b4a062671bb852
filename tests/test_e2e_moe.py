"""MoE layers in the e2e workload, the composer's launch rows and the serving simulator's pricing."""
from pathlib import Path

import pandas as pd
import pytest

from synperf.data.io import InputError
from synperf.e2e.compose import launches
from synperf.e2e.model_config import load_model_config, parse_config
from synperf.e2e.workload import Request, forward_ops, generate
from synperf.serving.silicon import read_silicon

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "models"
#: a small Qwen3-MoE-shaped config with a block-FP8 quantization_config (numbers chosen for hand arithmetic)
SMALL = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 1024,
         "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64, "num_hidden_layers": 6,
         "intermediate_size": 4096, "moe_intermediate_size": 512, "num_experts": 32, "num_experts_per_tok": 4,
         "vocab_size": 5000, "torch_dtype": "bfloat16",
         "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                 "weight_block_size": [128, 128]}}


def test_small_moe_layer_launches_by_hand():
    m = parse_config(SMALL, name="small")
    assert (m.num_experts, m.num_experts_per_tok, m.moe_intermediate_size, m.moe_dtype) == (32, 4, 512, "fp8_block")
    ops = {o.name: o for o in forward_ops(m.shard(tp=2), "prefill", (100, 28))}
    T = 128
    # attention block: QKV width (16/2 + 2 * 4/2) * 64 = 768, o_proj K = 8 * 64 = 512
    assert ops["qkv_proj"].params == {"type": "ColumnParallelLinear", "M": T, "N": 768, "K": 1024}
    assert ops["o_proj"].params == {"type": "RowParallelLinear", "M": T, "N": 1024, "K": 512}
    # router: replicated hidden x experts GEMM, once per layer
    assert ops["gate"].params == {"type": "ReplicatedLinear", "M": T, "N": 32, "K": 1024} and ops["gate"].count == 6
    # one fused-MoE launch per layer: full inter size, sharded by moe_tp_size = tp
    assert ops["experts"].params == {"num_tokens": T, "hidden_size": 1024, "inter_size": 512, "topk": 4,
                                     "num_experts": 32, "moe_tp_size": 2}
    assert ops["experts"].count == 6
    assert not {"gate_up_proj", "down_proj", "siluandmul"} & set(ops)
    # Qwen3 per-head q/k norms: rows = tokens x local heads
    assert ops["q_norm"].params == {"seq": T * 8, "dim": 64} and ops["k_norm"].params == {"seq": T * 2, "dim": 64}
    rows = launches(generate(m, [Request(100, 2)], tp=2))
    moe = rows[rows["family"] == "fused_moe"]
    assert set(moe["dtype"]) == {"fp8_block"} and set(moe["moe_ep_size"]) == {1}
    assert set(rows.loc[rows["family"] == "gemm", "dtype"]) == {"bfloat16"}


def test_tp_sharding_of_the_expert_width():
    m = parse_config(SMALL, name="small")
    assert m.shard(tp=4).moe_intermediate_size == 128
    with pytest.raises(InputError, match="moe_intermediate_size=512 is not divisible by tp=3"):
        parse_config({**SMALL, "num_attention_heads": 12, "num_key_value_heads": 3}).shard(tp=3)


def test_shipped_moe_configs():
    mm = load_model_config(EXAMPLES / "minimax-m2.5.json")
    assert (mm.num_layers, mm.hidden_size, mm.num_heads, mm.num_kv_heads, mm.head_dim, mm.num_experts,
            mm.num_experts_per_tok, mm.moe_intermediate_size, mm.shared_expert_intermediate_size, mm.vocab_size,
            mm.moe_dtype, mm.qk_norm_type) == (62, 3072, 48, 8, 128, 256, 8, 1536, 0, 200064, "fp8_block", "per_layer")
    ops = {o.name: o for o in forward_ops(mm.shard(tp=4), "decode", (1, 1))}
    assert ops["q_norm"].params == {"seq": 2, "dim": 12 * 128} and ops["k_norm"].params == {"seq": 2, "dim": 2 * 128}
    q = load_model_config(EXAMPLES / "qwen3-235b-a22b-fp8.json")
    assert (q.num_layers, q.hidden_size, q.num_heads, q.num_kv_heads, q.num_experts, q.num_experts_per_tok,
            q.moe_intermediate_size, q.vocab_size, q.moe_dtype) == (94, 4096, 64, 4, 128, 8, 1536, 151936, "fp8_block")


def test_mla_and_other_quantization_refused_by_name():
    kimi = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
            "text_config": {"kv_lora_rank": 512, "num_hidden_layers": 61}}
    with pytest.raises(InputError, match=r"^kimi: kv_lora_rank=512: MLA attention not modelled"):
        parse_config(kimi, where="kimi")
    with pytest.raises(InputError, match="quant_method='fp8'"):  # block size the family was not measured with
        parse_config({**SMALL, "quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 64]}})
    dense = {k: v for k, v in SMALL.items() if k not in ("num_experts", "num_experts_per_tok", "moe_intermediate_size")}
    with pytest.raises(InputError, match="quantized models are not modelled"):
        parse_config({**dense, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]})


def test_dense_workload_unchanged():
    m = load_model_config(EXAMPLES / "qwen3-32b.json")
    assert m.moe_dtype == "" and m.qk_norm_type == "per_head"
    ops = [(o.kind, o.name, o.params, o.count) for o in forward_ops(m.shard(tp=2), "prefill", (300,))]
    assert [o[1] for o in ops] == ["qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head", "attention",
                                   "rmsnorm", "q_norm", "k_norm", "siluandmul", "all_reduce"]
    assert ops[2][2] == {"type": "MergedColumnParallelLinear", "M": 300, "N": 25600, "K": 5120}
    assert ops[7][2] == {"seq": 300 * 32, "dim": 128}


def test_silicon_moe_rows_counted_and_priced():
    p = Path(__file__).resolve().parents[2] / "shared" / "public-data" / "aiconfigurator" / "silicon_sample_public.csv"
    if not p.exists():
        pytest.skip(f"{p} absent (public data)")
    d = read_silicon(p)
    assert len(d) == 4563
    kimi = d[d["model_path"] == "moonshotai/Kimi-K2.5"]
    assert set(kimi["reason"]) - {"other framework", "disaggregated serving"} == {"MLA attention not modelled"}
    moe = d[(d["reason"] == "") & d["model"].isin(["minimax-m2.5", "qwen3-235b-a22b-fp8"])]
    assert len(moe) > 0 and (moe["moe_tp_size"] == moe["tp_size"]).all() and (moe["moe_ep_size"] == 1).all()
    ep = d[(d["model"] == "minimax-m2.5") & (d["moe_ep_size"] > 1) & (d["backend"] == "vllm") & (d["mode"] == "agg")
           & (d["precision"] == "fp8")]
    assert len(ep) and set(ep["reason"]) == {"expert parallel or attention data parallel (MoE TP != TP)"}
    assert isinstance(d, pd.DataFrame)
