"""Few-shot calibration (synperf.evaluation.fewshot's short sweep and corrections) and the goals table
(synperf.evaluation.goals); few-shot on the fingerprint predictor is tested in test_fingerprint."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synperf.evaluation.fewshot import (
    CALIBRATIONS,
    Calibration,
    NeighbourCalibration,
    choose_calibration,
    short_sweep,
)
from synperf.evaluation.goals import NEAREST, goals_table


def _rows(n=600, factor=1.0, slope=0.0, seed=0, experiment="gemm", gpu="x", noise=0.0):
    """A synthetic GPU: predicted latency lognormal around the theoretical time, measured = predicted * factor *
    (t / median t) ** slope * lognormal noise."""
    rng = np.random.default_rng(seed)
    t = np.exp(rng.uniform(0.0, 8.0, n))
    pred = t * np.exp(rng.normal(0.0, 0.3, n))
    meas = pred * factor * (t / np.median(t)) ** slope * np.exp(rng.normal(0.0, noise, n))
    return pd.DataFrame({"experiment": experiment, "kernel": experiment, "gpu": gpu, "latency_us": meas,
                         "predicted_latency_us": pred, "theoretical_time_us": t})


def test_short_sweep_is_deterministic_and_spreads_over_the_problem_space():
    rows = _rows(1000)
    a, b = short_sweep(rows, 32, seed=3), short_sweep(rows, 32, seed=3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, short_sweep(rows, 32, seed=4))
    # one row in each of the 32 equal-count strata of theoretical time
    rank = rows["theoretical_time_us"].rank(method="first").to_numpy().astype(int) - 1
    stratum_of_rank = np.concatenate([np.full(len(s), i) for i, s in enumerate(np.array_split(np.arange(1000), 32))])
    assert sorted(stratum_of_rank[rank[a]]) == list(range(32))
    # the same rule on shuffled rows draws the same launches (shape-based, not position-based)
    shuffled = rows.sample(frac=1.0, random_state=1).reset_index(drop=True)
    picked = np.sort(rows["theoretical_time_us"].to_numpy()[short_sweep(rows, 8, 0)])
    assert len(picked) == 8 and len(np.unique(picked)) == 8
    assert np.ptp(np.log(picked)) > 0.75 * np.ptp(np.log(rows["theoretical_time_us"]))
    assert len(short_sweep(shuffled, 8, 0)) == 8


def test_short_sweep_edge_cases():
    rows = _rows(5)
    assert list(short_sweep(rows, 0)) == []
    assert list(short_sweep(rows, 10)) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        short_sweep(rows, -1)
    with pytest.raises(ValueError):
        short_sweep(rows.drop(columns="theoretical_time_us"), 3)


def _score(rows, k, name, seed=0):
    """MAPE % on the rows a short sweep of ``k`` rows leaves, after correction ``name`` fitted on the sweep."""
    cal = short_sweep(rows, k, seed)
    rest = np.ones(len(rows), dtype=bool)
    rest[cal] = False
    c, e = rows.iloc[cal], rows[rest]
    # a design of one column, the log theoretical time (the trees' features; the other candidates ignore it)
    design = np.log(rows[["theoretical_time_us"]].to_numpy())
    fitted = CALIBRATIONS[name].fit(c["predicted_latency_us"], c["latency_us"], c["theoretical_time_us"], design[cal])
    pred = fitted.apply(e["predicted_latency_us"], e["theoretical_time_us"], design[rest])
    return float(np.mean(np.abs(pred / e["latency_us"].to_numpy() - 1.0)) * 100.0)


def test_constant_factor_is_recovered_and_none_leaves_the_predictions():
    rows = _rows(800, factor=1.7)
    for name in CALIBRATIONS:
        score = _score(rows, 8, name)
        # the trees approach the factor by boosting steps (shrunk leaves): within 0.1%, not exactly
        assert (np.isclose(score, 100 * 0.7 / 1.7) if name == "none" else score < 0.1 if name == "trees_8_leaves"
                else score < 1e-6)
    # no calibration rows: every candidate is the identity
    assert np.allclose(CALIBRATIONS["median_scale"].fit([], [], []).apply([3.0], [1.0]), [3.0])


def test_loglinear_calibration_recovers_a_size_dependent_error():
    rows = _rows(2000, factor=1.3, slope=0.15)
    assert _score(rows, 128, "loglinear_k0_8") < 3.0 < _score(rows, 128, "median_scale")


def test_neighbour_calibration_corrects_each_regime_by_its_own_factor():
    # two regimes of one family, told apart by the predicted efficiency: the model is 2x too slow on the
    # launches it predicts at high efficiency and 1.5x too fast on the others, at every size
    rng = np.random.default_rng(0)
    n = 3000
    t = np.exp(rng.uniform(0.0, 8.0, n))
    fast = rng.random(n) < 0.5
    pred = t / np.where(fast, 0.8, 0.1)
    meas = pred * np.where(fast, 0.5, 1.5)
    rows = pd.DataFrame({"experiment": "gemm", "kernel": "gemm", "gpu": "x", "latency_us": meas,
                         "predicted_latency_us": pred, "theoretical_time_us": t})
    assert _score(rows, 32, "neighbours_8") < 1.0 < 20.0 < _score(rows, 32, "median_scale")
    # fewer calibration rows than neighbours: the median ratio of all of them
    cal = NeighbourCalibration("n", neighbours=8).fit([1.0, 2.0, 4.0], [2.0, 2.0, 12.0], [1.0, 1.0, 1.0])
    assert np.allclose(cal.apply([10.0, 3.0], [1.0, 2.0]), [20.0, 6.0])
    # no calibration rows: unchanged; a neighbour count below 1 or mismatched arrays are refused
    assert np.allclose(NeighbourCalibration("n").fit([], [], []).apply([5.0], [1.0]), [5.0])
    with pytest.raises(ValueError):
        NeighbourCalibration("n", neighbours=0).fit([1.0], [1.0], [1.0])
    with pytest.raises(ValueError):
        NeighbourCalibration("n").fit([1.0, 2.0], [1.0], [1.0, 1.0])


def test_a_calibration_refuses_mismatched_or_non_positive_rows():
    with pytest.raises(ValueError):
        Calibration("median_scale").fit([1.0, 2.0], [1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        Calibration("median_scale").fit([1.0, -2.0], [1.0, 1.0], [1.0, 1.0])


def test_a_gpus_correction_is_chosen_by_cross_validation_on_its_own_rows():
    """On the k rows alone: rows already right keep no correction; a bias of the whole GPU takes a scale factor;
    an error that grows with the launch size takes the log-linear correction; each score is the cross-validated
    MAPE of its candidate (fitted on the other folds), and the simplest within 5% of the lowest wins."""
    right = _rows(n=32, noise=0.01, seed=1)
    name, scores = choose_calibration(right["predicted_latency_us"], right["latency_us"],
                                      right["theoretical_time_us"])
    assert name == "none" and "trees_8_leaves" not in scores   # no design: no candidate that reads one
    biased = _rows(n=32, factor=1.5, noise=0.02, seed=5)
    name, bias_scores = choose_calibration(biased["predicted_latency_us"], biased["latency_us"],
                                           biased["theoretical_time_us"])
    assert name == "median_scale" and bias_scores["none"] > 30 > 3 > bias_scores["median_scale"]
    sloped = _rows(n=32, slope=0.3, noise=0.01, seed=3)
    name, scores = choose_calibration(sloped["predicted_latency_us"], sloped["latency_us"],
                                      sloped["theoretical_time_us"])
    assert name.startswith("loglinear") and scores[name] <= 1.05 * min(scores.values())
    # the score of a candidate is its error on rows it was not fitted on (four folds by theoretical time)
    t = biased["theoretical_time_us"].to_numpy()
    folds = np.empty(32, dtype=int)
    folds[np.argsort(t, kind="stable")] = np.arange(32) % 4
    p, m = biased["predicted_latency_us"].to_numpy(), biased["latency_us"].to_numpy()
    want = np.concatenate([np.abs(p[folds == f] * np.exp(np.median(np.log(m[folds != f] / p[folds != f])))
                                  / m[folds == f] - 1)
                           for f in range(4)]).mean() * 100
    assert bias_scores["median_scale"] == pytest.approx(want)
    assert choose_calibration([1.0], [2.0], [1.0]) == ("none", {})


def _protocol_rows(values: dict, protocol="configured", split="unseen", scope="all", coverage=None):
    """Protocol-table rows: values[(experiment, method)] = MAPE (one fold, pooled)."""
    coverage = coverage or {}
    return [{"protocol": protocol, "fold": protocol, "method": m, "gpu": "ALL", "split": split, "scope": scope,
             "mape_pct": v, "coverage": coverage.get(m, 1.0), "experiment": e} for (e, m), v in values.items()]


def test_goals_table_marks_met_and_not_met():
    fams = ["gemm", "rmsnorm"]
    rows = []
    # configured unseen: ours 8 and 11 (mean 9.5 <= 10 met; worst 11 <= 12 met); gbt 20/30; nearest 1 (partial)
    rows += _protocol_rows({("gemm", "synperf"): 8.0, ("rmsnorm", "synperf"): 11.0, ("gemm", "gbt"): 20.0,
                            ("rmsnorm", "gbt"): 30.0, ("gemm", "nearest_gpu_roofline"): 1.0,
                            ("rmsnorm", "nearest_gpu_roofline"): 1.0, ("gemm", "synperf_mlp"): 0.5,
                            ("rmsnorm", "synperf_mlp"): 0.5}, coverage={"nearest_gpu_roofline": 0.5})
    # configured, the workstation GPU alone (only gemm has it): 18 <= 20 met; gbt 30 on the same rows
    rows += [{**r, "gpu": "l40s"} for r in _protocol_rows({("gemm", "synperf"): 18.0, ("gemm", "gbt"): 30.0})]
    # held-out problems: worst 6 > 5 not met
    rows += _protocol_rows({("gemm", "synperf"): 4.0, ("rmsnorm", "synperf"): 6.0, ("gemm", "gbt"): 3.0,
                            ("rmsnorm", "gbt"): 3.5}, split="test_seen")
    # logo: no synperf, so synperf_mlp; mean 16 > 13 not met; paired: lower on gemm only
    rows += _protocol_rows({("gemm", "synperf_mlp"): 12.0, ("rmsnorm", "synperf_mlp"): 20.0,
                            ("gemm", "roofline"): 50.0, ("rmsnorm", "roofline"): 40.0}, protocol="logo")
    rows += _protocol_rows({("gemm", "synperf_mlp"): 10.0, ("rmsnorm", "synperf_mlp"): 20.0,
                            ("gemm", "nearest_gpu_roofline"): 11.0, ("rmsnorm", "nearest_gpu_roofline"): 15.0},
                           protocol="logo", scope="nearest_covered")
    # logo per GPU: the interval covers 80% (in the band), 95% (above), 50% (below); a GPU without an interval
    # (NaN) and another method's or the pooled row are no cells
    cells = [("gemm", "a100", 0.8), ("gemm", "b200", 0.95), ("rmsnorm", "a100", 0.5), ("rmsnorm", "h100", np.nan)]
    rows += [{"protocol": "logo", "fold": f"logo:{gpu}", "method": "synperf", "gpu": gpu, "split": "unseen",
              "scope": "all", "mape_pct": 10.0, "coverage": 1.0, "interval_coverage": c, "experiment": e}
             for e, gpu, c in cells]
    rows += [{**rows[-1], "method": "gbt", "interval_coverage": 0.8},
             {**rows[-1], "gpu": "ALL", "interval_coverage": 0.8}]
    # held-out problems of seen GPUs per GPU (configured): 82% in the band, 99% above
    rows += [{"protocol": "configured", "fold": "configured", "method": "synperf", "gpu": gpu, "split": "test_seen",
              "scope": "all", "mape_pct": 3.0, "coverage": 1.0, "interval_coverage": c, "experiment": e}
             for e, gpu, c in [("gemm", "a100", 0.82), ("rmsnorm", "a100", 0.99)]]
    # loao: mean 19 <= 20 met
    rows += _protocol_rows({("gemm", "synperf_mlp"): 18.0, ("rmsnorm", "synperf_mlp"): 20.0}, protocol="loao")
    # few-shot: gemm on GPUs a and b gets better with k; rmsnorm worse at k = 8 than at k = 0; GPU c, scored at
    # k = 0 only, is no part of gemm's curve; "other" is no core family
    fewshot = pd.DataFrame([{"experiment": e, "gpu": gpu, "k": k, "mape_pct": v, "uncalibrated_mape_pct": 9.0}
                            for e, gpu, curve in [("gemm", "a", (9.0, 7.0, 4.0)), ("gemm", "b", (9.0, 7.0, 6.0)),
                                                  ("rmsnorm", "a", (9.0, 10.0, 4.0)), ("other", "a", (1, 1, 90.0))]
                            for k, v in zip((0, 8, 32), curve)]
                           + [{"experiment": "gemm", "gpu": "c", "k": 0, "mape_pct": 50.0,
                               "uncalibrated_mape_pct": 50.0}])
    g = goals_table(pd.DataFrame(rows), fewshot, {"launches_per_s": 50_000.0}, families=fams).set_index("goal")
    met = g["met"].tolist()
    assert met == ["yes", "yes", "yes", "no", "no", "no", "yes", "no", "no", "yes", "no", "no", "no"] + [
        "not measured"] * 4
    measured = g["measured"].tolist()
    assert measured[:2] == [9.5, 11.0]
    assert measured[2] == 18.0 and g["best_baseline"].iloc[2] == 30.0 and "over 1 families" in g["detail"].iloc[2]
    assert measured[3] == 1.0  # families lower than nearest_gpu_roofline
    assert measured[4] == 16.0 and measured[6] == 19.0 and measured[7] == 6.0
    assert measured[5] == 1.0 and g["target"].iloc[5] == "all 3 cells"  # one of three interval cells in the band
    assert g["detail"].iloc[5].startswith("1 of 3 cells in the band, 1 below, 1 above")
    # held-out problems' intervals: one of two cells in the band (the leave-one-out rows are no cells of it)
    assert g.index[8].startswith("held-out problems on seen GPUs: the 80% interval covers 70-90%")
    assert measured[8] == 1.0 and g["target"].iloc[8] == "all 2 cells"
    assert g["detail"].iloc[8] == "1 of 2 cells in the band, 0 below, 1 above; coverage % gemm a100 82, rmsnorm a100 99"
    assert measured[9] == pytest.approx(4.5)  # gemm mean 5, rmsnorm 4; "other" is no core family
    assert measured[10] == pytest.approx(8.5)  # k = 8: gemm 7, rmsnorm 10
    assert measured[11] == 1.0 and g["target"].iloc[11] == "all 2 families"  # rmsnorm got worse at k = 8
    assert g["detail"].iloc[11] == "MAPE % at k = 0, 8, 32: gemm 9.0/7.0/5.0; rmsnorm 9.0/10.0/4.0"
    assert measured[12] == 50_000.0
    per = {"gemm": {"launches_per_s": 40_000.0}, "rmsnorm": {"launches_per_s": 60_000.0}}
    g = goals_table(pd.DataFrame(rows), fewshot, {"launches_per_s": 50_000.0, "per_experiment": per,
                                                  "cold_launches": 2000, "cold_launches_per_s": 900.0},
                    families=fams).set_index("goal")
    assert g["detail"].iloc[12] == ("launches/s per family (a batch after the first call): gemm 40,000, rmsnorm "
                                    "60,000; first call of 1,000 launches per family, loading the models: 900")
    # the partial-coverage baseline is not the best baseline; the full-coverage one is
    assert g["best_baseline"].iloc[0] == 25.0 and g["best_baseline_method"].iloc[0] == "gbt"
    assert g["best_baseline"].iloc[4] == 45.0 and g["best_baseline_method"].iloc[4] == "roofline"
    assert "synperf_mlp" in g["detail"].iloc[4]
    g0 = goals_table(pd.DataFrame(rows), None, None, families=fams).set_index("goal")["met"]
    assert g0[g0.index.str.startswith(("few-shot", "batch predict", "serving"))].unique().tolist() == ["not measured"]


def test_serving_goals_read_the_dense_scopes_beside_aiconfigurator():
    from synperf.evaluation.goals import serving_goals
    from synperf.serving.score import DENSE_SEEN, DENSE_UNSEEN

    def scope(name, ttft, tpot):
        return {"scope": name, "rows": 40, "ttft_mape_pct": ttft, "tpot_mape_pct": tpot, "aic_rows": 30,
                "synperf_ttft_mape_on_aic_rows_pct": ttft + 1, "synperf_tpot_mape_on_aic_rows_pct": tpot + 1,
                "aic_ttft_mape_pct": 30.0, "aic_tpot_mape_pct": 9.0}

    t = pd.DataFrame([scope("all fp8 rows", 1.0, 1.0), scope(DENSE_SEEN, 14.0, 11.0), scope(DENSE_UNSEEN, 25.0, 12.0)])
    g = pd.DataFrame(serving_goals(t))
    assert g["met"].tolist() == ["yes", "no", "no", "yes"]     # 14 <= 15, 11 > 10, 25 > 20, 12 <= 15
    assert g["measured"].tolist() == [14.0, 11.0, 25.0, 12.0]
    assert g["best_baseline"].tolist() == [30.0, 9.0, 30.0, 9.0]
    assert "synperf 15.0, aiconfigurator 30.0" in g["detail"].iloc[0]
    assert pd.DataFrame(serving_goals(t.iloc[:1]))["met"].unique().tolist() == ["not measured"]
    # the leave-one-GPU-out table answers the unseen goals
    logo = pd.DataFrame([scope(DENSE_UNSEEN, 18.0, 16.0)])
    g = pd.DataFrame(serving_goals(t, logo))
    assert g["measured"].tolist() == [14.0, 11.0, 18.0, 16.0] and g["met"].tolist() == ["yes", "no", "yes", "no"]
    assert g["goal"].str.contains("leave-one-GPU-out folds").tolist() == [False, False, True, True]
    # with no serving table at all, the goals read "not measured" and none names leave-one-GPU-out folds
    g = pd.DataFrame(serving_goals(None, None))
    assert g["met"].unique().tolist() == ["not measured"]
    assert g["goal"].str.contains("leave-one-GPU-out folds").tolist() == [False, False, False, False]


def test_short_profiling_sweep_draws_k_grid_points_by_the_same_rule():
    from synperf.data.hardware import load_registry
    from synperf.gpu.profiling.grids import load_grid, short_points, sweep_path

    spec = load_registry("config/gpus.yaml")["h100_sxm"]
    points = load_grid(sweep_path("gemm")).points
    short = short_points(points, 32, spec, seed=0)
    assert short == short_points(points, 32, spec, seed=0)
    assert len(short) == 32 and all(p in points for p in short)
    assert len({(p["m"], p["n"], p["k"]) for p in short}) == 32
    m = [p["m"] for p in short]
    assert min(m) <= 16 and max(m) >= 4096  # spread from decode-sized to prefill-sized launches
    assert short_points(points[:10], 32, spec) == points[:10]


@pytest.mark.xdist_group("default_dry_run")
def test_fewshot_and_goals_are_in_the_default_target(default_dry_run):
    proc = default_dry_run
    assert proc.returncode == 0, proc.stdout[-3000:]
    for rule in ("fewshot", "predict_throughput", "report"):
        assert f"rule {rule}:" in proc.stdout
    assert "results/tables/goals.csv" in proc.stdout


def test_the_goals_measure_the_fingerprint_predictor_and_report_the_papers_mlp_beside():
    """``synperf`` is what ``predict`` serves: the measured value, never the best baseline; the paper's MLP
    (``synperf_mlp``) is reported beside in its own column with the same statistic over the same families."""
    rows = _protocol_rows({("gemm", "synperf_mlp"): 8.0, ("gemm", "gbt"): 20.0, ("gemm", "synperf"): 5.0})
    g = goals_table(pd.DataFrame(rows), None, None, families=["gemm"]).set_index("goal")
    first = g.iloc[0]
    assert first["best_baseline_method"] == "gbt" and first["best_baseline"] == 20.0
    assert first["measured"] == 5.0 and first["detail"].startswith("synperf MAPE %")
    assert first["paper_mlp"] == 8.0 and "; synperf_mlp: gemm 8.0" in first["detail"]
    two = _protocol_rows({("gemm", "synperf_mlp"): 8.0, ("gemm", "synperf"): 5.0, ("rmsnorm", "synperf_mlp"): 9.0,
                          ("rmsnorm", "synperf"): 15.0})
    two += _protocol_rows({("gemm", "synperf_mlp"): 8.0, ("gemm", "synperf"): 7.0, ("gemm", NEAREST): 6.0,
                           ("rmsnorm", "synperf_mlp"): 9.0, ("rmsnorm", "synperf"): 15.0, ("rmsnorm", NEAREST): 20.0},
                          protocol="logo", scope="nearest_covered")
    g = goals_table(pd.DataFrame(two), None, None, families=["gemm", "rmsnorm"])
    assert g["measured"].iloc[0] == 10.0 and g["measured"].iloc[1] == 15.0
    assert g["paper_mlp"].iloc[0] == 8.5 and g["paper_mlp"].iloc[1] == 9.0
    # paired with nearest-GPU: each is lower on rmsnorm only
    assert g["measured"].iloc[3] == 1.0 and g["paper_mlp"].iloc[3] == 1.0
    # a family the fingerprint predictor was not scored on: the MLP is measured, nothing beside
    g = goals_table(pd.DataFrame(two[:3]), None, None, families=["gemm", "rmsnorm"])
    assert g["measured"].iloc[0] == 8.5 and g["detail"].iloc[0].startswith("synperf_mlp MAPE %")
    assert np.isnan(g["paper_mlp"].iloc[0])


def test_fewshot_curves_per_gpu_class_average_the_class_gpus():
    from synperf.reporting.fewshot_report import class_curves, fewshot_section

    rows = [("gemm", "h200_sxm", 0, 10.0, "none"), ("gemm", "h200_sxm", 32, 6.0, "none;median_scale"),
            ("gemm", "gb200", 0, 20.0, "none"), ("gemm", "gb200", 32, 8.0, "median_scale"),
            ("gemm", "l40s", 0, 40.0, "none"), ("gemm", "l40s", 32, 30.0, "trees_8_leaves")]
    table = pd.DataFrame(rows, columns=["experiment", "gpu", "k", "mape_pct", "calibration"])
    classes = {"h200_sxm": "sm_9x HBM", "gb200": "sm_10x HBM", "l40s": "sm_8x GDDR"}
    per = class_curves(table, classes).set_index("gpu_class")
    assert per.loc["sm_8x GDDR", "k = 32 MAPE %"] == 30.0 and per.loc["sm_8x GDDR", "gpus"] == "l40s"
    merged = class_curves(table, {**classes, "gb200": "sm_9x HBM"}).set_index("gpu_class")
    assert merged.loc["sm_9x HBM", "k = 0 MAPE %"] == 15.0 and merged.loc["sm_9x HBM", "gpus"] == "gb200, h200_sxm"
    with pytest.raises(KeyError, match=r"no GPU class for \['l40s'\]"):
        class_curves(table, {"h200_sxm": "sm_9x HBM", "gb200": "sm_10x HBM"})
    choice = pd.DataFrame({"k": [32], "calibration": ["refit: borrowed own-GPU corrections"], "chosen": [True]})
    text = "\n".join(fewshot_section(table, choice, "f.png", ["gemm"], classes))
    assert "Per GPU class" in text and "| gemm | sm_8x GDDR |" in text
    assert "k = 32: `median_scale` (2), `none` (1), `trees_8_leaves` (1). Refits that borrow" in text
    assert "own-GPU corrections (experiments): k = 32: 1." in text
    assert "Per GPU class" not in "\n".join(fewshot_section(table, choice, "f.png", ["gemm"]))


def test_tree_calibration_learns_a_residual_that_depends_on_the_design_and_needs_the_design():
    from synperf.evaluation.fewshot import CALIBRATIONS, TreeCalibration

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (128, 3))
    pred = rng.uniform(10, 100, 128)
    # the GPU runs launches with x0 > 0.5 1.5x slower than predicted: one factor cannot fix both halves
    measured = pred * np.where(x[:, 0] > 0.5, 1.5, 1.0)
    theo = pred / 2
    fitted = CALIBRATIONS["trees_8_leaves"].fit(pred, measured, theo, x)
    new = rng.uniform(0, 1, (200, 3))
    p_new = rng.uniform(10, 100, 200)
    truth = p_new * np.where(new[:, 0] > 0.5, 1.5, 1.0)
    tree_err = np.mean(np.abs(fitted.apply(p_new, p_new / 2, new) / truth - 1))
    scale_err = np.mean(np.abs(CALIBRATIONS["median_scale"].fit(pred, measured, theo).apply(p_new, p_new / 2)
                               / truth - 1))
    assert tree_err < 0.05 < 0.15 < scale_err
    # a design column without a finite value on the calibration rows (a feature the family lacks) is left out
    gap = np.column_stack([x, np.full(len(x), np.nan)])
    with_gap = CALIBRATIONS["trees_8_leaves"].fit(pred, measured, theo, gap)
    assert np.allclose(with_gap.apply(p_new, p_new / 2, np.column_stack([new, np.ones(len(new))])),
                       fitted.apply(p_new, p_new / 2, new))
    # no rows: the identity; rows without their design are refused
    assert np.allclose(TreeCalibration("t").fit([], [], []).apply([5.0], [1.0]), [5.0])
    with pytest.raises(ValueError, match="needs the design"):
        TreeCalibration("t").fit(pred, measured, theo)
    with pytest.raises(ValueError, match="needs the design"):
        fitted.apply(p_new, p_new / 2)
