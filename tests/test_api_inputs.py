"""Impossible launches get a one-line InputError naming column and row, before any model is looked up."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synperf.api import launch_table, predict
from synperf.data.io import InputError


def _predict(kernel, params, gpu="h100_sxm", tmp_path=None):
    return predict(kernel, params, gpu, models_dir=tmp_path)


@pytest.mark.parametrize("kernel, params, match", [
    ("gemm", {"m": 0, "n": 4096, "k": 4096, "dtype": "bfloat16"}, r"params row 0: m = 0; expected an integer >= 1"),
    ("gemm", {"m": [1, 2, -8], "n": 4096, "k": 4096, "dtype": "bfloat16"}, r"row 2: m = -8"),
    ("gemm", {"m": [1, 2.5], "n": 4096, "k": 4096, "dtype": "bfloat16"}, r"row 1: m = 2.5; expected an integer"),
    ("gemm", {"m": np.array([1.0, np.nan]), "n": 4096, "k": 4096, "dtype": "bfloat16"}, r"row 1: m = nan"),
    ("gemm", {"m": 16, "n": 4096, "k": 4096, "dtype": "int4"}, r"dtype = 'int4'; expected one of"),
    ("rmsnorm", {"num_tokens": 0, "hidden_size": 4096, "dtype": "bfloat16"}, r"num_tokens = 0; expected an integer"),
    ("silu_mul", {"num_tokens": 8, "hidden_size": 0, "dtype": "bfloat16"}, r"hidden_size = 0"),
    ("attention_decode", {"batch_size": 1, "kv_len": 4096, "num_heads": 30, "num_kv_heads": 4, "head_dim": 128,
                          "dtype": "bfloat16"}, r"num_heads = 30 with num_kv_heads = 4"),
    ("attention_decode", {"batch_size": 1, "kv_len": 0, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
                          "dtype": "bfloat16"}, r"kv_len = 0"),
    ("attention_prefill", {"batch_size": 1, "seq_len": 512, "kv_len": 256, "num_heads": 32, "num_kv_heads": 8,
                           "head_dim": 128, "dtype": "bfloat16"}, r"kv_len = 256 < seq_len = 512"),
    ("fused_moe", {"num_tokens": 16, "hidden_size": 4096, "inter_size": 14336, "topk": 0, "num_experts": 8,
                   "dtype": "bfloat16"}, r"topk = 0"),
])
def test_impossible_launches_are_refused(kernel, params, match, tmp_path):
    with pytest.raises(InputError, match=match):
        _predict(kernel, params, tmp_path=tmp_path)


def test_fp8_on_a_gpu_without_fp8_tensor_cores_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"dtype = 'fp8' on GPU 'a100_sxm4_80gb'; the GPU has no dense_fp8_tflops"):
        _predict("gemm_fp8", {"m": 16, "n": 4096, "k": 4096, "dtype": "fp8"}, gpu="a100_sxm4_80gb", tmp_path=tmp_path)


def test_arrays_and_series_are_accepted_like_lists(registry):
    lists = launch_table("gemm", {"m": [1, 2, 3], "n": [64, 64, 128], "k": 4096, "dtype": "bfloat16"}, "h100_sxm",
                         registry)
    arrays = launch_table("gemm", {"m": np.array([1, 2, 3]), "n": pd.Series([64, 64, 128]), "k": 4096,
                                   "dtype": "bfloat16"}, "h100_sxm", registry)
    pd.testing.assert_frame_equal(lists, arrays)
    assert lists["m"].tolist() == [1, 2, 3] and lists["n"].tolist() == [64, 64, 128]
    frame = launch_table("gemm", pd.DataFrame({"m": [7], "n": [8], "k": [9], "dtype": ["bfloat16"]}, index=[42]),
                         "h100_sxm", registry)
    assert frame["m"].tolist() == [7]


def test_valid_launches_still_pass(registry):
    t = launch_table("attention_prefill", {"batch_size": 2, "seq_len": 512, "kv_len": 8192, "num_heads": 28,
                                           "num_kv_heads": 4, "head_dim": 128, "dtype": "bfloat16"}, "h100_sxm",
                     registry)
    assert t["kv_len"].tolist() == [8192] and t["window_size"].tolist() == [0]


MOE = {"num_tokens": 16, "hidden_size": 4096, "inter_size": 14336, "topk": 2, "num_experts": 8, "dtype": "bfloat16"}
ATTN = {"batch_size": 1, "kv_len": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "dtype": "bfloat16"}
GEMM = {"m": 16, "n": 4096, "k": 4096, "dtype": "bfloat16"}


@pytest.mark.parametrize("kernel, params, match", [
    ("fused_moe", {**MOE, "ep_size": 2}, r"^params: unknown parameter 'ep_size' for fused_moe \(did you mean "
                                         r"'moe_ep_size'\?\); expected one of \[.*'moe_ep_size'"),
    ("attention_decode", {**ATTN, "window": 128}, r"^params: unknown parameter 'window' for attention_decode \(did "
                                                  r"you mean 'window_size'\?\);"),
    ("gemm", {**GEMM, "window_size": 128}, r"^params: unknown parameter 'window_size' for gemm; expected one of "
                                           r"\['dtype', 'implementation', 'm', 'n', 'k', 'batch'\]$"),
    ("gemm", {**GEMM, "gpu": "a100_sxm4_80gb"}, r"unknown parameter 'gpu' for gemm"),
    ("fused_moe", {**MOE, "topk": 9}, r"^params row 0: topk = 9 exceeds num_experts = 8; a token picks topk distinct"),
    ("fused_moe", {**MOE, "moe_ep_size": [1, 16]}, r"^params row 1: moe_ep_size = 16 exceeds num_experts = 8"),
    ("fused_moe", {**MOE, "moe_ep_size": 3}, r"^params row 0: moe_ep_size = 3 does not divide num_experts = 8"),
    ("fused_moe", {**MOE, "moe_tp_size": [2, 4096]}, r"^params row 1: moe_tp_size = 4096 does not divide inter_size "
                                                     r"= 14336"),
    ("fused_moe", {**MOE, "distribution": "powerlaw_1.2"}, r"^params row 0: distribution = 'powerlaw_1.2' \(did you "
                                                           r"mean 'power_law_<alpha>'\?\); expected one of"),
    ("fused_moe", {**MOE, "distribution": ["balanced", "zipf"]}, r"^params row 1: distribution = 'zipf'; expected "
                                                                 r"one of \['balanced', 'random', 'power_law_<alpha>'"),
    ("fused_moe", {**MOE, "moe_stage": "w3"}, r"moe_stage = 'w3' \(did you mean 'w13'\?\); expected"),
    ("attention_decode", {**ATTN, "kv_cache_dtype": "int8"}, r"kv_cache_dtype = 'int8'; expected one of"),
    ("gemm", {**GEMM, "dtype": "bfloat"}, r"dtype = 'bfloat' \(did you mean 'bfloat16'\?\);"),
    ("gem", GEMM, r"^unknown kernel 'gem' \(did you mean 'gemm'\?\);"),
])
def test_unknown_keys_and_values_are_refused_with_the_closest_name(kernel, params, match, tmp_path):
    with pytest.raises(InputError, match=match):
        _predict(kernel, params, tmp_path=tmp_path)


def test_a_table_may_carry_empty_columns_of_other_families(registry):
    t = launch_table("gemm", pd.DataFrame({**{k: [v] for k, v in GEMM.items()}, "kv_cache_dtype": [None]}),
                     "h100_sxm", registry)
    assert t["m"].tolist() == [16]
    with pytest.raises(InputError, match="unknown parameter 'kv_cache_dtype' for gemm"):
        launch_table("gemm", pd.DataFrame({**{k: [v] for k, v in GEMM.items()}, "kv_cache_dtype": ["fp8"]}),
                     "h100_sxm", registry)


def test_valid_moe_routings_pass(registry):
    t = launch_table("fused_moe", {**MOE, "moe_ep_size": [1, 2, 8], "distribution": ["balanced", "power_law_1.2",
                                                                                     "random"]}, "h100_sxm", registry)
    assert t["moe_ep_size"].tolist() == [1, 2, 8] and t["distribution"].tolist() == ["balanced", "power_law_1.2",
                                                                                     "random"]


def test_an_unknown_or_untrained_feature_set_is_refused(tmp_path):
    (tmp_path / "gemm" / "v1-all").mkdir(parents=True)
    (tmp_path / "gemm" / "v1-all" / "meta.json").write_text("{}")
    with pytest.raises(InputError, match=r"^feature_set = 'v3'; expected one of \['v1', 'v2', 'v2_launch', "
                                         r"'v2_paper'\]$"):
        predict("gemm", GEMM, "h100_sxm", models_dir=tmp_path, feature_set="v3")
    with pytest.raises(InputError, match=r"v2-all: feature_set = 'v2' has no trained model; trained: \['v1'\]$"):
        predict("gemm", GEMM, "h100_sxm", models_dir=tmp_path, feature_set="v2")


@pytest.mark.parametrize("kernel, params, experiment", [
    ("gemm", {**GEMM, "dtype": "float32"}, "gemm_fp32_neusight"),
    # the gemm experiment trains on Vidur's A40 float16 rows beside the bfloat16 ones, so float16 goes to it too
    ("gemm", {**GEMM, "dtype": "float16"}, "gemm"),
    ("gemm", GEMM, "gemm"),
    ("gemm_fp8", {**GEMM, "dtype": "fp8"}, "gemm_fp8"),
    ("gemm_fp8", {**GEMM, "dtype": "fp8_block"}, "gemm_fp8_aiconfigurator"),
    ("fused_moe", {**MOE, "dtype": ["bfloat16", "fp8"]}, "fused_moe"),
    # RMSNorm's features see the dtype only through its element size: bfloat16 is priced like float16
    ("rmsnorm", {"num_tokens": 8, "hidden_size": 4096, "dtype": "bfloat16"}, "rmsnorm"),
])
def test_the_dtype_chooses_the_experiment_trained_on_it(kernel, params, experiment, tmp_path):
    # no model is trained under tmp_path: the refusal names the experiment folder the launch was routed to
    with pytest.raises(InputError, match=rf"^{tmp_path / experiment}: no trained model"):
        _predict(kernel, params, tmp_path=tmp_path)


@pytest.mark.parametrize("kernel, params, experiment, match", [
    ("gemm", {**GEMM, "m": [1, 2], "dtype": ["bfloat16", "float32"]}, "gemm",
     r"^params row 1: dtype = 'float32', but experiment 'gemm' was trained on \['bfloat16', 'float16'\]; experiments "
     r"of gemm trained on float32: \['gemm_fp32_neusight'\]$"),
    ("gemm", GEMM, "rmsnorm", r"^experiment 'rmsnorm' models rmsnorm, not gemm; experiments of gemm: "
                              r"\['gemm', 'gemm_fp16_vidur', 'gemm_fp32_neusight'\]$"),
    ("gemm", {**GEMM, "m": [1, 2], "dtype": ["bfloat16", "float32"]}, None,
     r"^params: dtypes \['bfloat16', 'float32'\] have no one experiment of gemm trained on all of them .*call "
     r"predict once per dtype$"),
    ("rmsnorm", {"num_tokens": 8, "hidden_size": 4096, "dtype": "float32"}, None,
     r"^params row 0: dtype = 'float32': no model of rmsnorm was trained on it; trained: "
     r"\{'rmsnorm': \['float16'\]\}$"),
    ("fused_moe", {**MOE, "dtype": "fp8"}, "fused_moe_pipeweave",
     r"^params row 0: dtype = 'fp8', but experiment 'fused_moe_pipeweave' was trained on \['bfloat16'\]; experiments "
     r"of fused_moe trained on fp8: \['fused_moe'\]$"),
])
def test_a_dtype_no_model_was_trained_on_is_refused(kernel, params, experiment, match, tmp_path):
    with pytest.raises(InputError, match=match):
        predict(kernel, params, "h100_sxm", experiment=experiment, models_dir=tmp_path)


def test_the_experiments_of_the_models_config_route_the_dtype_not_the_checkouts(tmp_path):
    # a config whose gemm experiment is a float32 GEMM: with its experiments block a float32 launch goes to that
    # (here absent) model, where the checkout's config, whose gemm is bfloat16/float16, refuses it
    launch = {**GEMM, "dtype": "float32"}
    with pytest.raises(InputError, match=r"experiment 'gemm' was trained on \['bfloat16', 'float16'\]"):
        predict("gemm", launch, "h100_sxm", experiment="gemm", models_dir=tmp_path)
    with pytest.raises(InputError, match=rf"^{tmp_path / 'gemm'}: no trained model"):
        predict("gemm", launch, "h100_sxm", experiment="gemm", models_dir=tmp_path,
                experiments={"gemm": {"kernel": "gemm", "dtypes": ["float32"]}})
    # a name neither the config nor the models folder knows is an unknown experiment, not a missing model
    with pytest.raises(InputError, match=rf"^unknown experiment 'gemm_nope': not in the config's experiments and no "
                                         rf"folder {tmp_path / 'gemm_nope'}; experiments of gemm: \['gemm'\]$"):
        predict("gemm", GEMM, "h100_sxm", experiment="gemm_nope", models_dir=tmp_path,
                experiments={"gemm": {"kernel": "gemm", "dtypes": ["bfloat16"]}})
    # a deploy-only install of an experiment the config does not list is a known one (its missing model is named)
    (tmp_path / "deploy" / "gemm_nope").mkdir(parents=True)
    with pytest.raises(InputError, match=r"gemm_nope: no trained model"):
        predict("gemm", GEMM, "h100_sxm", experiment="gemm_nope", models_dir=tmp_path,
                experiments={"gemm": {"kernel": "gemm", "dtypes": ["bfloat16"]}})


def test_progress_lines_in_a_log_are_one_per_quarter(capsys, monkeypatch):
    """Without tqdm and with stderr a file (a log), progress is whole lines, not carriage-return redraws."""
    import builtins

    from synperf.api import progress_reporter

    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name == "tqdm":
            raise ImportError("no tqdm")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    cb = progress_reporter("pricing", "configurations", min_total=6)
    for done in range(1, 21):
        cb(done, 20)
    err = capsys.readouterr().err
    assert "\r" not in err
    assert err.splitlines() == [f"pricing: {d}/20 configurations" for d in (5, 10, 15, 20)]
    cb_small = progress_reporter("pricing", "configurations", min_total=6)
    cb_small(1, 5)
    assert capsys.readouterr().err == ""


def test_the_default_registry_is_parsed_once_per_version_of_its_files(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    from synperf import api

    root = Path(api.__file__).resolve().parent.parent
    yaml_copy = tmp_path / "gpus.yaml"
    shutil.copy(root / "config" / "gpus.yaml", yaml_copy)
    measured = tmp_path / "hardware"
    measured.mkdir()
    monkeypatch.setattr(api, "default_paths", lambda: {"registry": yaml_copy, "measured_dir": measured})
    first = api.default_registry()
    assert api.default_registry() is first  # the same object: no second parse
    # a changed file is read again: a GPU's SM count edited in the YAML shows in the next registry
    text = yaml_copy.read_text()
    sms = first["h100_sxm"].sm_count
    edited = text.replace(f"sm_count: {sms}", f"sm_count: {sms + 1}", 1)
    assert edited != text
    yaml_copy.write_text(edited + "\n")
    second = api.default_registry()
    assert second is not first
    assert sorted(g for g in first.ids if second[g].sm_count != first[g].sm_count) != []
