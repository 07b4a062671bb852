"""Adapters on the real public data, and on broken copies of it."""

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from synperf.data.ingest import aiconfigurator, neusight, pipeweave, vidur
from synperf.data.io import InputError


@pytest.fixture
def aic(aiconfigurator_ingest):
    return aiconfigurator_ingest


@pytest.mark.xdist_group("aiconfigurator_ingest")
def test_aiconfigurator_drops_the_known_bad_rows(aic):
    # public-data README: 5,457 L40S flashinfer prefill rows; 37 + 7 + 1 isolated GEMM spikes
    assert aic.dropped["known_bad:l40s_flashinfer_prefill"] == 5457
    assert aic.dropped["known_bad:isolated_gemm_spike"] == 45
    t = aic.table
    l40s_prefill = t[(t.gpu == "l40s") & (t.kernel == "attention_prefill")]
    assert set(l40s_prefill["implementation"]) == {"vllm_flash_attn"}


@pytest.mark.xdist_group("aiconfigurator_ingest")
def test_aiconfigurator_units_are_microseconds(aic):
    t = aic.table
    row = t[(t.gpu == "h100_sxm") & (t.kernel == "gemm") & (t.m == 4096) & (t.n == 4096) & (t.k == 4096)]
    # README unit check: H100 bf16 4096^3 takes 0.174 ms
    assert row["latency_us"].median() == pytest.approx(174, rel=0.05)


@pytest.mark.xdist_group("aiconfigurator_ingest")
def test_aiconfigurator_spike_example_is_gone(aic):
    t = aic.table
    sel = (t.gpu == "h200_sxm") & (t.kernel == "gemm") & (t.n == 1024) & (t.k == 8192)
    assert 80 not in set(t.loc[sel, "m"])            # the 0.62 ms spike at m=80
    assert {65, 81} <= set(t.loc[sel, "m"])


def test_gemm_spike_rule_on_a_hand_made_series():
    m = pd.Series([1, 2, 3, 4, 5])
    lat = pd.Series([10.0, 10.5, 40.0, 11.0, 30.0])
    mask = aiconfigurator.gemm_spikes(pd.Series(["g"] * 5), pd.Series(["bf16"] * 5), m, pd.Series([8] * 5),
                                      pd.Series([8] * 5), lat)
    assert mask.tolist() == [False, False, True, False, False]  # the last point has one neighbour only


def test_vidur_shapes(public_data, registry, ingest_config):
    res = vidur.ingest(public_data, registry, ingest_config["vidur"])
    t = res.table
    sel = ((t.gpu == "a100_sxm4_80gb") & (t.kernel == "gemm") & (t.m == 4096) & (t.k == 4096) & (t.n == 12288)
           & t.source_file.str.contains("Llama-2-7b-hf"))
    # first row of Llama-2-7b mlp.csv on A100: attn_pre_proj median 1.911 ms (tp 1: n = (32 + 64) * 128)
    assert sel.sum() >= 1 and t.loc[sel, "latency_us"].iloc[0] == pytest.approx(1911.0)
    silu = t[(t.kernel == "silu_mul") & (t.gpu == "a100_sxm4_80gb") & t.source_file.str.contains("Llama-2-7b-hf")]
    assert set(silu["hidden_size"]) <= {11008, 5504, 2752, 1376}
    assert res.dropped["unsupported_op:vidur:gelu"] > 0  # phi-2


def test_neusight_linear_and_bmm_mapping(public_data, registry):
    t = neusight.ingest(public_data, registry).table
    l4 = t[(t.gpu == "l4") & t.source_file.str.endswith("test/bmm.csv")]
    row = l4[(l4.batch == 192) & (l4.m == 96) & (l4.k == 196) & (l4.n == 196)]
    assert len(row) == 1 and row["latency_us"].iloc[0] == pytest.approx(238.592)
    lin = t[(t.gpu == "l4") & t.source_file.str.endswith("test/linear.csv") & (t.m == 1024) & (t.k == 2560)]
    assert (lin["batch"] == 1).all() and 2560 in set(lin["n"])


