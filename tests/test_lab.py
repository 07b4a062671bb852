"""The fast accuracy loop (``python -m synperf.lab``) on the small config's protocol family, from feature tables
built here from real Vidur rows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from synperf import lab
from synperf.evaluation.goals import GOAL_COLUMNS
from synperf.pipeline.features import experiment_features

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "config" / "test" / "config.yaml"


def test_a_sample_keeps_every_gpus_rows_of_the_drawn_problems_and_depends_only_on_the_seed():
    t = pd.DataFrame({"problem_key": np.repeat(np.arange(50, dtype="uint64"), 3),
                      "gpu": np.tile(["a", "b", "c"], 50), "latency_us": np.arange(150.0)})
    s = lab.sample_problems(t, 10, seed=3)
    assert s["problem_key"].nunique() == 10 and len(s) == 30
    assert (s.groupby("problem_key")["gpu"].nunique() == 3).all()
    assert s.equals(lab.sample_problems(t.copy(), 10, seed=3))
    assert set(s["problem_key"]) != set(lab.sample_problems(t, 10, seed=4)["problem_key"])
    assert len(lab.sample_problems(t, 0, seed=3)) == len(lab.sample_problems(t, 80, seed=3)) == 150


@pytest.fixture(scope="module")
def small_features(vidur_measurements, tmp_path_factory):
    """The small config's protocol families' feature tables (its top-level feature set), built from Vidur rows."""
    reg, allp, _ = vidur_measurements
    cfg = yaml.safe_load(SMALL.read_text())
    root = tmp_path_factory.mktemp("lab_features")
    for name in cfg["protocols"]["experiments"]:
        exp = cfg["experiments"][name]
        fs = cfg["feature_set"]
        (root / fs).mkdir(exist_ok=True)
        experiment_features(str(allp), name, exp, reg,
                            {fs: (str(root / fs / f"{name}.parquet"), str(root / fs / f"{name}.json"))},
                            int(cfg["seed"]))
    return cfg, root


def test_the_lab_command_scores_leave_one_gpu_out_on_the_small_config(small_features, tmp_path, capsys):
    cfg, features = small_features
    assert cfg["protocols"]["experiments"] == ["rmsnorm"]
    out = tmp_path / "lab" / "goals.csv"
    code = lab.main(["--config", str(SMALL), "--features", str(features),
                     "--problems", "300", "--workers", "1", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "unseen-GPU MAPE % per family and method (300 problems per experiment)" in printed
    goals = pd.read_csv(out)
    assert list(goals.columns) == GOAL_COLUMNS
    summary = pd.read_csv(out.with_name("goals_summary.csv"))
    # one leave-one-GPU-out fold per GPU of the experiment, each testing that GPU
    logo = summary[(summary["protocol"] == "logo") & (summary["scope"] == "all")]
    assert sorted(logo["fold"].unique()) == ["logo:a100_sxm4_80gb", "logo:a40", "logo:h100_sxm"]
    # the sample: 300 problems; a fold's unseen rows are its GPU's rows of them
    unseen = logo[(logo["method"] == "roofline") & (logo["split"] == "unseen") & (logo["gpu"] != "ALL")]
    assert (unseen["fold"].str.removeprefix("logo:") == unseen["gpu"]).all()
    assert 300 <= unseen["n_total"].sum() <= 3 * 300
    # the goals' leave-one-GPU-out mean is the served predictor's (synperf) mean over the folds of its pooled
    # unseen MAPE, not the MLP's
    pooled = logo[(logo["split"] == "unseen") & (logo["gpu"] == "ALL")].groupby("method")["mape_pct"].mean()
    assert {"synperf", "synperf_mlp", "nearest_gpu_roofline", "roofline"} <= set(pooled.index)
    row = goals[goals["goal"].str.startswith("leave-one-GPU-out, unseen GPUs: mean")].iloc[0]
    assert row["measured"] == pytest.approx(pooled["synperf"])
    assert row["detail"].startswith("synperf MAPE %") and row["met"] in ("yes", "no")
    # protocols the lab did not run are not measured
    assert goals[goals["goal"].str.startswith("configured split")]["met"].eq("not measured").all()


def test_the_lab_names_a_missing_feature_table_and_an_unknown_method(small_features, tmp_path, capsys):
    _, features = small_features
    assert lab.main(["--config", str(SMALL), "--features", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "rmsnorm.parquet: no cached feature table" in err and "snakemake --cores all lab_features" in err
    assert lab.main(["--config", str(SMALL), "--features", str(features), "--methods", "synperf_mpl"]) == 2
    assert "--methods: unknown ['synperf_mpl']" in capsys.readouterr().err
