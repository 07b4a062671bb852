"""The GPU registry refuses what YAML and the schema let through: a key listed twice, non-finite numbers, numbers in
the wrong unit; and predict takes a listed device name as its GPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from synperf.api import launch_table
from synperf.data.hardware import load_registry
from synperf.data.io import InputError

GPUS = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"


def _h100_line(text: str, key: str) -> str:
    """The line of ``key`` in the h100_sxm entry of ``text``."""
    start = text.index("\n  h100_sxm:\n")
    m = re.compile(rf"\n    {key}: [^\n]*").search(text, start)
    return m.group(0)


def _edited(tmp_path, key: str, value: str) -> Path:
    text = GPUS.read_text()
    line = _h100_line(text, key)
    start = text.index("\n  h100_sxm:\n")
    at = text.index(line, start)
    f = tmp_path / "gpus.yaml"
    f.write_text(text[:at] + f"\n    {key}: {value}" + text[at + len(line):])
    return f


def test_a_gpu_listed_twice_is_refused_naming_both_lines(tmp_path):
    text = GPUS.read_text()
    start = text.index("\n  h100_sxm:\n") + 1
    end = text.index("\n  ", start + 1)
    while text[end + 3] == " ":  # the entry ends at the next line indented by exactly two spaces
        end = text.index("\n  ", end + 1)
    entry = text[start:end + 1]
    f = tmp_path / "gpus.yaml"
    f.write_text(text.rstrip("\n") + "\n" + entry)
    first = text[:start].count("\n") + 1
    last = f.read_text().count("\n") - entry.count("\n") + 1
    with pytest.raises(InputError, match=rf"^{re.escape(str(f))}: 'h100_sxm' is listed twice in one mapping "
                                         rf"\(lines {first} and {last}\); keep one$"):
        load_registry(f, use_measured=False)


@pytest.mark.parametrize("key, value, match", [
    ("dram_bw_gbps", ".nan", r"gpus\.h100_sxm\.dram_bw_gbps = nan; expected a finite number$"),
    ("fp32_tflops", ".inf", r"gpus\.h100_sxm\.fp32_tflops = inf; expected a finite number$"),
    ("dram_bw_gbps", "3.35", r"gpus\.h100_sxm\.dram_bw_gbps = 3\.35 GB/s is outside the plausible \[50, 100000\] "
                             r"GB/s \(a value in TB/s\?\)$"),
    ("boost_clock_mhz", "1.98", r"gpus\.h100_sxm\.boost_clock_mhz = 1\.98 MHz is outside the plausible \[200, 5000\] "
                                r"MHz \(a value in GHz\?\)$"),
    ("l2_cache_mb", "51200", r"gpus\.h100_sxm\.l2_cache_mb = 51200 MiB is outside the plausible \[0\.25, 2048\] MiB "
                             r"\(a value in KiB\?\)$"),
    ("memory_gb", "0.5", r"gpus\.h100_sxm\.memory_gb = 0\.5 GB is outside the plausible \[1, 4096\] GB \(a value "
                         r"in TB\?\)$"),
    ("sm_count", "4096", r"gpus\.h100_sxm\.sm_count = 4096 SMs is outside the plausible \[1, 1024\] SMs$"),
])
def test_non_finite_and_implausible_numbers_are_refused_with_their_unit(tmp_path, key, value, match):
    f = _edited(tmp_path, key, value)
    with pytest.raises(InputError, match=rf"^{re.escape(str(f))}: {match}"):
        load_registry(f, use_measured=False)


def test_the_shipped_registry_passes_and_a_plausible_edit_is_kept(tmp_path):
    assert load_registry(GPUS, use_measured=False)["h100_sxm"].dram_bw_gbps == 3350
    assert load_registry(_edited(tmp_path, "dram_bw_gbps", "3000"), use_measured=False)["h100_sxm"].dram_bw_gbps \
        == 3000


def test_a_listed_device_name_is_taken_as_its_gpu(registry):
    params = {"m": [1, 64], "n": 4096, "k": 4096, "dtype": "bfloat16"}
    by_name = launch_table("gemm", params, "NVIDIA H100 80GB HBM3", registry)
    by_id = launch_table("gemm", params, "h100_sxm", registry)
    assert by_name["gpu"].tolist() == ["h100_sxm", "h100_sxm"]
    import pandas as pd

    pd.testing.assert_frame_equal(by_name, by_id)
    mixed = launch_table("gemm", params, ["NVIDIA H100 80GB HBM3", "a100_sxm4_80gb"], registry)
    assert mixed["gpu"].tolist() == ["h100_sxm", "a100_sxm4_80gb"]
    with pytest.raises(InputError, match=r"^unknown GPU id 'NVIDIA H100 80GB' \(did you mean 'NVIDIA "
                                         r"H100 80GB HBM3'\?\): not in "):
        launch_table("gemm", params, "NVIDIA H100 80GB", registry)
    with pytest.raises(InputError, match=r"^gpu: 3 values for 2 launches; expected one GPU or one per launch$"):
        launch_table("gemm", params, ["h100_sxm"] * 3, registry)


# ---- dense Tensor Core peaks: FP32 accumulate, one rate per SM per clock per compute capability ----

ADA_AND_WORKSTATION = ("rtx_6000_ada", "l40s", "l40", "l20", "rtx_a6000", "rtx_pro_6000_blackwell_server", "rtx_4090",
                       "l4")


def _registry_with(tmp_path, edit) -> Path:
    import yaml

    doc = yaml.safe_load(GPUS.read_text())
    edit(doc["gpus"])
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_every_ada_and_workstation_peak_says_what_it_is_and_the_rates_agree(registry):
    from synperf.data.checks import tensor_rate_mismatches

    assert tensor_rate_mismatches(registry.gpus) == []
    for gid in ADA_AND_WORKSTATION:
        assert "FP32 accumulate" in registry[gid].raw["sources"]["tensor_peaks"], gid
    marked = {g: s.raw["tensor_fp32_accumulate_rate"] for g, s in registry.gpus.items()
              if "tensor_fp32_accumulate_rate" in s.raw}
    assert marked == {"l20": "half", "rtx_4090": "half", "l40": "half", "h20": "quarter"}
    # the same AD102 board at two rates: L40S 1024 and L40 512 bf16 FLOP/clk/SM
    assert registry["l40s"].tensor_ops_per_clk_per_sm("bfloat16") == 2 * registry["l40"].tensor_ops_per_clk_per_sm(
        "bfloat16") == 1024


@pytest.mark.parametrize("edit, flagged", [
    # a sparse figure slipped into L40S: twice its compute capability's full rate
    (lambda g: g["l40s"].__setitem__("dense_bf16_tflops", 724.1), "gpus.l40s.dense_bf16_tflops"),
    # L40's half rate without its marker: the unmarked sm_89 GPUs disagree
    (lambda g: g["l40"].pop("tensor_fp32_accumulate_rate"), "gpus.l40.dense_fp16_tflops"),
    # an FP16-accumulate figure on the RTX 4090 (330.3): twice the marked half rate
    (lambda g: g["rtx_4090"].__setitem__("dense_fp16_tflops", 330.3), "gpus.rtx_4090.dense_fp16_tflops"),
    # H20 claimed at full Hopper rate
    (lambda g: g["h20"].__setitem__("tensor_fp32_accumulate_rate", "full"), "gpus.h20.dense_bf16_tflops"),
])
def test_a_tensor_peak_unlike_its_compute_capability_is_refused(tmp_path, edit, flagged):
    with pytest.raises(InputError, match=re.escape(flagged)) as err:
        load_registry(_registry_with(tmp_path, edit))
    assert set(re.findall(r"gpus\.(\w+)\.dense", str(err.value))) == {flagged.split(".")[1]}  # only the odd one


def test_a_rate_marker_needs_its_source(tmp_path):
    path = _registry_with(tmp_path, lambda g: g["l40"]["sources"].pop("tensor_peaks"))
    with pytest.raises(InputError, match=r"gpus/l40/sources.*tensor_peaks"):
        load_registry(path)


def test_measured_gemms_decide_between_the_two_candidate_peaks(registry, public_data):
    """L40S: bf16 GEMMs (FP32 accumulate) above the half-rate peak, so its full-rate peak is real. L40 (same board):
    Triton bf16 fused MoE plateaus just under its half-rate peak and never passes it."""
    import pandas as pd

    g = pd.read_parquet(public_data / "aiconfigurator/l40s/gemm/vllm/0.14.0/gemm_perf.parquet")
    g = g[(g["gemm_dtype"] == "bfloat16") & (g[["m", "n", "k"]] >= 2048).all(axis=1)]
    tflops = 2 * g["m"] * g["n"] * g["k"] / (g["latency"] * 1e-3) / 1e12
    peak = registry["l40s"].peak_tflops("bfloat16")
    assert len(g) > 400 and peak / 2 < tflops.max() <= peak and (tflops > peak / 2).mean() > 0.9
    rows = []
    for f in sorted((public_data / "pipeweave/pipetuning_test/moe_dse").glob("moe_dse_L40_*.csv")):
        rows.append(pd.read_csv(f))
    m = pd.concat(rows)
    m = m[m["weight_type"].isin(["w13", "w2"])]
    flops = 2 * m["M"] * m["topk"] * m["H"] * m["N"] * m["weight_type"].map({"w13": 2, "w2": 1})
    moe = flops / (m["avg_duration"] * 1e-6) / 1e12
    l40 = registry["l40"].peak_tflops("bfloat16")
    assert 0.85 * l40 < moe.max() <= l40
