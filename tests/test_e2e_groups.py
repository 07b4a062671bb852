"""`compose_trace` prices a trace a bounded group of iterations at a time with the same iterations, totals and
model table as `compose` of the whole workload: with the fake kernel predictor, and with the trained models of
`models/` (skipped without them, failed under SYNPERF_REQUIRE_OUTPUTS=1)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import need_output
from test_e2e_compose import FakePredictor
from test_predict_chunks import MODELS

from synperf.e2e._deps import InputError
from synperf.e2e.collectives import CollectiveModel
from synperf.e2e.compose import compose, compose_trace
from synperf.e2e.model_config import load_model_config
from synperf.e2e.workload import generate, generate_groups, iteration_count, read_trace


def _same(grouped, whole):
    pd.testing.assert_frame_equal(grouped.iterations, whole.iterations, check_exact=True)
    assert grouped.total_s == whole.total_s and grouped.prefill_s == whole.prefill_s
    assert grouped.decode_step_s == whole.decode_step_s
    pd.testing.assert_frame_equal(grouped.models, whole.models)
    a, b = grouped.breakdown(), whole.breakdown()
    pd.testing.assert_frame_equal(a.sort_values(["phase", "op"]).reset_index(drop=True),
                                  b.sort_values(["phase", "op"]).reset_index(drop=True), check_exact=False, rtol=1e-12)


def test_grouped_trace_equals_the_whole_workload_with_collectives(public_data, registry, e2e_config):
    pw = public_data / "pipeweave"
    model = load_model_config(pw / "config/Qwen3-32B.json")
    reqs = read_trace(pw / "workload/arxiv_12.csv")
    coll = CollectiveModel.from_dir(pw / "dataset/collective", registry, e2e_config["collective_gpu_map"])
    whole = compose(generate(model, reqs, tp=2, max_batch=5, prefill_impl="fa3"), "h100_sxm",
                    predict_fn=FakePredictor(), registry=registry, collectives=coll)
    fake, seen = FakePredictor(), []
    grouped = compose_trace(model, reqs, "h100_sxm", tp=2, max_batch=5, prefill_impl="fa3", group_iterations=7,
                            predict_fn=fake, registry=registry, collectives=coll,
                            progress=lambda done, total: seen.append((done, total)))
    _same(grouped, whole)
    n = iteration_count(reqs, 5)
    assert n == len(whole.iterations) and seen[-1] == (2 * n, 2 * n)
    assert sorted(k for k, _, _ in fake.calls) == sorted(set(whole.models["family"]) - {"all_reduce"})  # one each
    sizes = [len(w.iterations) for w in generate_groups(model, reqs, tp=2, max_batch=5, group_iterations=7)]
    assert sum(sizes) == n and sizes[0] == 7 and max(sizes) == 7
    with pytest.raises(InputError, match=r"^group_iterations = 0; expected an integer >= 1$"):
        generate_groups(model, reqs, group_iterations=0)


def test_grouped_trace_equals_the_whole_workload_with_the_trained_models(public_data, registry):
    for family in ("gemm", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul"):
        need_output(MODELS / family / "fingerprint.joblib")
    pw = public_data / "pipeweave"
    model = load_model_config(pw / "config/Qwen2.5-14B.json")
    reqs = read_trace(pw / "workload/arxiv_8.csv")
    whole = compose(generate(model, reqs, max_batch=3), "h200_sxm", models_dir=MODELS, registry=registry)
    grouped = compose_trace(model, reqs, "h200_sxm", max_batch=3, group_iterations=25, models_dir=MODELS,
                            registry=registry)
    _same(grouped, whole)
