"""End-to-end evaluation on the real runs with a fake kernel predictor (no trained models on CPU)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_e2e_compose import FakePredictor

from synperf.data.io import InputError
from synperf.e2e.compose import Overhead, fit_overhead
from synperf.e2e.evaluate import real_runs, run_e2e_evaluation


def test_real_runs_table(public_data, e2e_config):
    runs = real_runs(public_data, e2e_config["real_gpu_map"])
    assert len(runs) == 18          # A100, H100, H200 x 2 (TP1) + A100, H100 x (4 TP2 + 2 TP4)
    assert set(runs["gpu_id"]) == {"a100_sxm4_80gb", "h100_sxm", "h200_sxm"}
    r = runs[(runs["run_name"] == "Qwen3-32B-splitwise_64") & (runs["gpu"] == "A100")].iloc[0]
    assert (r["model"], r["trace"], r["tp"], r["batch_size"]) == ("Qwen3-32B", "splitwise_64", 2, 64)
    assert set(runs["repetitions"]) == {5}
    assert r["prefill_latency"] == pytest.approx(8.811696, rel=1e-5)   # median of 5 repetitions, seconds


def test_real_runs_need_the_config_gpu_map(public_data):
    with pytest.raises(InputError, match=r"^config key e2e\.real_gpu_map: missing or empty"):
        real_runs(public_data, None)
    with pytest.raises(InputError, match=r"e2e_H200\.jsonl: GPU 'H200' has no registry id in config key "
                                         r"e2e\.real_gpu_map \(known: \['A100', 'H100'\]\)"):
        real_runs(public_data, {"A100": "a100_sxm4_80gb", "H100": "h100_sxm"})
    runs = real_runs(public_data, {"A100": "a100_sxm4_40gb", "H100": "h100_sxm", "H200": "h200_sxm"})
    assert set(runs.loc[runs["gpu"] == "A100", "gpu_id"]) == {"a100_sxm4_40gb"}     # the map decides the id


def _real_dir(tmp_path, files: dict[str, list[dict]]):
    """A public-data folder whose ``pipeweave/e2e/real`` holds ``files`` (name -> JSON lines)."""
    real = tmp_path / "pipeweave" / "e2e" / "real"
    real.mkdir(parents=True)
    for name, lines in files.items():
        (real / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return tmp_path, real


def _reps(run_name="Qwen3-32B-arxiv_8", batch=8, prefill=(1.0, 3.0, 2.0), key="iteration"):
    return [{"run_name": run_name, "batch_size": batch, key: i, "prefill_latency": p,
             "median_decode_latency": 0.01 * (i + 1), "total_latency": 5.0 + i} for i, p in enumerate(prefill)]


ADA_MAP = {"RTX_6000_Ada": "rtx_6000_ada", "RTX_PRO_6000_S": "rtx_pro_6000_blackwell_server"}


def test_real_runs_read_gpu_names_with_underscores(tmp_path):
    pub, _ = _real_dir(tmp_path, {"e2e_RTX_6000_Ada.jsonl": _reps(),
                                  "e2e_tp2_RTX_PRO_6000_S.jsonl": _reps(prefill=(4.0, 6.0))})
    runs = real_runs(pub, ADA_MAP).set_index("gpu")
    assert runs.loc["RTX_6000_Ada", ["gpu_id", "tp", "repetitions"]].tolist() == ["rtx_6000_ada", 1, 3]
    assert runs.loc["RTX_6000_Ada", "prefill_latency"] == 2.0                  # median of 1, 3, 2 s
    assert runs.loc["RTX_PRO_6000_S", ["gpu_id", "tp"]].tolist() == ["rtx_pro_6000_blackwell_server", 2]
    assert runs.loc["RTX_PRO_6000_S", "prefill_latency"] == 5.0
    assert runs.loc["RTX_PRO_6000_S", "total_latency"] == 5.5
    with pytest.raises(InputError, match=r"e2e_tp2_RTX_PRO_6000_S\.jsonl: GPU 'RTX_PRO_6000_S' has no registry id "
                                         r"in config key e2e\.real_gpu_map \(known: \['RTX_6000_Ada'\]\)"):
        real_runs(pub, {"RTX_6000_Ada": "rtx_6000_ada"})


@pytest.mark.parametrize("name, lines, message", [
    ("e2e_RTX_6000_Ada.jsonl", _reps(key="iterations"),
     r"e2e_RTX_6000_Ada\.jsonl: missing key\(s\) \['iteration'\]; expected at least \['run_name', .*\]; "
     r"misspelled\? 'iteration' \(found 'iterations'\)$"),
    ("e2e_RTX_6000_Ada.jsonl", [{k: v for k, v in r.items() if k != "total_latency"} for r in _reps()],
     r"e2e_RTX_6000_Ada\.jsonl: missing key\(s\) \['total_latency'\]; expected at least \[.*\]$"),
    ("e2e-RTX_6000_Ada.jsonl", _reps(), r"e2e-RTX_6000_Ada\.jsonl: not a real-run file name; "
                                        r"expected e2e\[_tp<T>\]_<GPU>\.jsonl"),
    ("e2e_RTX_6000_Ada.jsonl", [], r"e2e_RTX_6000_Ada\.jsonl: no lines; expected one JSON object per repetition"),
    ("e2e_RTX_6000_Ada.jsonl", _reps(run_name="Qwen3_arxiv"),
     r"e2e_RTX_6000_Ada\.jsonl: run_name 'Qwen3_arxiv' is not <model>-<trace>"),
])
def test_real_runs_refuse_a_bad_file_by_name(tmp_path, name, lines, message):
    pub, _ = _real_dir(tmp_path, {"e2e_tp2_RTX_PRO_6000_S.jsonl": _reps(), name: lines})
    with pytest.raises(InputError, match=message) as e:
        real_runs(pub, ADA_MAP)
    assert "\n" not in str(e.value)


def test_real_runs_refuse_a_file_that_is_not_json_lines(tmp_path):
    pub, real = _real_dir(tmp_path, {})
    (real / "e2e_RTX_6000_Ada.jsonl").write_text('{"run_name": "a-b"}\n{bad\n')
    with pytest.raises(InputError, match=r"e2e_RTX_6000_Ada\.jsonl: not JSON lines \(.+\); expected one JSON object"):
        real_runs(pub, ADA_MAP)


def test_run_e2e_evaluation(public_data, tmp_path, e2e_config):
    with pytest.raises(InputError, match=r"^config key e2e\.real_gpu_map: missing"):
        run_e2e_evaluation(public_data, None, None, tmp_path, {}, predict_fn=FakePredictor())
    deploy = FakePredictor()
    answer = deploy.__call__

    def as_deploy(kernel, params, gpu, **kw):
        out = answer(kernel, params, gpu, **kw)
        out.attrs["model_set"] = "deploy"
        return out

    with pytest.raises(InputError, match=r"^e2e evaluation: the deploy models"):
        run_e2e_evaluation(public_data, None, None, tmp_path / "deploy", e2e_config, predict_fn=as_deploy)
    res = run_e2e_evaluation(public_data, None, None, tmp_path, e2e_config, predict_fn=FakePredictor())
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
    # the fake predictor gives no kernel interval: each configuration's interval is the composition error alone,
    # the split-conformal quantile of the other model-and-trace pairs' |log(measured / predicted)|
    assert c["total_kernel_low_s"].isna().all()
    for i in (0, 5, 11):
        others = (c["run_name"] != c.loc[i, "run_name"]).to_numpy()
        for m in ("prefill", "decode_step", "total"):
            need = np.sort(np.abs(np.log(c[f"{m}_measured_s"] / c[f"{m}_predicted_s"]))[others])
            k = int(np.ceil((len(need) + 1) * 0.8))
            assert c.loc[i, f"{m}_composition_log_hw"] == pytest.approx(need[k - 1])
            pred = c.loc[i, f"{m}_predicted_s"]
            assert (c.loc[i, f"{m}_low_s"], c.loc[i, f"{m}_high_s"]) == pytest.approx(
                (pred * np.exp(-need[k - 1]), pred * np.exp(need[k - 1])))
    inside = (c["total_low_s"] <= c["total_measured_s"]) & (c["total_measured_s"] <= c["total_high_s"])
    assert s.loc["total", "interval_coverage_pct"] == pytest.approx(inside.mean() * 100)
    # overhead.json ships the quantile of all 18 configurations (the 16th smallest), which the CLI reads back
    need = np.sort(np.abs(np.log(c["total_measured_s"] / c["total_predicted_s"])))
    assert ov["composition_log_half_width"]["total"] == pytest.approx(need[15])
    assert Overhead.from_json(tmp_path / "overhead.json").composition_of("total") == pytest.approx(need[15])


class BandPredictor(FakePredictor):
    """FakePredictor with an interval of [0.2, 5] x the point on GEMM and attention launches, none elsewhere."""

    def __call__(self, kernel, params, gpu, **kw):
        out = super().__call__(kernel, params, gpu, **kw)
        if kernel in ("gemm", "attention_prefill", "attention_decode"):
            out["predicted_latency_low_us"] = out["predicted_latency_us"] * 0.2
            out["predicted_latency_high_us"] = out["predicted_latency_us"] * 5.0
        return out


def test_e2e_evaluation_scores_interval_coverage(public_data, tmp_path, e2e_config):
    res = run_e2e_evaluation(public_data, None, None, tmp_path, e2e_config, predict_fn=BandPredictor())
    c = res["configs"]
    assert (c["total_low_s"] < c["total_predicted_s"]).all() and (c["total_predicted_s"] < c["total_high_s"]).all()
    inside = (c["total_low_s"] <= c["total_measured_s"]) & (c["total_measured_s"] <= c["total_high_s"])
    assert c["total_in_interval"].astype(bool).tolist() == inside.tolist()
    s = res["summary"].set_index("metric")
    assert s.loc["total", "interval_coverage_pct"] == pytest.approx(inside.mean() * 100)
    from synperf.reporting.e2e_report import e2e_section

    md = "\n".join(e2e_section(str(tmp_path / "e2e_summary.csv"), str(tmp_path / "e2e_configs.csv"),
                               str(tmp_path / "e2e_breakdown.csv"), str(tmp_path / "overhead.json"), "f.png"))
    assert "measured in 80% interval %" in md and "total in 80% interval %" in md
    h100 = c[c["gpu"] == "H100"]
    cov = float(h100["total_in_interval"].astype(bool).mean() * 100)
    row = next(line for line in md.splitlines() if line.startswith(f"| H100 | {len(h100)} |"))
    assert row.rstrip(" |").endswith(f"| {cov:.1f}"), row


def test_report_section_states_the_mape_beside_the_paper(tmp_path):
    import json

    import pandas as pd

    from synperf.reporting.e2e_report import e2e_section

    pd.DataFrame({"metric": ["prefill", "decode", "total"], "synperf_mape_pct": [12.5, 8.25, 9.0],
                  "paper_mape_pct": [5.7, 10.3, 7.2], "neusight_mape_pct": [78.4, 24.4, 43.7],
                  "configurations": 3}).to_csv(tmp_path / "s.csv", index=False)
    pd.DataFrame({"config": ["a", "b", "c"], "gpu": ["A100", "H200", "H200"], "total_measured_s": [1.0, 2.0, 2.0],
                  "total_predicted_s": [1.1, 1.8, 2.5], "total_ape_pct": [10.0, 10.0, 25.0]}
                 ).to_csv(tmp_path / "c.csv", index=False)
    pd.DataFrame({"config": ["a", "a", "b"], "phase": "decode", "op": ["qkv", "attn", "qkv"],
                  "family": ["gemm", "attention_decode", "gemm"], "time_s": [3.0, 1.0, 1.0],
                  "share": [0.75, 0.25, 1.0]}).to_csv(tmp_path / "b.csv", index=False)
    (tmp_path / "o.json").write_text(json.dumps({"a_s": 0.002, "b_s": 0.0001}))
    md = "\n".join(e2e_section(str(tmp_path / "s.csv"), str(tmp_path / "c.csv"), str(tmp_path / "b.csv"),
                               str(tmp_path / "o.json"), "e2e/e2e_breakdown.png"))
    assert "| median decode step | 8.2 | 10.3 | 24.4 | 3 |" in md
    assert "a = 2.00 ms, b = 0.100 ms" in md
    # per GPU: A100 one configuration at 10%, H200 two at 10 and 25%
    assert "| A100 | 1 | 10.0 |" in md and "| H200 | 2 | 17.5 |" in md
    # gemm: mean of 0.75 (a) and 1.0 (b) = 87.5%; attention 0.25 in a and nothing in b: 12.5%
    assert "| gemm | 87.5 |" in md and "| attention_decode | 12.5 |" in md
    assert "![Per-operator breakdown](e2e/e2e_breakdown.png)" in md
    # with the models table: per GPU, the families trained on it and those it is unseen for
    pd.DataFrame({"config": ["a", "a", "a", "b", "b", "c"],
                  "family": ["gemm", "rmsnorm", "all_reduce", "gemm", "rmsnorm", "gemm"],
                  "model": "m", "path": "", "prediction_path": ["residual 3", "mlp 1", "measured table",
                                                                "ensemble 2", "mlp 1", "ensemble 2"],
                  "training_gpu": [True, True, False, False, True, False]}).to_csv(tmp_path / "m.csv", index=False)
    md = "\n".join(e2e_section(str(tmp_path / "s.csv"), str(tmp_path / "c.csv"), str(tmp_path / "b.csv"),
                               str(tmp_path / "o.json"), "e2e/e2e_breakdown.png", str(tmp_path / "m.csv")))
    assert "| A100 | 1 | 10.0 | gemm, rmsnorm | – |" in md
    assert "| H200 | 2 | 17.5 | rmsnorm | gemm |" in md
    # a model that did not name its training GPUs (empty flag) is in neither column, never "trained"
    m = pd.read_csv(tmp_path / "m.csv")
    m["training_gpu"] = m["training_gpu"].astype(object)
    m.loc[4, "training_gpu"] = None
    m.to_csv(tmp_path / "m.csv", index=False)
    md = "\n".join(e2e_section(str(tmp_path / "s.csv"), str(tmp_path / "c.csv"), str(tmp_path / "b.csv"),
                               str(tmp_path / "o.json"), "e2e/e2e_breakdown.png", str(tmp_path / "m.csv")))
    assert "| H200 | 2 | 17.5 | – | gemm |" in md


def test_no_measurement_of_the_scored_pair_enters_its_composition_error():
    """The half-width scoring run 0 re-fits each other run's overhead without run 0's model-and-trace pair: changing
    the measurements of that pair (run 1, same pair on another GPU) leaves it unchanged; another pair's moves it."""
    from synperf.e2e.compose import E2EResult
    from synperf.e2e.evaluate import composition_of_others

    def result(batch):
        it = pd.DataFrame({"iteration": range(4), "phase": ["prefill"] + ["decode"] * 3, "batch_size": batch,
                           "kernel_s": [1.0, 0.01, 0.01, 0.01], "comm_s": 0.0, "overhead_s": 0.0})
        it["latency_s"] = it["kernel_s"]
        return E2EResult("a100_sxm4_80gb", it, pd.DataFrame(), pd.DataFrame())

    batches = np.array([8.0, 8.0, 16.0, 32.0, 64.0, 4.0])
    base = [result(b) for b in batches]
    decode = 0.01 + 0.002 + 0.0001 * batches * np.array([1.0, 1.0, 1.3, 0.8, 1.1, 0.9])

    def runs_of(decode):
        return pd.DataFrame({"run_name": ["m-a", "m-a", "m-b", "m-c", "m-d", "m-e"], "prefill_latency": 1.05,
                             "median_decode_latency": decode, "total_latency": 1.0 + 3 * decode})

    resid = decode - 0.01
    c0 = composition_of_others(runs_of(decode), base, batches, resid, 0)
    assert c0["decode_step"] > 0
    moved = decode.copy()
    moved[1] *= 3.0                                        # run 0's pair, measured on another GPU
    assert composition_of_others(runs_of(moved), base, batches, moved - 0.01, 0) == pytest.approx(c0)
    moved = decode.copy()
    moved[3] *= 3.0                                        # another pair
    assert composition_of_others(runs_of(moved), base, batches, moved - 0.01, 0)["decode_step"] != pytest.approx(
        c0["decode_step"])
