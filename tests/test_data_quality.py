"""Merge and data quality: duplicates are reduced only within one source and version and their spread is
reported; own measurements keep their provenance and obey each experiment's filters; rows above a physical
ceiling of their GPU are dropped and counted whatever the GPU; a GPU group slower than a less capable sibling
is reported and excluded."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from synperf.data.hardware import load_registry
from synperf.data.io import InputError, read_table
from synperf.data.quality import (
    QualitySettings,
    ceiling_violations,
    dominates,
    duplicate_spread,
    peak_flops,
    sibling_excluded,
    sibling_slowdowns,
)
from synperf.data.schema import conform, reduce_duplicates
from synperf.pipeline.common import select_rows
from synperf.pipeline.merge import merge_measurements

REPO = Path(__file__).resolve().parent.parent
GPUS = REPO / "config" / "gpus.yaml"


def gemm_rows(rows, **common):
    """Canonical GEMM rows from dicts (m, n, k, latency_us and any override)."""
    base = {"gpu": "h100_sxm", "kernel": "gemm", "implementation": "cublas", "dtype": "bfloat16", "batch": 1,
            "latency_stat": "mean", "source": "aiconfigurator", "source_version": "v1", "source_file": "f"}
    return conform(pd.DataFrame([{**base, **common, **r} for r in rows]))


def merge(tmp_path, tables, own=(), quality=None):
    paths, summaries = [], []
    for i, t in enumerate(tables):
        p = tmp_path / f"src{i}.parquet"
        t.to_parquet(p)
        s = tmp_path / f"src{i}.json"
        s.write_text(json.dumps({"dropped": {}}))
        paths.append(str(p))
        summaries.append(str(s))
    own_paths = []
    for t in own:  # as the profiler writes them: <measurements_dir>/<gpu>/<kernel>.parquet
        p = tmp_path / "own" / str(t["gpu"].iloc[0]) / f"{t['kernel'].iloc[0]}.parquet"
        p.parent.mkdir(parents=True, exist_ok=True)
        t.to_parquet(p)
        own_paths.append(str(p))
    merge_measurements(paths, summaries, own_paths, str(GPUS), str(tmp_path / "all.parquet"),
                       str(tmp_path / "summary.json"), quality=quality)
    return read_table(tmp_path / "all.parquet"), json.loads((tmp_path / "summary.json").read_text())


@pytest.fixture(scope="module")
def reg():
    return load_registry(GPUS, use_measured=False)


# --------------------------------------------------------------------------------------------------------------
# duplicates and provenance
# --------------------------------------------------------------------------------------------------------------

def test_two_versions_of_one_key_stay_apart_and_their_spread_is_reported(tmp_path):
    """The issue's instance: 10 µs (version v1) and 100 µs (v2) used to become one 55 µs row labelled v1."""
    t = gemm_rows([{"m": 1024, "n": 1024, "k": 1024, "latency_us": 10.0, "source_version": "v1"},
                   {"m": 1024, "n": 1024, "k": 1024, "latency_us": 100.0, "source_version": "v2"}])
    out, summ = merge(tmp_path, [t])
    assert sorted(zip(out["source_version"], out["latency_us"])) == [("v1", 10.0), ("v2", 100.0)]
    assert summ["duplicate_rows_merged"] == 0
    (spread,) = summ["duplicate_spread"]
    assert (spread["gpu"], spread["kernel"]) == ("h100_sxm", "gemm")
    assert (spread["duplicate_keys"], spread["cross_source_keys"], spread["spread_keys"],
            spread["cross_source_spread_keys"]) == (1, 1, 1, 1)
    assert spread["max_ratio"] == pytest.approx(10.0)
    assert spread["sources"] == "aiconfigurator@v1;aiconfigurator@v2"


