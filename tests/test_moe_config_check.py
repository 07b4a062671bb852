"""The GPU check of suggested fused-MoE configs, run for correctness only under the Triton interpreter."""

import importlib.util
import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")   # before anything imports triton (its own jit helpers included)
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="triton is not installed (the kernels run on CPU with TRITON_INTERPRET=1)")


@pytest.mark.parametrize("stage", ["w13", "w2"])
def test_suggested_and_default_configs_agree(stage):
    from synperf.gpu.moe_config_check import run_pair

    shape = {"moe_stage": stage, "num_tokens": 24, "num_experts": 4, "topk": 2, "hidden_size": 64,
             "inter_size": 32}
    sugg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2, "num_warps": 2,
            "num_stages": 2}
    res = run_pair(shape, sugg, reps=1, warmup=0)
    assert res["max_abs_diff"] < 2e-2            # same GEMM, other tiling: fp16 rounding only
    assert res["default"] != res["suggested"]
    if not torch.cuda.is_available():
        assert res["default_us"] is None and res["speedup"] is None


def test_unknown_stage_is_rejected():
    from synperf.gpu.moe_config_check import run_pair

    with pytest.raises(ValueError, match="moe_stage='gate'"):
        run_pair({"moe_stage": "gate", "num_tokens": 4, "num_experts": 4, "topk": 1, "hidden_size": 32,
                  "inter_size": 16}, {}, reps=1, warmup=0)
