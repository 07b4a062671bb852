"""Hardware characterization on the CPU: the kernels' sources (entry points, a host C++ syntax check,
an NVRTC compile where libnvrtc is installed), the host-side arithmetic on fake timings, the clock bookkeeping,
the output document and its schema, and the Snakemake targets on a machine without a GPU."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from synperf.data import hardware
from synperf.data.hardware import MEASURED_FIELDS, load_registry
from synperf.data.io import InputError
from synperf.gpu.characterize import arithmetic as ar
from synperf.gpu.characterize import kernels as K
from synperf.gpu.characterize.benchmarks import BENCHMARKS, BenchmarkSkipped, CharacterizeSettings, Prepared
from synperf.gpu.characterize.records import build_document, build_record, datasheet_reference, write_document
from synperf.gpu.characterize.run import ClockSampler, characterize, run_benchmarks
from synperf.gpu.profiling import NoGPUError
from synperf.gpu.profiling.timing import TimingResult, summarize

GPUS = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"  # the registry the tests read

REPO = Path(__file__).resolve().parent.parent
MIB = 1 << 20
GIB = 1 << 30


def has_gpu():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def datasheet():
    return load_registry(GPUS, use_measured=False)


# ------------------------------------------------------------------------------------------------
# kernel sources
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(K.KERNELS))
def test_kernel_source_has_the_expected_entry_point_and_parameters(name):
    source, params = K.KERNELS[name]
    assert 'extern "C" __global__' in source
    eps = K.entry_points(source)
    assert list(eps) == [name]                       # exactly one entry point, named as cupy.RawKernel is told
    assert eps[name] == list(params)
    assert f"__launch_bounds__({K.BLOCK_THREADS}" in source
    assert "== -1.0f" in source                      # the never-taken sink store keeps the work alive
    assert source.count("{") == source.count("}") and source.count("(") == source.count(")")


def test_kernel_constants_match_the_host_side():
    assert re.search(r"#define SMEM_UNROLL (\d+)", K.SMEM_READ).group(1) == str(K.SMEM_UNROLL)
    assert re.search(r"#define FMA_UNROLL (\d+)", K.FMA_FP32).group(1) == str(K.FMA_UNROLL)
    assert K.FMA_FP32.count("fmaf(") == K.FMA_CHAINS
    assert K.SMEM_TILE_VEC & (K.SMEM_TILE_VEC - 1) == 0    # the tile index wraps by mask
    assert "__ldcg(" in K.L2_READ and "%%smid" in K.SMEM_READ and "clock64()" in K.SMEM_READ


def test_entry_points_parser():
    src = 'extern "C" __global__ void __launch_bounds__(128, 2)\nfoo(const float* __restrict__ a,\n int n) {}'
    assert K.entry_points(src) == {"foo": [("const float*", "a"), ("int", "n")]}
    assert K.entry_points("__global__ void bar(int n) {}") == {}    # not extern "C": not a RawKernel entry


def _cxx():
    return shutil.which("g++") or shutil.which("clang++")


@pytest.mark.skipif(_cxx() is None, reason="no host C++ compiler (g++/clang++) for the syntax check")
@pytest.mark.parametrize("name", sorted(K.KERNELS))
def test_kernel_source_passes_a_host_cxx_syntax_check(name):
    """Not NVRTC: the host compiler parses the source against stand-ins for the CUDA built-ins it uses, which
    catches syntax and type errors (a missing semicolon, an undeclared variable, a wrong argument count)."""
    source, _ = K.KERNELS[name]
    proc = subprocess.run([_cxx(), "-fsyntax-only", "-std=c++14", "-x", "c++", "-"],
                          input=K.HOST_SYNTAX_PRELUDE + source, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(_cxx() is None, reason="no host C++ compiler (g++/clang++) for the syntax check")
def test_host_syntax_check_catches_an_error():
    broken = K.FMA_FP32.replace("x0 = fmaf(x0, a, b);", "x0 = fmaf(x0, a);")
    proc = subprocess.run([_cxx(), "-fsyntax-only", "-std=c++14", "-x", "c++", "-"],
                          input=K.HOST_SYNTAX_PRELUDE + broken, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0


NVRTC = K.find_nvrtc()
PTX_MUST_HAVE = {"l2_read": ["ld.global.cg.v4.f32"], "smem_read": ["ld.shared.v4.f32", "%smid", "%clock64"],
                 "fma_fp32": ["fma.rn.f32"]}


@pytest.mark.skipif(NVRTC is None, reason="NVRTC (libnvrtc) not installed: `pip install nvidia-cuda-nvrtc` or set "
                                          "SYNPERF_NVRTC=/path/libnvrtc.so; NVRTC needs no GPU")
@pytest.mark.parametrize("name", sorted(K.KERNELS))
def test_kernel_compiles_with_nvrtc(name):
    source, _ = K.KERNELS[name]
    ptx = K.nvrtc_compile(source, name, arch="compute_80")
    assert re.search(rf"\.entry {name}\b", ptx)
    for instr in PTX_MUST_HAVE[name]:
        assert instr in ptx, instr
    if name == "fma_fp32":
        assert ptx.count("fma.rn.f32") >= K.FMA_CHAINS * K.FMA_UNROLL     # nothing folded away
    if name == "smem_read":
        assert ptx.count("ld.shared.v4.f32") >= K.SMEM_UNROLL


def test_nvrtc_compile_without_a_library_says_so(monkeypatch):
    monkeypatch.setattr(K, "find_nvrtc", lambda: None)
    with pytest.raises(RuntimeError, match="no NVRTC library"):
        K.nvrtc_compile(K.FMA_FP32, "fma_fp32")


@pytest.mark.skipif(not has_gpu(), reason="cupy.RawKernel needs a CUDA GPU")
def test_kernels_compile_with_cupy_rawkernel():
    cupy = pytest.importorskip("cupy")
    for name, (source, _) in K.KERNELS.items():
        cupy.RawKernel(source, name, options=("-std=c++14",)).compile()


# ------------------------------------------------------------------------------------------------
# arithmetic
# ------------------------------------------------------------------------------------------------

def test_work_counts():
    assert ar.copy_bytes(GIB) == 2 * GIB                                    # read + write
    assert ar.l2_read_bytes(12 * MIB, 256) == 3 * GIB
    assert ar.smem_read_bytes_per_block(256, 1024, 8) == 256 * 1024 * 8 * 16
    assert ar.fma_flops(blocks=132 * 16, threads=256, iters=512, unroll=16, chains=8) == 2 * 132 * 16 * 256 * 512 * 128
    assert ar.gemm_flops(8192, 8192, 8192) == 2 * 8192**3
    assert ar.gemm_flops(1, 4096, 14336) == 2 * 4096 * 14336
    assert ar.grid_blocks(132, 4) == 528


def test_dram_buffer_sizes():
    assert ar.dram_buffer_bytes(50 * MIB) == 400 * MIB                     # H100/H200: 8 x L2
    assert ar.dram_buffer_bytes(4 * MIB) == 256 * MIB                      # T4: the minimum
    assert ar.dram_buffer_bytes(1000 * MIB) == 2048 * MIB                  # capped
    assert ar.dram_buffer_bytes(50 * MIB, free_bytes=800 * MIB) == 200 * MIB   # a quarter of the free memory
    assert ar.dram_buffer_bytes(50 * MIB + 12345) % MIB == 0
    with pytest.raises(ValueError, match="64 MiB"):
        ar.dram_buffer_bytes(50 * MIB, free_bytes=100 * MIB)


def test_l2_buffer_is_inside_l2_and_a_whole_number_of_loads_per_thread():
    threads = 132 * 4 * 256
    n = ar.l2_buffer_bytes(50 * MIB, threads)
    assert 0 < n <= 50 * MIB / 4 and n % (threads * 16) == 0
    assert ar.l2_buffer_bytes(50 * MIB, threads) > 50 * MIB / 4 - threads * 16
    with pytest.raises(ValueError, match="too small"):
        ar.l2_buffer_bytes(1 * MIB, 1 << 20)


def test_rates_from_elapsed_times():
    assert ar.gbps(2 * GIB, 1e-3) == pytest.approx(2147.483648)
    assert ar.tflops(2 * 8192**3, 1.6e-3) == pytest.approx(687.19476736)
    assert ar.per_clk_per_sm(128 * 132 * 1755e6, 132, 1755.0) == pytest.approx(128.0)
    assert ar.per_clk_per_sm(1e12, 132, None) is None
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="elapsed time"):
            ar.gbps(1, bad)
    assert ar.ratio(3000, 3350) == pytest.approx(0.8955, abs=1e-4)
    assert ar.ratio(1, None) is None and ar.ratio(None, 1) is None and ar.ratio(1, 0) is None


def test_time_statistics_and_rates_use_the_best_sample():
    t = ar.per_call_seconds(summarize([2000.0, 1000.0, 1500.0, 1100.0, 4000.0]))    # µs samples of the harness
    assert t == {"best_s": pytest.approx(1e-3), "median_s": pytest.approx(1.5e-3), "p90_s": pytest.approx(3.2e-3),
                 "n_samples": 5}
    r = ar.rate_record(2e9, t, "GB/s")
    assert r == {"value": pytest.approx(2000.0), "value_median": pytest.approx(2e9 / 1.5e-3 / 1e9)}
    assert ar.rate_record(1e12, t, "TFLOP/s")["value"] == pytest.approx(1000.0)
    with pytest.raises(ValueError, match="unit"):
        ar.rate_record(1, t, "B/clk/SM")


def test_smem_bytes_per_clock_from_clock64_stamps():
    per_block = ar.smem_read_bytes_per_block(256, 1024, 8)               # 33554432 B
    stamps = []
    for b in range(4):                                                   # SM 0: 4 blocks over 1,048,576 cycles
        stamps.append((0, 1000 + b, 1000 + 1_048_576 - b))
    for b in range(4):                                                   # SM 7: a different clock64 origin
        stamps.append((7, 5_000_000 + 10 * b, 5_000_000 + 1_100_000))
    out = ar.smem_bytes_per_clk(stamps, per_block)
    assert out["n_sms"] == 2 and out["blocks_per_sm_min"] == out["blocks_per_sm_max"] == 4
    assert out["max"] == pytest.approx(4 * per_block / 1_048_576) == pytest.approx(128.0)
    assert out["min"] == pytest.approx(4 * per_block / 1_100_000)
    assert out["value"] == pytest.approx((out["min"] + out["max"]) / 2)   # median of two
    # an SM that got 5 blocks (uneven distribution) is still counted by its own bytes and span
    uneven = ar.smem_bytes_per_clk(stamps + [(7, 5_000_000, 5_000_000 + 1_375_000)], per_block)
    assert uneven["blocks_per_sm_max"] == 5
    with pytest.raises(ValueError, match="not positive"):
        ar.smem_bytes_per_clk([(3, 10, 10)], per_block)
    with pytest.raises(ValueError, match="no smem_read stamps"):
        ar.smem_bytes_per_clk([], per_block)


def snap(sm, mem=2619, reasons=(), temp=50, power=300.0):
    return {"sm_clock_mhz": sm, "mem_clock_mhz": mem, "temperature_c": temp, "power_w": power,
            "clock_event_reason_names": list(reasons)}


def test_clock_bookkeeping():
    c = ar.summarize_clocks([snap(1980), snap(1755), snap(1740, reasons=["sw_power_cap"], temp=61, power=690.5),
                             snap(1755), {}])
    assert c["source"] == "nvml" and c["n_samples"] == 4
    assert c["sm_clock_mhz"] == 1755 and c["sm_clock_mhz_min"] == 1740 and c["sm_clock_mhz_max"] == 1980
    assert c["mem_clock_mhz"] == 2619 and c["throttled"] is True and c["clock_event_reasons"] == ["sw_power_cap"]
    assert c["temperature_c_max"] == 61 and c["power_w_max"] == 690.5
    idle = ar.summarize_clocks([snap(1980, reasons=["gpu_idle"])])
    assert idle["throttled"] is False and idle["clock_event_reasons"] == ["gpu_idle"]
    none = ar.summarize_clocks([])
    assert none == {"source": "none", "sm_clock_mhz": None, "n_samples": 0, "throttled": False,
                    "clock_event_reasons": []}


def test_clock_sampler_samples_on_entry_during_and_on_exit():
    clocks = iter(range(1000, 100000, 10))
    lock = threading.Lock()

    def snapshot():
        with lock:
            return snap(next(clocks))

    with ClockSampler(snapshot, period_s=0.002) as s:
        time.sleep(0.05)
    assert len(s.samples) >= 4                                            # entry + some thread samples + exit
    assert [x["sm_clock_mhz"] for x in s.samples] == sorted(x["sm_clock_mhz"] for x in s.samples)
    assert s.summary()["n_samples"] == len(s.samples)
    with ClockSampler(None) as s:
        pass
    assert s.samples == [] and s.summary()["source"] == "none"

    def failing():
        raise RuntimeError("NVML lost")

    with ClockSampler(failing, period_s=0.001) as s:                     # a failing NVML never fails a benchmark
        time.sleep(0.005)
    assert s.samples == []


# ------------------------------------------------------------------------------------------------
# records and the document on fake timings
# ------------------------------------------------------------------------------------------------

class FakeTimer:
    """Returns programmed per-launch times (seconds); enters the clock sampler as Timer.measure does."""

    def __init__(self, per_call: dict[str, list[float]]):
        self.per_call = per_call
        self.calls = []

    def measure(self, fn, during=None):
        fn()
        key = fn.key
        self.calls.append(key)
        with during:
            time.sleep(0.003)
        return TimingResult(samples_us=[x * 1e6 for x in self.per_call[key]], method="cuda_events", l2_policy="hot",
                            warmup_iters=10, calls_per_sample=4, estimate_us=1000.0)


def fake_prepared(key, work, after=None):
    calls = []

    def fn():
        calls.append(1)

    fn.key = key
    return Prepared(fn=fn, work_per_call=work, work={"fake": True}, implementation=f"fake {key}", after=after)


H100_TIMES = {
    "dram_bw": [0.30e-3, 0.28e-3, 0.29e-3],          # 2 x 400 MiB per launch
    "l2_bw": [0.40e-3, 0.38e-3],
    "smem_bw": [1.2e-3, 1.1e-3],
    "fp32_fma": [2.5e-3, 2.45e-3],
    "gemm_bf16": [1.60e-3, 1.55e-3, 1.58e-3],
    "gemm_tf32": [3.0e-3],
}


def fake_preparers(calls):
    per_block = ar.smem_read_bytes_per_block(256, 1024, 8)
    stamps = [(sm, 0, 4 * per_block // 125) for sm in range(132) for _ in range(4)]   # 125 B/clk/SM exactly

    def skip_fp8():
        raise BenchmarkSkipped("FP8 GEMM needs compute capability >= 8.9; this GPU has 8.0")

    def oom():
        raise MemoryError("CUDA out of memory")

    def prep(key, work, after=None):
        def make():
            calls.append(key)
            return fake_prepared(key, work, after)
        return make

    return {
        "dram_bw": prep("dram_bw", ar.copy_bytes(400 * MIB)),
        "l2_bw": prep("l2_bw", ar.l2_read_bytes(12 * MIB, 256)),
        "smem_bw": prep("smem_bw", per_block * 528,
                        after=lambda: {"smem": ar.smem_bytes_per_clk(stamps, per_block)}),
        "fp32_fma": prep("fp32_fma", ar.fma_flops(132 * 16, 256, 512, 16, 8)),
        "gemm_bf16": prep("gemm_bf16", ar.gemm_flops(8192, 8192, 8192)),
        "gemm_fp16": oom,
        "gemm_fp8": skip_fp8,
        "gemm_tf32": prep("gemm_tf32", ar.gemm_flops(8192, 8192, 8192)),
        # gemm_fp32 has no preparer
    }


def run_fake(datasheet, settings=None):
    calls, cleaned = [], []
    snaps = iter([snap(1755 + (i % 3) * 15) for i in range(100000)])
    measurements, skipped = run_benchmarks(
        fake_preparers(calls), FakeTimer(H100_TIMES), snapshot=lambda: next(snaps),
        settings=settings or CharacterizeSettings(clock_period_ms=1.0), sm_count=132, spec=datasheet["h100_sxm"],
        cleanup=lambda: cleaned.append(1))
    return measurements, skipped, calls, cleaned


def test_run_benchmarks_on_fake_timings(datasheet):
    m, skipped, calls, cleaned = run_fake(datasheet)
    assert calls == ["dram_bw", "l2_bw", "smem_bw", "fp32_fma", "gemm_bf16", "gemm_tf32"]   # BENCHMARKS order
    assert len(cleaned) == len(BENCHMARKS) - 1                           # after every benchmark that had a preparer
    assert set(m) == {"dram_bw", "l2_bw", "smem_bw", "fp32_fma", "gemm_bf16", "gemm_tf32"}
    assert skipped["gemm_fp8"].startswith("FP8 GEMM needs compute capability >= 8.9")
    assert skipped["gemm_fp16"] == "failed: MemoryError: CUDA out of memory"
    assert skipped["gemm_fp32"] == "no implementation on this device"

    d = m["dram_bw"]                                                     # bytes read + written / best time
    assert d["value"] == pytest.approx(2 * 400 * MIB / 0.28e-3 / 1e9)
    assert d["timing"]["value_median"] == pytest.approx(2 * 400 * MIB / 0.29e-3 / 1e9)
    assert d["timing"]["best_s"] == pytest.approx(0.28e-3) and d["timing"]["median_s"] == pytest.approx(0.29e-3)
    assert d["timing"]["p90_s"] == pytest.approx(0.298e-3)               # 0.29 + 0.8 x (0.30 - 0.29) ms
    assert (d["timing"]["n_samples"], d["timing"]["calls_per_sample"], d["timing"]["warmup_calls"]) == (3, 4, 10)
    assert d["timing"]["estimate_s"] == pytest.approx(1e-3)
    assert set(d["timing"]) == {"best_s", "median_s", "p90_s", "n_samples", "calls_per_sample", "warmup_calls",
                                "estimate_s", "value_median"}
    assert d["work"] == {"fake": True, "per_call": 2 * 400 * MIB, "unit": "B"}
    assert (d["unit"], d["method"], d["registry_field"], d["statistic"]) == ("GB/s", "STREAM copy", "dram_bw_gbps",
                                                                             "best")
    assert d["datasheet_value"] == 3350.0 and d["ratio_to_datasheet"] == pytest.approx(d["value"] / 3350.0)
    assert d["clocks"]["source"] == "nvml" and 1755 <= d["clocks"]["sm_clock_mhz"] <= 1785
    assert d["per_clk_per_sm"] == pytest.approx(d["value"] * 1e9 / (132 * d["clocks"]["sm_clock_mhz"] * 1e6))

    assert m["l2_bw"]["value"] == pytest.approx(12 * MIB * 256 / 0.38e-3 / 1e9)
    assert m["l2_bw"]["registry_field"] == "l2_bw_gbps" and m["l2_bw"]["datasheet_value"] == pytest.approx(
        datasheet["h100_sxm"].l2_bw_gbps)

    s = m["smem_bw"]                                                     # from clock64, not from the events
    assert s["value"] == pytest.approx(125.0) and s["unit"] == "B/clk/SM"
    assert s["smem_per_sm"]["n_sms"] == 132 and s["datasheet_value"] == 128.0
    assert s["timing"]["gbps_best"] == pytest.approx(s["work"]["per_call"] / 1.1e-3 / 1e9)
    assert "value_median" not in s["timing"]

    f = m["fp32_fma"]
    assert f["value"] == pytest.approx(2 * 132 * 16 * 256 * 512 * 128 / 2.45e-3 / 1e12)
    assert f["registry_field"] == "fp32_tflops" and f["work"]["unit"] == "FLOP"
    assert f["per_clk_per_sm"] == pytest.approx(f["value"] * 1e12 / (132 * f["clocks"]["sm_clock_mhz"] * 1e6))

    g = m["gemm_bf16"]
    assert g["value"] == pytest.approx(2 * 8192**3 / 1.55e-3 / 1e12)
    assert g["ratio_to_datasheet"] == pytest.approx(g["value"] / 989.4)
    assert m["gemm_tf32"]["registry_field"] == "dense_tf32_tflops"


def test_document_is_valid_written_atomically_and_merged_by_the_registry(tmp_path, datasheet):
    m, skipped, _, _ = run_fake(datasheet)
    settings = CharacterizeSettings()
    doc = build_document("h100_sxm", m, skipped, device_name="NVIDIA H100 80GB HBM3",
                         uuid="GPU-8f0e3c9a-0000-0000-0000-000000000000", created_utc="2026-03-01T12:00:00+00:00",
                         compute_capability="9.0", sm_count=132, l2_bytes=50 * MIB,
                         environment={"torch": "2.13.0", "cupy": "14.0"}, settings=settings, seconds=12.345)
    path = write_document(doc, tmp_path)
    assert path == tmp_path / "h100_sxm.json"
    assert [p.name for p in tmp_path.iterdir()] == ["h100_sxm.json"]     # no temporary file left behind
    back = json.loads(path.read_text())
    assert back["settings"]["benchmarks"] == list(BENCHMARKS) and back["seconds"] == 12.35
    assert back["skipped"]["gemm_fp8"].startswith("FP8 GEMM")
    for key, rec in back["measurements"].items():                        # every value has its unit, method, clocks
        assert rec["value"] > 0 and rec["unit"] == BENCHMARKS[key].unit and rec["method"]
        assert "sm_clock_mhz" in rec["clocks"]
    reg = load_registry(GPUS, measured_dir=tmp_path)
    h = reg["h100_sxm"]
    assert h.dram_bw_gbps == pytest.approx(m["dram_bw"]["value"])
    assert h.smem_bw_bytes_per_clk_per_sm == pytest.approx(125.0)
    assert h.dense_fp16_tflops == datasheet["h100_sxm"].dense_fp16_tflops       # skipped: datasheet stays
    assert h.value_source("dram_bw_gbps") == f"measured: {path} (STREAM copy, 2026-03-01)"
    assert h.value_source("dense_fp16_tflops") == "datasheet"
    assert set(h.sources_used) == {MEASURED_FIELDS[k][0] for k in m}


def test_write_document_refuses_an_invalid_document(tmp_path, datasheet):
    m, skipped, _, _ = run_fake(datasheet)
    m["dram_bw"]["value"] = -1.0
    doc = build_document("h100_sxm", m, skipped)
    with pytest.raises(InputError, match=r"h100_sxm\.json: at key 'measurements/dram_bw/value'"):
        write_document(doc, tmp_path)
    assert not (tmp_path / "h100_sxm.json").exists()
    with pytest.raises(InputError, match="should be non-empty"):
        write_document(build_document("h100_sxm", {}, skipped), tmp_path)


def test_build_record_needs_the_smem_figures(datasheet):
    info = BENCHMARKS["smem_bw"]
    prepared = fake_prepared("smem_bw", 1e9)
    timing = TimingResult(samples_us=[1000.0], method="cuda_events", l2_policy="hot", warmup_iters=1)
    with pytest.raises(ValueError, match="smem_read"):
        build_record(info, prepared, timing, {"sm_clock_mhz": None}, 132)
    rec = build_record(info, prepared, timing, {"source": "none", "sm_clock_mhz": None}, 132, None,
                       {"smem": {"value": 127.5}})
    assert rec["value"] == 127.5 and rec["per_clk_per_sm"] is None and rec["ratio_to_datasheet"] is None


def test_datasheet_reference(datasheet):
    h = datasheet["h100_sxm"]
    assert datasheet_reference(h, "dram_bw") == 3350.0
    assert datasheet_reference(h, "gemm_fp32") == h.fp32_tflops           # SGEMM compared with the FP32 peak
    assert datasheet_reference(None, "dram_bw") is None                   # GPU not in the registry
    assert datasheet_reference(datasheet["a100_sxm4_80gb"], "gemm_fp8") is None


def test_settings():
    s = CharacterizeSettings.from_dict({"timing": {"min_reps": 3, "max_reps": 3}},
                                       {"gemm_size": 4096, "benchmarks": ["dram_bw", "gemm_bf16"],
                                        "timing": {"warmup_ms": 20}})
    assert (s.timing.min_reps, s.timing.max_reps, s.timing.warmup_ms) == (3, 3, 20)   # timing layered key by key
    assert (s.timing.sample_ms, s.timing.l2, s.timing.method) == (5.0, "hot", "events")  # CHARACTERIZE_TIMING
    assert s.gemm_size == 4096 and s.benchmarks == ("dram_bw", "gemm_bf16")
    assert s.as_dict()["benchmarks"] == ["dram_bw", "gemm_bf16"] and s.as_dict()["timing"]["warmup_ms"] == 20
    d = CharacterizeSettings().timing                                    # 15 samples of ~5 ms, 100 ms warm-up
    assert (d.l2, d.warmup_ms, d.sample_ms, d.min_reps, d.max_reps) == ("hot", 100.0, 5.0, 15, 15)
    assert CharacterizeSettings(timing={"warmup_ms": 7}).timing.warmup_ms == 7
    with pytest.raises(InputError, match="unknown key 'gemm'"):
        CharacterizeSettings.from_dict({"gemm": 1})
    with pytest.raises(InputError, match=r"^characterize\.settings: unknown key 'samples'"):
        CharacterizeSettings.from_dict({"samples": 3})                  # the sample count is timing.min/max_reps
    with pytest.raises(InputError, match=r"^characterize\.settings\.timing: unknown key 'samples'"):
        CharacterizeSettings.from_dict({"timing": {"samples": 3}})
    with pytest.raises(InputError, match=r"^characterize\.settings\.timing\.sample_ms: .*l2: flush"):
        CharacterizeSettings.from_dict({"timing": {"l2": "flush"}})
    with pytest.raises(InputError, match=r"^characterize\.settings\.timing\.sample_ms: 0 is not > 0"):
        CharacterizeSettings.from_dict({"timing": {"sample_ms": 0}})
    with pytest.raises(InputError, match=r"^characterize\.settings\.timing: expected a mapping"):
        CharacterizeSettings.from_dict({"timing": 5})
    with pytest.raises(InputError, match="unknown"):
        CharacterizeSettings(benchmarks=("dram",))
    with pytest.raises(InputError, match="l2_fraction"):
        CharacterizeSettings(l2_fraction=1.5)
    m, skipped, calls, _ = run_fake(load_registry(GPUS, use_measured=False), CharacterizeSettings(
        benchmarks=("gemm_bf16", "dram_bw"), clock_period_ms=1.0))
    assert calls == ["gemm_bf16", "dram_bw"] and set(m) == {"gemm_bf16", "dram_bw"} and skipped == {}


def test_config_block_and_schema_match_the_settings():
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert cfg["hardware_measurements_dir"] == "data/hardware"
    assert cfg["characterize"]["use_measured"] is True
    CharacterizeSettings.from_dict(cfg["characterize"]["settings"])
    props = schema["properties"]["characterize"]["properties"]["settings"]["properties"]
    assert set(props) == set(CharacterizeSettings().as_dict())
    assert set(props["benchmarks"]["items"]["enum"]) == set(BENCHMARKS)
    import copy

    import jsonschema

    jsonschema.validate(cfg, schema)
    ok = copy.deepcopy(cfg)
    ok["characterize"]["settings"] = {"timing": {"warmup_ms": 50, "min_reps": 5, "max_reps": 5}}
    jsonschema.validate(ok, schema)
    for bad in ({"samples": 15}, {"timing": {"samples": 15}}, {"timing": {"sample_ms": -1}}):
        cfg_bad = copy.deepcopy(cfg)
        cfg_bad["characterize"]["settings"] = bad
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(cfg_bad, schema)


def test_benchmarks_cover_every_measured_field():
    assert set(BENCHMARKS) == set(MEASURED_FIELDS) | set(hardware.INFORMATIONAL_MEASUREMENTS)
    for key, info in BENCHMARKS.items():
        unit = MEASURED_FIELDS[key][1] if key in MEASURED_FIELDS else hardware.INFORMATIONAL_MEASUREMENTS[key]
        assert info.unit == unit and info.method and info.reference


class FakeCudaEvent:
    """torch.cuda.Event stand-in: records the host clock (the fake launches run synchronously)."""

    def __init__(self, enable_timing=True):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3                                   # ms, like torch


class FakeTorch:
    def __init__(self):
        self.cuda = type("cuda", (), {"Event": FakeCudaEvent, "synchronize": staticmethod(lambda *a: None),
                                      "set_device": staticmethod(lambda *a: None)})


def test_characterization_timing_through_the_harness():
    from synperf.gpu.profiling.timing import CudaTimer

    launches = []

    def fn():
        launches.append(1)
        time.sleep(1e-3)

    settings = CharacterizeSettings(timing={"warmup_ms": 3.0, "sample_ms": 3.0, "min_reps": 4, "max_reps": 4})
    entered = []

    class During:
        def __enter__(self):
            entered.append(len(launches))

        def __exit__(self, *exc):
            entered.append(len(launches))

    t = CudaTimer(settings.timing, "cuda:0", 50 * MIB, torch_module=FakeTorch()).measure(fn, during=During())
    assert 1 <= t.calls_per_sample <= 3 and 1 <= t.warmup_iters <= 3       # about 3 ms of ~1 ms launches
    assert t.l2_policy == "hot"                                            # no flush buffer between batched launches
    assert len(t.samples_us) == 4 and all(900 < x < 5000 for x in t.samples_us)
    # 1 untimed + 3 estimate + warm-up before the sampler; the samples inside it
    assert entered == [1 + 3 + t.warmup_iters, 1 + 3 + t.warmup_iters + 4 * t.calls_per_sample]


class FakeIdentity:
    gpu_id, name, uuid, note = "h100_sxm", "NVIDIA H100 80GB HBM3", "GPU-8f0e3c9a-1111-2222-3333-444455556666", ""
    nvml = True
    identity = {"driver_version": "580.00"}

    def snapshot(self):
        return snap(1755)


class FakeGPU:
    """synperf.gpu.characterize.device.GPU stand-in: the fake preparers of the tests above."""

    def __init__(self, torch, settings):
        import torch as real_torch

        self.device = real_torch.device("cpu")
        self.sm_count, self.l2_bytes, self.capability = 132, 50 * MIB, (9, 0)
        self._cupy = None
        self.calls = []

    def preparers(self):
        return fake_preparers(self.calls)

    def cleanup(self):
        pass


@pytest.fixture
def restore_logging():
    """``run.main`` configures the root logger (as a script does); put it back afterwards."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    for h in handlers:
        if h not in root.handlers:
            root.addHandler(h)
    root.setLevel(level)


