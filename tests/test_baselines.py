"""Baselines: hand-checked roofline and nearest-GPU transfer, coverage, seeding on real rows."""


import numpy as np
import pandas as pd
import pytest

from synperf.data.schema import conform
from synperf.evaluation import baselines as B


def gemm_rows(gpus, shapes, dtype="bfloat16", latency=100.0):
    """Canonical GEMM rows: every (gpu, (m, n, k)) pair, one latency."""
    rows = [{"gpu": g, "kernel": "gemm", "implementation": "cublas", "dtype": dtype, "m": m, "n": n, "k": k,
             "batch": 1, "latency_us": latency, "latency_stat": "median", "source": "test",
             "source_version": "test"} for g in gpus for (m, n, k) in shapes]
    return conform(pd.DataFrame(rows))


def test_roofline_of_a_4096_cubed_bf16_gemm_on_h100(registry):
    df = gemm_rows(["h100_sxm"], [(4096, 4096, 4096)])
    spec = registry["h100_sxm"]
    flops = 2.0 * 4096**3
    bytes_ = (4096 * 4096 * 2 + 4096 * 4096) * 2.0      # A and B read, C written, 2 B each
    expected = max(flops / (spec.peak_tflops("bfloat16") * 1e12), bytes_ / (spec.dram_bw_gbps * 1e9)) * 1e6
    assert expected == pytest.approx(2.0 * 4096**3 / 989.4e12 * 1e6)   # compute-bound: ~138.9 us
    pred = B.fit_predict("roofline", df.iloc[:0], df, registry)
    assert pred.shape == (1,) and pred[0] == pytest.approx(expected, rel=1e-12)


def test_nearest_roofline_on_the_same_gpu_reproduces_the_measurement(registry):
    shapes = [(1, 4096, 4096), (4096, 4096, 4096), (37, 12288, 4096)]
    df = gemm_rows(["h100_sxm"], shapes)
    df["latency_us"] = [11.0, 180.0, 33.3]
    pred = B.nearest_gpu_roofline(df, df, registry)
    np.testing.assert_allclose(pred, df["latency_us"].to_numpy(), rtol=1e-12)


def test_nearest_roofline_carries_the_excess_over_the_roofline(registry):
    src = gemm_rows(["a100_sxm4_80gb"], [(4096, 4096, 4096)], latency=400.0)
    tgt = gemm_rows(["h100_sxm"], [(4096, 4096, 4096)])
    rf = lambda d: B.roofline(d.iloc[:0], d, registry)[0]  # noqa: E731
    pred = B.nearest_gpu_roofline(src, tgt, registry)
    assert pred[0] == pytest.approx(400.0 - rf(src) + rf(tgt))


def test_nearest_scaled_uses_the_bandwidth_ratio_for_a_memory_bound_shape(registry):
    shape = [(1, 8192, 8192)]  # GEMV: 134 MB of weights, 0.13 GFLOP: memory-bound everywhere
    src = gemm_rows(["h100_sxm"], shape, latency=50.0)
    tgt = gemm_rows(["h200_sxm"], shape)
    t = B.add_baseline_columns(tgt, registry, tiles=False)
    assert t["bl_memory_us"].iloc[0] > t["bl_compute_us"].iloc[0]
    pred = B.nearest_gpu_scaled(src, tgt, registry)
    ratio = registry["h100_sxm"].dram_bw_gbps / registry["h200_sxm"].dram_bw_gbps
    assert ratio < 0.8
    assert pred[0] == pytest.approx(50.0 * ratio, rel=1e-12)


def test_nearest_scaled_uses_the_peak_ratio_for_a_compute_bound_shape(registry):
    shape = [(8192, 8192, 8192)]
    src = gemm_rows(["h100_sxm"], shape, latency=1200.0)
    tgt = gemm_rows(["b200"], shape)
    pred = B.nearest_gpu_scaled(src, tgt, registry)
    ratio = registry["h100_sxm"].peak_tflops("bfloat16") / registry["b200"].peak_tflops("bfloat16")
    assert pred[0] == pytest.approx(1200.0 * ratio, rel=1e-12)


def test_nearest_source_prefers_the_same_class_then_the_closest_specs(registry):
    shape = [(256, 4096, 4096)]
    train = gemm_rows(["a100_sxm4_80gb", "h100_sxm", "b200", "a40"], shape)
    test = gemm_rows(["h200_sxm", "a10", "gb200", "l40s", "a100_pcie_40gb", "rtx_pro_6000_blackwell_server"], shape)
    src = B.nearest_sources(train, test, registry)
    got = dict(zip(test["gpu"], src["src_gpu"]))
    assert got["h200_sxm"] == "h100_sxm"          # class (9.0, HBM)
    assert got["a10"] == "a40"                    # (8.6, GDDR), although A100 (8.0, HBM) is also measured
    assert got["gb200"] == "b200"                 # (10.0, HBM)
    assert got["l40s"] == "a40"                   # sm_89 and sm_86 share major version 8 and GDDR
    assert got["a100_pcie_40gb"] == "a100_sxm4_80gb"
    # RTX PRO 6000 (12.0, GDDR7) has no seen GPU of its class (B200 is 10.0 HBM3e): the closest
    # (ln peak, ln bandwidth) among all
    pro = registry["rtx_pro_6000_blackwell_server"]
    dist = {g: np.hypot(np.log(pro.peak_tflops("bfloat16") / registry[g].peak_tflops("bfloat16")),
                        np.log(pro.dram_bw_gbps / registry[g].dram_bw_gbps))
            for g in ("a100_sxm4_80gb", "h100_sxm", "b200", "a40")}
    assert got["rtx_pro_6000_blackwell_server"] == min(dist, key=dist.get)
    assert src["same_class"].tolist() == [True, True, True, True, True, False]
    # without A40, L40S (GDDR) has no class sibling among the HBM parts
    src = B.nearest_sources(train[train["gpu"] != "a40"], test, registry)
    assert src["same_class"].tolist() == [True, False, True, False, True, False]


