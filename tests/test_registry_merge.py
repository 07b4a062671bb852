"""The registry merge of measured hardware files (data/hardware/<gpu>.json) over datasheet values:
overrides, partial files, provenance, use_measured=False, and clear errors for bad files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from synperf.data import hardware
from synperf.data.hardware import (
    DATASHEET,
    MEASURABLE_FIELDS,
    MEASURED_FIELDS,
    load_registry,
    read_measured_file,
    validate_measured_document,
)
from synperf.data.io import InputError
from synperf.reporting.gpu_table import registry_provenance

GPUS = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"  # the registry the tests read


def measurement(value, unit, method="test method"):
    return {"value": value, "unit": unit, "method": method,
            "clocks": {"source": "nvml", "sm_clock_mhz": 1755.0, "n_samples": 12, "throttled": False,
                       "clock_event_reasons": []}}


def doc_for(gpu, **values):
    """A valid measured document with the given measurement key -> value (units from MEASURED_FIELDS)."""
    units = {k: u for k, (_, u) in MEASURED_FIELDS.items()}
    return {"version": 1, "gpu": gpu, "device_name": "NVIDIA X", "uuid": "GPU-0",
            "created_utc": "2026-03-01T10:00:00+00:00",
            "measurements": {k: measurement(v, units.get(k, "TFLOP/s"), method=f"{k} method")
                             for k, v in values.items()},
            "skipped": {}}


def write(dirpath, name, doc):
    path = dirpath / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def datasheet():
    return load_registry(GPUS, use_measured=False)


def test_load_without_measured_files_is_the_datasheet(tmp_path, datasheet):
    reg = load_registry(GPUS, tmp_path / "does-not-exist")
    assert reg.use_measured and reg.measured_gpus == [] and reg.measured_files == {}
    assert reg.ids == datasheet.ids
    for gid in reg.ids:
        assert reg[gid] == datasheet[gid]
        assert reg[gid].sources_used == {}
    h100 = reg["h100_sxm"]
    assert h100.value_source("dram_bw_gbps") == DATASHEET and not h100.is_measured("dram_bw_gbps")
    assert load_registry(GPUS, tmp_path)["h100_sxm"] == h100   # positional, empty folder


def test_measured_folder_is_passed_in_never_defaulted(tmp_path):
    write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", dram_bw=3000.0))
    reg = load_registry(GPUS, tmp_path)
    assert reg["h100_sxm"].dram_bw_gbps == 3000.0 and reg.measured_dir == tmp_path
    assert load_registry(GPUS)["h100_sxm"].dram_bw_gbps == 3350.0                     # no folder: datasheet
    assert not load_registry(GPUS).use_measured
    assert load_registry(GPUS, tmp_path, use_measured=False)["h100_sxm"].dram_bw_gbps == 3350.0
    assert not hasattr(hardware, "DEFAULT_MEASURED_DIR") and not hasattr(hardware, "DEFAULT_REGISTRY")


def test_measured_values_override_datasheet_and_say_where_from(tmp_path, datasheet):
    write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", dram_bw=3012.5, l2_bw=9100.0, smem_bw=121.0,
                                             gemm_bf16=712.0, gemm_fp16=705.0, gemm_fp8=1290.0, gemm_tf32=370.0,
                                             fp32_fma=58.0, gemm_fp32=41.0))
    reg = load_registry(GPUS, measured_dir=tmp_path)
    h = reg["h100_sxm"]
    ds = datasheet["h100_sxm"]
    assert (h.dram_bw_gbps, h.l2_bw_gbps, h.smem_bw_bytes_per_clk_per_sm) == (3012.5, 9100.0, 121.0)
    assert (h.dense_bf16_tflops, h.dense_fp16_tflops, h.dense_fp8_tflops, h.dense_tf32_tflops, h.fp32_tflops) == (
        712.0, 705.0, 1290.0, 370.0, 58.0)
    assert h.peak_tflops("bfloat16") == 712.0 and h.peak_tflops("float32") == 58.0
    assert h.datasheet_peak_tflops("bfloat16") == pytest.approx(989.4)
    # every replaced field names the file, the method and the date; the datasheet value is kept
    for key, (field, _unit) in MEASURED_FIELDS.items():
        assert h.value_source(field) == f"measured: {tmp_path / 'h100_sxm.json'} ({key} method, 2026-03-01)"
        assert h.is_measured(field)
        assert h.datasheet_value(field) == getattr(ds, field)
    # fields no measurement touches stay as they were
    assert (h.sm_count, h.boost_clock_mhz, h.l2_cache_mb, h.memory_gb) == (ds.sm_count, ds.boost_clock_mhz,
                                                                           ds.l2_cache_mb, ds.memory_gb)
    assert h.value_source("sm_count") == DATASHEET and h.datasheet_value("sm_count") == ds.sm_count
    assert h.raw == ds.raw                                            # raw stays the YAML entry
    assert h.datasheet() == ds                                        # the datasheet spec round trip
    # other GPUs are untouched
    assert reg["a100_sxm4_80gb"] == datasheet["a100_sxm4_80gb"]
    assert reg.measured_gpus == ["h100_sxm"] and reg.measured_files == {"h100_sxm": tmp_path / "h100_sxm.json"}


def test_partial_file_replaces_only_what_it_has(tmp_path, datasheet):
    write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", gemm_bf16=600.0))
    write(tmp_path, "a100_sxm4_80gb.json", doc_for("a100_sxm4_80gb", smem_bw=126.0, gemm_fp32=18.0))
    reg = load_registry(GPUS, measured_dir=tmp_path)
    h, a = reg["h100_sxm"], reg["a100_sxm4_80gb"]
    assert h.dense_bf16_tflops == 600.0 and h.is_measured("dense_bf16_tflops")
    for f in set(MEASURABLE_FIELDS) - {"dense_bf16_tflops"}:
        assert getattr(h, f) == getattr(datasheet["h100_sxm"], f) and h.value_source(f) == DATASHEET
    assert a.smem_bw_bytes_per_clk_per_sm == 126.0
    assert a.fp32_tflops == datasheet["a100_sxm4_80gb"].fp32_tflops      # gemm_fp32 is informational only
    assert set(a.sources_used) == {"smem_bw_bytes_per_clk_per_sm"}
    assert reg.measured_gpus == ["a100_sxm4_80gb", "h100_sxm"]


def test_architectural_tensor_rate_stays_the_datasheet_power_of_two(tmp_path, datasheet):
    # 600 / 989.4 TFLOPS = 0.61 of peak: rounding the measured rate would give 2048 FLOP/clk/SM, not 4096
    write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", gemm_bf16=600.0, gemm_fp8=1100.0))
    h = load_registry(GPUS, measured_dir=tmp_path)["h100_sxm"]
    ds = datasheet["h100_sxm"]
    assert h.tensor_ops_per_clk_per_sm("bfloat16") == ds.tensor_ops_per_clk_per_sm("bfloat16") == 4096
    assert h.tensor_ops_per_clk_per_sm("fp8") == ds.tensor_ops_per_clk_per_sm("fp8") == 8192


def test_use_measured_false_ignores_the_folder_even_broken_files(tmp_path, datasheet):
    write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", dram_bw=1.0))
    write(tmp_path, "not_a_gpu.json", "{broken")
    reg = load_registry(GPUS, measured_dir=tmp_path, use_measured=False)
    assert reg["h100_sxm"] == datasheet["h100_sxm"] and reg["h100_sxm"].sources_used == {}
    assert not reg.use_measured and reg.measured_dir is None and reg.measured_gpus == []


def test_unknown_gpu_id_in_file_name_is_a_clear_error(tmp_path):
    path = write(tmp_path, "h900_sxm.json", doc_for("h900_sxm", dram_bw=3000.0))
    with pytest.raises(InputError) as err:
        load_registry(GPUS, measured_dir=tmp_path)
    msg = str(err.value)
    assert str(path) in msg and "unknown GPU id 'h900_sxm'" in msg and "registry" in msg


def test_gpu_key_must_match_the_file_name(tmp_path):
    path = write(tmp_path, "h100_sxm.json", doc_for("h200_sxm", dram_bw=3000.0))
    with pytest.raises(InputError, match=r"h100_sxm\.json: at key 'gpu'.*'h200_sxm'.*'h100_sxm'"):
        load_registry(GPUS, measured_dir=tmp_path)
    assert path.exists()


def test_malformed_json_names_the_file_and_position(tmp_path):
    path = write(tmp_path, "h100_sxm.json", '{"version": 1, "gpu": "h100_sxm",\n  "measurements": {,}}')
    with pytest.raises(InputError) as err:
        load_registry(GPUS, measured_dir=tmp_path)
    assert str(path) in str(err.value) and "not valid JSON" in str(err.value) and "line 2" in str(err.value)


@pytest.mark.parametrize("edit, key, words", [
    (lambda d: d["measurements"]["dram_bw"].pop("unit"), "measurements/dram_bw", "'unit' is a required property"),
    (lambda d: d["measurements"]["dram_bw"].__setitem__("value", -5.0), "measurements/dram_bw/value",
     "less than or equal to the minimum of 0"),
    (lambda d: d["measurements"]["dram_bw"].__setitem__("value", 0), "measurements/dram_bw/value",
     "less than or equal to the minimum of 0"),
    (lambda d: d["measurements"]["dram_bw"].__setitem__("unit", "GiB/s"), "measurements/dram_bw/unit",
     "'GB/s' was expected"),
    (lambda d: d["measurements"]["gemm_bf16"].__setitem__("unit", "GB/s"), "measurements/gemm_bf16/unit",
     "'TFLOP/s' was expected"),
    (lambda d: d["measurements"]["dram_bw"].pop("method"), "measurements/dram_bw", "'method' is a required"),
    (lambda d: d["measurements"]["dram_bw"].pop("clocks"), "measurements/dram_bw", "'clocks' is a required"),
    (lambda d: d["measurements"]["dram_bw"]["clocks"].__setitem__("sm_clock_mhz", -1),
     "measurements/dram_bw/clocks/sm_clock_mhz", "minimum of 0"),
    (lambda d: d["measurements"].__setitem__("dram_bandwidth", d["measurements"]["dram_bw"]), "measurements",
     "'dram_bandwidth' was unexpected"),
    (lambda d: d["measurements"]["dram_bw"].__setitem__("value", "fast"), "measurements/dram_bw/value",
     "is not of type 'number'"),
    (lambda d: d.pop("created_utc"), "(top level)", "'created_utc' is a required property"),
    (lambda d: d.__setitem__("measurements", {}), "measurements", "should be non-empty"),
    (lambda d: d.__setitem__("version", 2), "version", "1 was expected"),
])
def test_schema_failures_name_the_file_and_the_key(tmp_path, edit, key, words):
    doc = doc_for("h100_sxm", dram_bw=3000.0, gemm_bf16=700.0)
    edit(doc)
    path = write(tmp_path, "h100_sxm.json", doc)
    with pytest.raises(InputError) as err:
        load_registry(GPUS, measured_dir=tmp_path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: at key {key!r}: "), msg
    assert words in msg, msg


def test_validate_document_accepts_a_valid_one():
    validate_measured_document(doc_for("h100_sxm", **{k: 1.0 for k in MEASURED_FIELDS}, gemm_fp32=1.0), "x.json")


def test_hidden_temporary_and_other_files_are_ignored(tmp_path, datasheet):
    write(tmp_path, ".h100_sxm.json.abc123.tmp", "{half a file")      # synperf.data.io.atomic_path's temporary file
    write(tmp_path, ".hidden.json", "{broken")
    write(tmp_path, "README.md", "# measured hardware")
    (tmp_path / "sub.json").mkdir()                                     # a folder, not a file
    write(tmp_path, "l40s.json", doc_for("l40s", dram_bw=800.0))
    reg = load_registry(GPUS, measured_dir=tmp_path)
    assert reg.measured_gpus == ["l40s"]
    assert hardware.measured_files(tmp_path) == [tmp_path / "l40s.json"]
    assert hardware.measured_files(tmp_path / "nope") == []


def test_read_measured_file_directly(tmp_path):
    path = write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", dram_bw=3000.0, gemm_fp32=40.0))
    mf = read_measured_file(path)
    assert mf.gpu == "h100_sxm" and mf.values == {"dram_bw_gbps": 3000.0}
    assert mf.source("dram_bw_gbps") == f"measured: {path} (dram_bw method, 2026-03-01)"
    with pytest.raises(InputError, match="unknown GPU id"):
        read_measured_file(path, known_ids={"a100_sxm4_80gb"})
    with pytest.raises(InputError, match="cannot be read|not valid JSON|No such file"):
        read_measured_file(tmp_path / "missing.json")


def test_source_paths_inside_the_working_directory_are_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert hardware.display_path(tmp_path / "data" / "hardware" / "h100_sxm.json") == "data/hardware/h100_sxm.json"
    assert hardware.display_path("/elsewhere/h100_sxm.json") == "/elsewhere/h100_sxm.json"


def test_provenance_table_lists_each_source(tmp_path, datasheet):
    write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", dram_bw=3000.0, smem_bw=120.0))
    reg = load_registry(GPUS, measured_dir=tmp_path)
    df = registry_provenance(reg)
    assert list(df.columns) == ["gpu", "field", "value", "unit", "source", "datasheet_value",
                                "measured_over_datasheet"]
    assert len(df) == len(reg.ids) * len(MEASURABLE_FIELDS)
    h = df[df.gpu == "h100_sxm"].set_index("field")
    assert h.loc["dram_bw_gbps", "value"] == 3000.0 and h.loc["dram_bw_gbps", "datasheet_value"] == 3350.0
    assert h.loc["dram_bw_gbps", "source"].startswith("measured: ") and h.loc["dram_bw_gbps", "unit"] == "GB/s"
    assert h.loc["dram_bw_gbps", "measured_over_datasheet"] == pytest.approx(3000 / 3350)
    assert h.loc["smem_bw_bytes_per_clk_per_sm", "unit"] == "B/clk/SM"
    assert h.loc["l2_bw_gbps", "source"] == DATASHEET and h.loc["l2_bw_gbps", "measured_over_datasheet"] == 1.0
    assert h.loc["dense_fp16_tflops", "unit"] == "TFLOP/s"
    measured = registry_provenance(reg, measured_only=True)
    assert set(measured.gpu) == {"h100_sxm"} and (measured.source != DATASHEET).sum() == 2
    # a field missing on the datasheet (no FP8 on A100) is NaN-safe
    a = registry_provenance(reg, fields=["dense_fp8_tflops", "sm_count"], gpus=["a100_sxm4_80gb"])
    assert math.isnan(a.iloc[0]["value"]) and math.isnan(a.iloc[0]["measured_over_datasheet"])
    assert a.iloc[1]["source"] == DATASHEET and a.iloc[1]["value"] == 108
    # the datasheet-only registry says datasheet everywhere: the two can be compared
    ds = registry_provenance(datasheet, gpus=["h100_sxm"])
    assert (ds.source == DATASHEET).all()


def test_value_source_rejects_unknown_fields(datasheet):
    with pytest.raises(KeyError, match="not a GPUSpec field"):
        datasheet["h100_sxm"].value_source("dram_bandwidth")
    with pytest.raises(KeyError, match="not a GPUSpec field"):
        datasheet["h100_sxm"].datasheet_value("dram_bandwidth")


def test_measured_fields_cover_the_issue_and_match_the_schema():
    assert set(MEASURABLE_FIELDS) == {"dram_bw_gbps", "l2_bw_gbps", "smem_bw_bytes_per_clk_per_sm",
                                      "dense_bf16_tflops", "dense_fp16_tflops", "dense_fp8_tflops",
                                      "dense_tf32_tflops", "fp32_tflops"}
    props = hardware.measured_schema()["properties"]["measurements"]["properties"]
    assert set(props) == set(MEASURED_FIELDS) | set(hardware.INFORMATIONAL_MEASUREMENTS)
    for key, (_field, unit) in MEASURED_FIELDS.items():
        assert props[key]["allOf"][1]["properties"]["unit"]["const"] == unit


def test_registry_constructor_stays_compatible(datasheet):
    reg = hardware.Registry(dict(datasheet.gpus), datasheet.path)
    assert reg.ids == datasheet.ids and not reg.use_measured and reg.measured_gpus == []


def test_apply_measured_refuses_another_gpu(tmp_path, datasheet):
    mf = read_measured_file(write(tmp_path, "h100_sxm.json", doc_for("h100_sxm", dram_bw=1.0)))
    with pytest.raises(InputError, match="measures 'h100_sxm', not 'a100_sxm4_80gb'"):
        hardware.apply_measured(datasheet["a100_sxm4_80gb"], mf)
    spec = hardware.apply_measured(datasheet["h100_sxm"], mf)
    again = hardware.apply_measured(spec, mf)                            # idempotent
    assert again == spec and again.datasheet_value("dram_bw_gbps") == 3350.0

