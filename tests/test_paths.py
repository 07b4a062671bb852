"""Prediction paths (physical time model, sibling transfer) and their choice by leave-one-seen-GPU-out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synperf.evaluation import path_selection as S
from synperf.evaluation.baselines import BASELINE_COLUMNS
from synperf.model.estimator import TrainConfig
from synperf.model.paths import PHYSICAL_LOWER, PhysicalModel, physical_design, transfer_predict

TRAIN = TrainConfig(hidden_sizes=[32, 16], max_epochs=4, early_stopping_patience=3, batch_size=256)


def spec_rows(n, gpu, seed=0, **specs):
    """Rows carrying the bl_* columns directly (the physical model reads only those)."""
    rng = np.random.default_rng(seed)
    d = {c: np.zeros(n) for c in BASELINE_COLUMNS}
    d.update({"gpu": [gpu] * n, "bl_sm_count": specs.get("sm", 100.0), "bl_clock_hz": specs.get("clock", 1e9),
              "bl_memory_us": rng.uniform(1, 100, n), "bl_compute_us": rng.uniform(0, 50, n),
              "bl_xu_us": rng.uniform(0, 5, n), "bl_flops": rng.uniform(0, 1e8, n), "bl_xu_ops": np.zeros(n)})
    return pd.DataFrame(d)


def test_physical_model_recovers_its_coefficients_and_respects_the_peak_bounds():
    rows = spec_rows(200, "g")
    x = physical_design(rows, None)
    assert x.shape == (200, 5)
    # work per SM cycle in us: flops / (100 SMs * 1e9 Hz) * 1e6
    np.testing.assert_allclose(x[:, 4], rows["bl_flops"] / 1e11 * 1e6)
    true = np.array([3.0, 1.7, 1.2, 2.0, 0.4])
    m = PhysicalModel.fit(rows.assign(latency_us=x @ true), None)
    np.testing.assert_allclose(m.coef, true, rtol=1e-6)
    assert m.train_mape_pct < 1e-6
    # a kernel that "beats" DRAM peak (coefficient 0.5) is fitted at the bound: no pipe runs above its peak
    half = np.array([3.0, 0.5, 1.0, 1.0, 0.0])
    m = PhysicalModel.fit(rows.assign(latency_us=x @ half), None)
    assert m.coef[1] == pytest.approx(PHYSICAL_LOWER[1]) and (m.coef >= np.array(PHYSICAL_LOWER) - 1e-12).all()
    assert PhysicalModel.from_dict(m.to_dict()).coef.tolist() == m.coef.tolist()
    with pytest.raises(ValueError):
        PhysicalModel.fit(rows.assign(latency_us=0.0), None)


def gemm_rows(gpus, ms, latency):
    return pd.DataFrame([{"gpu": g, "kernel": "gemm", "implementation": "cublas", "dtype": "bfloat16", "m": m,
                          "n": 64, "k": 64, "batch": 1, "latency_us": latency(g, m)} for g in gpus for m in ms])


def test_transfer_scales_the_nearest_sibling_and_never_uses_the_target_gpu(registry):
    from synperf.data.schema import conform

    lat = {"a100_sxm4_80gb": 10.0, "h100_sxm": 6.0, "h200_sxm": 5.0}
    train = conform(gemm_rows(["a100_sxm4_80gb", "h100_sxm", "h200_sxm"], [1, 2], lambda g, m: lat[g] * m))
    # m = 3 was measured nowhere: base prediction, no source
    test = conform(gemm_rows(["h200_sxm", "a100_pcie_40gb"], [1, 2, 3], lambda g, m: np.nan))
    base_train = np.full(len(train), 2.0)
    base_test = np.full(len(test), 3.0)
    pred, src = transfer_predict(train, test, registry, base_train, base_test)
    # h200 is in train but never its own source: nearest other (9.0, HBM) is h100; a100_pcie_40gb (8.0, HBM) a100
    assert src.tolist() == ["h100_sxm", "h100_sxm", pd.NA, "a100_sxm4_80gb", "a100_sxm4_80gb", pd.NA]
    np.testing.assert_allclose(pred, [6.0 * 1.5, 12.0 * 1.5, 3.0, 10.0 * 1.5, 20.0 * 1.5, 3.0])
    with pytest.raises(ValueError):
        transfer_predict(train, test, registry, base_train[:1], base_test)
    # sibling mode: the same ratio from a source of the target's class only; a100_pcie_40gb's nearest source is the
    # A100 SXM (8.0, HBM: a sibling), h200's an H100 (9.0, HBM); with only the Hopper GPUs as sources, the A100 PCIe
    # has none
    pred_s, src_s = transfer_predict(train, test, registry, base_train, base_test, "sibling")
    np.testing.assert_allclose(pred_s, pred)
    assert src_s.tolist() == src.tolist()
    hopper = train[train["gpu"] != "a100_sxm4_80gb"].reset_index(drop=True)
    pred_h, src_h = transfer_predict(hopper, test, registry, np.full(len(hopper), 2.0), base_test, "sibling")
    assert src_h.tolist() == ["h100_sxm", "h100_sxm", pd.NA, pd.NA, pd.NA, pd.NA]
    np.testing.assert_allclose(pred_h, [9.0, 18.0, 3.0, 3.0, 3.0, 3.0])
    # ... while the ratio mode takes the other class's source
    pred_t, src_t = transfer_predict(hopper, test, registry, np.full(len(hopper), 2.0), base_test)
    assert src_t.tolist()[3:5] == ["h100_sxm", "h100_sxm"]
    np.testing.assert_allclose(pred_t[3:5], [9.0, 18.0])
    with pytest.raises(ValueError):
        transfer_predict(train, test, registry, base_train, base_test, "nope")


def test_sibling_roofline_shifts_a_sibling_by_the_roofline_difference_and_leaves_other_rows_to_the_base(registry):
    from synperf.data.schema import conform
    from synperf.evaluation.baselines import add_baseline_columns

    lat = {"a100_sxm4_80gb": 10.0, "h100_sxm": 6.0}
    # m = 4096 makes the roofline times of H100 and H200 differ
    train = conform(gemm_rows(["a100_sxm4_80gb", "h100_sxm"], [1, 4096], lambda g, m: lat[g] * (1 + m / 64)))
    test = conform(gemm_rows(["h200_sxm", "a100_pcie_40gb", "l40s"], [1, 4096, 3], lambda g, m: np.nan))
    roof_tr = add_baseline_columns(train, registry, tiles=False)["bl_roofline_us"].to_numpy()
    roof_te = add_baseline_columns(test, registry, tiles=False)["bl_roofline_us"].to_numpy()
    base_test = np.full(len(test), 3.0)
    # the base's training predictions are not read: NaN there must not reach the result
    pred, src = transfer_predict(train, test, registry, np.full(len(train), np.nan), base_test, "sibling_roofline")
    # h200 takes h100 (9.0, HBM), a100_pcie_40gb takes a100 (8.0, HBM); l40s (8.9, GDDR) has no sibling; m = 3 was
    # measured nowhere
    assert src.tolist() == ["h100_sxm", "h100_sxm", pd.NA, "a100_sxm4_80gb", "a100_sxm4_80gb", pd.NA,
                            pd.NA, pd.NA, pd.NA]
    y_tr = train["latency_us"].to_numpy()
    want = base_test.copy()
    for i, j in ((0, 2), (1, 3), (3, 0), (4, 1)):  # test row -> source row (train: a100 m=1, 4096; h100 m=1, 4096)
        want[i] = max(y_tr[j] - roof_tr[j] + roof_te[i], 1e-3 * y_tr[j])
    np.testing.assert_allclose(pred, want)
    assert abs(roof_te[1] - roof_tr[3]) > 0.05  # the shift is not zero on the large launch
    # floored at 1e-3 of the source latency where the target's roofline is far below the source's excess
    fast = train.assign(latency_us=1e-3)
    pred_f, _ = transfer_predict(fast, test.iloc[[1]], registry, np.full(len(fast), np.nan), base_test[:1],
                                 "sibling_roofline")
    assert pred_f[0] == pytest.approx(max(1e-3 - roof_tr[3] + roof_te[1], 1e-6))


def test_path_choice_never_reads_heldout_or_unseen_rows(vidur_gemm, registry):
    table, meta = vidur_gemm
    poisoned = table.copy()
    bad = poisoned["split"].isin(["test_seen", "unseen"]).to_numpy()
    rng = np.random.default_rng(1)
    poisoned.loc[bad, "latency_us"] = poisoned.loc[bad, "latency_us"] * rng.uniform(0.01, 100, bad.sum())
    clean = S.score_paths(table, meta, "gemm_fp16_vidur", registry, TRAIN, log=lambda *_: None)
    dirty = S.score_paths(poisoned, meta, "gemm_fp16_vidur", registry, TRAIN, log=lambda *_: None)
    assert sorted(set(clean["validation_gpu"])) == ["a100_sxm4_80gb", "h100_sxm"]
    assert sorted(set(clean["path"])) == sorted(S.PATHS)
    np.testing.assert_allclose(clean["mape_pct"], dirty["mape_pct"])
    assert S.choose_paths(clean)[0] == S.choose_paths(dirty)[0]
    # every validation row of a fold is a training row of its GPU
    n = {g: int(((table.split == "train") & (table.gpu == g)).sum()) for g in ["a100_sxm4_80gb", "h100_sxm"]}
    assert all(r.n_rows == n[r.validation_gpu] for r in clean.itertuples())


def as_a100_pcie(table):
    """Vidur's A40 rows relabelled as an A100 PCIe 80GB, a GPU of the A100 SXM's class (8.0, HBM): the sibling
    structure the tests below need, which Vidur's three GPUs (8.0 HBM, 9.0 HBM, 8.6 GDDR) lack."""
    gpu = table["gpu"].astype(str)
    return table.assign(gpu=gpu.where(gpu != "a40", "a100_pcie_80gb"))


