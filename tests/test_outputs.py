"""The finished main job keeps the split contract: checks on `results/` and `models/` after a run.

These need the outputs of `snakemake --cores all`; without them they skip, unless SYNPERF_REQUIRE_OUTPUTS=1
(set by `.ci/run` after the main job), where a missing output fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import need_output

REPO = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
PRIMARY = CONFIG["feature_set"]


def primary(experiment: str) -> str:
    """The experiment's primary feature set: its config entry's, else the top-level one."""
    from synperf.model.features import primary_feature_set

    return primary_feature_set(CONFIG["experiments"][experiment], PRIMARY)


@pytest.mark.parametrize("experiment", sorted(CONFIG["experiments"]))
def test_no_model_trained_on_an_unseen_gpu(experiment):
    exp = CONFIG["experiments"][experiment]
    metas = sorted((REPO / "models" / experiment).glob("*/meta.json"))
    need_output(REPO / "models" / experiment / f"{primary(experiment)}-all" / "meta.json")
    for path in metas:
        meta = json.loads(path.read_text())
        assert set(meta["train_gpus"]) <= set(exp["seen"]), path
        assert not set(meta["train_gpus"]) & set(exp.get("unseen", [])), path


@pytest.mark.parametrize("experiment", sorted(CONFIG["experiments"]))
def test_no_heldout_problem_in_training_and_leak_check_clean(experiment):
    from synperf.data.io import read_table

    rep = json.loads(need_output(REPO / "results" / "leak_check" / primary(experiment) / f"{experiment}.json")
                     .read_text())
    assert rep["ok"] and not any(rep["leaks"].values())
    t = read_table(need_output(REPO / "results" / "features" / primary(experiment) / f"{experiment}.parquet"),
                   columns=["gpu", "split", "problem_key", "source_file"])
    train = t[t.split == "train"]
    assert not np.isin(train["problem_key"], t.loc[t.split == "test_seen", "problem_key"]).any()
    assert set(train["gpu"]) <= set(CONFIG["experiments"][experiment]["seen"])
    if experiment == "gemm_fp8":
        assert train["source_file"].str.endswith("gemm_fp8_train.csv").all()
        assert t.loc[t.split != "train", "source_file"].str.endswith("gemm_fp8_test.csv").all()


def test_selection_chose_the_configured_primary_feature_set():
    choice = json.loads(need_output(REPO / "results" / "selection" / "choice.json").read_text())
    assert choice["configured"] == PRIMARY
    assert choice["agrees"], (f"leave-one-seen-GPU-out selection chose {choice['chosen']}, the config says "
                              f"{PRIMARY}: set feature_set to the chosen one")
    # per experiment, over only the experiments that may inform it: its primary set is the rule's choice
    assert choice["primary"] == {e: primary(e) for e in CONFIG["experiments"]}
    assert choice["disagree"] == [], (f"without their test GPUs the rule picks {choice['per_experiment']}: set "
                                      "those experiments' feature_set")


@pytest.mark.parametrize("experiment", sorted(CONFIG["experiments"]))
def test_models_train_with_the_recipe_their_experiment_chose(experiment):
    recipes = (CONFIG.get("selection") or {}).get("recipes")
    if not recipes:
        pytest.skip("no training recipes configured")
    choice = json.loads(need_output(REPO / "results" / "selection" / experiment / "recipe.json").read_text())
    meta = json.loads(need_output(REPO / "models" / experiment / f"{primary(experiment)}-all" / "meta.json")
                      .read_text())
    assert meta["recipe"] == choice["chosen"] and meta["feature_set"] == primary(experiment)
    for key, value in choice["overrides"].items():
        assert meta["train_config"][key] == value, (experiment, key)


def test_fewshot_scores_each_unseen_gpu_from_what_predict_serves_and_chooses_once_per_k():
    """The few-shot table's k = 0 rows are the configured split's `synperf` MAPE of each unseen GPU (the same
    predictor, uncalibrated); every k > 0 row names the corrections its draws chose on their own rows; the choice
    to borrow own-GPU corrections is the model's record, one way per k."""
    import pandas as pd

    from synperf.evaluation.fewshot import CALIBRATIONS
    from synperf.model.fingerprint import FINGERPRINT_FILE, FingerprintModel

    table = pd.read_csv(need_output(REPO / "results" / "tables" / "fewshot.csv"))
    choice = pd.read_csv(need_output(REPO / "results" / "tables" / "fewshot_choice.csv"))
    for experiment, exp in sorted(CONFIG["experiments"].items()):
        if not exp.get("unseen") or experiment not in set(table["experiment"]):
            continue
        t = table[table["experiment"] == experiment]
        assert set(t["gpu"]) == set(exp["unseen"]), experiment
        prot = pd.read_csv(need_output(REPO / "results" / "protocols" / f"{experiment}.csv"))
        ref = prot[(prot["protocol"] == "configured") & (prot["method"] == "synperf") & (prot["scope"] == "all")
                   & (prot["split"] == "unseen") & (prot["gpu"] != "ALL")].set_index("gpu")["mape_pct"]
        k0 = t[t["k"] == 0].set_index("gpu")["mape_pct"]
        assert np.allclose(k0.sort_index(), ref.reindex(k0.index).sort_index(), rtol=1e-6), experiment
        model = FingerprintModel.load(REPO / "models" / experiment / FINGERPRINT_FILE)
        mine = choice[(choice["for_experiment"] == experiment) & choice["chosen"]]
        refit = mine["calibration"].str.startswith("refit:")
        assert refit.all(), experiment
        names = {n for v in t[t["k"] > 0]["calibration"] for n in str(v).split(";")}
        assert names <= set(CALIBRATIONS) and (t[t["k"] == 0]["calibration"] == "none").all(), experiment
        # the choice to borrow own-GPU corrections: one way per k, the model's
        borrowed = mine[refit].set_index("k")["calibration"].str.startswith("refit: borrowed")
        assert {int(k): bool(v) for k, v in model.choice["fewshot_borrow"].items()} == borrowed.to_dict(), experiment