def patch_gpu_side(monkeypatch, tmp_path, identity=FakeIdentity):
    import synperf.gpu.characterize.run as run
    import synperf.gpu.profiling.nvml as nvml

    monkeypatch.setenv("SYNPERF_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(nvml, "require_cuda", lambda: FakeTorch())
    monkeypatch.setattr(nvml, "local_gpu", lambda registry, allow_unknown=False: identity())
    monkeypatch.setattr(run, "GPU", FakeGPU)
    monkeypatch.setattr(run, "CudaTimer", lambda settings, device, l2_bytes, torch_module: FakeTimer(H100_TIMES))


def test_characterize_end_to_end_with_a_fake_gpu(tmp_path, monkeypatch, restore_logging):
    patch_gpu_side(monkeypatch, tmp_path)
    out = tmp_path / "hardware"
    path = characterize(out, registry_path=GPUS, gpu="h100_sxm", settings={"clock_period_ms": 1.0})
    assert path == out / "h100_sxm.json"
    doc = json.loads(path.read_text())
    assert doc["gpu"] == "h100_sxm" and doc["device_name"] == "NVIDIA H100 80GB HBM3" and doc["sm_count"] == 132
    assert doc["environment"]["driver_version"] == "580.00" and "cupy" in doc["environment"]
    assert doc["settings"]["clock_period_ms"] == 1.0
    assert set(doc["measurements"]) == {"dram_bw", "l2_bw", "smem_bw", "fp32_fma", "gemm_bf16", "gemm_tf32"}
    assert doc["measurements"]["dram_bw"]["clocks"]["sm_clock_mhz"] == 1755
    assert list((tmp_path / "locks").iterdir())                           # the per-UUID GPU lock was taken
    reg = load_registry(GPUS, measured_dir=out)
    assert reg.measured_gpus == ["h100_sxm"] and reg["h100_sxm"].is_measured("l2_bw_gbps")
    # the rule's command line: same file, exit 0
    from synperf.gpu.characterize.run import main

    assert main(["--registry", str(GPUS), "--gpu", "h100_sxm", "--out", str(tmp_path / "rule" / "h100_sxm.json")]) == 0
    assert (tmp_path / "rule" / "h100_sxm.json").exists()


def test_characterize_refuses_another_gpu_than_asked(tmp_path, monkeypatch, restore_logging):
    patch_gpu_side(monkeypatch, tmp_path)
    from synperf.gpu.profiling import ProfilingError

    with pytest.raises(ProfilingError, match="characterizes 'a100_sxm4_80gb' but the visible GPU is"):
        characterize(tmp_path, registry_path=GPUS, gpu="a100_sxm4_80gb")
    from synperf.gpu.characterize.run import main

    assert main(["--registry", str(GPUS), "--gpu", "a100_sxm4_80gb",
                 "--out", str(tmp_path / "a100_sxm4_80gb.json")]) == 1
    assert main(["--registry", str(GPUS), "--gpu", "h100_sxm", "--out", str(tmp_path / "wrong_name.json")]) == 2
    assert list(tmp_path.glob("*.json")) == []


def test_characterize_with_nothing_measured_fails(tmp_path, monkeypatch):
    patch_gpu_side(monkeypatch, tmp_path)
    from synperf.gpu.profiling import ProfilingError

    with pytest.raises(ProfilingError, match="no benchmark produced a value"):
        characterize(tmp_path, registry_path=GPUS, settings={"benchmarks": ["gemm_fp8", "gemm_fp16"]})
    assert list(tmp_path.glob("*.json")) == []


# ------------------------------------------------------------------------------------------------
# without a GPU
# ------------------------------------------------------------------------------------------------

@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU")
def test_characterize_without_gpu_fails_with_the_reason(tmp_path):
    with pytest.raises(NoGPUError) as err:
        characterize(tmp_path, registry_path=GPUS)
    msg = str(err.value)
    assert msg.startswith("no NVIDIA GPU visible (") and "hardware characterization needs one" in msg
    assert "characterize_local" in msg and "needs no GPU" in msg
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU")
def test_rule_script_without_gpu_exits_1_with_a_message(tmp_path):
    out = tmp_path / "h100_sxm.json"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "characterize.py"), "--gpu", "h100_sxm",
                           "--out", str(out), "--log", str(tmp_path / "log.txt")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "no NVIDIA GPU visible" in proc.stderr and not out.exists()
    assert "no NVIDIA GPU visible" in (tmp_path / "log.txt").read_text()
    assert "Traceback" not in proc.stderr