def test_path_scores_on_rows_without_a_sibling_leave_out_exactly_the_rows_a_sibling_measured(vidur_gemm, registry):
    table, meta = vidur_gemm
    table = as_a100_pcie(table)
    # the A100 PCIe rows as training rows too: the two A100s are siblings (8.0, HBM), H100 has none
    t = table.assign(split=np.where(table["gpu"] == "a100_pcie_80gb", "train", table["split"].astype(str)))
    paths = ("physical", "sibling+physical")
    sc = S.score_paths(t, meta, "x", registry, TRAIN, paths, log=lambda *_: None).set_index(["fold", "path"])
    assert (sc["n_rows_no_sibling"] <= sc["n_rows"]).all()
    h100 = sc.xs("losgo:h100_sxm", level="fold")
    assert (h100["n_rows_no_sibling"] == h100["n_rows"]).all()
    np.testing.assert_allclose(h100["mape_no_sibling_pct"], h100["mape_pct"])
    for fold in ("losgo:a100_sxm4_80gb", "losgo:a100_pcie_80gb"):
        f = sc.xs(fold, level="fold")
        assert 0 < f["n_rows_no_sibling"].iloc[0] < f["n_rows"].iloc[0]  # some launches both A100s measured
        # where no sibling measured the launch the sibling path predicts as its base ...
        assert f.loc["sibling+physical", "mape_no_sibling_pct"] == pytest.approx(f.loc["physical",
                                                                                     "mape_no_sibling_pct"])
        # ... and on the sibling rows it does not
        assert f.loc["sibling+physical", "mape_pct"] != pytest.approx(f.loc["physical", "mape_pct"])


