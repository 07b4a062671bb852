"""End-to-end evaluation on the real runs with a fake kernel predictor (no trained models on CPU)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from synperf.e2e.compose import fit_overhead
from synperf.e2e.evaluate import real_runs, run_e2e_evaluation

from test_e2e_compose import FakePredictor


def test_real_runs_table(public_data):
    runs = real_runs(public_data)
    assert len(runs) == 18          # A100, H100, H200 x 2 (TP1) + A100, H100 x (4 TP2 + 2 TP4)
    assert set(runs["gpu_id"]) == {"a100_sxm4_80gb", "h100_sxm", "h200_sxm"}
    r = runs[(runs["run_name"] == "Qwen3-32B-splitwise_64") & (runs["gpu"] == "A100")].iloc[0]
    assert (r["model"], r["trace"], r["tp"], r["batch_size"]) == ("Qwen3-32B", "splitwise_64", 2, 64)
    assert set(runs["repetitions"]) == {5}
    assert r["prefill_latency"] == pytest.approx(8.811696, rel=1e-5)   # median of 5 repetitions, seconds


def test_run_e2e_evaluation(public_data, tmp_path):
    res = run_e2e_evaluation(public_data, None, None, tmp_path, predict_fn=FakePredictor())
    names = {p.name for p in res["files"]}
    assert names == {"e2e_configs.csv", "e2e_summary.csv", "e2e_breakdown.csv", "e2e_models.csv", "overhead.json",
                     "e2e_breakdown.png"}
    assert all(p.exists() and p.stat().st_size > 0 for p in res["files"])
    c = pd.read_csv(tmp_path / "e2e_configs.csv")
    assert len(c) == 18
    # APE by definition
    row = c.iloc[3]
    assert row["total_ape_pct"] == pytest.approx(abs(row["total_predicted_s"] - row["total_measured_s"])
                                                 / row["total_measured_s"] * 100)
    # leave-one-configuration-out: config i's overhead is the fit on the other 17 decode residuals
    resid = c["decode_step_measured_s"] - (c["decode_step_predicted_s"] - c["overhead_a_s"]
                                           - c["overhead_b_s"] * c["batch_size"])
    for i in (0, 7):
        others = np.arange(len(c)) != i
        ov = fit_overhead(c["batch_size"][others], resid[others])
        assert (c.loc[i, "overhead_a_s"], c.loc[i, "overhead_b_s"]) == pytest.approx((ov.a_s, ov.b_s), abs=1e-12)
    s = pd.read_csv(tmp_path / "e2e_summary.csv").set_index("metric")
    assert s.loc["decode_step", "synperf_mape_pct"] == pytest.approx(c["decode_step_ape_pct"].mean())
    assert list(s["paper_mape_pct"]) == [5.7, 10.3, 7.2] and list(s["neusight_mape_pct"]) == [78.4, 24.4, 43.7]
    ov = json.loads((tmp_path / "overhead.json").read_text())
    assert ov["a_s"] >= 0 and ov["b_s"] >= 0 and len(ov["fitted_on"]) == 18
    m = pd.read_csv(tmp_path / "e2e_models.csv")
    assert set(m.loc[m["config"].str.endswith("/H100") & (m["family"] == "attention_prefill"), "path"]) == {"fa3"}