def test_device_smoke_calls_characterize(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import device_smoke
    finally:
        sys.path.remove(str(REPO / "tools"))
    import synperf.gpu.characterize as ch

    seen = []
    monkeypatch.setattr(ch, "characterize", lambda out_dir, registry_path: seen.append((out_dir, registry_path)))
    assert device_smoke.run_characterization(tmp_path, str(GPUS)).startswith("done in")
    assert seen == [(tmp_path / "hardware", str(GPUS))]


def snakemake(*args):
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    return proc.returncode, proc.stdout


@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU: characterize_local would plan a real job")
def test_characterize_local_without_gpu_fails_with_the_reason():
    rc, out = snakemake("-n", "characterize_local")
    assert rc != 0
    assert "characterize_local: no NVIDIA GPU visible" in out, out[-2000:]
    assert "hardware characterization needs one" in out


def test_characterize_file_target_plans_one_gpu_job():
    rc, out = snakemake("-n", "data/hardware/h100_sxm.json")
    assert rc == 0, out[-3000:]
    assert "rule characterize_gpu:" in out and "output: data/hardware/h100_sxm.json" in out
    jobs = [line for line in out.splitlines() if line.strip().startswith("resources:") and "gpu=1" in line]
    assert len(jobs) == 1


def test_default_target_never_characterizes(tmp_path):
    rc, out = snakemake("-n", "--config", f"hardware_measurements_dir={tmp_path}")
    assert rc == 0, out[-3000:]
    assert "characterize_gpu" not in out and "characterize_local" not in out