def test_duplicates_within_one_version_are_reduced_to_their_median(tmp_path):
    t = gemm_rows([{"m": 64, "n": 4096, "k": 4096, "latency_us": v} for v in (10.0, 11.0, 30.0)]
                  + [{"m": 128, "n": 4096, "k": 4096, "latency_us": 12.0, "source": "vidur"}])
    out, summ = merge(tmp_path, [t], quality={"duplicate_spread_ratio": 2.5})
    m64 = out[out["m"] == 64].iloc[0]
    assert len(out) == 2 and m64["latency_us"] == 11.0 and m64["n_duplicates"] == 3
    assert summ["duplicate_rows_merged"] == 2 and summ["duplicate_keys"] == 1
    (spread,) = summ["duplicate_spread"]
    assert (spread["spread_keys"], spread["cross_source_keys"]) == (1, 0)       # 30 / 10 = 3 > 2.5, one source
    out2, summ2 = merge(tmp_path, [t], quality={"duplicate_spread_ratio": 3.5})
    assert summ2["duplicate_spread"][0]["spread_keys"] == 0


def test_two_sources_with_one_key_keep_their_labels(tmp_path):
    """Constructed: NeuSight and Vidur both measured one fp32 GEMM key on A100; each keeps its row and label."""
    common = {"gpu": "a100_sxm4_80gb", "dtype": "float32", "m": 512, "n": 512, "k": 512}
    a = gemm_rows([{"latency_us": 80.0, "source": "neusight", "source_version": "n"}], **common)
    b = gemm_rows([{"latency_us": 90.0, "source": "vidur", "source_version": "v"}], **common)
    out, summ = merge(tmp_path, [a, b])
    assert sorted(out["source"]) == ["neusight", "vidur"]
    assert {(r["source"], r["rows"]) for r in summ["row_counts"]} == {("neusight", 1), ("vidur", 1)}
    assert summ["duplicate_spread"][0]["cross_source_keys"] == 1
    assert summ["duplicate_spread"][0]["spread_keys"] == 0                       # 90 / 80 < 2


def test_own_measurements_keep_their_source_when_a_public_source_has_the_shape(tmp_path):
    pub = gemm_rows([{"m": 256, "n": 4096, "k": 4096, "latency_us": 30.0}])
    own = gemm_rows([{"m": 256, "n": 4096, "k": 4096, "latency_us": 20.0, "source": "synperf_profiler",
                      "source_version": "synperf@abc torch 2.5", "latency_stat": "median"}])
    out, summ = merge(tmp_path, [pub], own=[own])
    assert dict(zip(out["source"], out["latency_us"])) == {"aiconfigurator": 30.0, "synperf_profiler": 20.0}
    assert {r["source"] for r in summ["row_counts"]} == {"aiconfigurator", "synperf_profiler"}


OWN = {"source": "synperf_profiler", "source_version": "synperf@abc torch 2.5", "latency_stat": "median"}


@pytest.mark.parametrize("where, rows, match", [
    ("h100_sxm/gemm.parquet", [{"m": 1}, {"m": 2, "gpu": "a100_sxm4_80gb"}],
     r"h100_sxm/gemm\.parquet row 1: gpu = 'a100_sxm4_80gb', but the file is under h100_sxm/; expected only gpu "
     r"'h100_sxm' in <gpu>/<kernel>\.parquet$"),
    ("h100_sxm/gemm_fp8.parquet", [{"m": 1}],
     r"h100_sxm/gemm_fp8\.parquet row 0: kernel = 'gemm', but the file is named gemm_fp8\.parquet; expected only "
     r"kernel 'gemm_fp8'"),
    ("h100_sxm/matmul.parquet", [{"m": 1}], r"h100_sxm/matmul\.parquet: 'matmul' is not a kernel family; expected "
                                            r"<gpu>/<kernel>\.parquet"),
    ("h100_sxm/gemm.parquet", [], r"h100_sxm/gemm\.parquet: no rows; delete the file or profile gemm on h100_sxm "
                                  r"again$"),
])
def test_an_own_measurement_file_holds_the_gpu_and_kernel_its_path_names(tmp_path, where, rows, match):
    t = gemm_rows([{"n": 16, "k": 16, "latency_us": 5.0, **OWN, **r} for r in rows]) if rows else \
        gemm_rows([{"m": 1, "n": 16, "k": 16, "latency_us": 5.0, **OWN}]).iloc[:0]
    p = tmp_path / "own" / where
    p.parent.mkdir(parents=True)
    t.to_parquet(p)
    with pytest.raises(InputError, match=rf"^{tmp_path / 'own'}/{match}"):
        merge_measurements([], [], [str(p)], str(GPUS), str(tmp_path / "all.parquet"), str(tmp_path / "s.json"))
    assert not (tmp_path / "all.parquet").exists()


