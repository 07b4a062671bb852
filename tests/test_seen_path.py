"""The seen path: the zero-shot path (a base model: MLP, physical, residual, ensemble) of rows on the GPUs the
models were trained on, chosen on the MLP's own early-stopping validation problems inside the training rows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from synperf.evaluation import path_selection as S
from synperf.model.estimator import TrainConfig
from synperf.model.paths import PhysicalModel, physical_design, with_spec_columns

TRAIN = TrainConfig(hidden_sizes=[32, 16], max_epochs=4, early_stopping_patience=3, batch_size=256)
SEEN = ["a100_sxm4_80gb", "h100_sxm"]


@pytest.fixture(scope="module")
def fitted(vidur_gemm):
    """The training rows of the Vidur GEMM table and an MLP trained on them under a row cap (so the cap's
    subsample is part of the split to reproduce)."""
    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    cfg = replace(TRAIN, max_train_rows=int(len(tr) * 0.8))
    return tr, S.fit_mlp(tr, meta, cfg)


def count_train(monkeypatch) -> list:
    """Count every call of :func:`synperf.model.estimator.train` made through path selection or the protocols."""
    import synperf.evaluation.protocols as P

    calls = []

    def wrap(real):
        def counted(*a, **k):
            calls.append(1)
            return real(*a, **k)
        return counted

    monkeypatch.setattr(S, "train", wrap(S.train))
    monkeypatch.setattr(P, "train", wrap(P.train))
    return calls


def test_the_seen_scores_reproduce_the_mlps_validation_rows_and_refuse_other_rows(vidur_gemm, fitted, registry):
    table, meta = vidur_gemm
    tr, mlp = fitted
    fit, val = S.seen_validation_rows(tr, mlp)
    assert len(fit) + len(val) < len(tr)  # the row cap left rows out
    assert (len(fit), len(val)) == (mlp.meta["n_train_rows"], mlp.meta["n_val_rows"])
    assert not set(tr.problem_key.iloc[fit]) & set(tr.problem_key.iloc[val])
    scores = S.score_seen_paths(tr, meta, registry, mlp, "gemm_fp16_vidur", log=lambda *_: None)
    assert sorted(set(scores.path)) == sorted(S.SEEN_PATHS)
    assert sorted(set(scores.validation_gpu)) == SEEN
    assert scores[scores.path == "mlp"]["n_rows"].sum() == len(val)
    # the physical model is fitted on every row outside the validation problems, the capped-out ones included
    held = tr.problem_key.isin(set(tr.problem_key.iloc[val]))
    assert scores[scores.path == "physical"]["n_train"].iloc[0] == int((~held).sum()) > len(fit)
    assert scores[scores.path == "residual"]["n_train"].iloc[0] == int((~held).sum())
    # its score is the physical model of those rows on the validation rows, per GPU
    phys = PhysicalModel.fit(tr[~held.to_numpy()], registry)
    va = tr.iloc[val]
    a100 = va[va.gpu == SEEN[0]]
    want = np.mean(np.abs(phys.predict(a100, registry) / a100.latency_us.to_numpy() - 1.0)) * 100.0
    got = scores.set_index(["path", "validation_gpu"]).loc[("physical", SEEN[0]), "mape_pct"]
    assert got == pytest.approx(want, rel=1e-9)
    # rows the MLP was not trained on (another order draws other validation problems) are refused
    with pytest.raises(ValueError, match="not the MLP's training rows"):
        S.seen_validation_rows(tr.iloc[::-1].reset_index(drop=True), mlp)


def test_the_seen_path_reads_only_training_rows(vidur_gemm, fitted, registry, tmp_path):
    table, meta = vidur_gemm
    _, mlp = fitted
    poisoned = table.copy()
    bad = poisoned["split"].isin(["test_seen", "unseen"]).to_numpy()
    rng = np.random.default_rng(3)
    poisoned.loc[bad, "latency_us"] = poisoned.loc[bad, "latency_us"] * rng.uniform(0.01, 100, bad.sum())
    recs = []
    for name, t in (("clean", table), ("dirty", poisoned)):
        S.record_choice(t, meta, "gemm_fp16_vidur", registry, pd.DataFrame(columns=S.PATH_SCORE_COLUMNS),
                        tmp_path / name, mlp_dir="v2-all", mlp=mlp, log=lambda *_: None)
        recs.append(S.load_choice(tmp_path / name))
    clean, dirty = (pd.DataFrame(r["seen_scores"]) for r in recs)
    assert recs[0]["seen_path"] == recs[1]["seen_path"] in S.SEEN_PATHS
    assert len(clean) == 2 * len(S.SEEN_PATHS)  # every seen-path candidate on two training GPUs
    np.testing.assert_allclose(clean["mape_pct"], dirty["mape_pct"])
    # the validation rows among the training rows do move the scores
    tr = table.split.eq("train").to_numpy()
    moved = table.copy()
    moved.loc[tr, "latency_us"] = moved.loc[tr, "latency_us"] * 2.0
    S.record_choice(moved, meta, "gemm_fp16_vidur", registry, pd.DataFrame(columns=S.PATH_SCORE_COLUMNS),
                    tmp_path / "moved", mlp_dir="v2-all", mlp=mlp, log=lambda *_: None)
    m = pd.DataFrame(S.load_choice(tmp_path / "moved")["seen_scores"])
    assert not np.allclose(m.loc[m.path == "mlp", "mape_pct"], clean.loc[clean.path == "mlp", "mape_pct"])


def test_physical_wins_the_seen_path_only_with_a_clear_lead(vidur_gemm, registry, monkeypatch):
    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    # latencies the physical model reproduces exactly: it must win
    coef = np.array([2.0, 1.5, 1.2, 1.0, 0.3])
    exact = tr.assign(latency_us=physical_design(with_spec_columns(tr, registry), registry) @ coef)
    mlp = S.fit_mlp(exact, meta, TRAIN)
    calls = count_train(monkeypatch)
    scores = S.score_seen_paths(exact, meta, registry, mlp, "e", log=lambda *_: None)
    assert calls == []  # scoring trains nothing
    per = scores.groupby("path")["mape_pct"].mean()
    assert per["physical"] < 1e-6 < per["mlp"]
    assert per["residual"] < 1e-6  # the trees fit a zero correction
    assert S.choose_seen_path(scores, "e") in ("physical", "residual")

    # otherwise the MLP: physical 3% lower is within noise, 6% lower is a lead; no scores at all -> MLP
    def frame(mlp_mape, phys_mape):
        return pd.DataFrame([{"experiment": "e", "path": p, "fold": f"seen:{g}", "validation_gpu": g, "n_train": 1,
                              "n_rows": 1, "mape_pct": v} for p, v in (("mlp", mlp_mape), ("physical", phys_mape))
                             for g in SEEN])
    assert S.choose_seen_path(frame(10.0, 9.7), "e") == "mlp"
    assert S.choose_seen_path(frame(10.0, 9.4), "e") == "physical"
    assert S.choose_seen_path(frame(5.8, 18.8), "e") == "mlp"
    assert S.choose_seen_path(frame(1.0, 1.0).iloc[:0], "e") == "mlp"
    # the mean over GPUs weighs each GPU the same, whatever its row count
    uneven = frame(10.0, 10.0)
    uneven.loc[(uneven.path == "physical") & (uneven.validation_gpu == SEEN[0]), ["mape_pct", "n_rows"]] = [2.0, 1]
    uneven.loc[uneven.validation_gpu == SEEN[1], "n_rows"] = 1000
    assert S.choose_seen_path(uneven, "e") == "physical"  # 6.0 vs 10.0


def test_recorded_choice_predicts_training_gpus_with_the_seen_path(vidur_gemm, fitted, registry, tmp_path):
    from synperf.api import predict

    table, meta = vidur_gemm
    tr, mlp = fitted
    mlp.meta["feature_set"] = "v2"
    phys = PhysicalModel.fit(tr, registry)
    cols = ["implementation", "dtype", "m", "n", "k", "batch"]
    a100 = table[table.gpu == SEEN[0]].head(40).reset_index(drop=True)
    a40 = table[table.gpu == "a40"].head(40).reset_index(drop=True)
    out = {}
    for seen_path in ("mlp", "physical", None):
        exp_dir = tmp_path / str(seen_path) / "gemm_fp16_vidur"
        mlp.save(exp_dir / "v2-all")
        S.save_choice(exp_dir, "shift+physical", tr, registry, mlp_dir="v2-all", feature_set="v2",
                      seen_path=seen_path)
        out[seen_path] = {g: predict("gemm", r[cols], g, experiment="gemm_fp16_vidur", models_dir=exp_dir.parent,
                                     registry=registry) for g, r in ((SEEN[0], a100), ("a40", a40))}
    mlp_only = predict("gemm", a100[cols], SEEN[0], experiment="gemm_fp16_vidur",
                       models_dir=tmp_path / "mlp", registry=registry, feature_set="v2")
    # a training GPU takes the seen path, no source
    seen = out["mlp"][SEEN[0]]
    assert set(seen["prediction_path"]) == {"mlp"} and seen["source_gpu"].isna().all()
    np.testing.assert_allclose(seen["predicted_latency_us"], mlp_only["predicted_latency_us"], rtol=1e-9)
    seen = out["physical"][SEEN[0]]
    assert set(seen["prediction_path"]) == {"physical"} and seen["source_gpu"].isna().all()
    np.testing.assert_allclose(seen["predicted_latency_us"], phys.predict(a100, registry), rtol=1e-9)
    # another GPU keeps the recorded path, whatever the seen path
    for seen_path in ("mlp", "physical", None):
        other = out[seen_path]["a40"]
        assert set(other["prediction_path"]) == {"shift+physical", "physical"}
        np.testing.assert_allclose(other["predicted_latency_us"], out[None]["a40"]["predicted_latency_us"])
    # a record without a seen path predicts a training GPU with the recorded path (the H100 measured the launches)
    old = out[None][SEEN[0]]
    assert (old["prediction_path"] == "shift+physical").any() and set(old["source_gpu"].dropna()) == {"h100_sxm"}
    with pytest.raises(ValueError, match="seen path"):
        S.save_choice(tmp_path / "bad", "physical", tr, registry, seen_path="shift+mlp")


def test_the_configured_synperf_method_applies_the_recorded_seen_path(vidur_gemm, registry, monkeypatch):
    from synperf.evaluation.protocols import MLP, SYNPERF, configured, predict_protocol

    table, meta = vidur_gemm
    folds = configured(table)
    tr = table[folds[0].train_mask].reset_index(drop=True)
    mlp = S.fit_mlp(tr, meta, TRAIN)
    te = table[folds[0].test_mask].reset_index(drop=True)
    fitted = S.fit_paths(tr, meta, registry, TRAIN, ("transfer+physical",))
    transfer = S.predict_path(fitted, "transfer+physical", te.drop(columns=["latency_us"]), registry)
    calls = count_train(monkeypatch)
    for seen_path in ("mlp", "physical"):
        p = predict_protocol(table, folds, [MLP, SYNPERF], registry, TRAIN, meta, log=lambda *_: None,
                             pretrained={"configured": mlp},
                             chosen_paths={"configured": ("transfer+physical", "physical", seen_path)})
        syn = p[p.method == SYNPERF].reset_index(drop=True)
        assert set(syn["budget"].str.split("; ").str[:2].str.join("; ")) == {
            f"transfer+physical (fallback physical, chosen before); seen GPUs {seen_path}"}
        held = (syn.split == "test_seen").to_numpy()
        assert held.any() and (~held).any() and set(syn.gpu[held]) <= set(SEEN) and set(syn.gpu[~held]) == {"a40"}
        want = (p[p.method == MLP]["predicted_latency_us"].to_numpy() if seen_path == "mlp"
                else PhysicalModel.fit(tr, registry).predict(te, registry))
        np.testing.assert_allclose(syn["predicted_latency_us"][held], want[held], rtol=1e-6)
        np.testing.assert_allclose(syn["predicted_latency_us"][~held], transfer["predicted_latency_us"][~held],
                                   rtol=1e-9)
    assert calls == []  # the pretrained MLP serves both methods and the seen path


def test_a_leave_one_out_fold_chooses_its_seen_path_from_its_mlp_without_training_another(
        vidur_gemm, fitted, registry, monkeypatch):
    table, meta = vidur_gemm
    tr, mlp = fitted
    te = table[table.split.isin(["test_seen", "unseen"])].reset_index(drop=True)
    calls = count_train(monkeypatch)
    res, chosen, _ = S.synperf_predict(tr, te, meta, registry, TRAIN, mlp=mlp, paths=("physical", "transfer+physical"),
                                       log=lambda *_: None)
    assert calls == []  # physical paths train no LOSGO MLP; the seen path reuses the fold's MLP
    seen_path = res.attrs["seen_path"]
    assert seen_path in S.SEEN_PATHS and len(res.attrs["seen_scores"]) == 2 * len(S.SEEN_PATHS)
    assert seen_path == S.choose_seen_path(S.score_seen_paths(tr, meta, registry, mlp, log=lambda *_: None), "")
    on = te.gpu.isin(SEEN).to_numpy()
    assert set(res["prediction_path"][on]) == {seen_path} and res["source_gpu"][on].isna().all()
    assert set(res["prediction_path"][~on]) <= {chosen, "physical"}
    want = {"mlp": lambda: mlp.predict_latency_us(S._frame(te[on], meta)),
            "physical": lambda: PhysicalModel.fit(tr, registry).predict(te[on], registry),
            "residual": lambda: S.fit_residual(tr, meta, registry, TRAIN).predict(te[on], registry),
            "ensemble": lambda: S.fit_paths(tr, meta, registry, TRAIN, ("ensemble",), mlp=mlp).base_predict(
                "ensemble", te[on], registry),
            "local": lambda: S.fit_paths(tr, meta, registry, TRAIN, ("local",)).base_predict(
                "local", te[on], registry),
            "local_mlp": lambda: S.fit_local_mlp(tr, meta, mlp).predict(
                te[on], registry, base_pred=mlp.predict_latency_us(S._frame(te[on], meta)))}[seen_path]()
    np.testing.assert_allclose(res["predicted_latency_us"][on], want, rtol=1e-6)
    # whichever zero-shot path wins (the MLP here, forced), the training GPUs' rows take it and only they
    monkeypatch.setattr(S, "choose_seen_path", lambda scores, experiment: "mlp")
    forced, chosen2, _ = S.synperf_predict(tr, te, meta, registry, TRAIN, mlp=mlp,
                                           paths=("physical", "transfer+physical"), log=lambda *_: None)
    assert forced.attrs["seen_path"] == "mlp" and chosen2 == chosen and calls == []
    assert set(forced["prediction_path"][on]) == {"mlp"} and forced["source_gpu"][on].isna().all()
    np.testing.assert_allclose(forced["predicted_latency_us"][on], mlp.predict_latency_us(S._frame(te[on], meta)),
                               rtol=1e-6)
    np.testing.assert_allclose(forced["predicted_latency_us"][~on], res["predicted_latency_us"][~on], rtol=1e-12)
    # without a test row on a training GPU no seen path is chosen, and nothing is trained for it
    res, _, _ = S.synperf_predict(tr, te[~on], meta, registry, TRAIN, paths=("physical",), log=lambda *_: None)
    assert res.attrs["seen_path"] is None and calls == [] and set(res["prediction_path"]) == {"physical"}


def _vidur_training_stage(vidur_gemm, registry, tmp_path):
    """Run the pipeline's training stage on the Vidur GEMM table (files under ``tmp_path``, no LOSGO path scores).
    Returns ``(experiment entry, model folder, training dict)``."""
    import json
    from dataclasses import asdict

    from synperf.data.io import write_parquet
    from synperf.pipeline.train import train_models

    table, meta = vidur_gemm
    write_parquet(table, tmp_path / "f.parquet")
    (tmp_path / "f.json").write_text(json.dumps(meta))
    pd.DataFrame(columns=S.PATH_SCORE_COLUMNS).to_csv(tmp_path / "scores.csv", index=False)
    exp = {"kernel": "gemm", "sources": ["vidur"], "seen": SEEN, "unseen": ["a40"], "heldout_frac": 0.2}
    mdir = tmp_path / "models" / "gemm_fp16_vidur" / "v2-all"
    training = {k: v for k, v in asdict(TRAIN).items() if k not in ("seed", "threads")}
    train_models("gemm_fp16_vidur", exp, [{"feature_set": "v2", "group": "all", "training": training,
                                           "table": str(tmp_path / "f.parquet"), "meta": str(tmp_path / "f.json"),
                                           "model_dir": str(mdir), "predictions": str(tmp_path / "p.parquet"),
                                           "mape": str(tmp_path / "mape.csv")}], 0, 1,
                 path_choice={"scores": str(tmp_path / "scores.csv"), "registry": str(registry.path)})
    return exp, mdir, training


def test_the_training_stage_records_the_seen_path_of_its_primary_model(vidur_gemm, registry, tmp_path, monkeypatch):
    """The pipeline's training stage records the seen path from the primary model it just trained, reproducing
    that model's validation rows from the feature table (no other MLP trained)."""
    from synperf.data.hardware import load_registry
    from synperf.model.estimator import TrainedModel

    table, meta = vidur_gemm
    calls = count_train(monkeypatch)
    exp, mdir, training = _vidur_training_stage(vidur_gemm, registry, tmp_path)
    assert calls == []  # the stage's own MLP is trained by train_experiment, not through path selection
    rec = S.load_choice(mdir.parent)
    assert rec["path"] == "mlp" and rec["seen_path"] in S.SEEN_PATHS
    model = TrainedModel.load(mdir)
    assert len(model.meta["validation_groups_sha256"]) == 64
    tr = table[table.split == "train"].reset_index(drop=True)
    want = S.score_seen_paths(tr, meta, load_registry(registry.path), model, "gemm_fp16_vidur", log=lambda *_: None)
    got = pd.DataFrame(rec["seen_scores"])
    np.testing.assert_allclose(got["mape_pct"], want["mape_pct"], rtol=1e-6)
    assert got["n_rows"].groupby(got["path"]).sum().tolist() == [model.meta["n_val_rows"]] * len(S.SEEN_PATHS)