def test_validation_row_cap_scores_a_seeded_sample_of_each_validation_gpu(vidur_gemm, registry):
    """With ``max_val_rows`` each fold scores that many of its validation GPU's rows (the models fitted on every
    training row), and the MAPE is that of the sampled rows' predictions: a per-row record of the sample."""
    table, meta = vidur_gemm
    rows_out = []
    capped = S.score_paths(table, meta, "gemm_fp16_vidur", registry, TRAIN, paths=("physical",),
                           log=lambda *_: None, rows_out=rows_out, max_val_rows=300)
    full = S.score_paths(table, meta, "gemm_fp16_vidur", registry, TRAIN, paths=("physical",), log=lambda *_: None)
    assert capped["n_rows"].tolist() == [300, 300]
    assert (full["n_rows"] > 300).all() and capped["n_train"].tolist() == full["n_train"].tolist()
    for fold, part in zip(capped.itertuples(), rows_out):
        assert part["row"].is_unique and len(part) == 300 and (part["gpu"] == fold.validation_gpu).all()
        err = 100 * np.abs(part["predicted_latency_us"] / part["latency_us"] - 1)
        assert fold.mape_pct == pytest.approx(err.mean())
    # the sample differs from the whole GPU's rows, so the cap is not a no-op
    assert not np.allclose(capped["mape_pct"], full["mape_pct"])


def test_synperf_predict_gives_a_target_without_a_sibling_the_best_path_without_a_sibling_mode(vidur_gemm, registry,
                                                                                                 monkeypatch):
    table, meta = vidur_gemm
    paths = ("physical", "transfer+physical", "sibling_roofline+physical")
    # scores in which the sibling path is best overall and transfer+physical best on the rows without a sibling,
    # though not on all rows without the sibling path (physical would win on mape_pct)
    fake = pd.DataFrame({"experiment": "x", "path": list(paths), "fold": "losgo:g", "validation_gpu": "g",
                         "n_train": 1, "n_rows": 2, "mape_pct": [19.0, 20.0, 10.0], "n_rows_no_sibling": 1,
                         "mape_no_sibling_pct": [30.0, 20.0, 30.0]})
    monkeypatch.setattr(S, "select_path", lambda *a, **k: ("sibling_roofline+physical", fake))
    table = as_a100_pcie(table)
    gpu = table["gpu"].astype(str)
    ampere = table[gpu.isin(["a100_sxm4_80gb", "a100_pcie_80gb"])]  # training GPUs of one class (8.0, HBM)
    h100 = table[(gpu == "h100_sxm")]
    res, chosen, _ = S.synperf_predict(ampere, h100, meta, registry, TRAIN, paths=paths, experiment="x",
                                       default="physical", log=lambda *_: None)
    assert chosen == "transfer+physical" and res.attrs["paths"] == {"h100_sxm": "transfer+physical"}
    fitted = S.fit_paths(ampere.reset_index(drop=True), meta, registry, TRAIN, ("transfer+physical",))
    want = S.predict_rows(fitted, "transfer+physical", h100, registry, fallback="physical")
    np.testing.assert_allclose(res["predicted_latency_us"], want["predicted_latency_us"])
    assert res["source_gpu"].notna().any()  # an A100 source scaled by the ratio, which the sibling path lacks
    # an A100 PCIe target with the A100 SXM among the training GPUs keeps the sibling path
    a100_h100 = table[gpu.isin(["a100_sxm4_80gb", "h100_sxm"]) & (table["split"] == "train")]
    pcie = table[gpu == "a100_pcie_80gb"]
    res2, chosen2, _ = S.synperf_predict(a100_h100, pcie, meta, registry, TRAIN, paths=paths, experiment="x",
                                         default="physical", log=lambda *_: None)
    assert chosen2 == "sibling_roofline+physical"
    assert res2.attrs["paths"] == {"a100_pcie_80gb": "sibling_roofline+physical"}
    assert set(res2["prediction_path"]) == {"sibling_roofline+physical", "physical"}  # physical: no sibling row


def test_synperf_predict_uses_training_rows_as_the_only_sources(vidur_gemm, registry):
    table, meta = vidur_gemm
    tr = table[table.split == "train"]
    te = table[table.split.isin(["test_seen", "unseen"])]
    res, chosen, scores = S.synperf_predict(tr, te, meta, registry, TRAIN, paths=("physical", "transfer+physical"),
                                            log=lambda *_: None)
    assert chosen in ("physical", "transfer+physical") and len(res) == len(te)
    # the test rows' measured latency never reaches the choice or the prediction
    res2, chosen2, _ = S.synperf_predict(tr, te.assign(latency_us=te.latency_us * 37.0), meta, registry, TRAIN,
                                         paths=("physical", "transfer+physical"), log=lambda *_: None)
    assert chosen2 == chosen
    np.testing.assert_array_equal(res2["predicted_latency_us"], res["predicted_latency_us"])
    # the default is kept unless the other path is 5% lower on the same LOSGO scores
    mean = scores.groupby("path")["mape_pct"].mean()
    for default in ("physical", "transfer+physical"):
        other = ({"physical", "transfer+physical"} - {default}).pop()
        want = other if mean[other] <= (1 - S.MIN_RELATIVE_GAIN) * mean[default] else default
        assert S.synperf_predict(tr, te, meta, registry, TRAIN, paths=("physical", "transfer+physical"),
                                 log=lambda *_: None, default=default)[1] == want
    assert np.isfinite(res["predicted_latency_us"]).all() and (res["predicted_latency_us"] > 0).all()
    # a held-out problem has no sibling among the training rows (held out on every seen GPU at once)
    held = (te.split == "test_seen").to_numpy()
    assert res["source_gpu"][held].isna().all()
    if chosen == "transfer+physical":
        src = res["source_gpu"][~held].dropna()
        assert len(src) and set(src) <= {"a100_sxm4_80gb", "h100_sxm"}
        assert set(res["prediction_path"]) <= {"physical", "transfer+physical"}


def test_choose_paths_takes_the_lowest_fold_mean_and_breaks_ties_in_path_order():
    s = pd.DataFrame({"experiment": ["e"] * 4 + ["f"] * 2, "path": ["mlp", "mlp", "physical", "physical",
                                                                        "mlp", "physical"],
                      "fold": ["a", "b", "a", "b", "a", "a"], "validation_gpu": "x", "n_train": 1, "n_rows": 1,
                      "mape_pct": [10.0, 30.0, 25.0, 5.0, 7.0, 7.0]})
    chosen, table = S.choose_paths(s)
    assert chosen == {"e": "physical", "f": "mlp"}        # e: 20 vs 15; f: a tie keeps the earlier path
    assert table.set_index("experiment").loc["e", "mlp"] == 20.0
    assert S.choose_paths(s.iloc[:0])[0] == {}