def test_pipeweave_fp8_split_and_moe(public_data, registry, ingest_config):
    res = pipeweave.ingest(public_data, registry, ingest_config["pipeweave"])
    t = res.table
    fp8 = t[t.kernel == "gemm_fp8"]
    assert set(fp8.gpu) == {"h20", "h800_sxm", "h100_sxm", "h200_sxm"}
    moe = t[t.kernel == "fused_moe"]
    assert set(moe.moe_stage) == {"w13"}  # the public sweeps hold the gate_up GEMM only
    assert res.dropped["nested_subset_copy:pipeweave_moe"] > 0
    cfg_cols = ["gpu", "moe_stage", "num_tokens", "num_experts", "topk", "hidden_size", "inter_size",
                "block_size_m", "block_size_n", "block_size_k", "group_size_m", "num_warps", "num_stages"]
    assert not moe.duplicated(cfg_cols).any()


def _copy(public_data, tmp_path, rel):
    dst = tmp_path / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(public_data / rel, dst)
    return dst


def test_unknown_gpu_stops_with_the_file_name(public_data, registry, tmp_path):
    dst = _copy(public_data, tmp_path, "pipeweave/dataset/gemm_fp8_test.csv")
    df = pd.read_csv(dst)
    df.loc[3, "hardware"] = "NVIDIA H900"
    df.to_csv(dst, index=False)
    with pytest.raises(InputError, match=r"gemm_fp8_test.csv: unknown GPU 'NVIDIA H900'"):
        pipeweave._fp8(tmp_path, registry)


@pytest.mark.parametrize("source, key", [("vidur", "gpu_map"), ("pipeweave", "moe_gpu_map")])
def test_a_missing_gpu_map_names_its_config_key(registry, tmp_path, source, key):
    """The source's GPU name map lives only in the config: without it the adapter stops before reading a file."""
    adapter = {"vidur": vidur, "pipeweave": pipeweave}[source]
    for cfg in ({}, {key: {}}, {key: None}):
        with pytest.raises(InputError, match=rf"^config key ingest\.{source}\.{key}: missing or empty; expected a "
                                             rf"mapping of the {source} data's GPU names to registry ids") as err:
            adapter.ingest(tmp_path, registry, cfg)
        assert "\n" not in str(err.value)


def test_the_config_gpu_map_decides_the_registry_id(public_data, registry, tmp_path):
    """Vidur's ``a100`` folder is whatever id the map gives (here the 40 GB SXM part instead of the 80 GB one)."""
    rel = "vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv"
    _copy(public_data, tmp_path, rel)
    t = vidur.ingest(tmp_path, registry, {"gpu_map": {"a100": "a100_sxm4_40gb"}}).table
    assert set(t["gpu"]) == {"a100_sxm4_40gb"} and len(t) > 0
    with pytest.raises(InputError, match=r"mlp\.csv: unknown GPU 'a100' in the folder name; known: \['h100'\]"):
        vidur.ingest(tmp_path, registry, {"gpu_map": {"h100": "h100_sxm"}})


def test_missing_column_stops_with_the_file_name(public_data, registry, tmp_path):
    rel = "aiconfigurator/a100_sxm/gemm/vllm/0.14.0/gemm_perf.parquet"
    dst = _copy(public_data, tmp_path, rel)
    pd.read_parquet(dst).drop(columns=["k"]).to_parquet(dst)
    with pytest.raises(InputError, match=r"gemm_perf.parquet: missing column\(s\) \['k'\]"):
        aiconfigurator.ingest(tmp_path, registry)