def test_the_local_model_is_the_residual_model_times_its_nearest_same_gpu_ratios(vidur_gemm, registry, tmp_path):
    from synperf.model.paths import LocalModel, ResidualModel

    table, meta = vidur_gemm
    tr = with_spec_columns(table[table.split == "train"].reset_index(drop=True), registry)
    fit_rows, new = tr.iloc[::2].reset_index(drop=True), tr.iloc[1::2].reset_index(drop=True)
    residual = ResidualModel.fit(fit_rows, meta, registry, max_train_rows=len(fit_rows) // 2, seed=0)
    local = LocalModel.fit(fit_rows, residual, registry)
    # a training row is its own nearest neighbour (distance 0, up to the rounding of scikit-learn's distances):
    # its measured latency comes back
    np.testing.assert_allclose(local.predict(fit_rows.head(50), registry), fit_rows["latency_us"].head(50),
                               rtol=1e-5)
    # a new row: the residual model times the 1/distance-weighted mean log ratio of its 5 nearest same-GPU rows,
    # distances over the standardized log1p-numeric and linear design columns (a plain numpy reimplementation)
    x_fit = ResidualModel._design(fit_rows, residual.numeric, residual.linear, [], {})
    x_new = ResidualModel._design(new, residual.numeric, residual.linear, [], {})
    sd = np.where(x_fit.std(axis=0) > 0, x_fit.std(axis=0), 1.0)
    x_fit, x_new = (x_fit - x_fit.mean(axis=0)) / sd, (x_new - x_fit.mean(axis=0)) / sd
    ratio = np.log(fit_rows["latency_us"].to_numpy() / residual.predict(fit_rows, registry))
    base = residual.predict(new, registry)
    want = []
    for i in range(0, len(new), max(1, len(new) // 40)):
        same = np.flatnonzero(fit_rows["gpu"].to_numpy() == new["gpu"].iloc[i])
        d = np.sqrt(((x_fit[same] - x_new[i]) ** 2).sum(axis=1))
        near = same[np.argsort(d, kind="stable")[:5]]
        dn = np.sort(d)[:5]
        r = ratio[near[0]] if dn[0] == 0 else np.sum(ratio[near] / dn) / np.sum(1 / dn)
        want.append((i, base[i] * np.exp(r)))
    idx, val = map(np.array, zip(*want))
    got = local.predict(new, registry)
    np.testing.assert_allclose(got[idx], val, rtol=1e-6)
    assert np.mean(np.abs(got / new["latency_us"] - 1)) < np.mean(np.abs(base / new["latency_us"] - 1))
    # a GPU without training rows is refused, by name
    with pytest.raises(ValueError, match="a40"):
        local.predict(table[table.gpu == "a40"].head(3), registry)
    local.save(tmp_path / "local.joblib")
    np.testing.assert_allclose(LocalModel.load(tmp_path / "local.joblib").predict(new.head(20), registry), got[:20])
    residual.save(tmp_path / "residual.joblib")
    with pytest.raises(TypeError, match="LocalModel"):
        LocalModel.load(tmp_path / "residual.joblib")


@pytest.mark.parametrize("seen_path", ["local", "local_mlp"])
def test_a_recorded_local_seen_path_predicts_training_gpus_from_its_file(vidur_gemm, fitted, registry, tmp_path,
                                                                         seen_path):
    from synperf.api import predict
    from synperf.model.paths import LocalModel

    table, meta = vidur_gemm
    tr, mlp = fitted
    mlp.meta["feature_set"] = "v2"
    exp_dir = tmp_path / "gemm_fp16_vidur"
    mlp.save(exp_dir / "v2-all")
    if seen_path == "local_mlp":
        with pytest.raises(ValueError, match="local_mlp"):  # the MLP's local model needs the MLP
            S.save_choice(exp_dir, "physical", tr, registry, mlp_dir="v2-all", seen_path="local_mlp", meta=meta)
    S.save_choice(exp_dir, "physical", tr, registry, mlp_dir="v2-all", feature_set="v2", seen_path=seen_path,
                  meta=meta, train_cfg=TRAIN, mlp=mlp if seen_path == "local_mlp" else None)
    rec = S.load_choice(exp_dir)
    file = {"local": S.LOCAL_FILE, "local_mlp": S.LOCAL_MLP_FILE}[seen_path]
    assert rec["seen_path"] == seen_path and rec[seen_path] == file
    assert ("residual" in rec) == (seen_path == "local")  # only the residual model's local model reads it
    assert set(rec) & {"local", "local_mlp"} == {seen_path}
    cols = ["implementation", "dtype", "m", "n", "k", "batch"]
    a100 = table[table.gpu == SEEN[0]].head(40).reset_index(drop=True)
    got = predict("gemm", a100[cols], SEEN[0], experiment="gemm_fp16_vidur", models_dir=tmp_path,
                  registry=registry)
    assert set(got["prediction_path"]) == {seen_path} and got["source_gpu"].isna().all()
    feats = with_spec_columns(S._with_features(a100[cols].assign(kernel="gemm", gpu=SEEN[0]), registry, "v2")[0],
                              registry)
    base = mlp.predict_latency_us(S._frame(feats, meta)) if seen_path == "local_mlp" else None
    want = LocalModel.load(exp_dir / file).predict(feats, registry, base_pred=base)
    np.testing.assert_allclose(got["predicted_latency_us"], want, rtol=1e-9)
    # another GPU keeps the recorded path
    a40 = predict("gemm", table[table.gpu == "a40"].head(5)[cols], "a40", experiment="gemm_fp16_vidur",
                  models_dir=tmp_path, registry=registry)
    assert set(a40["prediction_path"]) == {"physical"}


def test_the_local_model_on_the_mlp_corrects_the_mlp_by_its_nearest_same_gpu_ratios(vidur_gemm, fitted, registry):
    """The MLP's local model is the same neighbour correction over the same design columns, against the MLP: given
    the residual model's latencies as its base it equals the residual model's local model."""
    from synperf.model.paths import LocalModel, ResidualModel

    table, meta = vidur_gemm
    tr, mlp = fitted
    tr = with_spec_columns(tr, registry)
    new = with_spec_columns(table[table.split == "test_seen"].reset_index(drop=True), registry)
    residual = ResidualModel.fit(tr, meta, registry, max_train_rows=2000, seed=0)
    generic = LocalModel.fit_to_base(tr, residual.predict(tr, registry), residual.numeric, residual.linear)
    np.testing.assert_allclose(generic.predict(new, registry, base_pred=residual.predict(new, registry)),
                               LocalModel.fit(tr, residual, registry).predict(new, registry), rtol=1e-12)
    local = S.fit_local_mlp(tr, meta, mlp)
    assert local.residual is None and local.numeric == residual.numeric and local.linear == residual.linear
    base = mlp.predict_latency_us(S._frame(new, meta))
    got = local.predict(new, registry, base_pred=base)
    # a training row is its own nearest neighbour: its measured latency comes back
    np.testing.assert_allclose(local.predict(tr.head(30), registry, base_pred=mlp.predict_latency_us(
        S._frame(tr.head(30), meta))), tr["latency_us"].head(30), rtol=1e-5)
    y = new["latency_us"].to_numpy()
    assert np.mean(np.abs(got / y - 1)) < np.mean(np.abs(base / y - 1))  # the correction helps on new problems
    with pytest.raises(ValueError, match="base"):
        local.predict(new.head(3), registry)  # the MLP is not inside the model: its predictions must be given
    with pytest.raises(ValueError, match="> 0"):
        LocalModel.fit_to_base(tr.head(10), -np.ones(10), residual.numeric, residual.linear)


def test_a_leave_one_gpu_out_fold_with_the_configured_rows_reuses_them_only_under_the_same_default(
        vidur_gemm, registry, tmp_path, caplog):
    """logo:a40 has the configured fold's rows (A40 the one unseen GPU): it takes the configured predictions (the
    primary model and its recorded path) when its own default path is the one the recorded path was chosen with,
    and is fitted afresh when not."""
    import logging

    from synperf.pipeline.protocols import evaluate_protocols

    exp, mdir, training = _vidur_training_stage(vidur_gemm, registry, tmp_path)
    assert (S.load_choice(mdir.parent).get("default") or {}).get("default", "mlp") == "mlp"
    # another experiment's path scores, trained on GPUs the fold does not test, that favour the physical model
    other = {"kernel": "rmsnorm", "seen": ["b200", "gb200"]}
    pd.DataFrame([{"experiment": "other", "path": p, "fold": f"losgo:{g}", "validation_gpu": g, "n_train": 10,
                   "n_rows": 10, "mape_pct": v} for p, v in (("mlp", 30.0), ("physical", 5.0), ("residual", 30.0),
                                                             ("ensemble", 30.0)) for g in other["seen"]]
                 ).to_csv(tmp_path / "other.csv", index=False)

    def run(name, **kw):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="synperf.pipeline.protocols"):
            evaluate_protocols(str(tmp_path / "f.parquet"), str(tmp_path / "f.json"), "gemm_fp16_vidur", exp,
                               str(registry.path), 0, {**training, "max_epochs": 2}, ["configured", "logo"],
                               ["synperf", "roofline"], 1, str(tmp_path / f"{name}.csv"), model_dir=str(mdir), **kw)
        return list(caplog.messages)

    same = run("same")  # no pooled evidence: the fold's default is the MLP, as the recorded choice's
    assert any(m.startswith("logo:a40: same rows and choices as configured") for m in same)
    moved = run("moved", path_scores={"other": str(tmp_path / "other.csv")},
                experiments={"gemm_fp16_vidur": exp, "other": other})
    assert any(m.startswith("logo:a40: default path physical") for m in moved)
    assert not any(m.startswith("logo:a40: same rows") for m in moved)
    assert any(m.startswith("logo:a40 synperf:") for m in moved)  # fitted, not copied
