"""Performance ceiling: P80 training settings, gap tables, default-latency recovery, leave-one-GPU-out guard,
vLLM config files (format, legality, loader) and the suggest-moe-config CLI on a GPU without measurements."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from conftest import GPUS, train_tiny_model

from synperf.data.io import InputError
from synperf.evaluation import ceiling as C
from synperf.model import moe_configs as M


# --------------------------------------------------------------------------------------------- vLLM format
def test_file_name_follows_vllm():
    assert M.device_file_name(8, 14336, "NVIDIA H200") == "E=8,N=14336,device_name=NVIDIA_H200.json"
    assert (M.device_file_name(64, 1408, "NVIDIA H100 80GB HBM3", "fp8")
            == "E=64,N=1408,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json")
    with pytest.raises(InputError, match="int4"):
        M.device_file_name(8, 1, "x", "int4")


def test_check_config_names_the_bad_key():
    ok = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 16, "num_warps": 4,
          "num_stages": 3}
    assert M.check_config(ok) == ok
    with pytest.raises(InputError, match="BLOCK_SIZE_N=96 is not a power of two"):
        M.check_config({**ok, "BLOCK_SIZE_N": 96}, "M=4")
    with pytest.raises(InputError, match="missing num_stages"):
        M.check_config({k: v for k, v in ok.items() if k != "num_stages"})
    with pytest.raises(InputError, match="BLOCK_SIZE_M=512 outside"):
        M.check_config({**ok, "BLOCK_SIZE_M": 512})


def test_default_rule_is_the_profilers():
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (the profiler's kernel module imports it)")
    os.environ.setdefault("TRITON_INTERPRET", "1")   # no GPU here: the module's jit functions are interpreted
    from synperf.gpu.profiling.triton_kernels.fused_moe import default_config as kernel_default

    for t, e in [(1, 8), (8, 8), (9, 8), (4096, 64), (60, 60), (61, 60)]:
        assert M.default_config(t, e) == kernel_default(t, e)
    assert M.default_config(8, 8)["BLOCK_SIZE_M"] == 16 and M.default_config(9, 8)["BLOCK_SIZE_M"] == 64


def test_grid_and_fit(registry):
    g = M.grid_configs()
    assert len(g) == 5 * 4 * 3 * 4 * 2 * 4 == 1920
    big = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1, "num_warps": 8,
           "num_stages": 5}     # 5 * 512 * 256 * 2 B = 1.25 MiB of shared memory: fits no GPU
    assert M.smem_bytes(big) == 5 * 512 * 256 * 2
    assert not M.fits(big, registry["h200_sxm"])
    small = {**big, "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "num_stages": 3}  # 48 KiB
    assert M.fits(small, registry["h200_sxm"]) and M.fits(small, registry["t4"])
    legal = M.legal_candidates(g, registry["t4"])           # T4: 64 KiB per SM
    assert 0 < len(legal) < len(g)
    assert (legal.apply(lambda r: M.smem_bytes(r), axis=1) <= 64 * 1024).all()


def test_write_read_roundtrip(tmp_path):
    cfgs = {1: M.default_config(1, 8), 4096: M.default_config(4096, 8)}
    p = M.write_vllm_config(cfgs, tmp_path / "E=8,N=1,device_name=X.json")
    raw = json.loads(p.read_text())
    assert list(raw) == ["1", "4096"]
    assert M.read_vllm_config(p) == cfgs
    with pytest.raises(InputError, match="M=2: BLOCK_SIZE_K=48"):
        M.write_vllm_config({2: {**cfgs[1], "BLOCK_SIZE_K": 48}}, tmp_path / "bad.json")


# --------------------------------------------------------------------------------------------- gap tables
def test_ceiling_training_overrides_budget_and_loss():
    t = C.ceiling_training({"max_epochs": 100, "loss": "mre", "lr": 0.01},
                           {"quantile": 0.8, "training": {"max_epochs": 8}})
    assert t == {"max_epochs": 8, "loss": "pinball:0.8", "lr": 0.01}
    with pytest.raises(InputError, match="ceiling.quantile=1.2"):
        C.ceiling_training({}, {"quantile": 1.2})


def test_calibration_and_underperforming():
    g = pd.DataFrame({
        "experiment": ["e"] * 6, "kernel": ["k"] * 6, "gpu": ["a", "a", "a", "b", "b", "b"],
        "split": ["train", "test_seen", "test_seen", "unseen", "unseen", "unseen"],
        "gap": [-0.5, -0.2, 0.1, -0.05, 0.0, 0.3]})
    cal = C.calibration(g).set_index("split")
    assert cal.loc["test_seen", "rows"] == 2 and cal.loc["test_seen", "share_below_p80"] == 0.5
    assert cal.loc["unseen", "share_below_p80"] == pytest.approx(2 / 3)       # gap 0 counts as at/below
    u = C.underperforming(g, -0.1).set_index("gpu")
    assert u.loc["a", "underperforming"] == 2 and u.loc["b", "underperforming"] == 0
    w = C.worst_launches(g, 1)
    assert w["gap"].tolist() == [-0.5, -0.05]


def _sweep(rows):
    cols = ["gpu"] + C.SHAPE + list(M.CONFIG_COLUMNS) + ["latency_us"]
    return pd.DataFrame(rows, columns=cols)


def test_default_latency_recovered_from_improvement():
    shape = ["w13", 4096, 8, 2, 1024, 512]
    dflt = list(M.default_config(4096, 8).values())
    sweep = _sweep([["a40"] + shape + [128, 128, 64, 8, 8, 3] + [10.0],
                    ["a40"] + shape + dflt + [12.5],               # the default itself, measured
                    ["h20"] + shape + [128, 64, 64, 8, 8, 3] + [20.0]])
    vs = pd.DataFrame([["a40"] + shape + [20.0], ["h20"] + shape + [50.0]], columns=["gpu"] + C.SHAPE +
                      ["vs_default_pct"])
    d = C.default_latencies(sweep, vs).set_index("gpu")
    assert d.loc["a40", "best_us"] == 10.0
    assert d.loc["a40", "default_us"] == pytest.approx(12.5)           # 10 / (1 - 0.20)
    assert d.loc["a40", "check_rel_err"] == pytest.approx(0.0)
    assert d.loc["h20", "default_us"] == pytest.approx(40.0) and np.isnan(d.loc["h20", "check_rel_err"])
    assert d.loc["a40", "block_size_m"] == 64 and d.loc["a40", "block_size_k"] == 32


# ------------------------------------------------------------------------------------- leave one GPU out
def test_fold_guard_rejects_target_measurements():
    cands = pd.DataFrame({"gpu": ["a40", "h20"]})
    with pytest.raises(InputError, match="fold h20: the ranking model was trained on h20"):
        C.check_fold({"train_gpus": ["a40", "h20"]}, cands[cands.gpu == "a40"], "h20")
    with pytest.raises(InputError, match="fold h20: a candidate config comes from h20"):
        C.check_fold({"train_gpus": ["a40"]}, cands, "h20")
    C.check_fold({"train_gpus": ["a40"]}, cands[cands.gpu == "a40"], "h20")


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory, registry):
    """A small fused-MoE efficiency model (2 epochs) on synthetic sweep rows of a40 and h20, saved where
    :func:`synperf.api.predict` finds it: ``<dir>/fused_moe_pipeweave/v2-all`` (and ``<dir>/logo_l40/v2-all``)."""
    g = M.grid_configs().sample(40, random_state=0)
    rows = []
    for gpu in ("a40", "h20"):
        for t in (1, 64, 1024):
            for c in g.to_dict("records"):
                rows.append({"gpu": gpu, "num_tokens": t, "num_experts": 8, "topk": 2, "hidden_size": 1024,
                             "inter_size": 512, "moe_stage": "w13", "dtype": "bfloat16", "distribution": "random",
                             **{col: c[k] for k, col in zip(M.CONFIG_KEYS, M.CONFIG_COLUMNS)}})
    d = tmp_path_factory.mktemp("models")
    train_tiny_model("fused_moe", pd.DataFrame(rows), registry,
                     [d / exp / "v2-all" for exp in ("fused_moe_pipeweave", "logo_l40", "logo_h20")])
    return d


def test_suggest_logo_refuses_a_model_trained_on_the_target(tiny_models, registry):
    shape = ["w13", 64, 8, 2, 1024, 512]
    sweep = _sweep([["a40"] + shape + [64, 64, 64, 8, 4, 3] + [10.0], ["h20"] + shape + [32, 64, 64, 8, 4, 3] + [9.0],
                    ["l40"] + shape + [16, 64, 64, 8, 4, 3] + [8.0]])
    defaults = C.default_latencies(sweep, pd.DataFrame([[g] + shape + [10.0] for g in ("a40", "h20", "l40")],
                                                       columns=["gpu"] + C.SHAPE + ["vs_default_pct"]))
    with pytest.raises(InputError, match="fold h20: the ranking model was trained on h20"):
        C.suggest_logo(sweep, defaults, "h20", tiny_models, "logo_h20", "v2", registry)
    out = C.suggest_logo(sweep, defaults, "l40", tiny_models, "logo_l40", "v2", registry)
    # candidates: a40's and h20's configs for the shape plus the default, never l40's own (16, ...)
    assert len(out) == 1 and out.loc[0, "block_size_m"] in (64, 32)
    assert out.loc[0, "best_us"] == 8.0 and out.loc[0, "default_us"] == pytest.approx(8.0 / 0.9)


def test_cli_writes_a_file_vllm_loads_for_an_unmeasured_gpu(tiny_models, tmp_path):
    from synperf.cli import main

    rc = main(["suggest-moe-config", "--gpu", "h200_sxm", "--experts", "8", "--intermediate", "512",
               "--hidden", "1024", "--topk", "2", "--out-dir", str(tmp_path), "--models-dir", str(tiny_models),
               "--registry", str(GPUS), "--predictor", "mlp"])
    assert rc == 0
    path = tmp_path / "E=8,N=512,device_name=NVIDIA_H200.json"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    with open(path) as f:                                       # vLLM's get_moe_configs
        configs = {int(key): val for key, val in json.load(f).items()}
    assert sorted(configs) == list(M.VLLM_BATCH_SIZES)

    from synperf.data.hardware import load_registry

    h200 = load_registry(GPUS, use_measured=False)["h200_sxm"]
    for m, cfg in configs.items():
        assert set(cfg) == set(M.CONFIG_KEYS)
        for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps"):
            assert cfg[k] in (16, 32, 64, 128, 256) if k != "num_warps" else cfg[k] in (4, 8)
        assert cfg["GROUP_SIZE_M"] in (1, 8, 16, 32, 64) and cfg["num_stages"] in (2, 3, 4, 5)
        assert M.fits(cfg, h200)


def test_cli_rejects_bad_input(tmp_path, capsys):
    from synperf.cli import main

    assert main(["suggest-moe-config", "--gpu", "h200_sxm", "--experts", "2", "--intermediate", "512",
                 "--topk", "4", "--out-dir", str(tmp_path)]) == 2
    assert "suggest-moe-config: --topk = 4 exceeds --experts = 2" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- public data
def test_default_recovery_on_the_pipeweave_sweeps(public_data, registry, ingest_config):
    from synperf.data.ingest import pipeweave

    moe_gpu_map = ingest_config["pipeweave"]["moe_gpu_map"]
    t = pipeweave.ingest(public_data, registry, ingest_config["pipeweave"]).table
    t = t[t["kernel"] == "fused_moe"]
    sweep = t[["gpu"] + C.SHAPE + list(M.CONFIG_COLUMNS) + ["latency_us"]].astype(
        {c: "int64" for c in C.SHAPE[1:] + list(M.CONFIG_COLUMNS)})
    improve, vs_default = C.read_improvements(public_data, moe_gpu_map)
    assert 1700 <= len(vs_default) <= 6 * 288 and set(improve["gpu"]) == set(moe_gpu_map.values())
    d = C.default_latencies(sweep, vs_default)
    chk = d["check_rel_err"].dropna()
    assert len(chk) >= 70                      # shapes whose near-best sweep holds the default config
    assert chk.abs().max() < 1e-4              # best / (1 - pct/100) reproduces the measured default
    assert (d["default_us"] >= d["best_us"]).all()
    demo = C.read_demo(public_data, moe_gpu_map, registry)
    assert set(demo["gpu"]) == {"a100_sxm4_80gb", "a40", "h800_sxm", "l20", "l40"}
    assert (demo["gpu"] == "a40").sum() == 70


# ------------------------------------------------------------------------------------------------- report
def test_report_section_shows_the_tables(tmp_path):
    from synperf.reporting.ceiling_report import ceiling_section

    d = tmp_path / "ceiling"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({
        "quantile": 0.8, "underperform_gap": -0.1, "training": {"max_epochs": 10, "max_train_rows": 2000},
        "cpu_seconds": {"total": 190.0}, "default_recovery_check": {"shapes": 78, "max_abs_rel_err": 5e-7}}))
    pd.DataFrame({"experiment": ["gemm", "gemm"], "split": ["test_seen", "unseen"], "rows": [10, 20],
                  "share_below_p80": [0.774, 0.733]}).to_csv(d / "calibration.csv", index=False)
    pd.DataFrame({"experiment": ["e"], "kernel": ["fused_moe"], "gpu": ["a40"], "launches": [4], "underperforming": [1],
                  "share": [0.25], "median_gap": [-0.02]}).to_csv(d / "underperforming.csv", index=False)
    pd.DataFrame({"gpu": ["a40", "h20"], "shapes": [288, 286], "underperforming": [55, 1], "share": [0.191, 0.0035],
                  "mean_gap": [0.05, 0.15], "published": ["921 of 3,024 (30.4%)", "none"]}).to_csv(
        d / "moe_underperforming.csv", index=False)
    for n in ("worst_launches", "moe_demo_comparison", "moe_suggestion_summary"):
        pd.DataFrame().to_csv(d / f"{n}.csv", index=False)
    md = "\n".join(ceiling_section(str(d), "ceiling/gap_cdf.png"))
    assert "## Performance ceiling" in md and "![Gap to the P80 ceiling" in md
    assert "77.4" in md and "73.3" in md                 # calibration in %
    assert "921 of 3,024 (30.4%)" in md and "19.1" in md  # ours beside the published share
    assert "190 CPU-s" in md