def test_coverage_counts_nans_and_uncovered_shapes_are_nan(registry):
    assert B.coverage(np.array([1.0, np.nan, 2.0, np.nan])) == 0.5
    assert B.coverage(np.array([3.0])) == 1.0
    assert np.isnan(B.coverage(np.array([])))
    train = gemm_rows(["h100_sxm"], [(128, 4096, 4096)])
    test = gemm_rows(["h200_sxm"], [(128, 4096, 4096), (64, 4096, 4096)])
    for method in B.PARTIAL_COVERAGE:
        pred = B.fit_predict(method, train, test, registry)
        assert np.isfinite(pred[0]) and np.isnan(pred[1])
        assert B.coverage(pred) == 0.5
    # another dtype or implementation is another shape
    other = gemm_rows(["h200_sxm"], [(128, 4096, 4096)], dtype="float16")
    assert np.isnan(B.nearest_gpu_roofline(train, other, registry)[0])


def test_unknown_method_and_missing_feature_columns_are_reported(registry):
    df = gemm_rows(["h100_sxm"], [(128, 4096, 4096)])
    with pytest.raises(KeyError, match="unknown baseline"):
        B.fit_predict("oracle", df, df, registry)
    with pytest.raises(ValueError, match="absent"):
        B.linear(df, df, registry, feature_meta={"numeric": ["no_such_feature"], "linear": [], "categorical": []})
    with pytest.raises(ValueError, match="no training rows"):
        B.gbt(df.iloc[:0], df, registry)


SMALL = B.BaselineConfig(max_train_rows=3000, neusight_epochs=8, gbt_max_iter=60)


@pytest.mark.parametrize("method", ["linear", "gbt", "neusight"])
def test_fitted_baselines_are_seeded_and_finite_on_real_rows(vidur_gemm, registry, method):
    table, meta = vidur_gemm
    train, test = table[table.split == "train"], table[table.split == "unseen"]
    p1 = B.fit_predict(method, train, test, registry, seed=3, feature_meta=meta, cfg=SMALL)
    p2 = B.fit_predict(method, train, test, registry, seed=3, feature_meta=meta, cfg=SMALL)
    assert p1.shape == (len(test),)
    assert np.isfinite(p1).all() and (p1 > 0).all()
    np.testing.assert_array_equal(p1, p2)
    if method == "neusight":  # utilisation <= 1 and whole waves: never faster than the roofline
        assert (p1 >= B.roofline(train, test, registry) * (1 - 1e-5)).all()


def test_baselines_beat_nothing_silly_on_seen_gpus(vidur_gemm, registry):
    """Sanity on held-out problems of the seen GPUs: the fitted baselines beat the bare roofline."""
    table, meta = vidur_gemm
    train, test = table[table.split == "train"], table[table.split == "test_seen"]
    y = test["latency_us"].to_numpy()
    mape = {m: float(np.mean(np.abs(B.fit_predict(m, train, test, registry, feature_meta=meta, cfg=SMALL) - y) / y))
            for m in ("roofline", "linear", "gbt")}
    assert mape["gbt"] < mape["roofline"] and mape["linear"] < mape["roofline"], mape


def test_precomputed_columns_give_the_same_predictions(vidur_gemm, registry):
    table, meta = vidur_gemm
    train, test = table[table.split == "train"], table[table.split == "unseen"].iloc[:500]
    pre = B.add_baseline_columns(table, registry)
    tr2, te2 = pre[pre.split == "train"], pre[pre.split == "unseen"].iloc[:500]
    for m in ("roofline", "nearest_gpu_scaled", "nearest_gpu_roofline"):
        np.testing.assert_array_equal(B.fit_predict(m, train, test, registry), B.fit_predict(m, tr2, te2, registry))
    # v2 tables carry num_tasks: the tiles are the decomposer's
    np.testing.assert_array_equal(pre["bl_tiles"].to_numpy(), np.maximum(table["num_tasks"].to_numpy(), 1.0))


def test_neusight_utilisation_stays_between_the_training_floor_and_one(vidur_gemm, registry):
    """u = alpha * (1 - s / (waves + 1)) is positive, and floored at half the lowest training utilisation, so an
    unseen GPU cannot blow the prediction up by orders of magnitude (it used to, by up to 80x)."""
    table, meta = vidur_gemm
    train, test = table[table.split == "train"], table[table.split == "unseen"]
    pred = B.fit_predict("neusight", train, test, registry, seed=0, feature_meta=meta, cfg=SMALL)
    tr = B.add_baseline_columns(B._subsample(train, SMALL, 0), registry)
    _, w_tr, t_tr = B._neusight_inputs(tr)
    u_train = w_tr * t_tr / tr["latency_us"].to_numpy()
    _, w_te, t_te = B._neusight_inputs(B.add_baseline_columns(test, registry))
    u_pred = w_te * t_te / pred
    assert u_pred.max() <= 1.0 + 1e-5
    assert u_pred.min() >= 0.5 * np.quantile(u_train, 0.001) * (1 - 1e-4)