def test_own_rows_obey_the_experiment_sources_and_dtypes():
    df = pd.concat([gemm_rows([{"m": 1, "n": 16, "k": 16, "latency_us": 5.0}]),
                    gemm_rows([{"m": 2, "n": 16, "k": 16, "latency_us": 5.0, "source": "synperf_profiler"},
                               {"m": 3, "n": 16, "k": 16, "latency_us": 5.0, "source": "synperf_profiler",
                                "dtype": "float16"}])], ignore_index=True)
    assert list(select_rows(df, {"kernel": "gemm", "sources": ["aiconfigurator"]})["m"]) == [1]
    assert list(select_rows(df, {"kernel": "gemm", "sources": ["aiconfigurator", "synperf_profiler"],
                                 "dtypes": ["bfloat16"]})["m"]) == [1, 2]
    assert list(select_rows(df, {"kernel": "gemm"})["m"]) == [1, 2, 3]


def test_quality_settings_refuse_bad_values_in_one_line():
    with pytest.raises(InputError, match=r"^config key ingest.quality.flops_margin: 0.9; expected a number >= 1\.0$"):
        QualitySettings.from_dict({"flops_margin": 0.9})
    with pytest.raises(InputError, match=r"^config key ingest.quality.spread: unknown; expected one of"):
        QualitySettings.from_dict({"spread": 2})
    with pytest.raises(InputError, match="sibling_slowdown: 1.0; expected a number > 1.0"):
        QualitySettings.from_dict({"sibling_slowdown": 1.0})


def test_config_documents_the_code_defaults():
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert QualitySettings.from_dict(cfg["ingest"]["quality"]) == QualitySettings()


# --------------------------------------------------------------------------------------------------------------
# physical ceilings
# --------------------------------------------------------------------------------------------------------------

def test_peak_takes_the_boost_clock_rate_where_it_exceeds_the_datasheet(reg):
    # H100 SXM bf16: datasheet 989.4 TFLOP/s (at 1830 MHz) < 4096 FLOP/clk/SM x 132 SMs x 1980 MHz
    assert peak_flops(reg["h100_sxm"], "bfloat16", "gemm") == pytest.approx(4096 * 132 * 1.98e9)
    assert peak_flops(reg["a100_sxm4_80gb"], "bfloat16", "gemm") == pytest.approx(312e12)
    with pytest.raises(KeyError):
        peak_flops(reg["a100_sxm4_80gb"], "fp8", "gemm_fp8")


def _prefill(gpu, latency_us, **kw):
    base = {"gpu": gpu, "kernel": "attention_prefill", "implementation": "vllm_flashinfer", "dtype": "bfloat16",
            "batch_size": 1, "seq_len": 8192, "kv_len": 8192, "num_heads": 32, "num_kv_heads": 1, "head_dim": 128,
            "kv_cache_dtype": "fp8", "window_size": 0, "latency_us": latency_us, "latency_stat": "mean",
            "source": "aiconfigurator", "source_version": "v", "source_file": "f"}
    return {**base, **kw}


