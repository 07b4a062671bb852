"""The split contract on real data: the authors' FP8 file split, held-out problems, unseen rows as `predict`
sees them, and a deliberately leaked table that the leak check must refuse."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from synperf.data.io import read_table, write_parquet
from synperf.evaluation.leak_check import LeakError, check_model_meta, check_split, fold_leaks, spec_vector
from synperf.pipeline.features import experiment_features
from synperf.pipeline.leaks import check_leaks

FP8 = {"kernel": "gemm_fp8", "sources": ["pipeweave"], "seen": ["h20", "h800_sxm"],
       "unseen": ["h100_sxm", "h200_sxm"], "heldout_source_files": "gemm_fp8_test"}
TRAINING = {"max_train_rows": 20000, "validation_frac": 0.2}


@pytest.fixture(scope="module")
def fp8_features(public_data, registry, ingest_config, tmp_path_factory):
    """Feature table (v2_launch) of pipeweave's FP8 GEMMs under the experiment's file split."""
    from synperf.data.ingest import pipeweave
    from synperf.data.schema import reduce_duplicates

    d = tmp_path_factory.mktemp("fp8")
    t = pipeweave.ingest(public_data, registry, ingest_config["pipeweave"]).table
    t, _ = reduce_duplicates(t[t.kernel == "gemm_fp8"])
    write_parquet(t, d / "m.parquet")
    experiment_features(str(d / "m.parquet"), "gemm_fp8", FP8, str(registry.path),
                        {"v2_launch": (str(d / "f.parquet"), str(d / "f.json"))}, 0)
    return d, read_table(d / "f.parquet")


def test_fp8_split_is_the_authors_files(fp8_features):
    _, f = fp8_features
    train, held, unseen = (f[f.split == s] for s in ("train", "test_seen", "unseen"))
    assert train.source_file.str.endswith("gemm_fp8_train.csv").all()
    assert held.source_file.str.endswith("gemm_fp8_test.csv").all()
    assert set(train.gpu) == set(held.gpu) == {"h20", "h800_sxm"}
    assert set(unseen.gpu) == {"h100_sxm", "h200_sxm"}
    assert unseen.source_file.str.endswith("gemm_fp8_test.csv").all()
    # the authors' files: about 4/5 of the seen shapes train, no (m, n, k) of the test file is trained on
    assert 0.75 < len(train) / (len(train) + len(held)) < 0.85
    key = ["m", "n", "k"]
    assert not set(map(tuple, unseen[key].to_numpy())) & set(map(tuple, train[key].to_numpy()))


def test_leak_check_passes_the_real_split_and_reports_twins(fp8_features, registry):
    d, f = fp8_features
    out = d / "leaks.json"
    check_leaks({str(d / "f.parquet"): str(out)}, "gemm_fp8", FP8, str(registry.path), TRAINING, 0)
    rep = json.loads(out.read_text())
    assert rep["ok"] and not any(rep["leaks"].values())
    by_gpu = {u["gpu"]: u for u in rep["unseen"]}
    # H800 and H100 have identical registry specs: H800 is H100's twin, H200 has none
    assert by_gpu["h100_sxm"]["twin_gpus"] == ["h800_sxm"] and by_gpu["h200_sxm"]["twin_gpus"] == []
    assert by_gpu["h100_sxm"]["twin_share"] == 0.0          # the test file's shapes never train
    assert rep["validation_rows"] > 0 and rep["rows"]["train"] == int((f.split == "train").sum())


def test_a_leaked_table_fails_the_check_and_writes_nothing(fp8_features, registry, tmp_path):
    _, f = fp8_features
    leaked = f.copy()
    leaked.loc[leaked.index[leaked.split == "unseen"][:3], "split"] = "train"
    write_parquet(leaked, tmp_path / "leaked.parquet")
    out = tmp_path / "leaks.json"
    with pytest.raises(LeakError, match=r"gemm_fp8: unseen_gpu_rows_in_training: 3 row\(s\) \(h100_sxm: 3\)"):
        check_leaks({str(tmp_path / "leaked.parquet"): str(out)}, "gemm_fp8", FP8, str(registry.path), TRAINING, 0)
    assert not out.exists()


def test_a_heldout_problem_under_another_implementation_is_a_leak(fp8_features, registry):
    _, f = fp8_features
    held = f[f.split == "test_seen"].iloc[:2].assign(split="train", implementation="cutlass_fp8",
                                                     source_file="pipeweave/dataset/gemm_fp8_train.csv")
    leaked = pd.concat([f, held], ignore_index=True)
    with pytest.raises(LeakError, match="heldout_problems_in_training: 2 row"):
        check_split(leaked, "gemm_fp8", FP8, registry, TRAINING)
    # a row of the held-out file relabelled as training is caught by the file rule too
    leaked = f.copy()
    leaked.loc[leaked.index[leaked.split == "test_seen"][0], "split"] = "train"
    with pytest.raises(LeakError, match="heldout_"):
        check_split(leaked, "gemm_fp8", FP8, registry, TRAINING)


def test_model_meta_with_an_unseen_training_gpu_is_refused():
    check_model_meta({"train_gpus": ["h20", "h800_sxm"]}, "gemm_fp8", FP8)
    with pytest.raises(LeakError, match=r"GPU\(s\) \['h100_sxm'\]"):
        check_model_meta({"train_gpus": ["h20", "h100_sxm"]}, "gemm_fp8", FP8)


def test_trained_model_lists_only_seen_gpus(fp8_features, tmp_path):
    from synperf.pipeline.train import train_experiment

    d, _ = fp8_features
    train_experiment(str(d / "f.parquet"), str(d / "f.json"), "gemm_fp8", FP8,
                     {"max_epochs": 1, "max_train_rows": 2000, "hidden_sizes": [8]}, 0, 1, str(tmp_path / "m"))
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert sorted(meta["train_gpus"]) == ["h20", "h800_sxm"]


def test_fold_leaks_counts_each_kind():
    labels = np.array(["train", "train", "test_seen", "unseen", "train"])
    gpu = np.array(["a", "c", "a", "c", "b"])
    problem = np.array([1, 2, 3, 4, 3])
    leaks = fold_leaks(labels, gpu, problem, seen=["a", "b"], unseen=["c"])
    assert leaks == {"unseen_gpu_rows_in_training": 1, "non_seen_gpu_rows_in_training": 1,
                     "heldout_problems_in_training": 1}


def test_spec_vector_ignores_names_but_not_bandwidth(registry):
    assert spec_vector(registry["h100_sxm"]) == spec_vector(registry["h800_sxm"])
    assert spec_vector(registry["h100_sxm"]) != spec_vector(registry["h200_sxm"])


def test_unseen_rows_have_the_features_predict_builds(public_data, registry, tmp_path):
    """NeuSight rows record the launched kernel's name and grid; they must not reach the features of any row."""
    from synperf.api import launch_table
    from synperf.data.ingest import neusight
    from synperf.data.schema import PARAM_COLUMNS, reduce_duplicates
    from synperf.model.features import build_features

    t = neusight.ingest(public_data, registry, {}).table
    t, _ = reduce_duplicates(t)
    t = pd.concat([g.iloc[::40] for _, g in t.groupby("gpu")], ignore_index=True)
    assert t.kernel_name.notna().any() and t.grid_ctas.notna().any()
    write_parquet(t, tmp_path / "m.parquet")
    exp = {"kernel": "gemm", "sources": ["neusight"], "seen": ["p4", "p100_pcie_16gb", "v100_pcie_32gb", "t4",
                                                               "a100_pcie_40gb"],
           "unseen": ["a100_pcie_80gb", "h100_sxm", "l4"], "heldout_source_files": "dataset/test/"}
    experiment_features(str(tmp_path / "m.parquet"), "n", exp, str(registry.path),
                        {"v2_launch": (str(tmp_path / "f.parquet"), str(tmp_path / "f.json"))}, 0)
    f = read_table(tmp_path / "f.parquet")
    meta = json.loads((tmp_path / "f.json").read_text())
    un = f[f.split == "unseen"].reset_index(drop=True)
    assert len(un) > 50
    params = un[[c for c in PARAM_COLUMNS if un[c].notna().any()] + ["dtype", "implementation"]]
    api = build_features(launch_table("gemm", params, un["gpu"].tolist(), registry), registry, "v2_launch").frame
    cols = meta["numeric"] + meta["linear"] + ["theoretical_time_us"]
    np.testing.assert_allclose(un[cols].to_numpy(dtype="float64"), api[cols].to_numpy(dtype="float64"), rtol=1e-9)
    # training rows too: the recorded tiles would describe a launch predict never sees
    seen = f[f.split == "train"].reset_index(drop=True)
    sp = seen[[c for c in PARAM_COLUMNS if seen[c].notna().any()] + ["dtype", "implementation"]]
    plain = build_features(launch_table("gemm", sp, seen["gpu"].tolist(), registry), registry, "v2_launch").frame
    np.testing.assert_allclose(seen[cols].to_numpy(dtype="float64"), plain[cols].to_numpy(dtype="float64"), rtol=1e-9)