def test_nan_latency_stops_with_file_and_row(public_data, registry, tmp_path):
    rel = "neusight/dataset/train/collect/linear/p2.1.0/Tesla T4.csv"
    dst = _copy(public_data, tmp_path, rel)
    df = pd.read_csv(dst)
    df.loc[7, "Latency"] = float("nan")
    df.to_csv(dst, index=False)
    with pytest.raises(InputError, match=r"Tesla T4.csv: row 7 .*'Latency'"):
        neusight.ingest(tmp_path, registry)


def test_a_data_file_outside_the_manifest_is_refused(public_data, tmp_path):
    """The ingest rule's inputs are the manifest's files: a file the adapter would also read, but which the DAG
    does not track, stops the ingest with one line naming it (instead of being read behind the DAG's back)."""
    import shutil

    import yaml

    from synperf.data.io import InputError
    from synperf.pipeline.ingest import ingest_source

    repo = Path(__file__).resolve().parent.parent
    manifest = yaml.safe_load((repo / "config" / "public_data_manifest.yaml").read_text())["files"]
    data = tmp_path / "data"
    shutil.copytree(public_data / "vidur", data / "vidur")
    listed = [str(data / p) for p in manifest if p.startswith("vidur/")]
    cfg = yaml.safe_load((repo / "config" / "config.yaml").read_text())["ingest"]["vidur"]
    reg = str(repo / "config" / "gpus.yaml")
    ingest_source("vidur", str(data), reg, cfg, str(tmp_path / "t.parquet"), str(tmp_path / "s.json"),
                  listed_files=listed)
    extra = data / "vidur" / "compute" / "a100" / "meta-llama" / "Llama-3-8b-copy" / "mlp.csv"
    extra.parent.mkdir(parents=True)
    shutil.copy(data / "vidur" / "compute" / "a100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv", extra)
    with pytest.raises(InputError, match=r"Llama-3-8b-copy/mlp.csv: read by the vidur adapter but not listed"):
        ingest_source("vidur", str(data), reg, cfg, str(tmp_path / "t2.parquet"), str(tmp_path / "s2.json"),
                      listed_files=listed)
    assert not (tmp_path / "t2.parquet").exists()


@pytest.mark.parametrize("path", [("ingest", "vidur", "gpu_map"), ("ingest", "pipeweave", "moe_gpu_map"),
                                  ("e2e", "real_gpu_map"), ("e2e", "collective_gpu_map")])
def test_every_config_gpu_map_is_checked_against_the_registry(registry, path):
    import copy

    import yaml

    from synperf.data.checks import check_references

    cfg = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "config.yaml").read_text())
    check_references(cfg, registry)                                     # the shipped maps name registry ids
    bad = copy.deepcopy(cfg)
    block = bad
    for part in path:
        block = block[part]
    name = next(iter(block))
    block[name] = "h900_sxm"
    key = re.escape(".".join(path + (name,)))
    with pytest.raises(InputError, match=rf"^config key {key}: unknown GPU id 'h900_sxm'"):
        check_references(bad, registry)


@pytest.mark.parametrize("source_gpus, match", [
    ({"neusight": ["a40"]}, r"^config key experiments\.gemm\.source_gpus\.neusight: source 'neusight' is not in "
                            r"experiments\.gemm\.sources \['aiconfigurator', 'vidur'\]; list it there or remove the "
                            r"entry$"),
    ({"vidur": ["a4O"]}, r"^config key experiments\.gemm\.source_gpus\.vidur: unknown GPU id 'a4O'"),
    ({"vidur": ["l4"]}, r"^config key experiments\.gemm\.source_gpus\.vidur: 'l4' is neither seen nor unseen in "
                        r"experiments\.gemm; its rows would select nothing$"),
])
def test_source_gpus_must_name_a_listed_source_and_a_gpu_of_the_experiment(registry, source_gpus, match):
    import copy

    import yaml

    from synperf.data.checks import check_references

    cfg = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "config.yaml").read_text())
    bad = copy.deepcopy(cfg)
    bad["experiments"]["gemm"]["source_gpus"] = source_gpus
    with pytest.raises(InputError, match=match):
        check_references(bad, registry)
