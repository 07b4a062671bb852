"""Evaluation protocols (configured, leave-one-GPU-out, leave-one-architecture-out) and the runner."""


import numpy as np
import pandas as pd
import pytest

from synperf.data.schema import conform
from synperf.evaluation import protocols as P
from synperf.evaluation.baselines import BASELINES, BaselineConfig
from synperf.evaluation.split import SHAPE_COLUMNS, assign_split, shape_key
from synperf.model.estimator import TrainConfig

GPUS = ["a100_sxm4_80gb", "a40", "h100_sxm", "h200_sxm", "b200", "l40s"]


@pytest.fixture(scope="module")
def synthetic():
    """Canonical GEMM rows: 40 shapes on six GPUs of four architectures."""
    rng = np.random.default_rng(0)
    shapes = [(int(m), 4096, 4096) for m in rng.choice(np.arange(1, 8192), 40, replace=False)]
    rows = [{"gpu": g, "kernel": "gemm", "implementation": "cublas", "dtype": "bfloat16", "m": m, "n": n, "k": k,
             "batch": 1, "latency_us": 10.0 + m / 100, "latency_stat": "median", "source": "test",
             "source_version": "test"} for g in GPUS for (m, n, k) in shapes]
    return conform(pd.DataFrame(rows))


def shapes_of(df, mask):
    return set(shape_key(df[SHAPE_COLUMNS][mask]))


def test_leave_one_gpu_out_has_one_fold_per_gpu_with_disjoint_sides(synthetic):
    folds = P.leave_one_gpu_out(synthetic, heldout_frac=0.25, seed=0)
    assert [f.name for f in folds] == [f"logo:{g}" for g in sorted(GPUS)]
    gpu = synthetic["gpu"].astype(str).to_numpy()
    for f in folds:
        assert len(f.unseen_gpus) == 1 and not set(f.seen_gpus) & set(f.unseen_gpus)
        assert set(f.seen_gpus) | set(f.unseen_gpus) == set(GPUS)
        assert set(gpu[f.train_mask]) == set(f.seen_gpus)
        assert set(gpu[f.labels == "unseen"]) == set(f.unseen_gpus)
        assert (f.labels == "unseen").sum() == 40
        # held-out problems stay held out: no test_seen shape is trained on
        assert shapes_of(synthetic, f.labels == "test_seen")
        assert not shapes_of(synthetic, f.labels == "test_seen") & shapes_of(synthetic, f.train_mask)
        name, tr, te = f  # a fold unpacks as (name, train_mask, test_mask)
        assert name == f.name and not (tr & te).any() and (tr | te).all()
    # the held-out problems are the configured rule's (same seed and share)
    ref = assign_split(synthetic, ["a40", "b200", "h100_sxm", "h200_sxm", "l40s"], ["a100_sxm4_80gb"], 0.25, 0)
    np.testing.assert_array_equal(folds[0].labels, ref.to_numpy())


def test_leave_one_gpu_out_on_a_subset_and_errors(synthetic):
    folds = P.leave_one_gpu_out(synthetic, ["a40", "b200"])
    assert [f.name for f in folds] == ["logo:a40", "logo:b200"]
    assert set(folds[0].labels[synthetic["gpu"].astype(str).isin(["h100_sxm", "l40s"]).to_numpy()]) == {"unused"}
    with pytest.raises(ValueError, match="no rows"):
        P.leave_one_gpu_out(synthetic, ["a40", "rtx_4090_nonexistent"])
    assert P.leave_one_gpu_out(synthetic, ["a40"]) == []
    assert P.logo_gpu_sets(["b", "a"]) == [("logo:a", ["b"], ["a"]), ("logo:b", ["a"], ["b"])]


def test_leave_one_architecture_out_groups_hopper_gpus(synthetic, registry):
    folds = P.leave_one_architecture_out(synthetic, registry)
    by = {f.name: f for f in folds}
    assert sorted(by) == ["loao:Ada", "loao:Ampere", "loao:Blackwell", "loao:Hopper"]
    hop = by["loao:Hopper"]
    assert hop.unseen_gpus == ("h100_sxm", "h200_sxm")
    assert hop.seen_gpus == ("a100_sxm4_80gb", "a40", "b200", "l40s")
    gpu = synthetic["gpu"].astype(str).to_numpy()
    assert set(gpu[hop.labels == "unseen"]) == {"h100_sxm", "h200_sxm"}
    assert not set(gpu[hop.train_mask]) & {"h100_sxm", "h200_sxm"}
    assert by["loao:Ampere"].unseen_gpus == ("a100_sxm4_80gb", "a40")
    # a single architecture leaves nobody to train on: no fold
    assert P.loao_gpu_sets(["h100_sxm", "h200_sxm"], registry) == []
    assert [f.name for f in P.leave_one_architecture_out(synthetic, registry, ["h100_sxm", "h200_sxm", "b200"])] \
        == ["loao:Blackwell", "loao:Hopper"]