def test_plan_on_the_trained_models_gives_intervals_flags_and_memory(public_data, capsys):
    """`synperf plan` on the main job's models, the planning question of the README: every priced row carries an
    80% interval around its total, a seen/unseen flag per kernel family (H100 trained for gemm, L40S never), and
    a memory column; Llama-3.1-70B in bf16 does not fit one L40S and is listed, not priced."""
    import pandas as pd

    from synperf import cli

    need_output(REPO / "models" / "gemm")
    coll = public_data / "pipeweave" / "dataset" / "collective"
    assert cli.main(["plan", "--model", "llama-3.1-70b", "--gpus", "h100_sxm,h200_sxm,b200,l40s", "--tp", "1,2,4",
                     "--isl", "2000", "--osl", "200", "--batch", "16", "--collectives", str(coll),
                     "--models", "evaluation", "--format", "json"]) == 0
    df = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert len(df) == 12
    ok = df[df["status"] == "ok"]
    assert {("h100_sxm", 4), ("l40s", 4), ("b200", 1)} <= set(zip(ok["gpu"], ok["tp"]))
    assert not ((df["gpu"] == "l40s") & (df["tp"] == 1) & (df["status"] == "ok")).any()
    assert (ok["total_low_s"] < ok["total_s"]).all() and (ok["total_s"] < ok["total_high_s"]).all()
    assert (ok["memory_need_gb"] <= ok["memory_usable_gb"]).all()
    flags = ok.set_index(["gpu", "tp"])
    assert flags.loc[("h100_sxm", 4), "flag_gemm"] == "trained"
    assert flags.loc[("l40s", 4), "flag_gemm"] == "unseen"


@pytest.mark.parametrize("experiment", sorted(e for e, x in CONFIG["experiments"].items() if x.get("unseen")))
def test_the_fingerprint_predictor_predict_serves_is_the_one_the_configured_split_scored(experiment):
    """`models/<experiment>/fingerprint.joblib` is fitted on seen GPUs only, and its MAPE on each unseen GPU is the
    configured split's `synperf` number: what the report scores is what `predict` serves."""
    import pandas as pd

    from synperf.data.hardware import load_registry
    from synperf.model.fingerprint import FINGERPRINT_FILE, FingerprintModel

    exp = CONFIG["experiments"][experiment]
    model = FingerprintModel.load(need_output(REPO / "models" / experiment / FINGERPRINT_FILE))
    assert set(model.fitted) <= set(exp["seen"]) and model.feature_set == PRIMARY
    scores = pd.read_csv(need_output(REPO / "results" / "protocols" / f"{experiment}.csv"))
    scores = scores[(scores["protocol"] == "configured") & (scores["method"] == "synperf")
                    & (scores["split"] == "unseen") & (scores["scope"] == "all") & (scores["gpu"] != "ALL")]
    table = pd.read_parquet(need_output(REPO / "results" / "features" / PRIMARY / f"{experiment}.parquet"))
    registry = load_registry(REPO / CONFIG["gpu_registry"], REPO / CONFIG.get("hardware_measurements_dir",
                                                                               "data/hardware"))
    assert set(scores["gpu"]) == set(exp["unseen"]) & set(table["gpu"].astype(str))
    for gpu, want in zip(scores["gpu"], scores["mape_pct"]):
        rows = table[(table["gpu"].astype(str) == gpu) & (table["split"].astype(str) == "unseen")]
        y = rows["latency_us"].to_numpy(dtype="float64")
        got = float(np.mean(np.abs(model.predict(rows, registry) / y - 1.0)) * 100.0)
        assert got == pytest.approx(want, rel=1e-6, abs=1e-6), gpu
