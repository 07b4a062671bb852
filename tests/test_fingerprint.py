"""The fingerprint predictor: per-GPU constants fitted, predicted from the GPU's class, a tree correction on top."""

from __future__ import annotations

import copy
import re

import numpy as np
import pandas as pd
import pytest

from synperf.api import launch_table
from synperf.data.io import InputError
from synperf.data.schema import KEY_COLUMNS
from synperf.model import fingerprint as F
from synperf.model.twins import LAUNCH_KEY_COLUMNS, launch_keys

#: constants of the synthetic GPUs: launch floor (us), then one multiplier per pipe of F.PIPES
TRUE = {"a40": [4.0, 1.5, 1.2, 0.3, 0.8], "l40s": [2.0, 1.1, 1.6, 0.5, 0.4],
        "a100_sxm4_80gb": [9.0, 3.0, 1.2, 2.0, 0.0], "h100_sxm": [6.0, 0.7, 2.5, 0.0, 1.5]}


def gemm_launches(gpus, seed=0, n=60):
    """Canonical GEMM rows (bfloat16, cuBLAS) of ``n`` seeded shapes on each GPU, without latency."""
    from synperf.data.schema import conform

    rng = np.random.default_rng(seed)
    shapes = [(int(2 ** rng.integers(0, 14)), int(2 ** rng.integers(7, 15)), int(2 ** rng.integers(7, 15)))
              for _ in range(n)]
    return conform(pd.DataFrame([{"gpu": g, "kernel": "gemm", "implementation": "cublas", "dtype": "bfloat16",
                                  "m": m, "n": nn, "k": k, "batch": 1, "latency_us": 1.0}
                                 for g in gpus for m, nn, k in shapes]))


def with_formula_latency(rows, registry, constants=TRUE):
    """``rows`` (v2 columns added) with ``latency_us`` = the physical formula with each GPU's ``constants``."""
    rows = F.with_v2_columns(rows, registry)
    terms = F.pipe_times(rows, registry)
    c = np.array([constants[g] for g in rows["gpu"].astype(str)])
    return rows.assign(latency_us=c[:, 0] + (terms * c[:, 1:]).sum(axis=1))


META = {"numeric": [], "linear": [], "categorical": []}


def test_the_fit_recovers_the_constants_of_rows_made_by_the_physical_formula(registry):
    rows = with_formula_latency(gemm_launches(["a40", "h100_sxm"]), registry)
    terms = F.pipe_times(rows, registry)
    assert terms.shape == (len(rows), len(F.PIPES)) and (terms >= 0).all()
    # the pipes differ across launches (the fit is identified)
    assert np.linalg.matrix_rank(np.column_stack([np.ones(len(rows)), terms])) == 1 + len(F.PIPES)
    for g in ("a40", "h100_sxm"):
        on = (rows["gpu"] == g).to_numpy()
        fp = F.fit_fingerprint(g, terms[on], rows["latency_us"].to_numpy()[on])
        np.testing.assert_allclose(fp.constants, TRUE[g], rtol=1e-5, atol=1e-6)
        assert fp.source == f"fitted on {g} measurements ({on.sum()} rows)"
    with pytest.raises(ValueError, match="finite latency_us > 0"):
        F.fit_fingerprint("a40", terms[:3], np.array([1.0, 0.0, 2.0]))


def test_an_unseen_gpu_takes_its_constants_from_its_class_and_never_from_another_class(registry):
    assert F.gpu_class(registry["l40"]) == (8, "GDDR") == F.gpu_class(registry["a40"])
    assert F.gpu_class(registry["a100_sxm4_80gb"]) == (8, "HBM")
    rows = with_formula_latency(gemm_launches(list(TRUE)), registry)
    model = F.FingerprintModel.fit(rows, META, registry, correct=False, oof=False)
    fp = model.fingerprint("l40", registry)
    # the pooled fit of a40 and l40s, the two GDDR sm_8x GPUs trained; a100 (sm_8x HBM) and h100 are not in it
    assert fp.source == "predicted from spec row: class sm_8x GDDR (a40, l40s)"
    gddr = rows[rows["gpu"].isin(["a40", "l40s"])]
    pooled = F.pool_constants(["a40", "l40s"], model.fitted, model.train_terms, "pooled")
    np.testing.assert_allclose(fp.constants, pooled)
    assert F.FingerprintModel.fit(gddr, META, registry, correct=False, oof=False).fingerprint(
        "l40", registry).constants == pytest.approx(fp.constants)
    # the spread: l40s predicted from a40 alone (and a40 from l40s) misses by a measurable amount
    assert fp.log_spread > 0.01
    # a GPU of another class informs nothing: make the HBM GPUs ten times slower, l40's constants stay
    slow = {**TRUE, "a100_sxm4_80gb": [90.0, 30.0, 2.0, 20.0, 0.0], "h100_sxm": [60.0, 7.0, 25.0, 0.0, 15.0]}
    other = F.FingerprintModel.fit(with_formula_latency(gemm_launches(list(TRUE)), registry, slow), META,
                                   registry, correct=False, oof=False)
    np.testing.assert_allclose(other.fingerprint("l40", registry).constants, fp.constants, rtol=1e-9)
    # without a GPU of its class, every training GPU informs it, and the source says so
    hbm = F.FingerprintModel.fit(rows[rows["gpu"].isin(["a100_sxm4_80gb", "h100_sxm"])], META, registry,
                                 correct=False, oof=False)
    assert hbm.fingerprint("l40", registry).source.startswith(
        "predicted from spec row: all training GPUs (no sm_8x GDDR GPU trained: a100_sxm4_80gb, h100_sxm)")
    # the mean rule averages the fitted constants of the class
    mean = F.FingerprintModel.fit(rows, META, registry, correct=False, oof=False, rule="mean")
    np.testing.assert_allclose(mean.fingerprint("l40", registry).constants,
                               (np.array(TRUE["a40"]) + np.array(TRUE["l40s"])) / 2, rtol=1e-5, atol=1e-6)