def test_impossible_prefill_is_dropped_on_any_gpu(tmp_path, reg):
    """The README's L40S defect (32 query heads / 1 KV head at 8k tokens in 0.08 ms) placed on H100 and A100:
    no GPU name is involved. 4·32·(8192·8193/2)·128 FLOP = 550 GFLOP in 80 µs = 6.9 PFLOP/s."""
    t = conform(pd.DataFrame([_prefill("h100_sxm", 80.0), _prefill("a100_sxm4_80gb", 80.0),
                              _prefill("h100_sxm", 600.0, batch_size=1, num_heads=8)]))   # 137 GFLOP / 600 µs
    bad, dropped, unchecked = ceiling_violations(t, reg, QualitySettings())
    assert list(bad) == [True, True, False]
    assert dropped == {"impossible_throughput:attention_prefill:h100_sxm": 1,
                       "impossible_throughput:attention_prefill:a100_sxm4_80gb": 1}
    out, summ = merge(tmp_path, [t])
    assert len(out) == 1 and out["latency_us"].iloc[0] == 600.0
    assert summ["dropped"]["impossible_throughput:attention_prefill:h100_sxm"] == 1


def test_bandwidth_ceiling_only_beyond_l2(reg):
    """Decode over a 2 GiB bf16 KV cache in 100 µs moves 21 TB/s on an A100 (2,039 GB/s): impossible. A 16 MiB KV
    cache in 4 µs (4.2 TB/s) fits in the A100's 40 MiB L2 and is kept."""
    base = {"gpu": "a100_sxm4_80gb", "kernel": "attention_decode", "implementation": "vllm_flash_attn",
            "dtype": "bfloat16", "seq_len": 1, "num_heads": 8, "num_kv_heads": 8, "head_dim": 128,
            "kv_cache_dtype": "bfloat16", "window_size": 0, "latency_stat": "mean", "source": "aiconfigurator",
            "source_version": "v"}
    rows = [{**base, "batch_size": 64, "kv_len": 8192, "latency_us": 100.0},     # 64·8192·2·8·128·2 B = 2 GiB
            {**base, "batch_size": 1, "kv_len": 4096, "latency_us": 4.0},        # 16 MiB
            {**base, "batch_size": 64, "kv_len": 8192, "latency_us": 1200.0}]    # 1.8 TB/s: possible
    bad, dropped, _ = ceiling_violations(conform(pd.DataFrame(rows)), reg, QualitySettings())
    assert list(bad) == [True, False, False]
    assert dropped == {"impossible_bandwidth:attention_decode:a100_sxm4_80gb": 1}


def test_margin_is_applied(reg):
    """A 4096³ bf16 GEMM on H100 (137.4 GFLOP) at 1.05x the 1,070.5 TFLOP/s ceiling passes with margin 1.10 and
    fails with margin 1.0."""
    flops = 2 * 4096 ** 3
    lat = flops / (1.05 * 4096 * 132 * 1.98e9) * 1e6
    t = gemm_rows([{"m": 4096, "n": 4096, "k": 4096, "latency_us": lat}])
    assert not ceiling_violations(t, reg, QualitySettings())[0].any()
    assert ceiling_violations(t, reg, QualitySettings(flops_margin=1.0))[0].all()


def test_rows_without_a_peak_are_kept_and_counted(reg):
    t = gemm_rows([{"m": 4096, "n": 4096, "k": 4096, "latency_us": 0.001}], gpu="a100_sxm4_80gb", kernel="gemm_fp8",
                  dtype="fp8")
    bad, dropped, unchecked = ceiling_violations(t, reg, QualitySettings())
    assert not bad.any() and not dropped and unchecked == {"no_peak:gemm_fp8:a100_sxm4_80gb:fp8": 1}


# --------------------------------------------------------------------------------------------------------------
# siblings
# --------------------------------------------------------------------------------------------------------------