def test_api_predict_follows_the_recorded_path_and_names_the_source(vidur_gemm, registry, tmp_path):
    from synperf.api import predict
    from synperf.model.paths import PhysicalModel

    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    exp_dir = tmp_path / "gemm_fp16_vidur"
    mlp = S.fit_mlp(tr, meta, TRAIN)
    mlp.meta["feature_set"] = "v2"  # as the pipeline records it
    mlp.save(exp_dir / "v2-all")
    S.save_choice(exp_dir, "shift+physical", tr, registry, mlp_dir="v2-all", feature_set="v2")
    mlp.save(exp_dir / "v1-all")  # the config's primary set of gemm_fp16_vidur: the recorded path's MLP comes first
    a40 = table[table.gpu == "a40"].head(40).reset_index(drop=True)
    params = a40[["implementation", "dtype", "m", "n", "k", "batch"]]
    out = predict("gemm", params, "a40", experiment="gemm_fp16_vidur", models_dir=tmp_path, registry=registry)
    assert out.attrs["model_dir"] == str(exp_dir / "v2-all")
    covered = out["source_gpu"].notna().to_numpy()
    assert covered.any() and (~covered).any()
    # the nearest seen GPU of an Ampere target is the Ampere A100; uncovered rows use the physical model
    assert set(out["source_gpu"][covered]) == {"a100_sxm4_80gb"}
    assert set(out["prediction_path"][covered]) == {"shift+physical"}
    assert set(out["prediction_path"][~covered]) == {"physical"}
    phys = PhysicalModel.fit(tr, registry)
    np.testing.assert_allclose(out["predicted_latency_us"][~covered], phys.predict(a40[~covered], registry),
                               rtol=1e-9)
    src = tr[tr.gpu == "a100_sxm4_80gb"].set_index(["m", "n", "k"])
    i = int(np.flatnonzero(covered)[0])
    s = src.loc[[tuple(a40.loc[i, ["m", "n", "k"]])]]
    expect = (s["latency_us"].iloc[0] - phys.predict(s.reset_index(), registry)[0]
              + phys.predict(a40.iloc[[i]], registry)[0])
    assert out["predicted_latency_us"][i] == pytest.approx(max(expect, 1e-3 * s["latency_us"].iloc[0]), rel=1e-9)
    # an explicit feature set asks for that MLP, not the recorded path
    mlp_only = predict("gemm", params, "a40", experiment="gemm_fp16_vidur", models_dir=tmp_path, registry=registry,
                       feature_set="v2")
    assert mlp_only["prediction_path"].str.startswith("mlp:").all() and mlp_only["source_gpu"].isna().all()


def test_a_path_needs_a_clear_lead_over_the_mlp():
    import pandas as pd

    from synperf.evaluation.path_selection import choose_paths

    def scores(**mape):
        return pd.DataFrame([{"experiment": "e", "path": p, "fold": f, "mape_pct": v}
                             for p, v in mape.items() for f in ("losgo:a", "losgo:b")])

    chosen, _ = choose_paths(scores(mlp=37.1, physical=38.8, **{"transfer+mlp": 36.4}))
    assert chosen == {"e": "mlp"}                       # 1.9% lower: within retraining noise
    chosen, table = choose_paths(scores(mlp=69.4, physical=15.1, **{"transfer+physical": 9.7}))
    assert chosen == {"e": "transfer+physical"} and table["chosen"].tolist() == ["transfer+physical"]
    chosen, _ = choose_paths(scores(mlp=20.0, physical=18.9))
    assert chosen == {"e": "physical"}                  # 5.5% lower


def _base_scores(experiment, **mape):
    return pd.DataFrame([{"experiment": experiment, "path": p, "fold": f, "validation_gpu": "x", "n_train": 1,
                          "n_rows": 1, "mape_pct": v} for p, v in mape.items() for f in ("losgo:a", "losgo:b")])


def test_the_pooled_default_is_the_base_model_best_across_experiments_and_ignores_the_test_gpus():
    experiments = {"e1": {"seen": ["a", "b"]}, "e2": {"seen": ["c", "d"]}, "e3": {"seen": ["a", "t"]}}
    scores = {"e1": _base_scores("e1", mlp=20.0, physical=30.0, residual=21.0, ensemble=15.0),
              "e2": _base_scores("e2", mlp=10.0, physical=12.0, residual=11.0, ensemble=9.0),
              # the only experiment where the MLP wins by far, trained on GPU t
              "e3": _base_scores("e3", mlp=5.0, physical=50.0, residual=40.0, ensemble=30.0)}
    d = S.pooled_default(scores, experiments, exclude_gpus=["t"])
    assert d["default"] == "ensemble" and [r["experiment"] for r in d["experiments"]] == ["e1", "e2"]
    assert d["geometric_mean"]["ensemble"] == pytest.approx(np.sqrt(15.0 * 9.0))
    assert d["geometric_mean"]["mlp"] == pytest.approx(np.sqrt(20.0 * 10.0))
    # with GPU t's experiment in the pool the MLP's lead there decides it
    assert S.pooled_default(scores, experiments)["default"] == "mlp"
    # a lead under the rule's 5% keeps the MLP; an experiment lacking a base model is not used; nothing: the MLP
    close = {"e1": _base_scores("e1", mlp=20.0, physical=30.0, residual=21.0, ensemble=19.2)}
    assert S.pooled_default(close, experiments)["default"] == "mlp"
    partial = {**close, "e2": _base_scores("e2", mlp=10.0, ensemble=1.0)}
    assert [r["experiment"] for r in S.pooled_default(partial, experiments)["experiments"]] == ["e1"]
    assert S.pooled_default(scores, experiments, exclude=["e1", "e2", "e3"]) == {
        "default": "mlp", "min_gain": S.MIN_RELATIVE_GAIN, "excluded_gpus": [], "geometric_mean": {},
        "experiments": []}