def test_predicted_constants_follow_the_registry_they_are_asked_with(registry):
    """A loaded model answers many registries (the user's own ``config/gpus.yaml``): constants predicted for one
    registry's row of a GPU are never served for another registry whose row of that GPU differs."""
    import dataclasses

    from synperf.data.hardware import Registry

    rows = with_formula_latency(gemm_launches(list(TRUE)), registry)
    model = F.FingerprintModel.fit(rows, META, registry, correct=False, oof=False)
    gddr = model.fingerprint("l40", registry)
    assert gddr.source == "predicted from spec row: class sm_8x GDDR (a40, l40s)"
    # the same id, its row edited to HBM memory: the class, and with it the constants, change
    hbm_row = dataclasses.replace(registry["l40"], memory_type="HBM2e")
    edited = Registry({**registry.gpus, "l40": hbm_row}, registry.path)
    hbm = model.fingerprint("l40", edited)
    assert hbm.source == "predicted from spec row: class sm_8x HBM (a100_sxm4_80gb)"
    assert not np.allclose(hbm.constants, gddr.constants)
    # and the first registry still gets its own
    assert model.fingerprint("l40", registry).constants == pytest.approx(gddr.constants)


def test_few_shot_refits_the_constants_from_the_prior(registry):
    rows = with_formula_latency(gemm_launches(["a40", "l40s", "l40"], n=80),
                                registry, {**TRUE, "l40": [3.0, 1.3, 1.0, 0.4, 0.7]})
    model = F.FingerprintModel.fit(rows[rows["gpu"] != "l40"], META, registry, correct=False, oof=False)
    prior = model.fingerprint("l40", registry)
    l40 = rows[rows["gpu"] == "l40"]
    terms, y = F.pipe_times(l40, registry), l40["latency_us"].to_numpy()
    assert F.fewshot_fingerprint(prior, terms[:0], y[:0]) is prior
    err = [np.mean(np.abs(fp.time_us(terms) / y - 1)) for fp in
           (prior, F.fewshot_fingerprint(prior, terms[:8], y[:8]), F.fewshot_fingerprint(prior, terms[:40], y[:40]))]
    assert err[0] > 0.02 and err[2] < err[1] < err[0]
    fp = F.fewshot_fingerprint(prior, terms[:8], y[:8])
    assert fp.source.startswith("few-shot fit on 8 rows (prior: predicted from spec row: class sm_8x GDDR")
    assert fp.log_spread < prior.log_spread


def test_synperf_runs_in_predict_protocol_and_is_deterministic(registry):
    from synperf.evaluation.protocols import feature_table, leave_one_gpu_out, predict_protocol

    same = {g: [3.0, 1.4, 1.1, 0.2, 0.6] for g in ("a40", "l40s", "l40", "a100_sxm4_80gb")}
    launches = gemm_launches(list(same), n=80)
    latency = with_formula_latency(launches, registry, same)["latency_us"].to_numpy()
    table, meta = feature_table(launches.assign(latency_us=latency), registry, "v2")
    folds = leave_one_gpu_out(table, ["a40", "l40s", "l40"])
    preds = [predict_protocol(table, folds, ["synperf"], registry, None, meta, log=lambda *_: None)
             for _ in range(2)]
    p = preds[0]
    assert set(p["method"]) == {"synperf"} and np.isfinite(p["predicted_latency_us"]).all()
    # every GPU shares the constants: an unseen GPU's predicted constants give its latency within 2%
    unseen = p[p["split"] == "unseen"]
    assert unseen["ape_pct"].mean() < 2.0
    # unseen rows carry the interval of a GPU without measurements; the leave-one-out folds' held-out problems of
    # training GPUs none (no own-GPU residuals fitted there)
    assert (unseen["predicted_low_us"] <= unseen["predicted_latency_us"]).all()
    assert (unseen["predicted_latency_us"] <= unseen["predicted_high_us"]).all()
    assert p.loc[p["split"] == "test_seen", "predicted_low_us"].isna().all()
    np.testing.assert_array_equal(preds[0]["predicted_latency_us"], preds[1]["predicted_latency_us"])
    # the configured fold's held-out problems of training GPUs carry their own-GPU interval, as `predict` serves it
    from synperf.evaluation.protocols import configured, summarize_predictions

    keys = table["problem_key"].astype(str).to_numpy()
    held = np.isin(keys, np.unique(keys)[::5])
    gpu = table["gpu"].astype(str).to_numpy()
    split = np.where(gpu == "l40", "unseen", np.where(held, "test_seen", "train"))
    conf = predict_protocol(table.assign(split=split), configured(table.assign(split=split)), ["synperf"], registry,
                            None, meta, log=lambda *_: None)
    seen = conf[conf["split"] == "test_seen"]
    assert len(seen) and np.isfinite(seen[["predicted_low_us", "predicted_high_us"]].to_numpy()).all()
    summary = summarize_predictions(conf)
    assert summary.loc[summary["split"] == "test_seen", "interval_coverage"].notna().all()


def test_the_interval_widens_with_the_constants_spread(registry):
    rng = np.random.default_rng(1)
    rows = with_formula_latency(gemm_launches(list(TRUE), n=80), registry)
    rows = rows.assign(latency_us=rows["latency_us"] * np.exp(rng.normal(0, 0.1, len(rows))))
    model = F.FingerprintModel.fit(rows, META, registry, seed=0)
    lo_q, hi_q = model.residual_q
    assert lo_q < 0 < hi_q
    seen = rows[rows["gpu"] == "a40"]
    lo, hi = model.interval(seen, registry)
    pred = model.predict(seen, registry)
    assert (lo < pred).all() and (pred < hi).all()
    new = seen.assign(gpu="l40").drop(columns=list(F.V2_COLUMNS))
    lo_n, hi_n = model.interval(new, registry)
    assert np.median(np.log(hi_n / lo_n)) > np.median(np.log(hi / lo))