def test_configured_uses_the_split_column(synthetic):
    t = synthetic.assign(split=assign_split(synthetic, ["h100_sxm", "b200"], ["h200_sxm"], 0.2, 0).to_numpy())
    (f,) = P.configured(t)
    assert f.name == "configured" and f.seen_gpus == ("b200", "h100_sxm") and f.unseen_gpus == ("h200_sxm",)
    np.testing.assert_array_equal(f.labels, t["split"].to_numpy())
    with pytest.raises(ValueError, match="no 'split' column"):
        P.configured(synthetic)
    with pytest.raises(ValueError, match="unknown split label"):
        P.configured(t.assign(split="validation"))
    assert [x.name for x in P.make_folds("logo", synthetic, None, gpus=["a40", "h100_sxm"])] \
        == ["logo:a40", "logo:h100_sxm"]
    with pytest.raises(KeyError, match="unknown protocol"):
        P.make_folds("kfold", t, None)


TRAIN = TrainConfig(hidden_sizes=[64, 32], max_epochs=12, early_stopping_patience=5, batch_size=256)
BASE = BaselineConfig(neusight_epochs=10, gbt_max_iter=80)


@pytest.fixture(scope="module")
def configured_run(vidur_gemm, registry):
    table, meta = vidur_gemm
    return P.predict_protocol(table, P.configured(table), None, registry, TRAIN, meta, max_train_rows=3000,
                              baseline_cfg=BASE, log=lambda *_: None)


@pytest.mark.xdist_group("configured_run")
def test_runner_scores_every_method_on_a_real_slice(configured_run, vidur_gemm):
    table, _ = vidur_gemm
    res = P.summarize_predictions(configured_run)
    assert list(res.columns) == P.SUMMARY_COLUMNS
    assert set(res["method"]) == set(P.METHODS) == {"synperf_mlp", "synperf"} | set(BASELINES)
    assert set(res["split"]) == {"test_seen", "unseen"}
    allrows = res[res.gpu == "ALL"].set_index(["method", "split"])
    unseen = allrows.xs("unseen", level="split")
    print("\nVidur GEMM (1/4 of the shapes), unseen A40, configured split:\n"
          + unseen[["n_rows", "coverage", "mape_pct", "median_ape_pct", "p90_ape_pct"]].round(2).to_string())
    assert np.isfinite(unseen["mape_pct"]).all()
    assert (unseen["n_total"] == (table.split == "unseen").sum()).all()
    for m in ("nearest_gpu_scaled", "nearest_gpu_roofline"):
        assert 0.6 < unseen.loc[m, "coverage"] < 0.95   # held-out problems are not sources
        assert allrows.loc[(m, "test_seen"), "coverage"] == 0.0
    for m in ("synperf_mlp", "roofline", "linear", "neusight", "gbt", "synperf"):
        assert unseen.loc[m, "coverage"] == 1.0
    # synperf names the option and the interval rule leaving each training GPU out chose for the fold
    chosen, interval = res.loc[res.method == "synperf", "budget"].iloc[0].split(" (chosen by")[0].split(", interval ")
    from synperf.model.fingerprint_choice import GRID, INTERVALS

    assert chosen in [g[0] for g in GRID] and interval in [i[0] for i in INTERVALS]
    # per-GPU rows add up to the ALL row
    per = res[(res.gpu != "ALL") & (res.split == "test_seen")].groupby("method")["n_total"].sum()
    assert per.sort_index().to_dict() == allrows.xs("test_seen", level="split")["n_total"].sort_index().to_dict()
    # the MLP learns something on held-out problems of its own GPUs
    assert allrows.loc[("synperf_mlp", "test_seen"), "mape_pct"] < allrows.loc[("roofline", "test_seen"), "mape_pct"]


@pytest.mark.xdist_group("configured_run")
def test_paired_summary_restricts_every_method_to_the_covered_rows(configured_run):
    res = P.summarize_predictions(configured_run, on_rows_covered_by="nearest_gpu_roofline")
    u = res[(res.gpu == "ALL") & (res.split == "unseen")]
    assert u["n_total"].nunique() == 1 and (u["coverage"] == 1.0).all()
    with pytest.raises(ValueError, match="not in the predictions"):
        P.summarize_predictions(configured_run, on_rows_covered_by="oracle")


