"""The sweep runner: shards, resume after a kill, skip-and-continue, atomic merge, the GPU lock; and every
launcher end to end on the CPU (tools/device_smoke.py with tiny points)."""

import importlib.util
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from synperf.data.schema import validate
from synperf.gpu.profiling import ProfilingError
from synperf.gpu.profiling.grids import point_key
from synperf.gpu.profiling.lock import gpu_lock
from synperf.gpu.profiling.sweep import FatalDeviceError, latest_records, merge_shards, read_shards, run_sweep

REPO = Path(__file__).resolve().parent.parent


def points(n=8):
    return [{"kernel": "rmsnorm", "dtype": "bfloat16", "num_tokens": 2 ** i, "hidden_size": 4096, "backend": "auto"}
            for i in range(n)]


class FakeMeasure:
    """Latency 1 µs per token; raises what ``fail`` maps a token count to."""

    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail or {}

    def __call__(self, p):
        self.calls.append(p["num_tokens"])
        exc = self.fail.get(p["num_tokens"])
        if exc is not None:
            raise exc
        lat = float(p["num_tokens"])
        return ({"implementation": "fake_rmsnorm", "latency_us": lat, "latency_p10_us": lat * 0.9,
                 "latency_p90_us": lat * 1.1, "n_samples": 10},
                {"timing_method": "fake", "nvml_before": {"sm_clock_mhz": 1980}, "nvml_after": {"sm_clock_mhz": 1900}})


def merge(shards, pts, tmp_path, fp="fp1"):
    return merge_shards(shards, pts, fingerprint=fp, gpu="h100_sxm", kernel="rmsnorm", source_version="test",
                        source_file="h100_sxm/rmsnorm.parquet", out_parquet=tmp_path / "rmsnorm.parquet",
                        out_provenance=tmp_path / "rmsnorm.provenance.json", meta={"torch": "x"},
                        gpu_ids={"h100_sxm"})


def test_killed_sweep_resumes_without_redoing_points(tmp_path):
    shards = tmp_path / ".shards" / "rmsnorm"
    pts = points(8)
    first = FakeMeasure(fail={16: KeyboardInterrupt()})          # the job is killed at the 5th point
    with pytest.raises(KeyboardInterrupt):
        run_sweep(pts, first, shards, fingerprint="fp1")
    assert first.calls == [1, 2, 4, 8, 16]
    assert sorted(r["point"]["num_tokens"] for r in read_shards(shards)) == [1, 2, 4, 8]
    assert not (tmp_path / "rmsnorm.parquet").exists()

    second = FakeMeasure()
    stats = run_sweep(pts, second, shards, fingerprint="fp1")
    assert second.calls == [16, 32, 64, 128]                     # only the missing points
    assert (stats.already_done, stats.measured, stats.skipped) == (4, 4, 0)
    df = merge(shards, pts, tmp_path)
    assert len(df) == 8 and list(df["latency_us"]) == [float(2 ** i) for i in range(8)]
    validate(pd.read_parquet(tmp_path / "rmsnorm.parquet"), "merged", {"h100_sxm"})
    assert len(list(shards.glob("*.jsonl"))) == 2                # one shard per run

    third = FakeMeasure()
    assert run_sweep(pts, third, shards, fingerprint="fp1").already_done == 8 and third.calls == []
    fourth = FakeMeasure()                                       # other timing settings or libraries: redo
    run_sweep(pts[:2], fourth, shards, fingerprint="fp2")
    assert fourth.calls == [1, 2]