def test_path_default_leaves_out_the_same_rows_and_a_folds_own_experiment(tmp_path):
    from synperf.pipeline.selection import path_default

    experiments = {"mine": {"kernel": "gemm", "sources": ["s1"], "seen": ["a", "b"]},
                   "twin": {"kernel": "gemm", "sources": ["s1", "s2"], "seen": ["c", "d"]},
                   "other": {"kernel": "gemm", "sources": ["s3"], "seen": ["e", "f"]}}
    files = {}
    for name, mlp in (("mine", 8.0), ("twin", 5.0), ("other", 30.0)):
        files[name] = str(tmp_path / f"{name}.csv")
        _base_scores(name, mlp=mlp, physical=20.0, residual=20.0, ensemble=10.0).to_csv(files[name], index=False)
    used = lambda d: [r["experiment"] for r in d["experiments"]]  # noqa: E731
    d = path_default("mine", experiments, files, test_gpus=["z"])
    assert used(d) == ["mine", "other"] and d["default"] == "ensemble"   # twin shares kernel and source s1
    d = path_default("mine", experiments, files, test_gpus=["z"], own_scores=False)
    assert used(d) == ["other"]
    assert used(path_default("mine", experiments, files, test_gpus=["e"])) == ["mine"]
    # an experiment reading every source shares rows with any experiment of its kernel
    everything = {**experiments, "other": {"kernel": "gemm", "seen": ["e", "f"]}}
    assert used(path_default("mine", everything, files, test_gpus=["z"])) == ["mine"]
    # a GPU the scores validate on counts as trained on, even where the config's seen list lacks it
    pd.read_csv(files["other"]).assign(validation_gpu="g").to_csv(files["other"], index=False)
    assert used(path_default("mine", experiments, files, test_gpus=["g"])) == ["mine"]
    assert used(path_default("mine", experiments, files, test_gpus=["h"])) == ["mine", "other"]


def test_a_leave_one_architecture_out_fold_tests_every_gpu_of_its_architecture(registry):
    from types import SimpleNamespace

    from synperf.pipeline.protocols import tested_gpus

    logo = SimpleNamespace(protocol="logo", unseen_gpus=("h200_sxm",))
    assert tested_gpus(logo, registry) == ["h200_sxm"]
    loao = SimpleNamespace(protocol="loao", unseen_gpus=("h100_sxm", "h200_sxm"))
    got = tested_gpus(loao, registry)
    assert {"h100_sxm", "h200_sxm", "h800_sxm", "h20"} <= set(got)
    assert all(registry[g].architecture == "Hopper" for g in got) and "a100_sxm4_80gb" not in got


def test_record_choice_keeps_the_pooled_default_on_a_tie_and_records_it(vidur_gemm, registry, tmp_path):
    table, meta = vidur_gemm
    scores = _base_scores("gemm_fp16_vidur", mlp=13.0, physical=14.8, residual=12.8, ensemble=13.0)
    default = S.pooled_default({"gemm_fp16_vidur": scores, "x": _base_scores("x", mlp=30.0, physical=30.0,
                                                                            residual=30.0, ensemble=20.0)},
                               {"gemm_fp16_vidur": {"seen": ["a100_sxm4_80gb"]}, "x": {"seen": ["q"]}})
    assert default["default"] == "ensemble"
    chosen, _ = S.record_choice(table, meta, "gemm_fp16_vidur", registry, scores, tmp_path, mlp_dir="v2-all",
                                default=default)
    rec = S.load_choice(tmp_path)
    assert chosen == rec["path"] == "ensemble" and rec["default"]["default"] == "ensemble"
    # the same scores with the paper's default keep the MLP (residual's lead is under 5%)
    assert S.record_choice(table, meta, "gemm_fp16_vidur", registry, scores, tmp_path / "paper",
                           mlp_dir="v2-all")[0] == "mlp"


def test_path_scores_on_the_selection_folds_reuse_their_mlps_exactly(vidur_gemm, registry):
    """The selection stage scores the paths with the fold MLPs of its recipe scoring: the same folds and training,
    so the scores equal those of MLPs trained for the path scores themselves."""
    from synperf.evaluation.selection import score_feature_set

    table, meta = vidur_gemm
    models = {}
    score_feature_set(table, meta, "gemm_fp16_vidur", registry, TRAIN, log=lambda *_: None, models_out=models)
    assert sorted(models) == ["losgo:a100_sxm4_80gb", "losgo:h100_sxm"]
    reused = S.score_paths(table, meta, "gemm_fp16_vidur", registry, TRAIN, paths=("mlp", "shift+mlp"),
                           log=lambda *_: None, fold_mlps=models)
    own = S.score_paths(table, meta, "gemm_fp16_vidur", registry, TRAIN, paths=("mlp", "shift+mlp"),
                        log=lambda *_: None)
    np.testing.assert_allclose(reused["mape_pct"], own["mape_pct"], rtol=1e-6)
    # a different model for one fold changes that fold's scores: the reuse is real
    other = dict(models, **{"losgo:h100_sxm": models["losgo:a100_sxm4_80gb"]})
    moved = S.score_paths(table, meta, "gemm_fp16_vidur", registry, TRAIN, paths=("mlp",), log=lambda *_: None,
                          fold_mlps=other)
    assert moved.set_index("fold").loc["losgo:h100_sxm", "mape_pct"] != pytest.approx(
        own[own.path == "mlp"].set_index("fold").loc["losgo:h100_sxm", "mape_pct"])


