"""Model selection sees the seen GPUs' training rows only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synperf.evaluation.selection import choose, losgo_folds, score_feature_set
from synperf.model.estimator import TrainConfig

TRAIN = TrainConfig(hidden_sizes=[32, 16], max_epochs=6, early_stopping_patience=3, batch_size=256)


def test_losgo_folds_use_only_training_rows_of_seen_gpus():
    t = pd.DataFrame({"gpu": ["a", "a", "b", "b", "c", "c", "a"],
                      "split": ["train", "test_seen", "train", "train", "unseen", "unseen", "train"]})
    folds = losgo_folds(t)
    assert [f.name for f in folds] == ["losgo:a", "losgo:b"]
    a = folds[0].labels.tolist()
    assert a == ["unseen", "unused", "train", "train", "unused", "unused", "unseen"]
    assert folds[1].labels.tolist() == ["train", "unused", "unseen", "unseen", "unused", "unused", "train"]
    assert losgo_folds(t[t.gpu != "b"]) == []          # one seen GPU: nothing to validate on


def test_scores_never_touch_unseen_or_heldout_rows(vidur_gemm, registry):
    table, meta = vidur_gemm
    # poison every row the selection must not see: if it used them, the MAPE would explode
    poisoned = table.copy()
    bad = poisoned["split"].isin(["test_seen", "unseen"]).to_numpy()
    poisoned.loc[bad, "latency_us"] = poisoned.loc[bad, "latency_us"] * 1000
    clean = score_feature_set(table, meta, "gemm_fp16_vidur", registry, TRAIN, log=lambda *_: None)
    dirty = score_feature_set(poisoned, meta, "gemm_fp16_vidur", registry, TRAIN, log=lambda *_: None)
    assert list(clean["validation_gpu"]) == ["a100_sxm4_80gb", "h100_sxm"]
    np.testing.assert_allclose(clean["mape_pct"], dirty["mape_pct"])
    assert (clean["n_rows"] == [int(((table.split == "train") & (table.gpu == g)).sum())
                                for g in clean["validation_gpu"]]).all()


def test_choose_takes_the_lowest_mean_over_experiments_that_scored_every_candidate():
    s = pd.DataFrame({"experiment": ["e1", "e1", "e1", "e2", "e2", "e3"],
                      "feature_set": ["x", "x", "y", "x", "y", "x"],
                      "mape_pct": [10.0, 20.0, 12.0, 30.0, 40.0, 1.0]})
    chosen, table = choose(s)
    # e1: x 15, y 12; e2: x 30, y 40; e3 lacks y and does not count; geometric means x 21.2, y 21.9
    assert chosen == "x"
    t = table.set_index("experiment")
    assert list(t.index) == ["e1", "e2", "geometric mean"]
    assert t.loc["e1", "best"] == "y" and t.loc["geometric mean", "x"] == pytest.approx((15 * 30) ** 0.5)
    # one blow-up is a factor, not the whole sum: x fails on e3 by 100x but wins elsewhere by 2x twice
    s2 = pd.DataFrame({"experiment": ["e1", "e1", "e2", "e2", "e3", "e3"], "feature_set": ["x", "y"] * 3,
                       "mape_pct": [5.0, 10.0, 5.0, 10.0, 1000.0, 10.0]})
    assert choose(s2)[0] == "y"
    s3 = s2.assign(mape_pct=[5.0, 10.0, 5.0, 10.0, 30.0, 10.0])
    assert choose(s3)[0] == "x"
    # the configured set stays within 5% of the lowest (x 21.2, y 21.9: y is 3.2% higher), not beyond it
    assert choose(s, configured="y")[0] == "y"
    assert choose(s, configured="y", min_gain=0.03)[0] == "x"
    assert choose(s3, configured="y")[0] == "x"  # x 9.1 (5, 5, 30), y 10.0: y is 10% higher
    assert choose(s2, configured="x")[0] == "y"  # x is 10x worse on e3: far beyond the margin
    with pytest.raises(ValueError, match="every candidate"):
        choose(s[s.experiment == "e3"].assign(feature_set=["x"]).pipe(
            lambda d: pd.concat([d, d.assign(experiment="e4", feature_set="y")])))


def test_recipe_choice_uses_the_scores_alone_and_defaults_to_the_first_recipe():
    from synperf.evaluation.selection import choose_recipe

    recipes = {"paper": {"loss": "mre"}, "log_ratio": {"loss": "log_ratio"}, "small": {"min_steps_per_epoch": 16}}
    scores = pd.DataFrame({"recipe": ["paper", "paper", "log_ratio", "log_ratio", "small", "small"],
                           "fold": ["losgo:a", "losgo:b"] * 3, "mape_pct": [30.0, 50.0, 20.0, 40.0, 35.0, 5.0]})
    c = choose_recipe(scores, recipes)
    assert c["chosen"] == "small" and c["overrides"] == {"min_steps_per_epoch": 16}
    assert c["mape_pct"] == {"paper": 40.0, "log_ratio": 30.0, "small": 20.0} and c["folds"] == 2
    # a tie goes to the recipe listed first; no fold (one seen GPU) keeps the first
    tie = scores.assign(mape_pct=[10.0, 10.0, 10.0, 10.0, 12.0, 12.0])
    assert choose_recipe(tie, recipes)["chosen"] == "paper"
    assert choose_recipe(scores.iloc[0:0], recipes)["chosen"] == "paper"


def test_a_recipe_within_the_noise_margin_of_an_earlier_one_does_not_displace_it():
    from synperf.evaluation.selection import choose_recipe

    recipes = {"paper": {"loss": "mre"}, "log_ratio": {"loss": "log_ratio"}, "small": {"min_steps_per_epoch": 16}}

    def means(paper, log_ratio, small):
        return pd.DataFrame({"recipe": ["paper", "log_ratio", "small"], "fold": "losgo:a",
                             "mape_pct": [paper, log_ratio, small]})

    # small leads log_ratio by 0.1%: log_ratio (listed earlier) is chosen; paper is 7% behind the best: not chosen
    assert choose_recipe(means(34.18, 31.84, 31.815), recipes)["chosen"] == "log_ratio"
    # the default stays unless another recipe is more than 5% lower
    assert choose_recipe(means(26.16, 25.69, 28.70), recipes)["chosen"] == "paper"
    assert choose_recipe(means(26.16, 25.69, 24.0), recipes)["chosen"] == "small"
    assert choose_recipe(means(10.0, 9.6, 9.0), recipes, min_gain=0.0)["chosen"] == "small"


def test_recipe_scores_never_touch_unseen_or_heldout_rows(vidur_gemm, registry, tmp_path):
    """The recipe stage of score_selection on a poisoned table chooses and scores exactly as on the clean one."""
    import json

    from synperf.data.io import write_parquet
    from synperf.pipeline.selection import score_selection

    table, meta = vidur_gemm
    poisoned = table.copy()
    bad = poisoned["split"].isin(["test_seen", "unseen"]).to_numpy()
    poisoned.loc[bad, "latency_us"] = poisoned.loc[bad, "latency_us"] * 1000
    recipes = {"paper": {"loss": "mre"}, "log_ratio": {"loss": "log_ratio"}}
    out = {}
    for name, t in (("clean", table), ("poisoned", poisoned)):
        d = tmp_path / name
        d.mkdir()
        write_parquet(t, d / "f.parquet")
        (d / "f.json").write_text(json.dumps(meta))
        score_selection([], "gemm_fp16_vidur", str(registry.path), 0,
                        {"hidden_sizes": [32, 16], "max_epochs": 6, "early_stopping_patience": 3, "batch_size": 256},
                        1, recipes=recipes, recipe_features=(str(d / "f.parquet"), str(d / "f.json")),
                        out_recipes=str(d / "r.csv"), out_recipe=str(d / "r.json"))
        out[name] = (pd.read_csv(d / "r.csv"), json.loads((d / "r.json").read_text()))
    np.testing.assert_allclose(out["clean"][0]["mape_pct"], out["poisoned"][0]["mape_pct"])
    assert out["clean"][1] == out["poisoned"][1]
    assert set(out["clean"][0]["recipe"]) == {"paper", "log_ratio"}


def test_the_feature_set_check_names_experiments_whose_test_gpus_tipped_the_pooled_choice(tmp_path):
    import json

    import pandas as pd

    from synperf.pipeline.selection import choose_feature_set

    def scores(name, **mape):
        return pd.DataFrame([{"experiment": name, "feature_set": fs, "fold": f"losgo:{g}", "validation_gpu": g,
                              "n_train": 1, "n_rows": 1, "mape_pct": v} for fs, v in mape.items() for g in "ab"])

    experiments = {"e1": {"kernel": "gemm", "seen": ["a", "b"], "unseen": ["t"]},
                   "e2": {"kernel": "rmsnorm", "seen": ["c", "d"], "unseen": ["u"]},
                   "e3": {"kernel": "silu_mul", "seen": ["t", "c"], "unseen": ["v"]}}
    files = []
    # e1 and e2 favour v1 by 10%; e3 (trained on e1's test GPU t) favours v2 by far: pooled, v2 wins
    for name, table in (("e1", scores("e1", v1=10.0, v2=11.0)), ("e2", scores("e2", v1=20.0, v2=22.0)),
                        ("e3", scores("e3", v1=40.0, v2=20.0))):
        files.append(str(tmp_path / f"{name}.csv"))
        table.to_csv(files[-1], index=False)
    choose_feature_set(files, "v2", {"max_epochs": 1}, str(tmp_path / "t.csv"), str(tmp_path / "c.json"),
                       experiments=experiments)
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["chosen"] == "v2" and c["agrees"]
    assert c["per_experiment"] == {"e1": "v1", "e2": "v2", "e3": "v2"} and c["disagree"] == ["e1"]
    assert c["primary"] == {"e1": "v2", "e2": "v2", "e3": "v2"}
    # e1 naming v1 as its own primary set: the check then agrees for every experiment
    experiments["e1"]["feature_set"] = "v1"
    choose_feature_set(files, "v2", {"max_epochs": 1}, str(tmp_path / "t.csv"), str(tmp_path / "c.json"),
                       experiments=experiments)
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["primary"]["e1"] == "v1" and c["per_experiment"]["e1"] == "v1" and c["disagree"] == []


def test_an_experiment_that_may_hold_the_same_measurements_never_informs_a_choice():
    import pandas as pd

    from synperf.evaluation.evidence import informing_experiments
    from synperf.pipeline.selection import informed_choice

    experiments = {"gemm": {"kernel": "gemm", "sources": ["aiconfigurator"], "seen": ["a", "b"], "unseen": ["t"]},
                   "gemm_any": {"kernel": "gemm", "seen": ["c", "d"], "unseen": []},
                   "gemm_other": {"kernel": "gemm", "sources": ["vidur"], "seen": ["c", "d"], "unseen": []},
                   "norm": {"kernel": "rmsnorm", "sources": ["aiconfigurator"], "seen": ["c", "x"], "unseen": []},
                   "norm_t": {"kernel": "rmsnorm", "seen": ["c"], "unseen": []}}
    rows = [{"experiment": n, "feature_set": fs, "fold": f"losgo:{g}", "validation_gpu": g, "mape_pct": v}
            for n, fs, v in (("gemm", "v1", 10.0), ("gemm", "v2", 30.0), ("gemm_any", "v1", 50.0),
                             ("gemm_any", "v2", 10.0), ("gemm_other", "v1", 10.0), ("gemm_other", "v2", 12.0),
                             ("norm", "v1", 10.0), ("norm", "v2", 11.0), ("norm_t", "v1", 90.0),
                             ("norm_t", "v2", 10.0))
            for g in (["t"] if n == "norm_t" else ["c", "d"])]
    scores = pd.DataFrame(rows)
    frames = {n: g for n, g in scores.groupby("experiment")}
    # gemm_any reads every source of gemm (so maybe gemm's held-out problems); norm_t validates on the tested GPU t
    assert informing_experiments("gemm", experiments, ["t"], scores=frames) == ["gemm", "gemm_other", "norm"]
    assert informing_experiments("gemm", experiments, ["t"], scores=frames, own=False) == ["gemm_other", "norm"]
    # without them v1 wins by far; with gemm_any and norm_t pooled, v2 would
    assert informed_choice(scores, "gemm", experiments, ["t"], "v2") == "v1"
    assert informed_choice(scores, "gemm", experiments, [], "v2", own=False) == "v2"
    # nothing left to read: no evidence either way
    assert informed_choice(scores, "gemm", experiments, ["c", "d", "x"], "v2", own=False) is None