def test_failures_are_skipped_with_reasons_and_the_sweep_goes_on(tmp_path):
    shards = tmp_path / "s"
    oom = RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")
    freed = []
    m = FakeMeasure(fail={4: oom, 32: ValueError("bad config")})
    stats = run_sweep(points(8), m, shards, fingerprint="fp1", on_error=freed.append)
    assert m.calls == [2 ** i for i in range(8)] and (stats.measured, stats.skipped) == (6, 2)
    assert freed == ["out_of_memory", "kernel_error"]
    df = merge(shards, points(8), tmp_path)
    assert sorted(df["num_tokens"]) == [1, 2, 8, 16, 64, 128]
    prov = json.loads((tmp_path / "rmsnorm.provenance.json").read_text())
    assert prov["counts"] == {"points": 8, "measured": 6, "skipped": 2, "not_run": 0}
    assert prov["skip_reasons"] == {"out_of_memory": 1, "kernel_error": 1}
    assert {s["point"]["num_tokens"] for s in prov["skipped"]} == {4, 32}
    assert prov["points"][0]["nvml_before"]["sm_clock_mhz"] == 1980 and prov["torch"] == "x"

    again = FakeMeasure()
    run_sweep(points(8), again, shards, fingerprint="fp1")
    assert again.calls == []                                     # skipped points are not retried by default
    run_sweep(points(8), again, shards, fingerprint="fp1", retry_skipped=True)
    assert again.calls == [4, 32]
    assert len(merge(shards, points(8), tmp_path)) == 8


def test_torn_last_line_and_foreign_records_are_ignored(tmp_path):
    shards = tmp_path / "s"
    run_sweep(points(3), FakeMeasure(), shards, fingerprint="fp1")
    shard = next(shards.glob("*.jsonl"))
    with open(shard, "a") as fh:
        fh.write('{"key": "abc", "status": "ok", "row": {"lat')   # a kill in the middle of a write
    recs = read_shards(shards)
    assert len(recs) == 3
    assert set(latest_records(recs, "fp1")) == {point_key(p) for p in points(3)}
    assert latest_records(recs, "other") == {}


def test_fatal_cuda_error_stops_after_recording_the_point(tmp_path):
    shards = tmp_path / "s"
    bad = RuntimeError("CUDA error: an illegal memory access was encountered")
    with pytest.raises(FatalDeviceError, match="rerun to resume"):
        run_sweep(points(5), FakeMeasure(fail={4: bad}), shards, fingerprint="fp1")
    m = FakeMeasure()
    run_sweep(points(5), m, shards, fingerprint="fp1")
    assert m.calls == [8, 16]                                    # resumes after the bad point


def test_merge_with_nothing_measured_fails_clearly(tmp_path):
    shards = tmp_path / "s"
    run_sweep(points(2), FakeMeasure(fail={1: MemoryError("x"), 2: MemoryError("y")}), shards, fingerprint="fp1")
    with pytest.raises(ProfilingError, match="none of the 2 points was measured"):
        merge(shards, points(2), tmp_path)
    assert not (tmp_path / "rmsnorm.parquet").exists()


def test_deadline_stops_new_points(tmp_path):
    ticks = iter(range(100))
    stats = run_sweep(points(6), FakeMeasure(), tmp_path / "s", fingerprint="fp", deadline=4.5,
                      clock=lambda: float(next(ticks)))
    assert stats.measured + stats.not_run == 6 and stats.not_run > 0


def test_gpu_lock_is_exclusive_per_uuid(tmp_path):
    uuid = "GPU-8f0e3c9a-1b2c-4d5e-8f90-0123456789ab"
    with gpu_lock(uuid, tmp_path) as path:
        assert "pid" in path.read_text()
        with pytest.raises(ProfilingError, match="is busy"):
            with gpu_lock(uuid, tmp_path, timeout_s=0):
                pass
        with gpu_lock("GPU-11111111-2222-3333-4444-555555555555", tmp_path, timeout_s=0):
            pass                                                 # another GPU is free
    with gpu_lock(uuid, tmp_path, timeout_s=0):                  # released
        pass