def test_record_choice_follows_the_scores_and_refuses_another_experiments(vidur_gemm, registry, tmp_path):
    table, meta = vidur_gemm
    scores = pd.DataFrame({"experiment": "gemm_fp16_vidur", "path": ["mlp", "physical"] * 2,
                           "fold": ["losgo:a", "losgo:a", "losgo:b", "losgo:b"], "validation_gpu": "x",
                           "n_train": 1, "n_rows": 1, "mape_pct": [20.0, 10.0, 20.0, 12.0]})
    chosen, _ = S.record_choice(table, meta, "gemm_fp16_vidur", registry, scores, tmp_path, mlp_dir="v2-all")
    rec = S.load_choice(tmp_path)
    assert chosen == rec["path"] == "physical" and rec["mlp_dir"] == "v2-all"
    assert rec["training_gpus"] == ["a100_sxm4_80gb", "h100_sxm"]
    # no scores (one seen GPU): the MLP
    assert S.record_choice(table, meta, "gemm_fp16_vidur", registry, scores.iloc[:0], tmp_path / "one",
                           mlp_dir="v2-all")[0] == "mlp"
    with pytest.raises(ValueError, match="gemm_fp16_vidur"):
        S.record_choice(table, meta, "gemm_fp16_vidur", registry, scores.assign(experiment="gemm"), tmp_path,
                        mlp_dir="v2-all")


def test_the_configured_synperf_method_uses_the_path_chosen_before(vidur_gemm, registry):
    """With a path given for the configured fold, the protocol's synperf method fits that path on the fold's
    training rows and predicts its test rows, without choosing again."""
    from synperf.evaluation.protocols import SYNPERF, configured, predict_protocol

    table, meta = vidur_gemm
    folds = configured(table)
    p = predict_protocol(table, folds, [SYNPERF], registry, TRAIN, meta, log=lambda *_: None,
                         chosen_paths={"configured": ("transfer+physical", "physical")})
    assert set(p["budget"].str.split(";").str[0]) == {"transfer+physical (fallback physical, chosen before)"}
    tr = table[folds[0].train_mask].reset_index(drop=True)
    te = table[folds[0].test_mask].reset_index(drop=True)
    fitted = S.fit_paths(tr, meta, registry, TRAIN, ("transfer+physical",))
    want = S.predict_path(fitted, "transfer+physical", te.drop(columns=["latency_us"]), registry)
    np.testing.assert_allclose(p["predicted_latency_us"], want["predicted_latency_us"])


def test_rows_no_sibling_measured_take_the_fallback_and_say_so(vidur_gemm, registry, tmp_path):
    """A transfer path predicts the launches a sibling measured from that measurement and the others with its
    fallback (here the MLP, not the path's physical base); the recorded choice and api.predict do the same."""
    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    te = table[table.split.isin(["test_seen", "unseen"])].drop(columns=["latency_us"]).reset_index(drop=True)
    fitted = S.fit_paths(tr, meta, registry, TRAIN, ("transfer+physical", "mlp"))
    base = S.predict_path(fitted, "transfer+physical", te, registry)
    res = S.predict_path(fitted, "transfer+physical", te, registry, fallback="mlp")
    covered = res["source_gpu"].notna().to_numpy()
    assert covered.any() and (~covered).any()  # held-out problems have no sibling; most unseen rows have one
    np.testing.assert_allclose(res["predicted_latency_us"][covered], base["predicted_latency_us"][covered])
    mlp = fitted.mlp.predict_latency_us(S._frame(te, meta))
    np.testing.assert_allclose(res["predicted_latency_us"][~covered], mlp[~covered], rtol=1e-6)
    assert set(res["prediction_path"][~covered]) == {"mlp"} and set(base["prediction_path"][~covered]) == {"physical"}
    # the fallback comes from the zero-shot paths' scores of the same folds: mlp unless physical is 5% lower
    scores = pd.DataFrame({"experiment": "e", "path": ["mlp", "physical", "transfer+physical"], "fold": "losgo:a",
                           "validation_gpu": "a", "n_train": 1, "n_rows": 1, "mape_pct": [30.0, 29.0, 10.0]})
    assert S.choose_fallback(scores, "e") == "mlp"
    assert S.choose_fallback(scores.assign(mape_pct=[30.0, 20.0, 10.0]), "e") == "physical"
    with pytest.raises(ValueError, match="fallback"):
        S.save_choice(tmp_path, "transfer+physical", tr, registry, fallback="shift+mlp")


def test_residual_model_learns_the_correction_and_stays_within_the_training_residuals(registry):
    from synperf.model.paths import ResidualModel

    rng = np.random.default_rng(0)
    n = 2000
    rows = spec_rows(n, "g", seed=1).assign(size=rng.uniform(0, 10, n), label=rng.choice(["a", "b"], n))
    phys_true = physical_design(rows, None) @ np.array([2.0, 1.5, 1.0, 1.0, 0.0])
    # a correction the physical model cannot express: x1.6 below size 5, x0.8 above it, and x1.25 for label b
    factor = np.where(rows["size"] < 5, 1.6, 0.8) * np.where(rows["label"] == "b", 1.25, 1.0)
    rows = rows.assign(latency_us=phys_true * factor)
    meta = {"numeric": ["size"], "linear": [], "categorical": ["label"]}
    m = ResidualModel.fit(rows, meta, None, max_train_rows=1500, seed=0)
    pred = m.predict(rows, None)
    assert np.mean(np.abs(pred / rows["latency_us"] - 1)) < 0.02
    assert np.mean(np.abs(m.physical.predict(rows, None) / rows["latency_us"] - 1)) > 0.15  # physics alone misses
    # far outside the training sizes and with an unknown label, the correction is still one seen in training
    far = rows.head(50).assign(size=1e6, label="z")
    ratio = m.predict(far, None) / m.physical.predict(far, None)
    seen = pred / m.physical.predict(rows, None)
    assert (ratio >= seen.min() - 1e-9).all() and (ratio <= seen.max() + 1e-9).all()
    # the row cap and the seed decide the fit: same arguments, same model
    again = ResidualModel.fit(rows, meta, None, max_train_rows=1500, seed=0)
    np.testing.assert_allclose(again.predict(rows, None), pred)
    with pytest.raises(ValueError, match="feature column"):
        ResidualModel.fit(rows.drop(columns=["size"]), meta, None)


