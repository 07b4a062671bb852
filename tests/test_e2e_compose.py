"""Composition logic with a fake kernel predictor (the only mock: the edge to the trained models)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from synperf.e2e._deps import InputError
from synperf.e2e.collectives import CollectiveModel
from synperf.e2e.compose import Overhead, SharedPredictor, compose, fit_overhead
from synperf.e2e.model_config import load_model_config
from synperf.e2e.workload import Request, generate, read_trace

CONST_US = {"attention_prefill": 100.0, "attention_decode": 50.0, "rmsnorm": 1.0, "silu_mul": 2.0}


class FakePredictor:
    """GEMM: m*n*k * 1e-6 us; other families a constant. Records its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, kernel, params, gpu, *, models_dir=None, registry=None):
        assert isinstance(params, pd.DataFrame)
        self.calls.append((kernel, len(params), params.copy()))
        if kernel == "gemm":
            lat = params["m"] * params["n"] * params["k"] * 1e-6
        else:
            lat = pd.Series(CONST_US[kernel], index=params.index)
        out = pd.DataFrame({"predicted_latency_us": np.asarray(lat, dtype="float64"),
                            "prediction_path": "residual" if kernel == "gemm" else "mlp"})
        out.attrs["model_dir"] = f"fake/{kernel}"
        out.attrs["training_gpus"] = ["h200_sxm"] if kernel == "gemm" else ["a100_sxm4_80gb"]
        return out


@pytest.fixture(scope="module")
def qwen14(public_data):
    model = load_model_config(public_data / "pipeweave/config/Qwen2.5-14B.json")
    return generate(model, read_trace(public_data / "pipeweave/workload/arxiv_8.csv"))


def test_prefill_decode_total_by_hand(qwen14, registry):
    fake = FakePredictor()
    res = compose(qwen14, "h200_sxm", predict_fn=fake, registry=registry)
    # one bulk call per family, distinct launches only (GEMM: 4 layer shapes x 2 token counts + lm_head)
    assert sorted(k for k, _, _ in fake.calls) == sorted(["gemm", "attention_prefill", "attention_decode", "rmsnorm",
                                                          "silu_mul"])
    n_uniq = {k: n for k, n, _ in fake.calls}
    assert n_uniq["gemm"] == 4 * 2 + 1 and n_uniq["attention_prefill"] == 1
    assert n_uniq["attention_decode"] == 121          # the mean KV length grows every step
    T, L = 27966, 48
    gemm_us = L * T * (7168 * 5120 + 5120 * 5120 + 27648 * 5120 + 5120 * 13824) * 1e-6 + 8 * 152064 * 5120 * 1e-6
    prefill_us = gemm_us + L * 100 + (2 * L + 1) * 1 + L * 2
    assert res.prefill_s == pytest.approx(prefill_us / 1e6)
    dec_us = (L * 8 * (7168 * 5120 + 5120 * 5120 + 27648 * 5120 + 5120 * 13824) * 1e-6 + 8 * 152064 * 5120 * 1e-6
              + L * 50 + (2 * L + 1) * 1 + L * 2)
    assert res.decode_step_s == pytest.approx(dec_us / 1e6)
    assert res.total_s == pytest.approx((prefill_us + 121 * dec_us) / 1e6)
    # the canonical rows the predictor saw
    pre = [p for k, _, p in fake.calls if k == "attention_prefill"][0].iloc[0]
    q = [2648, 3740, 3761, 3866, 3777, 3508, 3227, 3439]
    assert (pre["batch_size"], pre["seq_len"], pre["num_heads"], pre["num_kv_heads"]) == \
        (8, round(np.sqrt(np.mean(np.square(q)))), 40, 8)
    silu = [p for k, _, p in fake.calls if k == "silu_mul"][0]
    assert set(silu["hidden_size"]) == {13824}
    assert res.models.set_index("family").loc["attention_decode", "model"] == "fake/attention_decode"
    assert res.models.set_index("family").loc["attention_prefill", "path"] == "fa3"   # H200 is sm_90
    # which families the GPU trained (their launches priced by the seen path), and the paths with launch counts
    models = res.models.set_index("family")
    assert models["training_gpu"].to_dict() == {"gemm": True, "attention_prefill": False,
                                                "attention_decode": False, "rmsnorm": False, "silu_mul": False}
    assert models.loc["gemm", "prediction_path"] == "residual 9"
    assert models.loc["attention_decode", "prediction_path"] == "mlp 121"
    shares = res.family_shares()
    assert shares.sum() == pytest.approx(1.0) and shares.index[0] == "gemm"


