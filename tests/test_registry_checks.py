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