def _tiny_points():
    moe = {"kernel": "fused_moe", "dtype": "float16", "hidden_size": 64, "inter_size": 96, "topk": 2,
           "num_experts": 8, "moe_tp_size": 2, "distribution": "power_law_1.2", "moe_config": "default"}
    att = {"dtype": "bfloat16", "num_heads": 8, "num_kv_heads": 2, "head_dim": 32, "kv_cache_dtype": "bfloat16",
           "window_size": 0, "page_size": 16, "backend": "auto"}
    return {
        "gemm": [{"kernel": "gemm", "dtype": "bfloat16", "m": 33, "n": 96, "k": 64, "batch": 1},
                 {"kernel": "gemm", "dtype": "float16", "m": 1, "n": 32, "k": 48, "batch": 1}],
        "gemm_fp8": [{"kernel": "gemm_fp8", "dtype": "fp8", "m": 16, "n": 32, "k": 64, "batch": 1}],
        "attention_prefill": [{"kernel": "attention_prefill", "batch_size": 2, "seq_len": 40, "kv_len": 40, **att}],
        "attention_decode": [{"kernel": "attention_decode", "batch_size": 3, "seq_len": 1, "kv_len": 50, **att},
                             {"kernel": "attention_decode", "batch_size": 3, "seq_len": 1, "kv_len": 50,
                              **att, "kv_cache_dtype": "fp8"}],
        "rmsnorm": [{"kernel": "rmsnorm", "dtype": "bfloat16", "num_tokens": 5, "hidden_size": 100, "backend": "auto"}],
        "silu_mul": [{"kernel": "silu_mul", "dtype": "bfloat16", "num_tokens": 5, "hidden_size": 100,
                      "backend": "auto"}],
        "fused_moe": [{**moe, "num_tokens": 20, "moe_ep_size": 2, "moe_stage": "full"},
                      {**moe, "num_tokens": 3, "moe_ep_size": 1, "moe_stage": "w2"}],
    }


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed (pip install triton)")
def test_every_launcher_end_to_end_on_cpu(tmp_path, monkeypatch):
    """tools/device_smoke.py's loop on the CPU: inputs, reference check, timing, shards, canonical Parquet."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = importlib.util.spec_from_file_location("device_smoke", REPO / "tools" / "device_smoke.py")
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    pts = _tiny_points()
    facts, summary = smoke.run_smoke(tmp_path, list(pts), device="cpu", points=pts,
                                     timing={"warmup_ms": 0, "budget_ms": 1, "min_reps": 2, "max_reps": 3})
    by_kernel = {r["kernel"]: r for r in summary}
    expected = {"gemm": 2, "gemm_fp8": 1, "attention_prefill": 1, "attention_decode": 1, "rmsnorm": 1,
                "silu_mul": 1, "fused_moe": 2}
    assert {k: r["rows"] for k, r in by_kernel.items()} == expected, summary
    assert by_kernel["attention_decode"]["skipped"] == 1          # fp8 KV cache needs FlashInfer
    for kernel in expected:
        df = pd.read_parquet(tmp_path / "cpu" / f"{kernel}.parquet")
        validate(df, kernel)
        assert (df["source"] == "synperf_profiler").all() and (df["latency_stat"] == "median").all()
        assert (df["latency_p10_us"] <= df["latency_us"]).all() and (df["latency_us"] <= df["latency_p90_us"]).all()
    moe = pd.read_parquet(tmp_path / "cpu" / "fused_moe.parquet")
    assert list(moe["block_size_m"]) == [64, 16] and (moe["num_warps"] == 4).all()   # default heuristic recorded
    att = json.loads((tmp_path / "cpu" / "attention_prefill.provenance.json").read_text())
    assert att["points"][0]["implementation"].startswith("torch_sdpa_")
    assert "FlashInfer" in att["points"][0]["details"]["fallback_reason"]
    text = smoke.format_summary(facts, summary)
    assert "fused_moe" in text and "triton_fused_moe" in text
    assert os.environ["TRITON_INTERPRET"] == "1"