def test_a_trained_gpus_interval_comes_from_its_own_held_out_residuals(registry):
    # a40 measures with 2% noise, h100 with 15%: one pooled width would be too wide for a40 and too narrow for h100
    rng = np.random.default_rng(3)
    rows = with_formula_latency(gemm_launches(["a40", "h100_sxm", "a100_sxm4_80gb"], n=600), registry)
    sigma = rows["gpu"].map({"a40": 0.02, "h100_sxm": 0.15, "a100_sxm4_80gb": 0.05}).to_numpy()
    rows = rows.assign(latency_us=rows["latency_us"] * np.exp(rng.normal(0, sigma)))
    rows = rows.assign(problem_key=np.arange(len(rows)) // 3 % 200)
    train, heldout = rows[rows["problem_key"] % 5 != 0], rows[rows["problem_key"] % 5 == 0]
    model = F.FingerprintModel.fit(train, META, registry, seed=0)
    assert sorted(model.local_q) == ["a100_sxm4_80gb", "a40", "h100_sxm"]
    width = {}
    for g in ("a40", "h100_sxm"):
        part = heldout[heldout["gpu"] == g]
        lo, hi = model.interval(part, registry)
        y = part["latency_us"].to_numpy()
        width[g] = float(np.median(np.log(hi / lo)))
        # 80% intervals on problems nothing was trained on: near 80% of the rows, not all of them
        assert 0.65 <= float(np.mean((y >= lo) & (y <= hi))) <= 0.92, g
    # the noisier GPU's interval is wider, in about the ratio of the noise (2 x 1.28 x sigma for 80%)
    assert width["h100_sxm"] > 4 * width["a40"]
    assert width["a40"] < 2 * 1.2816 * 0.02 * 1.5
    # without the own-GPU residuals (fit without oof: none at all), no interval for a trained GPU
    bare = F.FingerprintModel.fit(train, META, registry, seed=0, oof=False)
    assert bare.local_q == {}
    with pytest.raises(ValueError, match="no interval"):
        bare.interval(heldout[heldout["gpu"] == "a40"], registry)
    only_own = F.FingerprintModel.fit(train, META, registry, seed=0, oof=False, local_oof=True)
    assert np.isnan(only_own.residual_q).all() and sorted(only_own.local_q) == sorted(model.local_q)


def test_few_shot_on_the_fingerprint_refits_the_constants_and_gets_better_with_more_rows(registry):
    from synperf.evaluation.fewshot import fingerprint_fewshot

    truth = {**TRUE, "l40": [3.0, 1.3, 1.0, 0.4, 0.7]}
    rows = with_formula_latency(gemm_launches(["a40", "l40s", "l40"], n=120), registry, truth)
    rows = rows.assign(theoretical_time_us=rows["latency_us"])
    model = F.FingerprintModel.fit(rows[rows["gpu"] != "l40"], META, registry, correct=False)
    res = fingerprint_fewshot(model, rows[rows["gpu"] == "l40"], registry, ks=(0, 8, 32), seeds=(0, 1))
    # the model is left as it was: l40 keeps its predicted constants
    assert model.fingerprint("l40", registry).source.startswith("predicted from spec row")
    mape = res.groupby("k")["mape_pct"].mean()
    assert mape[0] > 2.0 and mape[32] < mape[8] < mape[0]
    assert (res.loc[res["k"] == 32, "n_eval_rows"] == 120 - 32).all()
    assert res["interval_coverage"].between(0, 1).all()
    # the rows of a training GPU are refused: its fitted constants, from every one of its rows, are no prior
    with pytest.raises(ValueError, match="a40"):
        fingerprint_fewshot(model, rows[rows["gpu"] != "l40s"], registry, ks=(8,), seeds=(0,))


def test_fit_chosen_picks_from_the_grid_and_an_unseen_gpu_takes_the_left_out_gpus_residuals(registry):
    from synperf.model.fingerprint_choice import (
        GRID,
        INTERVALS,
        PRIOR_WEIGHTS,
        choose_options,
        choose_prior_weight,
        fit_chosen,
    )

    rng = np.random.default_rng(3)
    rows = with_formula_latency(gemm_launches(list(TRUE), n=60), registry)
    rows = rows.assign(latency_us=rows["latency_us"] * np.exp(rng.normal(0, 0.05, len(rows))))
    rows = rows.assign(theoretical_time_us=F.pipe_times(rows, registry).sum(axis=1))
    name, opts, rule, scores, residuals, folds = choose_options(rows, META, registry, seed=0)
    names = [g[0] for g in GRID]
    assert set(scores) == set(names) and name in scores and len(names) == len(set(names)) == 6
    assert rule in F.RULES
    # the first option within 5% of the lowest score
    assert scores[name] <= 1.05 * min(scores.values())
    assert all(scores[n] > 1.05 * min(scores.values()) for n in names[:names.index(name)])
    assert sorted(residuals["gpu"].unique()) == sorted(TRUE)
    # one fold per training GPU, each model fitted without it
    assert sorted(h for h, _, _ in folds) == sorted(TRUE) and all(h not in m.fitted for h, _, m in folds)
    weight, weight_scores = choose_prior_weight(folds, registry, rule, seed=0)
    assert set(weight_scores) == set(PRIOR_WEIGHTS)
    assert weight == next(w for w in PRIOR_WEIGHTS if weight_scores[w] <= 1.05 * min(weight_scores.values()))
    model = fit_chosen(rows, META, registry, seed=0)
    assert model.choice["option"] == name and model.rule == rule
    assert model.prior_weight == weight
    new = gemm_launches(["l40"], seed=5, n=20)  # a GPU of a class that trained (a40, l40s)
    lo, hi = model.interval(new, registry)
    q = F.rule_bounds(model.unseen_q, "l40", sorted(model.fitted), registry)
    np.testing.assert_allclose(np.log(hi / lo), q[1] - q[0], rtol=1e-9)
    assert model.choice["interval"] in {n for n, _, _ in INTERVALS} and set(model.choice["interval_scores"]) == {
        n for n, _, _ in INTERVALS}
    # one training GPU: no fold, the first (simplest) option and prior weight
    one = fit_chosen(rows[rows["gpu"] == "a40"], META, registry, seed=0)
    assert one.choice["option"] == GRID[0][0] and one.unseen_q == {} and one.prior_weight == PRIOR_WEIGHTS[0]


def test_a_gpus_own_measurements_correct_its_rows_and_reach_other_gpus_only_as_class_mates_evidence(registry):
    # a40 alone runs launches with n of at most 1024 1.6x slower than its physics; no other GPU does
    launches = gemm_launches(["a40", "l40s", "a100_sxm4_80gb", "h100_sxm"], n=400)
    rows = with_formula_latency(launches, registry)
    quirk = (rows["gpu"] == "a40").to_numpy() & (rows["n"].to_numpy(dtype="int64") <= 1024)
    rows = rows.assign(latency_us=rows["latency_us"] * np.where(quirk, 1.6, 1.0))
    train, heldout = rows.iloc[::2], rows.iloc[1::2]
    # without the shared correction, the own-GPU correction is the only one
    with_local = F.FingerprintModel.fit(train, META, registry, seed=0, oof=False, correct=False)
    without = F.FingerprintModel.fit(train, META, registry, seed=0, oof=False, correct=False, local=False)
    assert sorted(with_local.local) == sorted(set(train["gpu"])) and without.local == {}
    a40 = heldout[heldout["gpu"] == "a40"]
    y = a40["latency_us"].to_numpy()
    err = {name: np.mean(np.abs(m.predict(a40, registry, sibling=False) / y - 1)) for name, m in
           (("local", with_local), ("shared", without))}
    assert err["local"] < 0.5 * err["shared"]
    # l40 (sm_8x GDDR, never measured): no own correction; the class mode adds the mean of a40's and l40s's
    l40 = a40.assign(gpu="l40").drop(columns=list(F.V2_COLUMNS))
    np.testing.assert_allclose(with_local.predict(l40, registry, sibling=False),
                               without.predict(l40, registry, sibling=False), rtol=1e-12)
    terms = F.pipe_times(F.with_v2_columns(l40, registry), registry)
    x, fp = with_local._design(F.with_v2_columns(l40, registry), terms, registry)
    local = (with_local.local["a40"].predict(x) + with_local.local["l40s"].predict(x)) / 2
    # the class-mates' correction is the predictor's own rule, not an option: the default prediction takes it
    np.testing.assert_allclose(with_local.predict(l40, registry), fp * np.exp(local), rtol=1e-9)
    # h200 (sm_9x HBM, never measured) takes h100's own correction alone: neither a100 (sm_8x) nor the GDDR GPUs'
    h200 = F.with_v2_columns(l40.assign(gpu="h200_sxm"), registry)
    xh, fph = with_local._design(h200, F.pipe_times(h200, registry), registry)
    twin = np.isin(launch_keys(h200), launch_keys(train[train["gpu"] == "h100_sxm"]))
    assert 0 < twin.sum() < len(h200)  # launches h100 measured take its measurement instead (the twins' test)
    np.testing.assert_allclose(with_local.predict(h200, registry)[~twin],
                               (fph * np.exp(with_local.local["h100_sxm"].predict(xh)))[~twin], rtol=1e-9)


def _roofline_us(rows, gpu, registry):
    from synperf.model.roofline import add_baseline_columns

    plain = rows.drop(columns=[c for c in rows.columns if c.startswith("bl_")]).assign(gpu=gpu)
    return add_baseline_columns(plain, registry, tiles=False)["bl_roofline_us"].to_numpy()


def test_a_gpu_without_measurements_takes_a_near_class_mates_measurement_of_the_same_launch(registry):
    from synperf.model.roofline import roofline_shift
    from synperf.model.twins import TWIN_MAX_DISTANCE, twin_mates

    rows = with_formula_latency(gemm_launches(list(TRUE), n=120), registry)
    rows = rows.assign(latency_us=rows["latency_us"] * np.exp(0.1 * np.sin(np.arange(len(rows)))))
    model = F.FingerprintModel.fit(rows, META, registry, seed=0, oof=False)
    # h200 is h100's class-mate and close on the spec sheet (1.43x the DRAM bandwidth); h20 is a class-mate with a
    # sixth of its tensor peak, too far for its measurements to carry
    assert twin_mates("h200_sxm", model.measured, registry) == ["h100_sxm"]
    assert twin_mates("h20", model.measured, registry) == []
    assert F.spec_distance("h20", ["h100_sxm"], registry) > TWIN_MAX_DISTANCE
    key_columns = [c for c in LAUNCH_KEY_COLUMNS if c in rows.columns]
    h100 = rows[rows["gpu"] == "h100_sxm"].drop_duplicates(key_columns).reset_index(drop=True)
    keys = launch_keys(h100)
    measured = rows[rows["gpu"] == "h100_sxm"]
    y = pd.Series(measured["latency_us"].to_numpy()).groupby(launch_keys(measured)).mean().reindex(keys).to_numpy()
    h200 = h100.drop(columns=["latency_us"]).assign(gpu="h200_sxm")
    want = roofline_shift(y, _roofline_us(h100, "h100_sxm", registry), _roofline_us(h100, "h200_sxm", registry))
    np.testing.assert_allclose(model.predict(h200, registry), want, rtol=1e-9)
    # a user's table: integer columns, no feature columns, another row order; and the canonical rows
    # synperf.api.launch_table builds, which fill other families' parameters with defaults (window_size=0, ...)
    plain = h200[list(KEY_COLUMNS)].iloc[::-1]
    plain = plain.assign(m=plain["m"].astype("int64"), n=plain["n"].astype(object))
    np.testing.assert_allclose(model.predict(plain, registry), want[::-1], rtol=1e-9)
    params = h200[["m", "n", "k"]].astype("int64").assign(dtype="bfloat16", implementation="cublas")
    canon = launch_table("gemm", params, "h200_sxm", registry)
    assert (canon["window_size"] == 0).all() and h200["window_size"].isna().all()
    np.testing.assert_allclose(model.predict(canon, registry), want, rtol=1e-9)
    d = model.describe(h200, registry)
    assert (d["evidence"] == "the same launch measured on h100_sxm (its time above the roofline carried over)").all()
    # the bounds stay around the prediction (its GPU's interval rule is not the twins' business)
    assert np.allclose(d["predicted_latency_us"], want, rtol=1e-9)
    # without the class-mates' evidence, or for a GPU too far from every class-mate, the model's own prediction
    bare = copy.deepcopy(model)
    bare.measured = {}
    np.testing.assert_allclose(model.predict(h200, registry, sibling=False),
                               bare.predict(h200, registry, sibling=False))
    assert not np.allclose(model.predict(h200, registry), bare.predict(h200, registry), rtol=1e-3)
    h20 = h200.assign(gpu="h20")
    np.testing.assert_allclose(model.predict(h20, registry), bare.predict(h20, registry), rtol=1e-12)
    assert not model.describe(h20, registry)["evidence"].str.contains("same launch").any()
    # a GPU with measurements of its own never takes a twin's
    own = h100.drop(columns=["latency_us"])
    np.testing.assert_allclose(model.predict(own, registry), bare.predict(own, registry), rtol=1e-12)


def test_the_dram_multiplier_is_never_fitted_below_the_spec_sheet_bandwidth(registry):
    # rows made with a DRAM multiplier of 0.4 (faster than the spec-sheet bandwidth): the fit holds it at 1 and
    # every other constant stays >= 0
    rows = with_formula_latency(gemm_launches(["a40"]), registry, {"a40": [4.0, 1.5, 0.4, 0.3, 0.8]})
    terms = F.pipe_times(rows, registry)
    fp = F.fit_fingerprint("a40", terms, rows["latency_us"].to_numpy())
    assert fp.multipliers[F.PIPES.index("dram_us")] == pytest.approx(1.0)
    assert (fp.constants >= F.LOWER_BOUNDS - 1e-12).all()
    assert F.LOWER_BOUNDS.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]


