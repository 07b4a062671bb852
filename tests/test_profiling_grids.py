"""Sweep grids: the shipped files validate, expand to canonical points, fit the hour; bad files are named."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from synperf.data.io import InputError
from synperf.data.schema import conform, validate
from synperf.gpu.profiling import PROFILED_KERNELS
from synperf.gpu.profiling.grids import (
    REQUEST_FIELDS,
    SWEEPS_DIR,
    estimate_seconds,
    expand,
    load_grid,
    load_models,
    point_key,
    sweep_path,
)
from synperf.gpu.profiling.timing import TimingSettings

REPO = Path(__file__).resolve().parent.parent


def rows_of(points):
    rows = [{**{k: v for k, v in p.items() if k not in REQUEST_FIELDS}, "gpu": "h100_sxm", "implementation": "x",
             "latency_us": 1.0, "latency_stat": "median", "source": "synperf_profiler", "source_version": "t"}
            for p in points]
    return conform(pd.DataFrame(rows))


@pytest.mark.parametrize("kernel", PROFILED_KERNELS)
def test_shipped_grid_expands_to_canonical_points(kernel, registry):
    full = load_grid(sweep_path(kernel))
    smoke = load_grid(sweep_path(kernel), smoke=True)
    assert full.kernel == kernel and full.points and smoke.smoke
    assert len(smoke.points) < len(full.points) <= 5000
    keys = [point_key(p) for p in full.points]
    assert len(set(keys)) == len(keys)
    validate(rows_of(full.points), f"{kernel} grid", registry.ids)   # every kernel parameter is present
    assert {point_key(p) for p in smoke.points} <= set(keys)   # the smoke grid is a subset


def test_default_grids_fit_an_hour_per_gpu(registry):
    """The roofline estimate of all default sweeps on H100 and A100 stays under one hour (the issue's bound)."""
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())["profiling"]
    for gpu in ("h100_sxm", "a100_sxm4_80gb"):
        total = 0.0
        for kernel in cfg["kernels"]:
            if kernel == "gemm_fp8" and gpu == "a100_sxm4_80gb":
                continue
            grid = load_grid(sweep_path(kernel))
            total += estimate_seconds(grid.points, registry[gpu], TimingSettings.from_dict(cfg["timing"], grid.timing))
        assert 60 < total < 3600, (gpu, total)


def test_expansion_rules_follow_the_model_shapes():
    models = load_models(SWEEPS_DIR / "models.yaml")
    pts = expand("gemm", {"dtype": ["bfloat16"], "tp": [2], "layers": ["qkv", "o", "gate_up", "down"], "m": [8]},
                 {"llama3_8b": models["llama3_8b"]})
    # Llama-3 8B under TP 2: 16 query heads + 2 x 4 KV heads of 128; intermediate 14336 / 2
    assert [(p["n"], p["k"]) for p in pts] == [(3072, 4096), (4096, 2048), (14336, 4096), (4096, 7168)]
    att = expand("attention_decode", {"dtype": ["bfloat16"], "kv_cache_dtype": ["bfloat16"], "tp": [8],
                                      "batch_size": [4], "kv_len": [100, 1000], "max_kv_tokens": 1000,
                                      "page_size": 16}, {"qwen2_5_7b": models["qwen2_5_7b"],
                                                         "llama3_70b": models["llama3_70b"]})
    # Qwen2.5-7B has 28 heads: TP 8 does not divide them; Llama-3 70B: 64/8 query heads, 8 KV heads -> 1 per GPU
    assert [(p["num_heads"], p["num_kv_heads"], p["kv_len"], p["seq_len"]) for p in att] == [(8, 1, 100, 1)]
    moe = expand("fused_moe", {"dtype": ["bfloat16"], "parallel": [{"tp": 1, "ep": 8}, {"tp": 3, "ep": 1}],
                               "num_tokens": [16], "distribution": ["balanced"], "stage": ["full"],
                               "configs": ["default"]}, {"deepseek_v3": models["deepseek_v3"]})
    assert len(moe) == 1 and moe[0]["moe_ep_size"] == 8 and moe[0]["num_experts"] == 256
    with pytest.raises(InputError, match="has no `moe` block"):
        expand("fused_moe", {"dtype": ["bfloat16"], "parallel": [{"tp": 1, "ep": 1}], "num_tokens": [1],
                             "distribution": ["balanced"], "stage": ["full"], "configs": ["default"]},
               {"llama3_8b": models["llama3_8b"]})


def write(tmp_path, doc, name="gemm.yaml"):
    (tmp_path / "models.yaml").write_text((SWEEPS_DIR / "models.yaml").read_text())
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


GOOD = {"kernel": "gemm", "models": ["llama3_8b"],
        "grid": {"dtype": ["bfloat16"], "tp": [1], "layers": ["qkv"], "m": [1, 2]}}


def test_bad_grid_errors_name_the_file_and_key(tmp_path):
    p = write(tmp_path, {**GOOD, "grid": {**GOOD["grid"], "m": [1, -4]}})
    with pytest.raises(InputError) as err:
        load_grid(p)
    assert str(p) in str(err.value) and "grid/m/1" in str(err.value)

    p = write(tmp_path, {**GOOD, "grid": {**GOOD["grid"], "tokens": [1]}})
    with pytest.raises(InputError, match="'tokens' was unexpected"):
        load_grid(p)

    p = write(tmp_path, {**GOOD, "models": ["llama3_8b", "llama9_1t"]})
    with pytest.raises(InputError) as err:
        load_grid(p)
    assert str(p) in str(err.value) and "models/1" in str(err.value) and "llama9_1t" in str(err.value)

    p = write(tmp_path, {**GOOD, "smoke": {"grid": {"tp": [3]}}})
    with pytest.raises(InputError) as err:
        load_grid(p)
    assert "smoke/grid/tp/0" in str(err.value)

    p = write(tmp_path, {**GOOD, "timing": {"method": "cupti"}})
    with pytest.raises(InputError, match="timing/method"):
        load_grid(p)

    p = write(tmp_path, {**GOOD, "grid": {**GOOD["grid"], "tp": [8]}, "models": ["qwen2_5_7b"]})
    with pytest.raises(InputError, match="expands to no points"):
        load_grid(p)          # 28 heads: TP 8 does not divide them

    p = tmp_path / "broken.yaml"
    p.write_text("kernel: [gemm\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_grid(p)


def test_bad_models_file_is_named(tmp_path):
    p = write(tmp_path, GOOD)
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": {"m1": {"source": "x", "hidden_size": "big"}}}))
    with pytest.raises(InputError) as err:
        load_grid(p)
    assert "models.yaml" in str(err.value) and "models/m1/hidden_size" in str(err.value)


def test_timing_keys_of_both_schemas_match_the_settings():
    fields = set(TimingSettings.__dataclass_fields__)
    sweep = yaml.safe_load((REPO / "workflow/schemas/sweep.schema.yaml").read_text())
    config = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert set(sweep["$defs"]["timing"]["properties"]) == fields
    assert set(config["$defs"]["timing"]["properties"]) == fields
    timing_ref = {"$ref": "#/$defs/timing"}                  # profiling and characterization share one definition
    assert config["properties"]["profiling"]["properties"]["timing"] == timing_ref
    assert config["properties"]["characterize"]["properties"]["settings"]["properties"]["timing"]["$ref"] == (
        timing_ref["$ref"])
