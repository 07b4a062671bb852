"""Leave-one-GPU-out serving scores: the launch lookup predictor, the protocol folds' launch hook, the scoring."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synperf.data.io import InputError
from synperf.data.schema import conform
from synperf.e2e._deps import default_registry
from synperf.evaluation import fold_launches as FL
from synperf.evaluation import protocols as P
from synperf.serving.logo import (
    CONFIGURED_UNSEEN,
    LOGO_FOLDS,
    PREDICTION_COLUMNS,
    LogoPredictor,
    launch_keys,
    record_launches,
    score_logo,
)

EXPERIMENTS = {"gemm_fp8_aiconfigurator": {"kernel": "gemm_fp8", "dtypes": ["fp8"], "seen": ["h100_sxm", "b200"],
                                           "unseen": ["h200_sxm"]},
               "gemm": {"kernel": "gemm", "dtypes": ["bfloat16"], "seen": ["h100_sxm", "b200"],
                        "unseen": ["h200_sxm"]}}
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "models"


def _fp8_predictions(registry, ms, gpu="h100_sxm"):
    """Fold predictions of fp8 GEMM launches (m in ``ms``, n = k = 4096) on ``gpu``: latency = m microseconds."""
    from synperf.api import launch_table

    canon = launch_table("gemm_fp8", {"m": list(ms), "n": 4096, "k": 4096, "dtype": "fp8"}, gpu, registry)
    t = canon.assign(experiment="gemm_fp8_aiconfigurator", fold=f"logo:{gpu}", training_gpus="b200,h200_sxm",
                     predicted_latency_us=canon["m"].astype(float))
    return t[PREDICTION_COLUMNS]


def test_logo_predictor_looks_up_each_launch_and_refuses_a_missing_one(tmp_path):
    registry = default_registry()
    pred = _fp8_predictions(registry, [8, 16, 32])
    pred.to_parquet(tmp_path / "p.parquet")   # the lookup survives the Parquet round trip of the pipeline
    lookup = LogoPredictor(pd.read_parquet(tmp_path / "p.parquet"), EXPERIMENTS,
                           fallback=lambda *a, **k: pytest.fail("fallback called for a fold-predicted GPU"))
    out = lookup("gemm_fp8", pd.DataFrame({"m": [32, 8, 32], "n": 4096, "k": 4096, "dtype": "fp8"}), "h100_sxm",
                 experiment="gemm_fp8_aiconfigurator", registry=registry)
    assert out["predicted_latency_us"].tolist() == [32.0, 8.0, 32.0]
    assert out["predicted_latency_low_us"].isna().all()
    assert out.attrs["training_gpus"] == ["b200", "h200_sxm"]   # the row's GPU is unseen: seen_<family> False
    with pytest.raises(InputError, match=r"gemm_fp8 on h100_sxm: 1 launch\(es\) absent .*gemm_fp8_aiconfigurator"):
        lookup("gemm_fp8", pd.DataFrame({"m": [8, 64], "n": 4096, "k": 4096, "dtype": "fp8"}), "h100_sxm",
               experiment="gemm_fp8_aiconfigurator", registry=registry)
    # a GPU the experiment's configured model trained on, without fold predictions, is refused
    with pytest.raises(InputError, match="gemm_fp8 on b200: no leave-one-GPU-out predictions"):
        lookup("gemm_fp8", pd.DataFrame({"m": [8], "n": 4096, "k": 4096, "dtype": "fp8"}), "b200",
               experiment="gemm_fp8_aiconfigurator", registry=registry)
    # a GPU the configured model never trained on goes to the fallback (the evaluation models)
    calls = []
    lookup.fallback = lambda family, params, gpu, **kw: calls.append(gpu) or pd.DataFrame(
        {"predicted_latency_us": np.full(len(params), 5.0)})
    out = lookup("gemm_fp8", pd.DataFrame({"m": [8], "n": 4096, "k": 4096, "dtype": "fp8"}), "h200_sxm",
                 experiment="gemm_fp8_aiconfigurator", registry=registry)
    assert calls == ["h200_sxm"] and out["predicted_latency_us"].tolist() == [5.0]


def test_launch_keys_ignore_dtypes():
    a = pd.DataFrame({"gpu": ["h100_sxm"], "kernel": "gemm", "m": pd.array([4], dtype="Int64"), "dtype": "fp8"})
    b = a.astype({"m": "float64", "gpu": "category"})
    assert launch_keys(a).tolist() == launch_keys(b).tolist()
    assert launch_keys(a).tolist() != launch_keys(a.assign(m=5)).tolist()
    # numbers held in an object column (a concatenation of tables, one without the column) key as numbers; a
    # string column stays a string
    c = pd.concat([a, pd.DataFrame({"gpu": ["b200"], "kernel": "gemm", "m": [None], "dtype": "fp8"})],
                  ignore_index=True)
    assert c["m"].dtype == object and launch_keys(c).tolist()[0] == launch_keys(a).tolist()[0]
    assert "|fp8|" in launch_keys(c).tolist()[1]


def _gemm_rows(gpus, ms):
    rows = [{"gpu": g, "kernel": "gemm", "implementation": "cublas", "dtype": "bfloat16", "m": m, "n": 4096,
             "k": 4096, "batch": 1, "latency_us": 10.0 + m / (50 if g == "h100_sxm" else 100),
             "latency_stat": "median", "source": "test", "source_version": "test"} for g in gpus for m in ms]
    return conform(pd.DataFrame(rows))


def test_fold_launch_hook_predicts_launches_only_in_folds_that_leave_their_gpu_out():
    registry = default_registry()
    gpus = ["a100_sxm4_80gb", "h100_sxm", "b200"]
    rows = _gemm_rows(gpus, [64 * i for i in range(1, 31)])
    table, meta = P.feature_table(rows, registry, "v2", seed=0)
    # two launches on H100: one a measured problem (m 128), one not measured anywhere (m 100)
    launches = _gemm_rows(["h100_sxm"], [128, 100])
    launches = launches.assign(experiment="gemm")
    launch = FL.launch_rows(launches, "gemm", gpus)
    assert FL.launch_rows(launches, "gemm", ["b200"]).empty
    big = FL.with_launches(table, launch, registry, "v2", seed=0)
    assert len(big) == len(table) + 2 and big["latency_us"].tail(2).isna().all()
    assert (big.iloc[len(table):]["problem_key"].to_numpy()[0] ==
            table.loc[(table["gpu"] == "a100_sxm4_80gb") & (table["m"] == 128), "problem_key"].iloc[0])
    folds = (P.leave_one_gpu_out(table, heldout_frac=0.2, seed=0) + P.configured(table.assign(split="train"))
             + P.leave_one_architecture_out(table, registry, heldout_frac=0.2, seed=0))
    ext = {f.name: FL.extend_fold(f, launch["gpu"].astype(str).to_numpy()) for f in folds}
    assert list(ext["logo:h100_sxm"].labels[-2:]) == ["unseen", "unseen"]
    # never trained on, never predicted elsewhere
    for name in ("logo:b200", "logo:a100_sxm4_80gb", "configured", "loao:Hopper"):
        assert list(ext[name].labels[-2:]) == ["unused", "unused"]
    logo = [ext[n] for n in ("logo:b200", "logo:h100_sxm")]
    preds = P.predict_protocol(big, logo, ["linear"], registry, None, meta, seed=0, log=lambda *_: None)
    got = FL.launch_predictions(preds, ext, launch, len(table), "gemm", method="linear")
    assert list(got.columns) == FL.PREDICTION_COLUMNS
    assert got["fold"].tolist() == ["logo:h100_sxm"] * 2
    assert got["training_gpus"].iloc[0] == "a100_sxm4_80gb,b200"
    # the launch of a measured H100 problem is predicted as that problem's measured row in the same fold
    own = preds[(preds["fold"] == "logo:h100_sxm") & (preds["row"] < len(table))]
    measured_128 = int(np.flatnonzero((table["gpu"] == "h100_sxm") & (table["m"] == 128))[0])
    assert got.loc[got["m"] == 128, "predicted_latency_us"].iloc[0] == pytest.approx(
        own.loc[own["row"] == measured_128, "predicted_latency_us"].iloc[0])
    assert got.loc[got["m"] == 100, "predicted_latency_us"].iloc[0] != pytest.approx(
        got.loc[got["m"] == 128, "predicted_latency_us"].iloc[0])
    # the scored rows are the table's: the same predictions as without the launches
    alone = P.predict_protocol(table, [folds[1], folds[2]], ["linear"], registry, None, meta, seed=0,
                               log=lambda *_: None)
    kept = FL.table_predictions(preds, len(table))
    assert len(kept) == len(alone)
    np.testing.assert_allclose(kept["predicted_latency_us"].to_numpy(), alone["predicted_latency_us"].to_numpy())


def test_score_logo_prices_seen_gpu_rows_from_the_fold_predictions(tmp_path):
    registry = default_registry()
    base = {"backend": "vllm", "model_path": "meta-llama/Llama-3.1-70B", "precision": "fp8", "gemm_quant_mode": "fp8",
            "mode": "agg", "osl": 16, "batch_size": 2, "tp_size": 1, "pp_size": 1, "silicon_ttft_ms": 100.0,
            "silicon_tpot_ms": 10.0}
    rows = pd.DataFrame([{**base, "system": "h100_sxm", "isl": 512}, {**base, "system": "h200_sxm", "isl": 512}])
    f = tmp_path / "silicon.csv"
    rows.to_csv(f, index=False)
    from synperf.serving.silicon import read_silicon

    experiments = {**EXPERIMENTS, **{e: {"kernel": e, "seen": ["h100_sxm"]}
                                     for e in ("attention_prefill", "attention_decode", "rmsnorm", "silu_mul")}}
    launches = record_launches(read_silicon(f), EXAMPLES, registry=registry, collectives=None,
                               experiments=experiments, gpus=["h100_sxm"])
    assert set(launches["gpu"].astype(str)) == {"h100_sxm"}
    assert set(launches["experiment"]) == {"gemm_fp8_aiconfigurator", "gemm", "attention_prefill",
                                           "attention_decode", "rmsnorm", "silu_mul"}
    # every fold predicts 2 us a launch; the H200 row's scores come from the seen-GPU table
    pred = launches.assign(fold="logo:h100_sxm", training_gpus="b200", predicted_latency_us=2.0)[PREDICTION_COLUMNS]
    scores = tmp_path / "serving_scores.csv"
    pd.DataFrame([{"model": "llama-3.1-70b", "gemm_dtype": "fp8", "gpu": "h200_sxm", "tp": 1, "concurrency": 2,
                   "isl": 512, "osl": 16, "measured_ttft_ms": 100.0, "measured_tpot_ms": 10.0, "ttft_mean_ms": 90.0,
                   "tpot_mean_ms": 12.0, "seen_gemm": False}]).to_csv(scores, index=False)
    tabs = score_logo(f, EXAMPLES, scores, pred, tmp_path / "out", registry=registry, collectives=None,
                      experiments=experiments, fallback=lambda *a, **k: pytest.fail("fallback called"))
    s = tabs["serving_logo_scores"].set_index("gpu")
    assert s.loc["h200_sxm", "left_out"] == CONFIGURED_UNSEEN and s.loc["h200_sxm", "ttft_mean_ms"] == 90.0
    assert s.loc["h100_sxm", "left_out"] == LOGO_FOLDS
    assert not s.loc["h100_sxm", [c for c in s.columns if c.startswith("seen_")]].astype(bool).any()
    # the same as pricing the row with 2 us for every launch
    from synperf.serving.score import score_rows

    ref = score_rows(read_silicon(f).head(1), EXAMPLES, registry=registry, collectives=None,
                     predict_fn=lambda family, params, gpu, **kw: pd.DataFrame(
                         {"predicted_latency_us": np.full(len(params), 2.0)}))
    assert s.loc["h100_sxm", "ttft_mean_ms"] == pytest.approx(ref["ttft_mean_ms"].iloc[0])
    assert s.loc["h100_sxm", "tpot_mean_ms"] == pytest.approx(ref["tpot_mean_ms"].iloc[0])
    m = tabs["serving_logo_mape"].set_index("scope")
    assert m.loc["all fp8 rows", "rows"] == 2
    assert m.loc["all fp8 rows", "tpot_mape_pct"] == pytest.approx(
        (abs(s.loc["h100_sxm", "tpot_mean_ms"] - 10) / 10 * 100 + 20) / 2)
    # a config without the fp8 GEMM experiment (the small CI config) prices no fp8 row: none is recorded or scored
    no_fp8 = {k: v for k, v in experiments.items() if k != "gemm_fp8_aiconfigurator"}
    assert record_launches(read_silicon(f), EXAMPLES, registry=registry, collectives=None, experiments=no_fp8,
                           gpus=["h100_sxm"]).empty
    t = score_logo(f, EXAMPLES, scores, pred.iloc[:0], tmp_path / "out3", registry=registry, collectives=None,
                   experiments=no_fp8)["serving_logo_scores"]
    assert t["gpu"].tolist() == ["h200_sxm"]
    # a seen-GPU row no fold tested is refused
    pd.read_csv(scores).assign(seen_gemm=True).to_csv(scores, index=False)
    with pytest.raises(InputError, match="h200_sxm .*no leave-one-GPU-out fold tested"):
        score_logo(f, EXAMPLES, scores, pred, tmp_path / "out2", registry=registry, collectives=None,
                   experiments=experiments)


def test_report_adds_the_leave_one_gpu_out_table(tmp_path):
    from synperf.reporting.serving_section import serving_lines

    d = tmp_path / "serving"
    d.mkdir()
    pd.DataFrame([{"scope": "all rows", "rows": 3, "ttft_mape_pct": 12.34, "tpot_mape_pct": 5.0, "aic_rows": 0}]
                 ).to_csv(d / "serving_mape.csv", index=False)
    pd.DataFrame({"reason": ["priced"], "rows": [3]}).to_csv(d / "serving_rows.csv", index=False)
    pd.DataFrame({"gpu": ["h100_sxm"], "seen_gemm": [True]}).to_csv(d / "serving_scores.csv", index=False)
    md = "\n".join(serving_lines(str(tmp_path / "report.md")))
    assert "Leave one GPU out" not in md
    pd.DataFrame([{"scope": "all fp8 rows", "rows": 3, "ttft_mape_pct": 31.25, "tpot_mape_pct": 7.5, "aic_rows": 3,
                   "aic_ttft_mape_pct": 20.0}]).to_csv(d / "serving_logo_mape.csv", index=False)
    md = "\n".join(serving_lines(str(tmp_path / "report.md")))
    logo = md[md.index("### Leave one GPU out"):]
    assert "| all fp8 rows | 3 | 31.2 | 7.5 |" in logo and "20.0" in logo