def test_describe_says_where_each_gpus_constants_and_correction_came_from_and_survives_save_and_load(registry,
                                                                                                    tmp_path):
    rng = np.random.default_rng(2)
    rows = with_formula_latency(gemm_launches(list(TRUE), n=60), registry)
    rows = rows.assign(latency_us=rows["latency_us"] * np.exp(rng.normal(0, 0.05, len(rows))))
    model = F.FingerprintModel.fit(rows[rows["gpu"] != "l40s"], {**META, "feature_set": "v2"}, registry, seed=0)
    assert model.feature_set == "v2"
    # launch rows without any feature column, as a caller passes them
    launches = gemm_launches(["a40", "l40s", "h200_sxm", "t4"], n=5).drop(columns=["latency_us"])
    d = model.describe(launches, registry)
    np.testing.assert_allclose(d["predicted_latency_us"], model.predict(launches, registry), rtol=1e-12)
    by = d.assign(gpu=launches["gpu"].to_numpy()).groupby("gpu").first()
    assert by.loc["a40", "gpu_constants"] == "fitted on a40 measurements (60 rows)"
    assert by.loc["a40", "evidence"].endswith("own-GPU correction on a40's measurements")
    # l40s left out: its constants and correction come from its class-mate a40 (sm_8x GDDR), never from a100
    assert by.loc["l40s", "gpu_constants"].startswith("predicted from spec row: class sm_8x GDDR (a40)")
    assert by.loc["l40s", "evidence"].endswith("class-mates' own-GPU corrections (a40)")
    # h200 (never measured): h100, its near class-mate, measured these very launches
    assert by.loc["h200_sxm", "evidence"] == "the same launch measured on h100_sxm (its time above the roofline " \
        "carried over)"
    assert by.loc["t4", "evidence"].endswith("no class-mate of class sm_7x GDDR in training")
    assert by.loc["t4", "gpu_constants"].startswith("predicted from spec row: all training GPUs")
    assert (d["predicted_latency_low_us"] < d["predicted_latency_us"]).all()
    assert (d["predicted_latency_us"] < d["predicted_latency_high_us"]).all()
    assert (d["unknown_category"] == "").all() and (d["fingerprint_time_us"] > 0).all()
    model.save(tmp_path / F.FINGERPRINT_FILE)
    again = F.FingerprintModel.load(tmp_path / F.FINGERPRINT_FILE)
    np.testing.assert_array_equal(again.describe(launches, registry)["predicted_latency_us"],
                                  d["predicted_latency_us"])
    # a file saved by a synperf whose model layout differed (no format recorded: format 2) is refused by name
    del model.__dict__["model_format"]
    model.save(tmp_path / "old.joblib")
    with pytest.raises(InputError, match=rf"^{re.escape(str(tmp_path / 'old.joblib'))}: fingerprint model of format 2, "
                                         rf"this synperf reads format {F.MODEL_FORMAT} .*retrain it"):
        F.FingerprintModel.load(tmp_path / "old.joblib")