def _pair(n_shapes, slow, gpu_fast="h100_sxm", gpu_slow="h200_sxm"):
    shapes = [{"m": 16 * (i + 1), "n": 4096, "k": 4096} for i in range(n_shapes)]
    fast = gemm_rows([{**s, "latency_us": 20.0 + i} for i, s in enumerate(shapes)], gpu=gpu_fast,
                     source_version="vllm 0.19.0")
    slowr = gemm_rows([{**s, "latency_us": (20.0 + i) * slow} for i, s in enumerate(shapes)], gpu=gpu_slow,
                      source_version="vllm 0.18.0")
    return pd.concat([fast, slowr], ignore_index=True)


def test_dominance_needs_every_spec(reg):
    assert dominates(reg["h200_sxm"], reg["h100_sxm"], "bfloat16", "gemm")      # same compute, more bandwidth
    assert not dominates(reg["h100_sxm"], reg["h200_sxm"], "bfloat16", "gemm")
    assert not dominates(reg["b200"], reg["h100_sxm"], "bfloat16", "gemm")      # 1965 < 1980 MHz boost
    assert not dominates(reg["h200_sxm"], reg["a100_sxm4_80gb"], "fp8", "gemm_fp8")   # A100 has no fp8 peak


def test_sibling_slower_group_is_flagged_and_excluded(tmp_path, reg):
    df = _pair(120, 2.0)
    comps = sibling_slowdowns(df, reg, QualitySettings())
    (row,) = comps.to_dict(orient="records")
    assert (row["gpu"], row["compared_gpu"], row["source_version"], row["shared_shapes"]) == \
        ("h200_sxm", "h100_sxm", "vllm 0.18.0", 120)
    assert row["median_ratio"] == pytest.approx(2.0) and row["flagged"]
    mask, dropped = sibling_excluded(df, comps)
    assert int(mask.sum()) == 120 and dropped == {"sibling_slower:gemm:h200_sxm": 120}
    out, summ = merge(tmp_path, [df])
    assert set(out["gpu"]) == {"h100_sxm"} and summ["dropped"] == {"sibling_slower:gemm:h200_sxm": 120}
    assert summ["sibling_comparisons"][0]["flagged"] is True


def test_sibling_check_needs_enough_shapes_and_a_real_slowdown(reg):
    assert not sibling_slowdowns(_pair(99, 2.0), reg, QualitySettings())["flagged"].any()     # < 100 shapes
    assert not sibling_slowdowns(_pair(120, 1.4), reg, QualitySettings())["flagged"].any()    # 1.4 <= 1.5
    # H100 2x slower than H200 is not a sibling defect: H100 does not dominate H200 (less bandwidth)
    comps = sibling_slowdowns(_pair(120, 2.0, gpu_fast="h200_sxm", gpu_slow="h100_sxm"), reg, QualitySettings())
    assert list(comps["gpu"]) == ["h200_sxm"] and comps["median_ratio"].iloc[0] == pytest.approx(0.5)
    assert not comps["flagged"].any()


def test_duplicate_spread_of_nothing_is_empty():
    assert duplicate_spread(gemm_rows([{"m": 1, "n": 16, "k": 16, "latency_us": 1.0}]), 2.0).empty


# --------------------------------------------------------------------------------------------------------------
# the public data
# --------------------------------------------------------------------------------------------------------------

