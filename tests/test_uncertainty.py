"""Prediction intervals from the leave-one-seen-GPU-out errors of the chosen path (synperf.model.uncertainty)."""
import numpy as np
import pandas as pd
import pytest

from synperf.model import uncertainty as U


def rows(path, gpu, ratios, labels=None, fold=None, start=0):
    """Path rows with predicted 100 us and measured 100 * ratio."""
    n = len(ratios)
    return pd.DataFrame({"experiment": "e", "kernel": "gemm", "gpu": gpu, "fold": fold or f"losgo:{gpu}",
                         "row": np.arange(start, start + n), "path": path, "latency_us": 100.0 * np.asarray(ratios),
                         "predicted_latency_us": 100.0, "prediction_path": labels if labels is not None else path,
                         "theoretical_time_us": 50.0})


def test_interval_ratios_are_the_widest_per_gpu_quantiles_of_measured_over_predicted():
    a = rows("mlp", "a", np.linspace(0.9, 1.1, 101))
    b = rows("mlp", "b", np.linspace(1.2, 1.6, 101))
    iv = U.fit_intervals(pd.concat([a, b]), "mlp")
    assert iv["mlp"]["low_ratio"] == pytest.approx(0.92)    # a's 10th percentile
    assert iv["mlp"]["high_ratio"] == pytest.approx(1.56)   # b's 90th percentile
    assert iv["mlp"]["n_rows"] == 202 and iv["*"] == iv["mlp"]
    assert U.fit_intervals(a, "physical") == {}              # no row of that path


def test_a_transfer_paths_uncovered_rows_take_the_fallbacks_own_predictions():
    labels = ["transfer+mlp"] * 40 + ["mlp"] * 40
    chosen = rows("transfer+mlp", "a", np.r_[np.full(40, 1.0), np.full(40, 5.0)], labels=labels)
    # the fallback's predictions of the same fold and rows: the uncovered rows are measured at 2x its prediction
    fb = rows("mlp", "a", np.full(80, 2.0))
    iv = U.fit_intervals(pd.concat([chosen, fb]), "transfer+mlp", fallback="mlp")
    assert iv["mlp"]["low_ratio"] == pytest.approx(2.0) and iv["mlp"]["n_rows"] == 40
    assert iv["transfer+mlp"]["high_ratio"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="lack a 'mlp' prediction"):
        U.fit_intervals(pd.concat([chosen, fb.iloc[:50]]), "transfer+mlp", fallback="mlp")


def test_a_label_with_few_rows_takes_the_pooled_interval_and_bounds_scale_the_prediction():
    r = rows("shift+physical", "a", np.r_[np.linspace(0.8, 1.2, 100), [3.0] * 5],
             labels=["shift+physical"] * 100 + ["physical"] * 5)
    iv = U.fit_intervals(r, "shift+physical")
    assert iv["physical"]["n_rows"] == 5
    assert iv["physical"]["low_ratio"] == iv["*"]["low_ratio"]
    lo, hi = U.interval_bounds(np.array([10.0, 20.0, 30.0]), np.array(["shift+physical", "physical", "other"]), iv)
    assert lo[0] == pytest.approx(10.0 * iv["shift+physical"]["low_ratio"])
    assert hi[1] == pytest.approx(20.0 * iv["*"]["high_ratio"])
    assert hi[2] == pytest.approx(30.0 * iv["*"]["high_ratio"])  # an unknown label: the pooled interval
    assert np.isnan(U.interval_bounds(np.ones(2), np.array(["a", "b"]), {})[0]).all()


def test_cross_fold_coverage_scores_each_gpu_with_the_others_interval():
    a = rows("mlp", "a", np.linspace(0.9, 1.1, 101))
    b = rows("mlp", "b", np.linspace(0.9, 1.1, 101))
    c = rows("mlp", "c", np.linspace(2.0, 2.2, 101))      # a GPU the others' interval cannot cover
    cov = U.cross_fold_coverage(pd.concat([a, b, c]), "mlp").set_index("gpu")
    assert cov.loc["c", "coverage"] == 0.0
    # a in [b's 10th percentile 0.92, c's 90th percentile 2.18]: the rows from 0.92 up, 90%
    assert cov.loc["a", "coverage"] == pytest.approx(0.9, abs=0.011)
    assert cov.loc["a", "nominal"] == pytest.approx(0.8)
    assert U.cross_fold_coverage(a, "mlp").empty


def test_api_predict_gives_an_interval_around_each_prediction_and_refuses_a_stale_record(vidur_gemm, registry,
                                                                                        tmp_path):
    import json

    from synperf.api import predict
    from synperf.data.io import InputError
    from synperf.evaluation import path_selection as S
    from synperf.model.estimator import TrainConfig

    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    exp_dir = tmp_path / "gemm_fp16_vidur"
    mlp = S.fit_mlp(tr, meta, TrainConfig(hidden_sizes=[16], max_epochs=2, batch_size=256))
    mlp.meta["feature_set"] = "v2"
    mlp.save(exp_dir / "v2-all")
    S.save_choice(exp_dir, "mlp", tr, registry, mlp_dir="v2-all", feature_set="v2", seen_path="mlp")
    U.save_intervals(exp_dir, "mlp", pd.concat([rows("mlp", "x", np.linspace(0.8, 1.5, 101)),
                                                rows("mlp", "y", np.linspace(0.9, 1.2, 101))]),
                     seen_path="mlp", seen_rows=rows("mlp", "a100_sxm4_80gb", np.linspace(0.95, 1.05, 101)))
    params = table[table.gpu == "a40"].head(5)[["implementation", "dtype", "m", "n", "k", "batch"]]
    out = predict("gemm", params, "a40", experiment="gemm_fp16_vidur", models_dir=tmp_path, registry=registry)
    p = out["predicted_latency_us"].to_numpy()
    np.testing.assert_allclose(out["predicted_latency_low_us"], p * 0.87, rtol=1e-9)
    np.testing.assert_allclose(out["predicted_latency_high_us"], p * 1.43, rtol=1e-9)
    assert "80% interval" in out.attrs["interval"]
    # a training GPU's rows take the seen path's interval, from the held-out training problems
    seen = predict("gemm", params, "a100_sxm4_80gb", experiment="gemm_fp16_vidur", models_dir=tmp_path,
                   registry=registry)
    p = seen["predicted_latency_us"].to_numpy()
    np.testing.assert_allclose(seen["predicted_latency_low_us"], p * 0.96, rtol=1e-9)
    np.testing.assert_allclose(seen["predicted_latency_high_us"], p * 1.04, rtol=1e-9)
    rec = json.loads((exp_dir / U.INTERVALS_FILE).read_text())
    (exp_dir / U.INTERVALS_FILE).write_text(json.dumps({**rec, "path": "physical"}))
    with pytest.raises(InputError, match="intervals.json: intervals of path 'physical'"):
        predict("gemm", params, "a40", experiment="gemm_fp16_vidur", models_dir=tmp_path, registry=registry)
    (exp_dir / U.INTERVALS_FILE).write_text(json.dumps({**rec, "seen_path": None}))
    with pytest.raises(InputError, match="intervals of seen_path None, but path.json records 'mlp'"):
        predict("gemm", params, "a40", experiment="gemm_fp16_vidur", models_dir=tmp_path, registry=registry)