def test_predict_answers_from_the_experiments_fingerprint_file_and_names_what_it_lacks(registry, tmp_path):
    from synperf.api import predict
    from synperf.data.io import InputError

    rows = with_formula_latency(gemm_launches(["a40", "h100_sxm"], n=40), registry)
    model = F.FingerprintModel.fit(rows, {**META, "feature_set": "v2"}, registry, seed=0)
    experiments = {"gemm": {"kernel": "gemm", "dtypes": ["bfloat16"]}}
    params = {"m": [1, 64, 4096], "n": 4096, "k": 4096, "dtype": "bfloat16"}
    call = dict(models_dir=tmp_path, registry=registry, experiments=experiments, predictor="fingerprint")
    with pytest.raises(InputError, match=r"gemm: no trained model \(no fingerprint.joblib, the fingerprint predictor "
                                         r"of 'gemm'\)"):
        predict("gemm", params, "l40s", **call)
    model.save(tmp_path / "gemm" / F.FINGERPRINT_FILE)
    out = predict("gemm", params, ["l40s", "h100_sxm", "a40"], **call)
    launches = gemm_launches(["l40s"], n=1).drop(columns=["latency_us"])
    launches = pd.concat([launches.assign(m=m, n=4096, k=4096, gpu=g)
                          for m, g in zip([1, 64, 4096], ["l40s", "h100_sxm", "a40"])], ignore_index=True)
    np.testing.assert_allclose(out["predicted_latency_us"], model.predict(launches, registry), rtol=1e-12)
    assert (out["prediction_path"] == "fingerprint").all() and out.attrs["training_gpus"] == ["a40", "h100_sxm"]
    assert out.loc[0, "gpu_constants"].startswith("predicted from spec row: class sm_8x GDDR (a40)")
    assert out.loc[1, "gpu_constants"].startswith("fitted on h100_sxm")
    assert (out["predicted_latency_low_us"] < out["predicted_latency_high_us"]).all()
    with pytest.raises(InputError, match="predictor = 'tree'; expected one of"):
        predict("gemm", params, "l40s", **{**call, "predictor": "tree"})
    with pytest.raises(InputError, match="names an MLP"):
        predict("gemm", params, "l40s", **call, feature_set="v2")


