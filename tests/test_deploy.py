"""The `deploy` target: a real Snakemake run of config/test/deploy.yaml (SiLU&Mul on Vidur rows, tiny budgets) in a
temporary folder, and `synperf.api.predict` choosing between the deploy and the evaluation models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO

from synperf.api import predict
from synperf.data.io import InputError
from synperf.data.schema import KEY_COLUMNS
from synperf.model.estimator import data_hash
from synperf.model.fingerprint import FingerprintModel


@pytest.fixture(scope="module")
def deployed(public_data, tmp_path_factory) -> Path:
    """The folder of a finished `snakemake deploy` run on config/test/deploy.yaml (about 40 s on two cores)."""
    d = tmp_path_factory.mktemp("deploy")
    cfg = yaml.safe_load((REPO / "config/test/deploy.yaml").read_text())
    cfg.update(public_data_dir=str(public_data), gpu_registry=str(REPO / cfg["gpu_registry"]),
               public_data_manifest=str(REPO / cfg["public_data_manifest"]))
    (d / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "deploy", "-s", str(REPO / "Snakefile"), "--directory",
                           str(d), "--cores", "2", "--replace-workflow-config", "--configfile", str(d / "c.yaml")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return d


@pytest.mark.xdist_group("deploy")
def test_deploy_trains_on_every_measured_gpu_with_the_evaluation_choices(deployed):
    exp = deployed / "models/deploy/silu_mul"
    meta = json.loads((exp / "mlp/meta.json").read_text())
    table = pd.read_parquet(deployed / "results/features/v2/silu_mul.parquet")
    # every GPU of the feature table, the unseen a40 included, and every row (held-out problems too)
    assert meta["train_gpus"] == sorted(table["gpu"].astype(str).unique()) == ["a100_sxm4_80gb", "a40", "h100_sxm"]
    assert meta["unseen_gpus"] == [] and set(table["split"]) == {"train", "test_seen", "unseen"}
    assert meta["data_sha256"] == data_hash(table[list(KEY_COLUMNS) + ["latency_us"]])   # its input: every row
    # the recipe the selection chose on the seen GPUs, the same feature set and training settings
    recipe = json.loads((deployed / "results/selection/silu_mul/recipe.json").read_text())
    assert meta["recipe"] == recipe["chosen"] and meta["feature_set"] == "v2"
    fp = FingerprintModel.load(exp / "fingerprint.joblib")
    assert sorted(fp.fitted) == meta["train_gpus"]
    # the target trains no evaluation model and scores nothing
    assert not (deployed / "models/silu_mul").exists() and not (deployed / "results/predictions").exists()


@pytest.mark.xdist_group("deploy")
def test_predict_prefers_the_deploy_models_and_says_which_set_answered(deployed, registry):
    models = deployed / "models"
    params = {"num_tokens": [16, 4096], "hidden_size": 8192, "dtype": "bfloat16"}
    out = predict("silu_mul", params, "a40", models_dir=models, registry=registry)
    assert out.attrs["model_set"] == "deploy" and set(out["model_set"]) == {"deploy"}
    # the deploy set's fingerprint predictor answers, fitted on every measured GPU; its MLP answers when asked
    assert "a40" in out.attrs["training_gpus"]
    assert out.attrs["model_dir"] == str(models / "deploy/silu_mul/fingerprint.joblib")
    assert out["gpu_constants"].str.startswith("fitted on a40 measurements").all()
    mlp = predict("silu_mul", params, "a40", models_dir=models, registry=registry, predictor="mlp")
    assert mlp.attrs["model_dir"] == str(models / "deploy/silu_mul/mlp") and mlp["predicted_latency_us"].gt(0).all()
    assert out["predicted_latency_us"].gt(0).all() and out["predicted_latency_low_us"].notna().all()
    same = predict("silu_mul", params, "a40", models_dir=models, registry=registry, models="deploy")
    assert same["predicted_latency_us"].tolist() == out["predicted_latency_us"].tolist()
    with pytest.raises(InputError, match="no trained model"):        # no evaluation model in this folder
        predict("silu_mul", params, "a40", models_dir=models, registry=registry, models="evaluation")
    with pytest.raises(InputError, match="no deploy model of 'gemm'"):
        predict("gemm", {"m": 1, "n": 1, "k": 1, "dtype": "bfloat16"}, "a40", models_dir=models, registry=registry,
                models="deploy")
    with pytest.raises(InputError, match="models = 'best'"):
        predict("silu_mul", params, "a40", models_dir=models, registry=registry, models="best")


@pytest.mark.xdist_group("default_dry_run")
def test_the_default_target_does_not_train_deploy_models(default_dry_run):
    assert default_dry_run.returncode == 0, default_dry_run.stdout[-2000:]
    assert "deploy_model" not in default_dry_run.stdout
