"""Collective model against hand-read values of the authors' NCCL tables (pipeweave dataset/collective, ms)."""

from __future__ import annotations

import numpy as np
import pytest

from synperf.e2e._deps import InputError
from synperf.e2e.collectives import CollectiveModel, Curve, link


@pytest.fixture(scope="module")
def model(public_data, registry, e2e_config):
    return CollectiveModel.from_dir(public_data / "pipeweave/dataset/collective", registry,
                                    e2e_config["collective_gpu_map"])


def test_the_folder_map_comes_from_the_config(public_data, registry, e2e_config):
    root = public_data / "pipeweave/dataset/collective"
    for bad in (None, {}):
        with pytest.raises(InputError, match=r"^config key e2e\.collective_gpu_map: missing or empty"):
            CollectiveModel.from_dir(root, registry, bad)
    with pytest.raises(InputError, match=r"^config key e2e\.collective_gpu_map\.A100: unknown GPU id 'a100'"):
        CollectiveModel.from_dir(root, registry, {"A100": "a100"})
    with pytest.raises(InputError, match=rf"^config key e2e\.collective_gpu_map\.H10: no folder {root / 'H10'} "
                                         r"\(did you mean 'H100'\?\); folders: \["):
        CollectiveModel.from_dir(root, registry, {"H10": "h100_sxm"})   # a misspelled folder is named, not skipped
    only = CollectiveModel.from_dir(root, registry, {"H100": "h100_sxm"})    # folders the map omits are not read
    assert {gid for gid, _ in only.curves} == {"h100_sxm"}
    full = CollectiveModel.from_dir(root, registry, e2e_config["collective_gpu_map"])
    assert {gid for gid, _ in full.curves} == set(e2e_config["collective_gpu_map"].values())


def test_measured_points_and_extrapolation(model):
    # A100/all_reduce.csv, num_workers 4, size 1073666050: median 7.2789945 ms (the largest size)
    t = model.latency_us("all_reduce", [1073666050, 2 * 1073666050, 0], 4, "a100_sxm4_80gb")
    assert t[0] == pytest.approx(7278.9945)
    assert t[1] == pytest.approx(2 * 7278.9945)          # bandwidth-bound beyond the table
    assert t[2] == 0.0
    # A100/send_recv.csv: largest size 67108864 B -> 0.290336 ms
    assert model.latency_us("send_recv", 67108864, 2, "a100_sxm4_80gb")[0] == pytest.approx(290.336)
    # H800/send_recv.csv, last two sizes: 1073123330 -> 6.440520 ms, 1073666050 -> 6.442763 ms
    assert model.latency_us("send_recv", 1073123330, 2, "h800_sxm")[0] == pytest.approx(6440.520)
    assert model.latency_us("all_reduce", 4096, 1, "h800_sxm")[0] == 0.0  # one GPU: nothing to reduce


def test_log_log_interpolation_and_floor():
    c = Curve(np.array([1e3, 1e5]), np.array([10.0, 1000.0]))
    assert c(np.array([1e4]))[0] == pytest.approx(100.0)   # geometric midpoint in log-log
    assert c(np.array([10.0]))[0] == pytest.approx(10.0)   # latency floor below the table
    assert c(np.array([2e5]))[0] == pytest.approx(2000.0)


def test_monotone_in_size_and_workers(model):
    sizes = np.geomspace(2048, 2**30, 60)
    t4 = model.latency_us("all_reduce", sizes, 4, "a100_sxm4_80gb")
    assert np.all(np.diff(t4) >= 0)
    t8 = model.latency_us("all_reduce", sizes, 8, "a100_sxm4_80gb")
    assert t8[-1] > t4[-1]


def test_worker_scaling_and_proxies(model):
    # H100 has 2 and 4 workers: 8 workers = the 4-worker curve x ring factor (2*7/8)/(2*3/4) = 7/6
    t4 = model.latency_us("all_reduce", 2**24, 4, "h100_sxm")[0]
    assert model.latency_us("all_reduce", 2**24, 8, "h100_sxm")[0] == pytest.approx(t4 * 7 / 6)
    assert "ring factor" in model.describe("all_reduce", 8, "h100_sxm")
    # H200 (no table): same NVLink4 900 GB/s and class (9.0, HBM) as H100 -> H100's curve unscaled
    assert model.latency_us("all_reduce", 2**24, 4, "h200_sxm")[0] == pytest.approx(t4)
    assert model.describe("all_reduce", 4, "h200_sxm").startswith("proxy h100_sxm")
    # B200 (NVLink5 1800 GB/s): a 900 GB/s Hopper table with 8 workers (H20); bandwidth part halved
    assert model.describe("all_reduce", 8, "b200").startswith("proxy h20")
    floor = model.curves[("h20", "all_reduce")][8].times_us[0]
    big = model.latency_us("all_reduce", 2**28, 8, "h20")[0]
    assert model.latency_us("all_reduce", 2**28, 8, "b200")[0] == pytest.approx(floor + (big - floor) / 2)
    # PCIe Gen3 T4 vs the PCIe Gen4 RTX 6000 Ada table: twice the bandwidth part
    assert model.describe("all_reduce", 2, "t4") == "proxy rtx_6000_ada, bandwidth part scaled by 64/32 GB/s"
    with pytest.raises(InputError, match="unknown GPU"):
        model.latency_us("all_reduce", 1024, 2, "no_such_gpu")
    with pytest.raises(InputError, match="collective"):
        model.latency_us("all_gather", 1024, 2, "h100_sxm")


def test_more_gpus_than_any_table_measured_are_refused(model):
    # the largest table of all_reduce is 8 workers (A100, H20, H800): one node; TP 16 crosses nodes
    assert model.max_workers("all_reduce") == 8 and model.max_workers("send_recv") == 2
    assert model.latency_us("all_reduce", 2**20, 8, "h100_sxm")[0] > 0     # within a node: ring-factor scaling
    with pytest.raises(InputError, match=r"^all_reduce over 16 GPUs: the NCCL tables measure at most 8 GPUs "
                                         r"\(one node\); collectives across nodes are not modelled$"):
        model.latency_us("all_reduce", 2**20, 16, "h100_sxm")


def test_link_parsing():
    assert link("NVLink4 900 GB/s + PCIe Gen5 x16") == ("nvlink", 900.0)
    assert link("PCIe Gen4 x16 (64 GB/s) + optional NVLink3 bridge 600 GB/s (2 GPUs)") == ("pcie", 64.0)
    assert link("PCIe Gen5 x16 (no NVLink)") == ("pcie", 128.0)
    assert link(None) == (None, None)