def test_predict_with_measured_launches_refits_that_gpus_fingerprint_and_says_so(registry, tmp_path, capsys):
    """Few-shot through the user entry point: measured launches of a GPU the model never trained on refit its
    constants (the predictions move towards the truth), the rows say so, and bad measurements are refused by row."""
    from synperf import cli
    from synperf.api import predict
    from synperf.data.io import InputError

    truth = {**TRUE, "l40": [3.0, 1.3, 1.0, 0.4, 0.7]}
    rows = with_formula_latency(gemm_launches(["a40", "l40s", "h100_sxm", "l40"], n=80), registry, truth)
    model = F.FingerprintModel.fit(rows[rows["gpu"] != "l40"], {**META, "feature_set": "v2"}, registry, seed=0,
                                   correct=False)
    model.save(tmp_path / "gemm" / F.FINGERPRINT_FILE)
    l40 = rows[rows["gpu"] == "l40"].reset_index(drop=True)
    cols = ["m", "n", "k", "dtype"]
    measured, rest = l40.iloc[:32], l40.iloc[32:].reset_index(drop=True)
    call = dict(models_dir=tmp_path, registry=registry, experiments={"gemm": {"kernel": "gemm",
                                                                                "dtypes": ["bfloat16"]}})
    zero = predict("gemm", rest[cols], "l40", **call)
    few = predict("gemm", rest[cols], "l40", **call, measured=measured[cols + ["latency_us"]].assign(gpu="l40"))
    y = rest["latency_us"].to_numpy()
    mape = lambda p: float(np.mean(np.abs(p / y - 1.0)))  # noqa: E731
    assert mape(few["predicted_latency_us"].to_numpy()) < 0.25 * mape(zero["predicted_latency_us"].to_numpy())
    assert few["gpu_constants"].str.startswith("few-shot fit on 32 rows").all()
    assert zero["gpu_constants"].str.startswith("predicted from spec row").all()
    # without a gpu column the measured rows are of the GPU asked for
    np.testing.assert_array_equal(predict("gemm", rest[cols], "l40", **call, measured=measured[cols + ["latency_us"]])
                                  ["predicted_latency_us"], few["predicted_latency_us"])
    # the cached model is left as it was
    again = predict("gemm", rest[cols], "l40", **call)
    np.testing.assert_array_equal(again["predicted_latency_us"], zero["predicted_latency_us"])
    with pytest.raises(InputError, match=r"measured: row 1: latency_us = -3.0; expected a finite number > 0"):
        predict("gemm", rest[cols], "l40", **call,
                measured=measured[cols].assign(gpu="l40", latency_us=[1.0, -3.0] + [1.0] * 30))
    with pytest.raises(InputError, match=r"measured: few-shot: \[.a40.\] trained the model"):
        predict("gemm", rest[cols], ["a40"] + ["l40"] * (len(rest) - 1), **call,
                measured=measured[cols + ["latency_us"]].assign(gpu="a40"))
    with pytest.raises(InputError, match=r"measured: needs the columns \['latency_us'\]"):
        predict("gemm", rest[cols], "l40", **call, measured=measured[cols])
    # rows that would refit nothing asked for, or refit it wrongly: another GPU, a dtype the model never trained
    # on, a latency faster than the GPU's spec sheet allows
    with pytest.raises(InputError, match=r"measured: row 0: gpu = 'l4', which no launch of this call predicts"):
        predict("gemm", rest[cols], "l40", **call, measured=measured[cols + ["latency_us"]].assign(gpu="l4"))
    with pytest.raises(InputError, match=r"measured row 0: dtype = 'float32', but experiment 'gemm' was trained"):
        predict("gemm", rest[cols], "l40", **call,
                measured=measured[cols + ["latency_us"]].assign(gpu="l40", dtype="float32"))
    with pytest.raises(InputError, match=r"measured: row 0: latency_us = 1e-09 is faster than l40's spec-sheet"):
        predict("gemm", rest[cols], "l40", **call,
                measured=measured[cols + ["latency_us"]].assign(gpu="l40", latency_us=1e-9))
    with pytest.raises(InputError, match=r"measured: no rows"):
        predict("gemm", rest[cols], "l40", **call, measured=measured[cols + ["latency_us"]].iloc[:0])
    # a launch the GPU measured itself answers with its measurement, nothing refitted or corrected on top
    both = pd.concat([measured[cols].iloc[:3], rest[cols].iloc[:2]], ignore_index=True)
    own = predict("gemm", both, "l40", **call, measured=measured[cols + ["latency_us"]])
    np.testing.assert_allclose(own["predicted_latency_us"].iloc[:3], measured["latency_us"].iloc[:3], rtol=1e-12)
    assert (own["evidence"].iloc[:3] == "the same launch measured on this GPU (its few-shot rows)").all()
    np.testing.assert_allclose(own["predicted_latency_us"].iloc[3:], few["predicted_latency_us"].iloc[:2], rtol=1e-9)
    # the command line: --measured FILE.csv, its gpu column defaulting to --gpu
    measured[cols + ["latency_us"]].to_csv(tmp_path / "sweep.csv", index=False)
    rest[cols].iloc[:5].to_csv(tmp_path / "launches.csv", index=False)
    import yaml

    cfg = tmp_path / "config" / "config.yaml"
    cfg.parent.mkdir()
    cfg.write_text(yaml.safe_dump({"experiments": call["experiments"]}))
    assert cli.main(["predict", "--kernel", "gemm", "--gpu", "l40", "--launches", str(tmp_path / "launches.csv"),
                     "--measured", str(tmp_path / "sweep.csv"), "--models-dir", str(tmp_path)]) == 0
    out = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    np.testing.assert_allclose(out["predicted_latency_us"], few["predicted_latency_us"].iloc[:5], rtol=1e-9)
    # a bad measured file is named by its flag and path, its row by the CSV line (row 1 is line 3)
    bad = measured[cols + ["latency_us"]].iloc[:3].copy()
    bad.loc[1, "m"] = 0
    bad.to_csv(tmp_path / "bad.csv", index=False)
    bad.drop(columns=["k"]).to_csv(tmp_path / "nok.csv", index=False)
    args = ["predict", "--kernel", "gemm", "--gpu", "l40", "--launches", str(tmp_path / "launches.csv"),
            "--models-dir", str(tmp_path), "--measured"]
    assert cli.main(args + [str(tmp_path / "bad.csv")]) == 2
    assert f"--measured {tmp_path / 'bad.csv'}: line 3: m = 0; expected an integer" in capsys.readouterr().err
    assert cli.main(args + [str(tmp_path / "nok.csv")]) == 2
    assert f"--measured {tmp_path / 'nok.csv'}: kernel 'gemm' needs ['k']" in capsys.readouterr().err