def test_a_recorded_residual_path_predicts_as_fitted_and_survives_a_reload(vidur_gemm, registry, tmp_path):
    import json

    from synperf.model.paths import ResidualModel

    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    exp_dir = tmp_path / "gemm_fp16_vidur"
    cfg = TrainConfig(max_train_rows=3000, seed=3)
    S.save_choice(exp_dir, "transfer+residual", tr, registry, feature_set="v2", fallback="residual", meta=meta,
                  train_cfg=cfg)
    rec = json.loads((exp_dir / S.CHOICE_FILE).read_text())
    assert rec["residual"] == S.RESIDUAL_FILE and rec["fallback"] == "residual"
    assert PhysicalModel.from_dict(rec["physical"]).coef.tolist() == PhysicalModel.fit(tr, registry).coef.tolist()
    a40 = table[table.gpu == "a40"].reset_index(drop=True)
    out = S.predict_with_choice(rec, exp_dir, a40, registry, None)
    fitted = S.fit_paths(tr, meta, registry, cfg, ("transfer+residual",))
    expect = S.predict_path(fitted, "transfer+residual", a40, registry)
    np.testing.assert_allclose(out["predicted_latency_us"], expect["predicted_latency_us"], rtol=1e-9)
    assert out["prediction_path"].tolist() == expect["prediction_path"].tolist()
    assert {"transfer+residual", "residual"} == set(out["prediction_path"])
    loaded = ResidualModel.load(exp_dir / S.RESIDUAL_FILE)
    np.testing.assert_allclose(loaded.predict(a40, registry), fitted.residual.predict(a40, registry), rtol=1e-12)
    with pytest.raises(ValueError, match="meta"):
        S.save_choice(tmp_path / "nometa", "residual", tr, registry)
    import joblib

    joblib.dump({"not": "a model"}, tmp_path / "other.joblib")
    with pytest.raises(TypeError, match="ResidualModel"):
        ResidualModel.load(tmp_path / "other.joblib")


def test_a_recorded_path_folder_always_holds_the_residual_model_and_the_sources(vidur_gemm, registry, tmp_path):
    import json

    from synperf.data.io import read_table
    from synperf.model.paths import ResidualModel, with_spec_columns

    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    cfg = TrainConfig(max_train_rows=2000, seed=1)
    exp_dir = tmp_path / "gemm_fp16_vidur"
    S.save_choice(exp_dir, "mlp", tr, registry, mlp_dir="v2-all", feature_set="v2", fallback="mlp",
                  seen_path="mlp", meta=meta, train_cfg=cfg)
    rec = json.loads((exp_dir / S.CHOICE_FILE).read_text())
    # the MLP path names neither file, yet both are there (the pipeline declares them as outputs)
    assert "residual" not in rec and "sources" not in rec and "physical" not in rec
    a40 = table[table.gpu == "a40"].reset_index(drop=True)
    want = S.fit_residual(with_spec_columns(tr, registry), meta, registry, cfg).predict(a40, registry)
    np.testing.assert_allclose(ResidualModel.load(exp_dir / S.RESIDUAL_FILE).predict(a40, registry), want,
                               rtol=1e-12)
    sources = read_table(exp_dir / S.SOURCES_FILE)
    assert len(sources) == len(tr) and sources["latency_us"].tolist() == tr["latency_us"].tolist()
    assert set(sources["gpu"].astype(str)) == set(tr["gpu"].astype(str))
    # without the feature table's meta a library caller gets the record and the sources, and no residual model
    bare = tmp_path / "bare"
    S.save_choice(bare, "transfer+physical", tr, registry, fallback="physical")
    assert (bare / S.CHOICE_FILE).exists() and (bare / S.SOURCES_FILE).exists()
    assert not (bare / S.RESIDUAL_FILE).exists()


def test_the_ensemble_is_the_geometric_mean_of_the_three_base_models_on_every_route(vidur_gemm, registry, tmp_path):
    import json

    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    a40 = table[table.gpu == "a40"].reset_index(drop=True)
    fitted = S.fit_paths(tr, meta, registry, TRAIN, ("ensemble", "transfer+ensemble"))
    assert fitted.mlp is not None and fitted.residual is not None and fitted.physical is fitted.residual.physical
    parts = {m: S.fit_paths(tr, meta, registry, TRAIN, (m,), mlp=fitted.mlp).base_predict(m, a40, registry)
             for m in ("mlp", "physical", "residual")}
    want = np.cbrt(parts["mlp"] * parts["physical"] * parts["residual"])
    np.testing.assert_allclose(fitted.base_predict("ensemble", a40, registry), want, rtol=1e-9)
    # the geometric mean lies between the lowest and the highest of the three, row by row
    stack = np.vstack(list(parts.values()))
    assert (want >= stack.min(axis=0) * (1 - 1e-12)).all() and (want <= stack.max(axis=0) * (1 + 1e-12)).all()
    # a transfer path scales the sibling by the ensemble's ratio; a recorded one predicts the same through the API
    direct = S.predict_path(fitted, "transfer+ensemble", a40, registry)
    exp_dir = tmp_path / "gemm_fp16_vidur"
    fitted.mlp.meta["feature_set"] = "v2"
    fitted.mlp.save(exp_dir / "v2-all")
    S.save_choice(exp_dir, "transfer+ensemble", tr, registry, mlp_dir="v2-all", feature_set="v2", meta=meta,
                  train_cfg=TRAIN)
    rec = json.loads((exp_dir / S.CHOICE_FILE).read_text())
    assert rec["residual"] == S.RESIDUAL_FILE and "physical" in rec
    via = S.predict_with_choice(rec, exp_dir, a40, registry, fitted.mlp)
    np.testing.assert_allclose(via["predicted_latency_us"], direct["predicted_latency_us"], rtol=1e-6)
    assert set(via["prediction_path"]) == {"transfer+ensemble", "ensemble"}
    with pytest.raises(ValueError, match="needs the MLP"):
        S.predict_with_choice(rec, exp_dir, a40, registry, None)