def test_runner_on_logo_folds_from_canonical_rows(synthetic, registry):
    """Canonical rows with a feature-set name: features built once, one block per fold; cheap methods only."""
    folds = P.leave_one_gpu_out(synthetic, ["a100_sxm4_80gb", "h100_sxm", "h200_sxm"])
    res = P.run_protocol(synthetic, folds, ["roofline", "nearest_gpu_roofline"], registry, None, "v1",
                         log=lambda *_: None)
    assert list(res.columns) == P.SUMMARY_COLUMNS
    assert set(res["fold"]) == {"logo:a100_sxm4_80gb", "logo:h100_sxm", "logo:h200_sxm"}
    assert set(res["protocol"]) == {"logo"}
    u = res[(res.split == "unseen") & (res.gpu != "ALL")]
    assert set(zip(u["fold"], u["gpu"])) == {(f.name, f.unseen_gpus[0]) for f in folds}
    assert np.isfinite(u["mape_pct"]).all()
    with pytest.raises(KeyError, match="unknown method"):
        P.run_protocol(synthetic, folds, ["oracle"], registry, None, "v1")
    with pytest.raises(ValueError, match="labels for a table"):
        P.run_protocol(synthetic.iloc[:10], folds, ["roofline"], registry, None, "v1")


@pytest.mark.xdist_group("configured_run")
def test_error_cdf_matches_the_row_errors(configured_run):
    cdf = P.error_cdf(configured_run)
    for (method, split), g in cdf.groupby(["method", "split"]):
        rows = configured_run[(configured_run.method == method) & (configured_run.split == split)]
        ape = rows.loc[np.isfinite(rows.predicted_latency_us), "ape_pct"].to_numpy()
        assert len(g) == len(P.CDF_QUANTILES) and (g["n_rows"] == len(ape)).all()
        assert np.all(np.diff(g["ape_pct"].to_numpy()) >= 0)
        med = g.loc[g["quantile"] == 0.5, "ape_pct"].iloc[0]
        assert med == pytest.approx(np.median(ape))
        assert g.loc[g["quantile"] == 1.0, "ape_pct"].iloc[0] == pytest.approx(ape.max())
    # the nearest-GPU methods cover nothing held out on the configured split: no test_seen CDF
    assert not ((cdf.method == "nearest_gpu_roofline") & (cdf.split == "test_seen")).any()


def test_a_pretrained_model_replaces_training_on_its_fold(vidur_gemm, registry):
    """The pipeline passes the primary model for the configured fold: its predictions are used as they are."""
    from synperf.model.estimator import train
    from synperf.model.features import FeatureFrame

    table, meta = vidur_gemm
    fold = P.configured(table)
    tr = table[fold[0].train_mask].iloc[:2000]
    ff = lambda t: FeatureFrame(t, meta["numeric"], meta["linear"], meta["categorical"])  # noqa: E731
    model = train(ff(tr), tr["latency_us"], tr["problem_key"], TRAIN, log=lambda *_: None)
    out = P.predict_protocol(table, fold, ["synperf_mlp"], registry, TRAIN, meta,
                             pretrained={"configured": model}, log=lambda *_: None)
    te = table.iloc[out["row"].to_numpy()]
    np.testing.assert_allclose(out["predicted_latency_us"].to_numpy(), model.predict_latency_us(ff(te)), rtol=1e-6)


def test_every_fitted_method_of_a_fold_gets_the_row_cap_of_its_mlp(vidur_gemm, registry):
    """On the configured fold the baselines get the primary model's row cap, not the leave-one-out budget."""
    from dataclasses import replace

    from synperf.model.estimator import train
    from synperf.model.features import FeatureFrame

    table, meta = vidur_gemm
    fold = P.configured(table)
    tr = table[fold[0].train_mask]
    ff = lambda t: FeatureFrame(t, meta["numeric"], meta["linear"], meta["categorical"])  # noqa: E731
    primary_cfg = replace(TRAIN, max_train_rows=1500)
    model = train(ff(tr), tr["latency_us"], tr["problem_key"], primary_cfg, log=lambda *_: None)
    out = P.predict_protocol(table, fold, ["synperf_mlp", "linear", "roofline"], registry, TRAIN, meta,
                             max_train_rows=300, pretrained={"configured": model}, log=lambda *_: None)
    budget = out.groupby("method")["budget"].first()
    assert budget["synperf_mlp"].startswith("<= 1500 rows") and budget["linear"].startswith("<= 1500 rows")
    assert budget["roofline"] == "no training"
    folds = P.leave_one_gpu_out(table, heldout_frac=0.2)[:1]
    out = P.predict_protocol(table, folds, ["linear"], registry, TRAIN, meta, max_train_rows=300,
                             log=lambda *_: None)
    assert out["budget"].iloc[0].startswith("<= 300 rows")