def test_fewshot_stage_reads_each_models_choice_and_scores_only_the_unseen_rows(registry, tmp_path):
    """The few-shot refit borrows own-GPU corrections as the model chose per k on its training GPUs
    (fit_chosen), and each draw's correction is chosen on its own k rows; the stage scores the unseen GPU's other
    rows, and poisoning the unseen GPU's rows moves its MAPE, never the model's choices."""
    from conftest import GPUS

    from synperf.evaluation.fewshot import CALIBRATIONS
    from synperf.model.fingerprint_choice import fit_chosen
    from synperf.pipeline.fewshot import CHOICE_COLUMNS, TABLE_COLUMNS, fewshot_stage

    truth = {**TRUE, "l40": [3.0, 1.3, 1.0, 0.4, 0.7]}
    rng = np.random.default_rng(4)
    rows = with_formula_latency(gemm_launches(list(truth), n=80), registry, truth)
    rows = rows.assign(latency_us=rows["latency_us"] * np.exp(rng.normal(0, 0.05, len(rows))),
                       theoretical_time_us=F.pipe_times(rows, registry).sum(axis=1),
                       split=np.where(rows["gpu"] == "l40", "unseen", "train"))
    model = fit_chosen(rows[rows["split"] == "train"], META, registry, seed=0)
    assert "fewshot_calibration" not in model.choice
    model.save(tmp_path / "fingerprint.joblib")
    out = {k: str(tmp_path / k) for k in ("table.csv", "choice.csv", "fig.png")}

    def stage(table_rows):
        table_rows.to_parquet(tmp_path / "e.parquet")
        fewshot_stage(["e"], [str(tmp_path / "fingerprint.joblib")], [str(tmp_path / "e.parquet")], {"e": "gemm"},
                      str(GPUS), None, out["table.csv"], out["choice.csv"], out["fig.png"])
        return pd.read_csv(out["table.csv"]), pd.read_csv(out["choice.csv"])

    table, choice = stage(rows)
    assert list(table.columns) == TABLE_COLUMNS and list(choice.columns) == CHOICE_COLUMNS
    # the choice to borrow own-GPU corrections, per k: both ways scored, the model's way marked
    refit = choice[choice["calibration"].str.startswith("refit:")].set_index(["k", "calibration"])
    assert sorted(set(refit.index.get_level_values("k"))) == [8, 32] and len(refit) == 4
    for k, b in model.choice["fewshot_borrow"].items():
        assert refit.loc[(k, "refit: borrowed own-GPU corrections"), "chosen"] == b
    assert set(table["gpu"]) == {"l40"} and sorted(table["k"]) == [0, 8, 32, 128][:3]
    got = table.set_index("k")
    assert got.loc[0, "calibration"] == "none"
    assert np.isclose(got.loc[0, "mape_pct"], got.loc[0, "uncalibrated_mape_pct"])
    assert all(set(got.loc[k, "calibration"].split(";")) <= set(CALIBRATIONS) for k in (8, 32))
    assert got.loc[32, "mape_pct"] < got.loc[0, "mape_pct"]
    poisoned = rows.copy()
    on = (poisoned["gpu"] == "l40").to_numpy()
    poisoned.loc[on, "latency_us"] *= np.exp(rng.normal(0, 1.0, on.sum()))
    table2, choice2 = stage(poisoned)
    pd.testing.assert_frame_equal(choice2, choice)
    assert not np.allclose(table2["mape_pct"], table["mape_pct"])


def test_the_interval_of_a_new_gpu_widens_with_its_spec_distance_when_the_left_out_gpus_say_so(registry):
    from synperf.model.fingerprint_choice import INTERVALS, choose_interval
    from synperf.model.pipes import spec_distance

    # one class (sm_9x HBM), so the case rule pools them all: h800 is h100's spec twin, h20 far from both
    training = ["h100_sxm", "h800_sxm", "h200_sxm", "h20"]
    assert spec_distance("h100_sxm", training, registry) == 0.0  # itself skipped, h800 a twin
    assert spec_distance("h100_sxm", ["h100_sxm", "a100_sxm4_80gb"], registry) > 0
    # another memory family adds its term
    assert spec_distance("l40", ["a100_sxm4_80gb"], registry) > spec_distance("l40", ["l40s"], registry) + 1.0
    # left-out residuals whose spread grows with each GPU's distance to the others: the distance rule fits them
    rng = np.random.default_rng(0)
    parts = []
    for g in training:
        d = spec_distance(g, [t for t in training if t != g], registry)
        found = F.class_pool(g, [t for t in training if t != g], registry)[1].startswith("class")
        parts.append(pd.DataFrame({"gpu": g, "log_residual": rng.normal(0.0, 0.2 * (0.4 + d), 400),
                                   "class_found": found}))
    residuals = pd.concat(parts, ignore_index=True)
    name, rule, scores = choose_interval(residuals, training, registry)
    assert set(scores) == {n for n, _, _ in INTERVALS}
    assert rule["kind"] == "distance" and scores[name] < scores["case 80%"]
    near, far = (F.rule_bounds(rule, g, training, registry) for g in ("h100_pcie", "b200"))
    assert spec_distance("h100_pcie", training, registry) + 1.0 < spec_distance("b200", training, registry)
    assert near[1] - near[0] < far[1] - far[0]
    # one left-out GPU: nothing to score, the first (simplest) rule
    name, rule, scores = choose_interval(residuals[residuals["gpu"] == "h20"], training, registry)
    assert name == INTERVALS[0][0] and rule["kind"] == "case" and scores == {}


def test_a_prior_constant_left_at_a_rounding_zero_does_not_derail_the_few_shot_fit():
    # a pooled fit can leave a constant at 1e-17 instead of 0; the few-shot fit must treat it as zero, not divide
    # by it (a pseudo-row weighing 1e16 stops the bounded solver at the bounds)
    rng = np.random.default_rng(0)
    dram = np.exp(rng.uniform(np.log(1.0), np.log(160.0), 32))
    terms = np.column_stack([dram * 0.019, dram, dram * 0.29, dram * 0.038])
    prior = F.Fingerprint("a40", 1.6, np.array([2.5, 1.0, 5.55e-17, 13.0]), "prior")
    y = 1.1 * prior.time_us(terms) * np.exp(rng.normal(0.0, 0.05, len(dram)))
    fp = F.fewshot_fingerprint(prior, terms, y, prior_weight=3.0)
    assert fp.floor_us > 0.5 and fp.multipliers[0] > 1.0 and fp.multipliers[3] > 5.0
    assert np.mean(np.abs(fp.time_us(terms) / y - 1.0)) < 0.1