def test_residual_tree_budget_choice_is_the_cheapest_within_the_choice_margin_of_the_lowest():
    """The residual model's tree budget takes the margin of every other choice (``MIN_RELATIVE_GAIN``, 5%)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "residual_tree_budget", Path(__file__).resolve().parent.parent / "tools" / "residual_tree_budget.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.WITHIN == S.MIN_RELATIVE_GAIN == 0.05

    def scores(mape: dict, fit_s: dict) -> pd.DataFrame:
        return pd.DataFrame([{"experiment": e, "validation_gpu": "g", "budget": b, "mape_pct": m * f,
                              "fit_s": fit_s[b], "predict_s": 0.0}
                             for e, f in (("a", 1.0), ("b", 2.0)) for b, m in mape.items()])

    fit_s = {"300x0.1": 3.0, "100x0.3": 1.0, "60x0.5": 0.5}
    chosen, geo, _ = tool.choose(scores({"300x0.1": 10.0, "100x0.3": 10.05, "60x0.5": 10.45}, fit_s))
    assert chosen == "60x0.5"  # 4.5% above the lowest: within the margin, and the cheapest
    assert geo["300x0.1"] == pytest.approx(10.0 * 2 ** 0.5)
    chosen, _, _ = tool.choose(scores({"300x0.1": 10.0, "100x0.3": 10.4, "60x0.5": 10.6}, fit_s))
    assert chosen == "100x0.3"  # 60x0.5 is 6% above the lowest
    chosen, _, _ = tool.choose(scores({"300x0.1": 10.0, "100x0.3": 10.6, "60x0.5": 10.8}, fit_s))
    assert chosen == "300x0.1"  # nothing cheaper within 5%
    assert tool.BUDGETS[tool.choose(scores({"300x0.1": 10.0, "100x0.3": 10.05, "60x0.5": 10.45}, fit_s))[0]] == {
        "max_iter": 60, "learning_rate": 0.5}


def test_protocol_mlp_budget_is_the_cheapest_within_the_choice_margin_of_the_lowest():
    """The leave-one-out MLP budget takes the margin of every other choice (``MIN_RELATIVE_GAIN``, 5%)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "protocol_mlp_budget", Path(__file__).resolve().parent.parent / "tools" / "protocol_mlp_budget.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.WITHIN == S.MIN_RELATIVE_GAIN == 0.05

    def scores(mape: dict) -> pd.DataFrame:
        fit_s = {"40x10000": 4.0, "25x10000": 2.5, "40x5000": 2.0, "25x5000": 1.0}
        return pd.DataFrame([{"experiment": e, "validation_gpu": "g", "budget": b, "mape_pct": m * f,
                              "fit_s": fit_s[b]} for e, f in (("a", 1.0), ("b", 3.0)) for b, m in mape.items()])

    chosen, geo, secs = tool.choose(scores({"40x10000": 10.0, "25x10000": 10.8, "40x5000": 10.3, "25x5000": 10.6}))
    assert chosen == "40x5000"  # 3% above the lowest; 25x5000 (cheaper) is 6% above
    assert geo["40x10000"] == pytest.approx(10.0 * 3 ** 0.5) and secs["25x5000"] == pytest.approx(2.0)
    chosen, _, _ = tool.choose(scores({"40x10000": 10.0, "25x10000": 10.8, "40x5000": 10.6, "25x5000": 10.6}))
    assert chosen == "40x10000"  # nothing cheaper within 5%
    assert tool.BUDGETS["40x5000"] == {"max_epochs": 40, "max_train_rows": 5000}


def test_transfer_reads_the_base_model_only_at_its_source_rows_and_predicts_as_with_every_row(vidur_gemm, registry):
    from synperf.model.paths import transfer_sources, with_spec_columns

    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    a40 = with_spec_columns(table[table.gpu == "a40"].reset_index(drop=True), registry)
    fitted = S.fit_paths(tr, meta, registry, TRAIN, ("transfer+ensemble",))
    assert not fitted.base_train  # nothing predicted on the training rows before a transfer reads them
    got = S.predict_path(fitted, "transfer+ensemble", a40, registry)
    src = transfer_sources(fitted.train, a40, registry)["src_pos"].to_numpy()
    read = np.unique(src[src >= 0])
    assert 0 < len(read) < len(fitted.train)
    for m in ("mlp", "physical", "residual"):  # each model predicted exactly the source rows
        assert np.flatnonzero(~np.isnan(fitted._model_train[m])).tolist() == read.tolist()
    every = fitted.base_predict("ensemble", fitted.train, registry)  # the base on every training row, up front
    want, _ = transfer_predict(fitted.train, a40, registry, every, fitted.base_predict("ensemble", a40, registry))
    # equal up to float32 rounding: the MLP runs in float32, and a matrix product over a different set of rows may
    # round a row differently (seen: 3e-8 relative on one row of 4,413 on an AMD EPYC CPU); a wrong source row
    # differs by far more
    np.testing.assert_allclose(got["predicted_latency_us"], want, rtol=1e-6)
    # a second read of the same rows predicts nothing new and returns the same values
    again = fitted.train_base("ensemble", read, registry)
    np.testing.assert_allclose(again[read], every[read], rtol=1e-6)  # float32 rounding, as above
    assert np.flatnonzero(~np.isnan(fitted._model_train["mlp"])).tolist() == read.tolist()


@pytest.mark.parametrize("dtype", ["str", "category", "object"])
def test_residual_design_maps_each_categorical_value_to_its_training_level(dtype):
    """A categorical column's design value is the level of the value's string (NaN for a value training never
    saw), row by row, whatever the column's dtype."""
    from synperf.model.paths import ResidualModel

    rows = pd.DataFrame({"implementation": pd.Series(["cublas", "triton", None, "cutlass", "triton"], dtype=dtype),
                         "m": [1.0, 3.0, 7.0, 0.0, np.nan], "waves": [0.5, 1.0, 2.0, 3.0, 4.0]})
    levels = {"implementation": {"cublas": 0, "triton": 1}}
    x = ResidualModel._design(rows, ["m"], ["waves"], ["implementation"], levels)
    assert x.shape == (5, 3)
    np.testing.assert_allclose(x[:, 0], np.log1p([1.0, 3.0, 7.0, 0.0, 0.0]))
    np.testing.assert_allclose(x[:, 1], [0.5, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(x[:, 2], [0.0, 1.0, np.nan, np.nan, 1.0])