def test_overhead_and_collectives(public_data, registry, e2e_config):
    model = load_model_config(public_data / "pipeweave/config/Qwen3-32B.json")
    wl = generate(model, [Request(1000, 3), Request(500, 3)], tp=2)
    coll = CollectiveModel.from_dir(public_data / "pipeweave/dataset/collective", registry,
                                    e2e_config["collective_gpu_map"])
    fake = FakePredictor()
    base = compose(wl, "a100_sxm4_80gb", predict_fn=fake, registry=registry, collectives=coll)
    ar_pre = coll.latency_us("all_reduce", 1500 * 5120 * 2, 2, "a100_sxm4_80gb")[0]
    assert base.iterations.loc[0, "comm_s"] == pytest.approx(128 * ar_pre / 1e6)
    assert base.models.set_index("family").loc["attention_prefill", "path"] == "fa2"
    # Qwen3 q/k norms: rmsnorm rows of head_dim 128 (tokens x 32 heads, tokens x 4 KV heads)
    rms = [p for k, _, p in fake.calls if k == "rmsnorm"][0]
    assert {(1500 * 32, 128), (1500 * 4, 128), (1500, 5120)} <= set(zip(rms["num_tokens"], rms["hidden_size"]))
    ov = base.with_overhead(Overhead(0.002, 0.0005))
    assert ov.decode_step_s == pytest.approx(base.decode_step_s + 0.002 + 0.0005 * 2)
    assert ov.total_s == pytest.approx(base.total_s + 3 * (0.002 + 0.0005 * 2))
    bd = ov.breakdown()
    assert bd.loc[bd["op"] == "overhead", "time_s"].sum() == pytest.approx(3 * 0.003)
    assert bd["share"].sum() == pytest.approx(1.0)
    # the composition error of the overhead file widens the (here absent) kernel bounds of each metric
    wide = base.with_overhead(Overhead(0.0, 0.0, (0.1, 0.2, 0.3))).intervals()
    assert wide["decode_step_low_s"] == pytest.approx(base.decode_step_s * np.exp(-0.2))
    assert wide["total_high_s"] == pytest.approx(base.total_s * np.exp(0.3))
    assert np.isnan(base.intervals()["total_high_s"])
    with pytest.raises(InputError, match="collective"):
        compose(wl, "a100_sxm4_80gb", predict_fn=FakePredictor(), registry=registry)


def test_overhead_file_round_trip_and_refusals(tmp_path):
    p = tmp_path / "overhead.json"
    p.write_text(json.dumps(Overhead(0.001, 0.0002, (0.05, 0.08, 0.06)).to_json()))
    back = Overhead.from_json(p)
    assert (back.a_s, back.b_s, *back.composition) == pytest.approx((0.001, 0.0002, 0.05, 0.08, 0.06))
    assert back.has_composition and back.composition_of("decode_step") == pytest.approx(0.08)
    p.write_text('{"a_s": 0.001, "b_s": 0}')
    assert not Overhead.from_json(p).has_composition
    p.write_text('{"a_s": 0, "b_s": 0, "composition_log_half_width": {"prefill": 0.1, "total": 0.1}}')
    with pytest.raises(InputError, match=r"overhead.json: composition_log_half_width = .*decode_step"):
        Overhead.from_json(p)
    p.write_text('{"a_s": 0, "b_s": 0, "composition_log_half_width": {"prefill": 0.1, "decode_step": -1, '
                 '"total": 0.1}}')
    with pytest.raises(InputError, match=r"composition_log_half_width\.decode_step = -1: expected a log half-width in"):
        Overhead.from_json(p)


def test_fit_overhead_nonnegative():
    ov = fit_overhead([8, 16, 32, 64], [0.004 + 0.0001 * b for b in (8, 16, 32, 64)])
    assert (ov.a_s, ov.b_s) == pytest.approx((0.004, 0.0001))
    neg = fit_overhead([8, 64], [0.01, -0.05])            # would need a negative slope
    assert neg.a_s >= 0 and neg.b_s >= 0
    with pytest.raises(InputError):
        fit_overhead([], [])


def test_bad_predictor_and_gpu(qwen14, registry):
    def short(kernel, params, gpu, **kw):
        return pd.DataFrame({"predicted_latency_us": [1.0]})
    with pytest.raises(InputError, match="expected"):
        compose(qwen14, "h100_sxm", predict_fn=short, registry=registry)
    with pytest.raises(InputError, match="unknown GPU"):
        compose(qwen14, "no_such_gpu", predict_fn=FakePredictor(), registry=registry)


def test_shared_predictor_prices_every_workload_as_its_own_calls(public_data, qwen14, registry):
    """Launches of several workloads and GPUs recorded first, one predictor call per (family, GPU) over their
    distinct launches, then the same results as composing each workload with its own calls."""
    other = generate(load_model_config(public_data / "pipeweave/config/Qwen2.5-14B.json"),
                     read_trace(public_data / "pipeweave/workload/arxiv_8.csv"), max_batch=4)
    jobs = [(qwen14, "h200_sxm"), (other, "h200_sxm"), (qwen14, "a100_sxm4_80gb"), (qwen14, "h200_sxm")]
    fakes = [FakePredictor() for _ in jobs]
    own = [compose(wl, gpu, predict_fn=f, registry=registry) for (wl, gpu), f in zip(jobs, fakes)]
    fake = FakePredictor()
    shared = SharedPredictor(fake)
    for wl, gpu in jobs:
        compose(wl, gpu, predict_fn=shared.record, registry=registry)
    assert fake.calls == []
    shared.predict(registry=registry)
    # one call per family and GPU over the distinct launches of its workloads (the first one twice on H200)
    assert len(fake.calls) == 2 * 5
    h200 = [f for f, (_, gpu) in zip(fakes, jobs) if gpu == "h200_sxm"]
    h200_gemm = pd.concat([p for f in h200 for k, _, p in f.calls if k == "gemm"]).drop_duplicates()
    assert sorted(n for k, n, _ in fake.calls if k == "gemm") == [9, len(h200_gemm)]
    assert len(h200_gemm) < sum(n for f in h200 for k, n, _ in f.calls if k == "gemm")
    for (wl, gpu), ref in zip(jobs, own):
        res = compose(wl, gpu, predict_fn=shared, registry=registry)
        pd.testing.assert_frame_equal(res.iterations, ref.iterations)
        pd.testing.assert_frame_equal(res.models, ref.models)
    assert len(fake.calls) == 2 * 5   # answered from the shared calls
    with pytest.raises(InputError, match="no recorded launches of 'gemm' on 'h100_sxm'"):
        compose(qwen14, "h100_sxm", predict_fn=shared, registry=registry)