def _reference_summary(preds, on_rows_covered_by=None):
    """The summary by a plain pandas groupby: per (protocol, fold, method) in order of appearance, every
    (gpu, split) sorted, then ("ALL", split)."""
    p = preds
    if on_rows_covered_by is not None:
        ref = p[p["method"] == on_rows_covered_by]
        p = p.merge(ref.loc[np.isfinite(ref["predicted_latency_us"]), ["fold", "row"]], on=["fold", "row"])
    rows = []
    for (proto, fold, method), g in p.groupby(["protocol", "fold", "method"], sort=False):
        cells = [(gpu, s) for (gpu, _), s in g.groupby(["gpu", "split"])] + [("ALL", s) for _, s in g.groupby("split")]
        for gpu, sub in cells:
            cov = np.isfinite(sub["predicted_latency_us"].to_numpy())
            e = sub["ape_pct"].to_numpy()[cov]
            b = sub.dropna(subset=["predicted_low_us", "predicted_high_us"])
            inside = b["latency_us"].between(b["predicted_low_us"], b["predicted_high_us"])
            rows.append((proto, fold, method, gpu, sub["split"].iloc[0], len(e), len(sub), cov.mean(),
                         e.mean() if len(e) else np.nan, np.median(e) if len(e) else np.nan,
                         np.percentile(e, 90) if len(e) else np.nan, inside.mean() if len(b) else np.nan,
                         round(float(sub["fit_seconds"].iloc[0]), 2),
                         sub["budget"].iloc[0]))
    return pd.DataFrame(rows, columns=P.SUMMARY_COLUMNS)


def test_summary_and_cdf_equal_a_plain_groupby_over_several_folds_and_protocols():
    """Folds of two protocols, methods and GPUs interleaved, uncovered rows: the same numbers, in the same
    order, as a per-group pandas computation (the summary reads integer codes, not a groupby over strings)."""
    rng = np.random.default_rng(3)
    parts = []
    for proto, fold, gpus in [("logo", "logo:l40s", ["l40s", "h100", "a100"]), ("logo", "logo:a100", ["a100", "l40s"]),
                              ("loao", "loao:Ampere", ["a100"])]:
        n = 300
        gpu = rng.choice(gpus, n)
        gpu[0] = gpus[0]  # GPUs first appear out of alphabetical order
        split = np.where(gpu == gpus[0], "unseen", "test_seen")
        for method in ("roofline", "nearest_gpu_roofline", "synperf"):
            pred = rng.uniform(1, 100, n)
            if method == "nearest_gpu_roofline":
                pred[rng.random(n) < 0.3] = np.nan
            lat = rng.uniform(1, 100, n)
            # only synperf carries an interval, and not on every row
            low, high = pred * rng.uniform(0.3, 1, n), pred * rng.uniform(1, 3, n)
            if method != "synperf":
                low[:], high[:] = np.nan, np.nan
            low[rng.random(n) < 0.2] = np.nan
            parts.append(pd.DataFrame({
                "protocol": proto, "fold": fold, "method": method, "row": np.arange(n), "gpu": gpu, "kernel": "gemm",
                "split": split, "latency_us": lat, "predicted_latency_us": pred, "predicted_low_us": low,
                "predicted_high_us": high,
                "ape_pct": 100 * np.abs(pred - lat) / lat, "fit_seconds": rng.uniform(0, 5),
                "budget": f"{method} budget"}))
    preds = pd.concat(parts, ignore_index=True)
    for cover in (None, "nearest_gpu_roofline"):
        got = P.summarize_predictions(preds, on_rows_covered_by=cover)
        pd.testing.assert_frame_equal(got, _reference_summary(preds, cover), check_dtype=False)
    cdf = P.error_cdf(preds)
    ok = preds[np.isfinite(preds["predicted_latency_us"])]
    groups = list(ok.groupby(["protocol", "method", "split"]))
    assert len(cdf) == len(groups) * len(P.CDF_QUANTILES)
    for i, ((proto, method, split), g) in enumerate(groups):
        block = cdf.iloc[i * len(P.CDF_QUANTILES):(i + 1) * len(P.CDF_QUANTILES)]
        assert (block["protocol"] == proto).all() and (block["method"] == method).all()
        assert (block["split"] == split).all() and (block["n_rows"] == len(g)).all()
        np.testing.assert_array_equal(block["ape_pct"], np.quantile(g["ape_pct"].to_numpy(), P.CDF_QUANTILES))
    with pytest.raises(ValueError, match="more than once"):
        P.summarize_predictions(pd.concat([preds, preds]), on_rows_covered_by="nearest_gpu_roofline")
