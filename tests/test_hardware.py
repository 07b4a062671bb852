from pathlib import Path

import pandas as pd
import pytest
import yaml

from synperf.data.hardware import load_registry
from synperf.data.io import InputError

GPUS = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"  # the registry the tests read


def test_registry_covers_every_reference_gpu(registry, reference):
    ids = set(pd.read_csv(reference / "gpu_specs.csv")["id"])
    assert ids <= registry.ids


def test_registry_matches_reference_values(registry, reference):
    ref = pd.read_csv(reference / "gpu_specs.csv").set_index("id")
    for gid, row in ref.iterrows():
        spec = registry[gid]
        assert spec.sm_count == row["sm_count"]
        assert spec.dram_bw_gbps == pytest.approx(row["dram_bw_gbps"])
        assert spec.l2_cache_mb == pytest.approx(row["l2_cache_mb"])


def test_every_gpu_has_a_sourced_l2_bandwidth(registry):
    for spec in registry.gpus.values():
        src = spec.raw["sources"]["l2_bw_gbps"]
        assert src.startswith(("measured:", "estimated:")), spec.id
        assert spec.l2_bw_gbps > spec.dram_bw_gbps * 0.9, spec.id  # L2 is never much slower than DRAM


def test_peak_lookup(registry):
    h100 = registry["h100_sxm"]
    assert h100.peak_tflops("bfloat16") == pytest.approx(989.4)
    assert h100.peak_tflops("fp8") == pytest.approx(1978.9)
    assert registry["v100_pcie_32gb"].peak_tflops("bfloat16") == pytest.approx(112)  # fp16 stands in
    with pytest.raises(KeyError, match="no fp8"):
        registry["a100_sxm4_80gb"].peak_tflops("fp8")


def test_device_names_map_to_ids(registry):
    assert registry.id_for_device_name("NVIDIA H100 80GB HBM3", "x") == "h100_sxm"
    assert registry.id_for_device_name("NVIDIA H100", "x") == "h100_sxm"
    with pytest.raises(InputError, match="unknown GPU 'NVIDIA H900'"):
        registry.id_for_device_name("NVIDIA H900", "file.csv")


def test_unknown_id_says_how_to_add_it(registry):
    with pytest.raises(InputError, match="Adding a GPU"):
        registry["h900"]


@pytest.mark.parametrize("edit, key", [
    (lambda g: g["h100_sxm"].pop("sm_count"), "gpus/h100_sxm"),
    (lambda g: g["h100_sxm"].__setitem__("dram_bw_gbps", "fast"), "gpus/h100_sxm/dram_bw_gbps"),
])
def test_bad_registry_names_the_key(tmp_path, edit, key):
    doc = yaml.safe_load(GPUS.read_text())
    edit(doc["gpus"])
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match=key):
        load_registry(path)


def test_a_mig_slice_is_not_advised_into_the_full_gpu_entry(registry):
    from synperf.data.hardware import is_mig_slice
    from synperf.data.io import InputError
    from synperf.gpu.profiling.nvml import unknown_gpu_message

    name = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    assert is_mig_slice(name) and not is_mig_slice("NVIDIA A100-SXM4-80GB") and not is_mig_slice("NVIDIA AMIGA")
    with pytest.raises(InputError, match=r"is a MIG slice: .*must not be added to the full GPU's `device_names`"):
        registry.id_for_device_name(name, "data.csv row 3")
    msg = unknown_gpu_message(name, "abcd", "config/gpus.yaml")
    assert "MIG slice" in msg and "add the name to the entry of the same model" not in msg
    assert "add the name to the entry of the same model" in unknown_gpu_message("NVIDIA X1", "ab", "g.yaml")


def test_memory_type_and_compute_capability_match_the_reference(registry, reference):
    ref = pd.read_csv(reference / "gpu_specs.csv", dtype={"compute_capability": str}).set_index("id")
    for gid, row in ref.iterrows():
        assert registry[gid].memory_type == row["memory_type"], gid
        assert registry[gid].compute_capability == row["compute_capability"], gid


def test_every_gpu_cites_a_compute_capability_table(registry):
    for spec in registry.gpus.values():
        assert any("arch_traits.h" in u or "compute-capabilities" in u for u in spec.raw["sources"]["specs"]), spec.id


def test_gpu_class(registry):
    assert registry["l40s"].gpu_class == ("8.9", "GDDR")
    assert registry["h100_sxm"].gpu_class == ("9.0", "HBM")
    assert registry["a100_pcie_40gb"].gpu_class == ("8.0", "HBM")  # HBM2
    assert registry["rtx_pro_6000_blackwell_server"].gpu_class == ("12.0", "GDDR")  # GDDR7
    same = lambda a, b: registry[a].same_class(registry[b])  # noqa: E731
    assert same("h100_sxm", "h20") and same("h100_sxm", "h200_sxm") and same("b200", "b300")
    assert same("l40s", "a40")  # sm_89 and sm_86: one major version, both GDDR
    assert not same("h100_sxm", "l40s") and not same("a100_sxm4_80gb", "a40")
    assert not same("b200", "rtx_pro_6000_blackwell_server") and not same("v100_pcie_32gb", "t4")


@pytest.mark.parametrize("value", ["HBM4", "gddr6", None])
def test_unknown_memory_type_names_the_gpu_and_key(tmp_path, value):
    doc = yaml.safe_load(GPUS.read_text())
    doc["gpus"]["l40s"]["memory_type"] = value
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match=r"gpus[./]l40s[./]memory_type"):
        load_registry(path)