def test_h200_fp8_block_gemm_is_flagged_against_h100(public_data, reg, tmp_path):
    """README: aiconfigurator fp8_block GEMM on H200 (vLLM 0.18.0) is a median 2.1x slower than on H100 (vLLM
    0.19.0) over the 29,484 shapes both have."""
    from synperf.data.ingest import aiconfigurator

    for gpu, ver in (("h100_sxm", "0.19.0"), ("h200_sxm", "0.18.0")):
        rel = Path("aiconfigurator") / gpu / "gemm" / "vllm" / ver / "gemm_perf.parquet"
        (tmp_path / rel).parent.mkdir(parents=True)
        (tmp_path / rel).symlink_to(public_data / rel)
    t = aiconfigurator.ingest(tmp_path, reg).table
    t, _ = reduce_duplicates(t)
    comps = sibling_slowdowns(t, reg, QualitySettings())
    flagged = comps[comps["flagged"]]
    assert len(flagged) == 1
    row = flagged.iloc[0]
    assert (row["gpu"], row["kernel"], row["dtype"], row["compared_gpu"]) == \
        ("h200_sxm", "gemm_fp8", "fp8_block", "h100_sxm")
    assert row["source_version"].endswith("vllm 0.18.0")
    assert row["shared_shapes"] == 29_484 and row["median_ratio"] == pytest.approx(2.1, abs=0.01)
    other = comps[~comps["flagged"]].set_index("dtype")["median_ratio"]
    assert other["bfloat16"] < 1.0 and other["fp8"] < 1.0                        # H200's other GEMMs are not slower


def test_l40s_flashinfer_prefill_fails_the_ceiling_without_its_name(public_data, reg):
    """README known-bad case: L40S prefill run by vllm_flashinfer (fp8 KV) has 788 rows physically impossible.
    The ceiling check finds at least as many from FLOPs and the L40S peak alone (the adapter drops all 5,457 by
    name, tests/test_ingest.py)."""
    (path,) = (public_data / "aiconfigurator" / "l40s" / "attention" / "vllm").glob("*/context_attention_perf.parquet")
    r = pd.read_parquet(path)
    r = r[r["kernel_source"] == "vllm_flashinfer"]
    t = conform(pd.DataFrame({
        "gpu": "l40s", "kernel": "attention_prefill", "implementation": r["kernel_source"], "dtype": r["attn_dtype"],
        "batch_size": r["batch_size"], "seq_len": r["isl"], "kv_len": r["isl"], "num_heads": r["num_heads"],
        "num_kv_heads": r["num_key_value_heads"], "head_dim": r["head_dim"], "kv_cache_dtype": r["kv_cache_dtype"],
        "window_size": r["window_size"] if "window_size" in r else 0, "latency_us": r["latency"] * 1000.0,
        "latency_stat": "mean", "source": "aiconfigurator", "source_version": "v"}))
    bad, dropped, _ = ceiling_violations(t, reg, QualitySettings())
    assert dropped["impossible_throughput:attention_prefill:l40s"] == int(bad.sum()) == 1171
    hit = t[bad.to_numpy()]
    assert ((hit["num_kv_heads"] < hit["num_heads"])).all()                     # only GQA/MQA shapes: KV-head timing


def test_report_shows_the_spread_and_sibling_tables(tmp_path):
    from synperf.reporting.report import _quality_tables

    df = pd.concat([_pair(120, 2.0), gemm_rows([{"m": 8, "n": 64, "k": 64, "latency_us": 3.0, "source_version": "a"},
                                                {"m": 8, "n": 64, "k": 64, "latency_us": 9.0, "source_version": "b"}])],
                   ignore_index=True)
    _, summ = merge(tmp_path, [df])
    md = "\n".join(_quality_tables(summ))
    assert "| h100_sxm | gemm | 1 | 1 | 1 | 1 | 3.0 | 3.0 | aiconfigurator@a;aiconfigurator@b |" in md
    assert "| h200_sxm | gemm | bfloat16 | vllm 0.18.0 | h100_sxm | vllm 0.19.0 | 120 | 2.0 | True |" in md
    assert _quality_tables({"dropped": {}}) == []                              # a summary from before the checks
    assert "`no_peak:gemm_fp8:a100_sxm4_80gb:fp8` 1,200" in "\n".join(
        _quality_tables({"quality_unchecked": {"no_peak:gemm_fp8:a100_sxm4_80gb:fp8": 1200}}))
