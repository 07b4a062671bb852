"""``synperf gpus``: the registry's datasheet values and where each GPU has measurements, in three formats."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_registry_merge import doc_for

from synperf.cli import main

REPO = Path(__file__).resolve().parent.parent
GPUS = REPO / "config" / "gpus.yaml"


@pytest.fixture
def checkout(tmp_path):
    """A config naming two experiments, own measurements of h100_sxm and a measured hardware file for it."""
    cfg = tmp_path / "config" / "config.yaml"
    cfg.parent.mkdir()
    cfg.write_text(yaml.safe_dump({
        "gpu_registry": str(GPUS), "measurements_dir": "own", "hardware_measurements_dir": "hw",
        "experiments": {"a": {"seen": ["h100_sxm", "a100_sxm4_80gb"], "unseen": ["l40s"]},
                        "b": {"seen": ["h100_sxm"], "unseen": ["b200"]}}}))
    for kernel in ("rmsnorm", "gemm"):
        (tmp_path / "own" / "h100_sxm").mkdir(parents=True, exist_ok=True)
        (tmp_path / "own" / "h100_sxm" / f"{kernel}.parquet").write_bytes(b"")
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "h100_sxm.json").write_text(json.dumps(doc_for("h100_sxm", dram_bw=3000.0)))
    return cfg


def test_gpus_lists_the_registry_and_the_measurements(checkout, capsys):
    assert main(["gpus", "--config", str(checkout), "--format", "json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    spec = yaml.safe_load(GPUS.read_text())["gpus"]
    assert list(rows) == list(spec)                                        # every GPU, in the registry's order
    h = rows["h100_sxm"]
    for key in ("architecture", "compute_capability", "memory_gb", "memory_type", "sm_count", "dense_bf16_tflops",
                "dense_fp8_tflops"):
        assert h[key] == spec["h100_sxm"][key], key
    assert (h["sm_count"], h["dense_bf16_tflops"]) == (132, 989.4)
    assert h["dram_bw_gbps"] == 3350.0                       # the datasheet value, not the measured 3000 GB/s
    assert rows["a100_sxm4_80gb"]["dense_fp8_tflops"] is None             # no FP8 on Ampere
    assert [rows[g]["memory_family"] for g in ("h100_sxm", "l40s", "rtx_pro_6000_blackwell_server")] == [
        "HBM", "GDDR", "GDDR"]
    assert (h["experiments"], h["own_kernels"], h["hardware_measured"]) == (2, "gemm+rmsnorm", True)
    assert [(rows[g]["experiments"], rows[g]["own_kernels"], rows[g]["hardware_measured"])
            for g in ("l40s", "b200", "h200_sxm")] == [(1, "", False), (1, "", False), (0, "", False)]


def test_gpus_csv_and_table_hold_the_same_values(checkout, capsys):
    assert main(["gpus", "--config", str(checkout), "--format", "csv"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("id")
    assert csv.loc["b200", ["sm_count", "dram_bw_gbps", "memory_type"]].tolist() == [148, 7700.0, "HBM3e"]
    assert main(["gpus", "--config", str(checkout)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split()
    assert head[:3] == ["id", "architecture", "compute_capability"] and len(lines) == len(csv) + 1
    a100 = dict(zip(head, next(line for line in lines if line.startswith("a100_sxm4_80gb ")).split()))
    assert (a100["dense_fp8_tflops"], a100["experiments"], a100["own_kernels"]) == ("-", "1", "-")
    assert a100["dram_bw_gbps"] == "2039.0"


def test_gpus_names_a_missing_config(tmp_path, capsys):
    assert main(["gpus", "--config", str(tmp_path / "none.yaml")]) == 2
    assert f"--config {tmp_path / 'none.yaml'}: not a file" in capsys.readouterr().err
    # a config that is not a mapping, or whose experiments are a list: named, never read as empty
    for text, what in (("- 1\n", "the file"), ("experiments: [1, 2]\n", "its experiments (and each entry)"),
                       ("experiments: {gemm: [1]}\n", "its experiments (and each entry)")):
        (tmp_path / "c.yaml").write_text(text)
        assert main(["gpus", "--config", str(tmp_path / "c.yaml")]) == 2
        assert f"--config {tmp_path / 'c.yaml'}: {what} must be a YAML mapping" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["plan", "--isl", "abc"],
     "synperf plan: error: argument --isl: invalid int value: 'abc' (see synperf plan --help)"),
    (["nosuch"], "synperf: error: argument command: invalid choice: 'nosuch'"),
    (["predict", "--kernel", "gemm"], "synperf predict: error: the following arguments are required: --gpu"),
])
def test_a_usage_error_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(message)