def test_no_prediction_is_faster_than_the_spec_sheet_flop_time(registry):
    # constants that beat the Tensor Core peak on paper (compute multiplier 0.1, as a fit can leave when pipes
    # overlap): H20 (a quarter of H100's per-SM rate) predicted from them would run a large GEMM faster than its peak
    fast = {"h100_sxm": [2.0, 0.1, 1.0, 0.0, 0.0], "b200": [2.0, 0.1, 1.0, 0.0, 0.0]}
    rng = np.random.default_rng(4)
    rows = with_formula_latency(gemm_launches(list(fast), n=60), registry, fast)
    rows = rows.assign(latency_us=rows["latency_us"] * np.exp(rng.normal(0, 0.05, len(rows))))
    model = F.FingerprintModel.fit(rows, META, registry, seed=0, correct=False, local=False)
    big = pd.concat([launch_table("gemm", {"m": s, "n": s, "k": s, "dtype": "bfloat16"}, g, registry)
                     for g, s in (("h20", 8192), ("h100_sxm", 64))], ignore_index=True)
    d = model.describe(big, registry)
    flop_us = 2 * np.array([8192, 64]) ** 3 / np.array([registry["h20"].datasheet().dense_bf16_tflops,
                                                         registry["h100_sxm"].datasheet().dense_bf16_tflops]) / 1e6
    np.testing.assert_allclose(d["compute_bound_us"], flop_us, rtol=0.01)
    # h20: raised to its FLOP time, the interval moved with it (its low end held at the bound), and said so
    assert d.loc[0, "predicted_latency_us"] == pytest.approx(d.loc[0, "compute_bound_us"])
    assert d.loc[0, "predicted_latency_low_us"] == pytest.approx(d.loc[0, "compute_bound_us"])
    assert d.loc[0, "predicted_latency_high_us"] > 1.05 * d.loc[0, "compute_bound_us"]
    assert d.loc[0, "evidence"].endswith("raised to the spec-sheet FLOP time (predicted faster than the GPU's peak)")
    np.testing.assert_allclose(model.predict(big, registry), d["predicted_latency_us"], rtol=1e-12)
    # every prediction is at or above its bound; one above it (a tiny GEMM, launch floor) is left as it is
    assert (model.predict(rows, registry) >= F.with_spec_columns(rows, registry)["bl_compute_us"] - 1e-9).all()
    assert d.loc[1, "predicted_latency_us"] > 10 * d.loc[1, "compute_bound_us"]
    assert not d.loc[1, "evidence"].endswith("peak)")
    pred, low, high, raised = F.at_compute_bound(np.array([10.0, 10.0]), np.array([5.0, 20.0]),
                                                 np.array([4.0, 15.0]), np.array([8.0, 30.0]))
    np.testing.assert_allclose(pred, [10.0, 20.0])
    np.testing.assert_allclose(low, [10.0, 15.0])
    np.testing.assert_allclose(high, [16.0, 30.0])
    assert raised.tolist() == [True, False]


def quirky_rows(registry, n: int, quirk: float = 1.6) -> pd.DataFrame:
    """GEMM rows of a40, a100, h100 and b200 by the physical formula, with the launches of a100 and b200 whose n is at
    most 1024 ``quirk`` times slower (b200: sm_10x HBM, no class-mate among the others)."""
    constants = {**TRUE, "b200": [3.0, 0.5, 2.0, 0.1, 1.0]}
    rows = with_formula_latency(gemm_launches(["a40", "a100_sxm4_80gb", "h100_sxm", "b200"], n=n), registry,
                                constants)
    slow = rows["gpu"].isin(["a100_sxm4_80gb", "b200"]).to_numpy() & (rows["n"].to_numpy(dtype="int64") <= 1024)
    return rows.assign(latency_us=rows["latency_us"] * np.where(slow, quirk, 1.0))


def test_a_few_shot_fit_borrows_the_own_gpu_correction_its_rows_share_and_leaves_the_model_as_it_was(registry):
    from synperf.evaluation.fewshot import chosen_borrow, fewshot_predictor

    # a100 and the new b200 (sm_10x HBM: no class-mate trained) run launches with n of at most 1024 1.6x slower
    # than their physics; h100 and a40 do not
    rows = quirky_rows(registry, 400)
    model = F.FingerprintModel.fit(rows[rows["gpu"] != "b200"], META, registry, seed=0, oof=False, correct=False)
    new = rows[rows["gpu"] == "b200"].drop(columns=list(F.V2_COLUMNS)).reset_index(drop=True)
    sweep, rest = new.iloc[::12], new.drop(index=new.index[::12])
    y = rest["latency_us"].to_numpy()
    before = (dict(model.overrides), dict(model.borrowed))
    kept, none = model.fewshot_fit("b200", sweep, registry, borrow=False)
    fp, mates = model.fewshot_fit("b200", sweep, registry, borrow=True)
    assert none is None and mates == ("a100_sxm4_80gb",)
    assert (model.overrides, model.borrowed) == before
    # h200 has a class-mate in training (h100): the same quirky rows keep h100's correction, nothing is borrowed
    assert model.fewshot_fit("h200_sxm", sweep.assign(gpu="h200_sxm"), registry, borrow=True)[1] is None
    err = {}
    for name, (f, m) in {"keep": (kept, None), "borrow": (fp, mates)}.items():
        model.overrides["b200"] = f
        if m:
            model.borrowed["b200"] = m
        err[name] = np.mean(np.abs(model.predict(rest, registry) / y - 1))
        if m:
            assert "own-GPU corrections of a100_sxm4_80gb, chosen on its few-shot rows" in model.evidence(
                "b200", registry)
        model.overrides.pop("b200"), model.borrowed.pop("b200", None)
    assert err["borrow"] < 0.5 * err["keep"]
    # the few-shot predictor borrows only for the row counts the model chose it for
    model.choice = {"fewshot_borrow": {8: False, 32: True}}
    assert [chosen_borrow(model, k) for k in (4, 8, 31, 32, 500)] == [False, False, False, True, True]
    refitted, _ = fewshot_predictor(model, sweep, registry)
    assert refitted.borrowed == {"b200": ("a100_sxm4_80gb",)} and model.borrowed == {}
    model.choice = {"fewshot_borrow": {8: False}}
    assert fewshot_predictor(model, sweep, registry)[0].borrowed == {}


def test_the_choice_to_borrow_is_made_per_k_on_the_training_gpus_left_out(registry):
    from synperf.model.fingerprint_choice import GRID, choose_fewshot_borrow, choose_options, with_own_corrections

    # a100 and b200 share a quirk (launches with n <= 1024 1.6x slower), h100 and a40 do not: left out, each quirky
    # GPU's few-shot rows pick the other's own-GPU correction, which only borrowing reaches (no class-mates)
    rows = quirky_rows(registry, 300)
    grid = [g for g in GRID if g[0].startswith("fingerprint only")]
    _, _, rule, _, _, folds = choose_options(rows, META, registry, grid=grid)
    assert all(m.local == {} for _, _, m in folds)   # no class-mate among the training GPUs of any fold
    folds = with_own_corrections(folds, rows, registry)
    assert all(sorted(m.local) == sorted(m.fitted) for _, _, m in folds)   # every training GPU's own correction
    chosen, scores = choose_fewshot_borrow(folds, registry, rule, 1.0, ks=(32,), seeds=(0,))
    assert chosen == {32: True} and scores[32]["borrow"] < scores[32]["keep"]
    # no quirk shared: borrowing wins nothing, the simpler way (keep the class-mates') stays
    plain = quirky_rows(registry, 300, quirk=1.0)
    _, _, rule, _, _, folds = choose_options(plain, META, registry, grid=grid)
    folds = with_own_corrections(folds, plain, registry)
    assert choose_fewshot_borrow(folds, registry, rule, 1.0, ks=(32,), seeds=(0,))[0] == {32: False}
