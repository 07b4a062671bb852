"""``synperf plan`` (fake kernel predictor at the model edge) and ``synperf predict`` (a tiny trained GEMM model)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import train_tiny_model
from test_e2e_compose import FakePredictor

import synperf.cli as cli
import synperf.e2e.plan as P
from synperf.api import configured_experiments
from synperf.e2e.compose import compose_trace
from synperf.e2e.workload import Request

WORKLOAD = ["--isl", "2000", "--osl", "200", "--batch", "16"]


class IntervalPredictor(FakePredictor):
    """FakePredictor with an interval of [0.5, 2] x the point prediction on every launch."""

    def __call__(self, kernel, params, gpu, **kw):
        out = super().__call__(kernel, params, gpu, **kw)
        out["predicted_latency_low_us"] = out["predicted_latency_us"] * 0.5
        out["predicted_latency_high_us"] = out["predicted_latency_us"] * 2.0
        return out


@pytest.fixture
def fake_plan(monkeypatch):
    monkeypatch.setattr(P, "predict", FakePredictor())


def _trace(tmp_path) -> Path:
    """The workload of :data:`WORKLOAD` as a trace file: 16 requests of 2000 prompt and 200 output tokens."""
    trace = tmp_path / "t.csv"
    pd.DataFrame({"num_prefill_tokens": [2000] * 16, "output_tokens": [200] * 16}).to_csv(trace, index=False)
    return trace


def _plan_json(capsys, args) -> pd.DataFrame:
    assert cli.main(["plan", "--format", "json"] + args) == 0
    return pd.DataFrame(json.loads(capsys.readouterr().out))


def test_70b_does_not_fit_one_l40s_and_rows_sort_by_total(fake_plan, capsys, tmp_path):
    png = tmp_path / "none.png"
    assert cli.main(["plan", "--model", "llama-3.1-70b", *WORKLOAD, "--gpus", "l40s", "--tp", "1", "--plot",
                     str(png)]) == 0
    assert "no configuration fits, so no chart is written" in capsys.readouterr().err and not png.exists()
    df = _plan_json(capsys, ["--model", "llama-3.1-70b", *WORKLOAD, "--gpus", "l40s,h200_sxm,b200,h100_sxm"])
    # Llama-3.1-70B from its config fields, bf16 (2 bytes), untied embedding + LM head
    h, L, inter, vocab, heads, kv, hd = 8192, 80, 28672, 128256, 64, 8, 128
    layer = h * (heads + 2 * kv) * hd + heads * hd * h + 3 * h * inter + 2 * h
    weights = (L * layer + 2 * vocab * h) * 2
    kv_cache = 16 * (2000 + 200) * 2 * L * kv * hd * 2
    need_gb = (weights + kv_cache) / 1e9 + P.ACTIVATION_GB
    assert 150 < need_gb < 160
    status = df.set_index("gpu")["status"]
    # 0.9 x L40S's 48 GB (GDDR with ECC: CUDA reports 48.3e9 bytes, read as 48e9); 0.9 x H100's and H200's 80 and
    # 141 GB, which count GiB on HBM parts
    assert status["l40s"] == f"does not fit: needs {need_gb:.1f} GB of 43.2 GB usable"
    assert status["h100_sxm"] == f"does not fit: needs {need_gb:.1f} GB of 77.3 GB usable"
    assert status["h200_sxm"] == f"does not fit: needs {need_gb:.1f} GB of 136.3 GB usable"
    assert status["b200"] == "ok" and df.loc[df.gpu == "l40s", "total_s"].isna().all()
    assert df["gpu"].iloc[0] == "b200"      # priced rows first


def test_plan_sorts_by_total_and_flags_unseen_families(fake_plan, capsys, public_data):
    coll = str(public_data / "pipeweave/dataset/collective")
    df = _plan_json(capsys, ["--model", "qwen2.5-14b", *WORKLOAD, "--gpus", "l40s,h200_sxm,b200",
                             "--tp", "1,2", "--collectives", coll])
    assert (df["status"] == "ok").all() and len(df) == 6
    assert df["total_s"].is_monotonic_increasing and df["total_s"].iloc[0] < df["total_s"].iloc[-1]
    # the fake GEMM model was trained on h200_sxm only, the others on a100_sxm4_80gb
    assert set(df.loc[df.gpu == "h200_sxm", "flag_gemm"]) == {"trained"}
    assert set(df.loc[df.gpu != "h200_sxm", "flag_gemm"]) == {"unseen"}
    assert set(df["flag_attention_decode"]) == {"unseen"}
    assert np.allclose(df["tokens_per_s"], 16 * 200 / df["total_s"])


def test_plan_total_equals_synperf_e2e(fake_plan, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cli, "compose_trace", functools.partial(compose_trace, predict_fn=FakePredictor()))
    trace = _trace(tmp_path)
    model = str(cli.EXAMPLE_MODELS / "qwen2.5-14b.json")
    assert cli.main(["e2e", "--model", model, "--trace", str(trace), "--gpu", "h200_sxm"]) == 0
    out = capsys.readouterr().out
    total = float(re.search(r"total latency\s+([\d.]+) s", out).group(1))
    prefill = float(re.search(r"prefill latency\s+([\d.]+) s", out).group(1))
    step_ms = float(re.search(r"median decode step\s+([\d.]+) ms", out).group(1))
    for args in (["--trace", str(trace)], WORKLOAD):
        row = _plan_json(capsys, ["--model", model, "--gpus", "h200_sxm", *args]).iloc[0]
        assert row["total_s"] == pytest.approx(total, abs=1e-4)
        assert row["prefill_ms"] / 1e3 == pytest.approx(prefill, abs=1e-4)
        assert row["decode_step_ms"] == pytest.approx(step_ms, abs=1e-3)


def test_intervals_price_and_plot(monkeypatch, capsys, tmp_path, registry):
    from synperf.e2e.compose import compose
    from synperf.e2e.workload import Request, generate

    monkeypatch.setattr(P, "predict", IntervalPredictor())
    png = tmp_path / "plan.png"
    df = _plan_json(capsys, ["--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm,l40s",
                             "--price", "h100_sxm=3", "--plot", str(png)])
    # no collectives, no overhead: each family's launches at half (twice) their latency move the total by
    # -0.5 (+1) x the family's time; families add in quadrature
    model = P.resolve_model("llama-3.1-8b", cli.EXAMPLE_MODELS)
    wl = generate(model, [Request(2000, 200)] * 16, max_batch=16, prefill_impl="fa3")
    res = compose(wl, "h100_sxm", predict_fn=IntervalPredictor(), registry=registry)
    fam = res.breakdown().groupby("family")["time_s"].sum()
    h100 = df.set_index("gpu").loc["h100_sxm"]
    assert h100["total_s"] == pytest.approx(res.total_s)
    assert h100["total_low_s"] == pytest.approx(res.total_s - np.sqrt(((0.5 * fam) ** 2).sum()))
    assert h100["total_high_s"] == pytest.approx(res.total_s + np.sqrt((fam ** 2).sum()))
    # narrower than every launch at its bound at once, wider than the largest family alone
    assert 0.5 * res.total_s < h100["total_low_s"] < res.total_s - 0.5 * fam.max()
    assert (df["prefill_low_ms"] < df["prefill_ms"]).all() and (df["decode_step_high_ms"] > df["decode_step_ms"]).all()
    assert np.allclose(df["tokens_per_s_low"], 3200 / df["total_high_s"])
    assert h100["usd_per_m_output_tokens"] == pytest.approx(3 * h100["total_s"] / 3600 / 3200 * 1e6)
    assert df.set_index("gpu")["usd_per_m_output_tokens"].isna()["l40s"]
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    # an overhead file with a composition error widens each bound in log space, in quadrature
    oh = tmp_path / "overhead.json"
    oh.write_text(json.dumps({"a_s": 0.0, "b_s": 0.0,
                              "composition_log_half_width": {"prefill": 0.0, "decode_step": 0.0, "total": 0.2}}))
    wide = _plan_json(capsys, ["--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm", "--overhead", str(oh)])
    w = wide.iloc[0]
    hi = np.log(h100["total_high_s"] / h100["total_s"])
    assert w["total_high_s"] == pytest.approx(res.total_s * np.exp(np.hypot(hi, 0.2)))
    assert w["decode_step_high_ms"] == pytest.approx(h100["decode_step_high_ms"])
    assert cli.main(["plan", "--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm", "--overhead", str(oh)]) == 0
    assert "plus the composition error measured on real runs (log half-width prefill 0.000, decode_step 0.000, " \
           "total 0.200" in capsys.readouterr().out


def test_memory_margin_refuses_a_config_that_fits_only_in_all_of_the_memory(fake_plan, capsys):
    # Llama-3.1-8B, 88 x 2200 tokens on one L40S: needs about 45.5 GB of 48 GB, more than 0.9 x 48 GB
    args = ["--model", "llama-3.1-8b", "--isl", "2000", "--osl", "200", "--batch", "88", "--gpus", "l40s"]
    row = _plan_json(capsys, args).iloc[0]
    assert 0.9 * 48 < row["memory_need_gb"] <= 48 and row["memory_usable_gb"] == pytest.approx(43.2)
    assert row["status"].startswith("does not fit") and pd.isna(row["total_s"])
    row = _plan_json(capsys, args + ["--gpu-memory-utilization", "1"]).iloc[0]
    assert row["status"] == "ok" and row["total_s"] > 0
    assert cli.main(["plan", *args, "--gpu-memory-utilization", "1.5"]) == 2
    assert "--gpu-memory-utilization 1.5: expected a fraction in (0, 1]" in capsys.readouterr().err


def test_table_format_lists_what_does_not_fit(fake_plan, capsys):
    assert cli.main(["plan", "--model", "llama-3.1-70b", *WORKLOAD, "--gpus", "l40s,b200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("b200") and "unseen: gemm" in lines[2]
    assert lines[3].startswith("l40s") and "does not fit: needs" in lines[3] and lines[3].endswith("of 43.2 GB usable")


@pytest.mark.parametrize("args, message", [
    (["--gpus", "h100_sxn"], "unknown GPU id 'h100_sxn'"),
    (["--gpus", "h100_sxm", "--tp", "1,x"], "--tp 1,x: expected a comma list of integers"),
    (["--gpus", "h100_sxm", "--tp", "2"], "TP/PP > 1 needs the collective tables"),
    (["--gpus", "h100_sxm", "--price", "h100_sxm"], "--price h100_sxm: expected GPU=USD_PER_HOUR"),
    (["--gpus", "h100_sxm", "--price", "h100_sxn=2"], "unknown GPU id 'h100_sxn'"),
    (["--gpus", "h100_sxm", "--tp", ","], "--tp ',': expected a comma list of integers"),
    (["--gpus", ","], "--gpus ',': expected a comma list of registry ids"),
    (["--gpus", "h100_sxm", "--concurrency", "-4"], "--concurrency -4: expected an integer from 1 to 1,000,000"),
    (["--gpus", "h100_sxm", "--batch", "0"], "--batch 0: expected an integer from 1 to 1,000,000"),
    (["--gpus", "h100_sxm", "--plot", "/no/such/folder/x.png"], "--plot /no/such/folder/x.png: no such folder"),
    (["--gpus", "h100_sxm", "--plot", "plan.txt"], "--plot plan.txt: expected a figure file ending in one of"),
    (["--gpus", "h100_sxm", "--plot", str(Path(__file__).resolve().parent)], ": a folder, not a file"),
    (["--gpus", "h100_sxm", "--price", "h100_sxm=inf"], "--price h100_sxm=inf: expected GPU=USD_PER_HOUR"),
    (["--gpus", "h100_sxm", "--price", "h100_sxm=1e308"], "at most 1000 per GPU-hour"),
    (["--gpus", "h100_sxm", "--price", "h100_sxm=2", "--price", "h100_sxm=3"], "h100_sxm priced twice"),
    (["--gpus", "h100_sxm", "--price", "h200_sxm=3"], "--price h200_sxm: not among --gpus"),
])
def test_plan_errors(fake_plan, monkeypatch, capsys, args, message):
    monkeypatch.setattr(cli, "DEFAULT_COLLECTIVES", ())
    assert cli.main(["plan", "--model", "llama-3.1-8b", *WORKLOAD] + args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_plan_workload_and_model_errors(capsys, tmp_path):
    assert cli.main(["plan", "--model", "llama-9", *WORKLOAD, "--gpus", "h100_sxm"]) == 2
    assert "--model llama-9: not a file nor a shipped example" in capsys.readouterr().err
    assert cli.main(["plan", "--model", "llama-3.1-8b", "--isl", "10", "--gpus", "h100_sxm"]) == 2
    assert "--isl, --osl and --batch" in capsys.readouterr().err
    assert cli.main(["plan", "--model", "llama-3.1-8b", "--gpus", "h100_sxm", *WORKLOAD,
                     "--models-dir", str(tmp_path)]) == 2     # real predict, no models
    assert "no trained model" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_gemm(tmp_path_factory, registry):
    """A small GEMM efficiency model on synthetic rows of a40 and h20, saved where :func:`synperf.api.predict`
    finds it: ``<dir>/gemm/v2-all``."""
    sizes = [64, 256, 1024, 4096]
    df = pd.DataFrame([{"gpu": g, "m": m, "n": n, "k": k, "dtype": "bfloat16"}
                       for g in ("a40", "h20") for m in sizes for n in sizes for k in sizes])
    d = tmp_path_factory.mktemp("models")
    train_tiny_model("gemm", df, registry, [d / "gemm" / "v2-all"])
    return d


def test_predict_cli_equals_api_predict(tiny_gemm, registry, capsys, tmp_path):
    from synperf.api import predict

    base = ["predict", "--kernel", "gemm", "--gpu", "l40s", "--models-dir", str(tiny_gemm), "--predictor", "mlp",
            "--registry", str(registry.path)]
    assert cli.main(base + ["--param", "m=128", "--param", "n=4096", "--param", "k=4096",
                            "--param", "dtype=bfloat16"]) == 0
    cap = capsys.readouterr()
    one = pd.read_csv(__import__("io").StringIO(cap.out))
    ref = predict("gemm", {"m": 128, "n": 4096, "k": 4096, "dtype": "bfloat16"}, "l40s", models_dir=tiny_gemm,
                  predictor="mlp", registry=registry)
    assert one["predicted_latency_us"].iloc[0] == pytest.approx(ref["predicted_latency_us"].iloc[0], rel=1e-9)
    assert one["prediction_path"].iloc[0].startswith("mlp:") and one["model_set"].iloc[0] == "evaluation"
    # no intervals, no unknown category, no transfer source in this model folder: those columns are left out
    assert not {"predicted_latency_low_us", "unknown_category", "source_gpu"} & set(one.columns)
    assert "left out columns empty on every row: " in cap.err and "source_gpu" in cap.err
    launches = tmp_path / "l.csv"
    pd.DataFrame({"m": [1, 128, 4096], "n": 4096, "k": 4096, "dtype": "bfloat16"}).to_csv(launches, index=False)
    out = tmp_path / "out.csv"
    assert cli.main(base + ["--launches", str(launches), "--out", str(out)]) == 0
    got = pd.read_csv(out)
    ref = predict("gemm", pd.read_csv(launches), "l40s", models_dir=tiny_gemm, registry=registry, predictor="mlp")
    assert got["m"].tolist() == [1, 128, 4096]
    assert np.allclose(got["predicted_latency_us"], ref["predicted_latency_us"], rtol=1e-9)
    capsys.readouterr()
    # an output that cannot be written: one line, exit status 2, and no half-written file
    assert cli.main(base + ["--launches", str(launches), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"synperf: error: --out {tmp_path}: a folder, not a file"

    def full_disk(text, path):   # the disk fills up while the file is written
        import errno

        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    import synperf.cli as climod
    orig, climod.write_text = climod.write_text, full_disk
    try:
        full = tmp_path / "full.csv"
        assert cli.main(base + ["--launches", str(launches), "--out", str(full)]) == 2
    finally:
        climod.write_text = orig
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"synperf: error: [Errno 28] No space left on device: '{full}'"
    assert "Traceback" not in err and not full.exists()


def test_predict_names_the_launches_file_of_a_bad_row(tmp_path, capsys):
    launches = tmp_path / "launches.csv"
    launches.write_text("m,n,k,dtype\n1,4096,4096,bfloat16\n2,abc,4096,bfloat16\n")
    assert cli.main(["predict", "--kernel", "gemm", "--gpu", "h100_sxm", "--models-dir", str(tmp_path),
                     "--launches", str(launches)]) == 2
    assert f"--launches {launches}: line 3: n = 'abc'" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--gpu", "h100_sxn", "--param", "m=1", "--param", "n=1", "--param", "k=1", "--param", "dtype=bfloat16"],
     "unknown GPU id 'h100_sxn'"),
    (["--gpu", "h100_sxm", "--param", "m"], "--param m: expected key=value"),
    (["--gpu", "h100_sxm"], "pass either --param key=value"),
    (["--gpu", "h100_sxm", "--launches", "/no/such.csv"], "--launches /no/such.csv: cannot read CSV"),
    (["--gpu", "h100_sxm", "--param", "m=1", "--param", "dtype=bfloat16"], "needs ['n', 'k']"),
    (["--gpu", "h100_sxm", "--param", "m=1"], "needs ['n', 'k', 'dtype'] (dtype e.g. 'bfloat16')"),
    (["--gpu", "h100_sxm", "--param", "m=1", "--out", "/no/such/folder/o.csv"], "no such folder /no/such/folder"),
    (["--gpu", "h100_sxm", "--param", "m=1", "--param", "m=2"], "--param m=2: m given twice"),
    (["--gpu", "h100_sxm", "--param", "m=99999999999999999999", "--param", "n=1", "--param", "k=1", "--param",
      "dtype=bfloat16"], "m = 99999999999999999999; expected an integer >= 1 and <= 2**53"),
])
def test_predict_errors(tmp_path, capsys, args, message):
    assert cli.main(["predict", "--kernel", "gemm", "--models-dir", str(tmp_path)] + args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_gpus_all_lists_what_cannot_run_or_shard(fake_plan, monkeypatch, capsys, public_data, registry):
    monkeypatch.setattr(cli, "default_registry", lambda: registry)
    df = _plan_json(capsys, ["--model", "qwen2.5-14b", *WORKLOAD, "--gpus", "all", "--tp", "1,3",
                             "--collectives", str(public_data / "pipeweave/dataset/collective")])
    assert sorted(df["gpu"].unique()) == sorted(registry.gpus) and len(df) == 2 * len(registry.gpus)
    status = df.set_index(["gpu", "tp"])["status"]
    assert status["v100_pcie_32gb", 1] == "cannot run bfloat16: no Tensor Core peak for it in the registry"
    assert status["h100_sxm", 3].startswith("cannot shard: qwen2.5-14b: num_attention_heads=40 is not divisible")
    assert status["h100_sxm", 1] == "ok" and df["total_s"].notna().sum() == (df["status"] == "ok").sum()
    # every row has the interval, flag and memory columns; memory filled wherever the model shards
    assert {"total_low_s", "total_high_s", "prefill_low_ms", "decode_step_high_ms", "flag_gemm", "model_set",
            "memory_need_gb", "memory_usable_gb"} <= set(df.columns)
    assert df.loc[~df["status"].str.startswith("cannot shard"), "memory_need_gb"].notna().all()


def test_sort_ranks_by_the_key_asked_for(fake_plan, capsys, public_data):
    args = ["--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm,b200", "--tp", "1,2",
            "--collectives", str(public_data / "pipeweave/dataset/collective")]
    by_total = _plan_json(capsys, args)
    assert by_total["total_s"].is_monotonic_increasing
    per_gpu = _plan_json(capsys, args + ["--sort", "tokens-per-gpu"])
    np.testing.assert_allclose(per_gpu["tokens_per_s_per_gpu"], per_gpu["tokens_per_s"] / per_gpu["gpus"])
    assert per_gpu["tokens_per_s_per_gpu"].is_monotonic_decreasing
    assert sorted(map(tuple, per_gpu[["gpu", "tp"]].values)) == sorted(map(tuple, by_total[["gpu", "tp"]].values))
    cost = _plan_json(capsys, args + ["--sort", "cost", "--price", "h100_sxm=2", "--price", "b200=5"])
    assert cost["usd_per_m_output_tokens"].is_monotonic_increasing
    for extra, message in ((["--sort", "cost"], "--sort cost: pass --price GPU=USD_PER_HOUR"),
                           (["--sort", "tpot"], "--sort tpot: pass --concurrency")):
        assert cli.main(["plan", "--format", "json"] + args + extra) == 2
        assert message in capsys.readouterr().err


def test_a_merged_trace_is_one_sequence_cut_to_its_context_with_a_note_and_its_output_count(fake_plan, capsys,
                                                                                             tmp_path):
    """--policy merged runs the trace as one sequence: cut to the context as the authors' merged runs were (a note
    says so), and generating its longest output only, which tokens/s counts."""
    trace = tmp_path / "t.csv"
    trace.write_text("num_prefill_tokens,output_tokens\n" + "4000,10\n" * 20)
    args = ["--model", "llama-3.1-8b", "--trace", str(trace), "--gpus", "h100_sxm"]
    df = _plan_json(capsys, args + ["--policy", "merged"])
    assert df["tokens_per_s"].iloc[0] == pytest.approx(10 / df["total_s"].iloc[0])
    static = _plan_json(capsys, args)
    assert static["tokens_per_s"].iloc[0] == pytest.approx(200 / static["total_s"].iloc[0])
    trace.write_text("num_prefill_tokens,output_tokens\n" + "4000,10\n" * 40)
    cut = _plan_json(capsys, args + ["--policy", "merged"])   # 160000 prompt tokens, cut to 131062
    trace.write_text("num_prefill_tokens,output_tokens\n" + "4000,10\n" * 80)
    assert cli.main(["plan", "--format", "json"] + args + ["--policy", "merged"]) == 0
    cap = capsys.readouterr()
    assert (f"synperf: note: {trace}: the merged sequence (--policy merged) of 320000 prompt tokens is cut to "
            "131062 (llama-3.1-8b's context of 131072 minus 10 output tokens)") in cap.err
    assert pd.DataFrame(json.loads(cap.out))["total_s"].iloc[0] == pytest.approx(cut["total_s"].iloc[0])


def test_tp_beyond_one_node_is_listed_not_priced(fake_plan, capsys, public_data):
    df = _plan_json(capsys, ["--model", "llama-3.1-70b", *WORKLOAD, "--gpus", "b200", "--tp", "8,16",
                             "--collectives", str(public_data / "pipeweave/dataset/collective")])
    status = df.set_index("tp")["status"]
    assert status[8] == "ok"
    assert status[16] == "not modelled: TP 16 all-reduces across nodes (the NCCL tables measure at most 8 GPUs)"
    assert np.isnan(df.set_index("tp")["total_s"][16]) and df["memory_need_gb"].notna().all()


def test_a_pipeline_beyond_one_node_is_listed_not_priced(fake_plan, capsys, public_data):
    """TP 8 x PP 2 puts the second stage on another node: its send/recv crosses the network, which the NCCL tables
    (one node) do not measure; TP 4 x PP 2 stays in one node and is priced."""
    df = _plan_json(capsys, ["--model", "llama-3.1-70b", *WORKLOAD, "--gpus", "b200", "--tp", "4,8", "--pp", "2",
                             "--collectives", str(public_data / "pipeweave/dataset/collective")])
    status = df.set_index("tp")["status"]
    assert status[4] == "ok"
    assert status[8] == "not modelled: TP 8 x PP 2 spans nodes (the NCCL tables measure one node, at most 8 GPUs)"
    # B200 has no NCCL table of its own: the plan says whose it priced its collectives with
    coll = df.set_index("tp")["collectives"][4]
    assert "all_reduce: proxy h100_sxm, bandwidth part scaled by 900/1800" in coll and "send_recv: proxy" in coll
    assert np.isnan(df.set_index("tp")["total_s"][8])


class MetaOnlyPredictor(FakePredictor):
    """FakePredictor whose GEMM result names a model folder (``meta.json`` with ``train_gpus``) and no
    ``training_gpus``, like a model folder without a recorded path."""

    def __init__(self, model_dir):
        super().__init__()
        self.model_dir = model_dir

    def __call__(self, kernel, params, gpu, **kw):
        out = super().__call__(kernel, params, gpu, **kw)
        if kernel == "gemm":
            out.attrs = {"model_dir": str(self.model_dir)}
        return out


def test_trained_flag_falls_back_to_the_model_meta(monkeypatch, capsys, tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"train_gpus": ["l40s", "b200"]}))
    monkeypatch.setattr(P, "predict", MetaOnlyPredictor(tmp_path))
    df = _plan_json(capsys, ["--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "l40s,h200_sxm"]).set_index("gpu")
    assert df.loc["l40s", "flag_gemm"] == "trained" and df.loc["h200_sxm", "flag_gemm"] == "unseen"
    assert df.loc["l40s", "flag_rmsnorm"] == "unseen"


def test_plan_total_equals_synperf_e2e_at_tp4(fake_plan, monkeypatch, capsys, tmp_path, public_data):
    monkeypatch.setattr(cli, "compose_trace", functools.partial(compose_trace, predict_fn=FakePredictor()))
    coll = ["--collectives", str(public_data / "pipeweave/dataset/collective")]
    trace = _trace(tmp_path)
    model = str(cli.EXAMPLE_MODELS / "llama-3.1-70b.json")
    assert cli.main(["e2e", "--model", model, "--trace", str(trace), "--gpu", "b200", "--tp", "4", *coll]) == 0
    total = float(re.search(r"total latency\s+([\d.]+) s", capsys.readouterr().out).group(1))
    # e2e takes an example name as plan does
    assert cli.main(["e2e", "--model", "llama-3.1-70b", "--trace", str(trace), "--gpu", "b200", "--tp", "4",
                     *coll]) == 0
    assert float(re.search(r"total latency\s+([\d.]+) s", capsys.readouterr().out).group(1)) == total
    row = _plan_json(capsys, ["--model", "llama-3.1-70b", *WORKLOAD, "--gpus", "b200", "--tp", "4", *coll]).iloc[0]
    assert row["status"] == "ok" and row["total_s"] == pytest.approx(total, abs=1e-4)


def test_e2e_prints_the_plan_interval_and_each_familys_flag(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cli, "compose_trace", functools.partial(compose_trace, predict_fn=IntervalPredictor()))
    trace = _trace(tmp_path)
    model = str(cli.EXAMPLE_MODELS / "qwen2.5-14b.json")
    assert cli.main(["e2e", "--model", model, "--trace", str(trace), "--gpu", "h200_sxm"]) == 0
    out = capsys.readouterr().out
    lo, hi = map(float, re.search(r"total latency\s+[\d.]+ s\s+80% interval \[([\d.]+), ([\d.]+)\]", out).groups())
    monkeypatch.setattr(P, "predict", IntervalPredictor())
    row = _plan_json(capsys, ["--model", model, "--gpus", "h200_sxm", *WORKLOAD]).iloc[0]
    assert (lo, hi) == (pytest.approx(row["total_low_s"], abs=1e-4), pytest.approx(row["total_high_s"], abs=1e-4))
    assert row["model_set"] == "unknown"         # the fake predictor does not name its model set
    # the fake GEMM model trained on h200_sxm, the others not
    assert re.search(r"^  gemm\s+trained\s+fake/gemm", out, re.M) and re.search(r"^  rmsnorm\s+unseen\s", out, re.M)


def test_plan_reports_progress_once_per_configuration(fake_plan, registry):
    """``progress(done, total)`` counts every (GPU, TP) configuration, priced or not, and ends at total."""
    calls = []
    model = P.resolve_model("llama-3.1-8b", cli.EXAMPLE_MODELS)
    P.plan(model, [Request(2000, 200)] * 4, ["h100_sxm", "l40s", "b200"], [1], [1], registry=registry,
           progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_the_shipped_trace_is_the_readme_workload(fake_plan, capsys):
    """examples/traces/16x2000x200.csv is the README's workload: the same plan as --isl 2000 --osl 200 --batch 16."""
    trace = Path(cli.EXAMPLE_MODELS).parent / "traces" / "16x2000x200.csv"
    a = _plan_json(capsys, ["--model", "llama-3.1-8b", "--trace", str(trace), "--batch", "16", "--gpus", "h100_sxm"])
    b = _plan_json(capsys, ["--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm"])
    assert a["total_s"].iloc[0] == b["total_s"].iloc[0] > 0


def test_concurrency_adds_ttft_and_tpot_and_stands_for_the_batch(fake_plan, capsys, tmp_path):
    """``--concurrency`` without ``--batch``: the static plan of that many requests, plus the server's TTFT/TPOT,
    both priced by the plan's predictor."""
    base = ["--model", "llama-3.1-8b", "--isl", "500", "--osl", "20", "--gpus", "h100_sxm"]
    a = _plan_json(capsys, [*base, "--concurrency", "4"])
    b = _plan_json(capsys, [*base, "--batch", "4"])
    assert a["total_s"].iloc[0] == b["total_s"].iloc[0] > 0
    assert "ttft_ms" not in b.columns
    # one request's prefill at least, and below the static batch's four prefills plus every decode step
    assert a["prefill_ms"].iloc[0] / 4 <= a["ttft_ms"].iloc[0] < 1e3 * a["total_s"].iloc[0]
    assert 0 < a["tpot_ms"].iloc[0] < a["ttft_ms"].iloc[0]
    assert a["ttft_low_ms"].isna().all() or (a["ttft_low_ms"] <= a["ttft_ms"]).all()
    # the serving simulator's measured error bounds TTFT/TPOT even without kernel intervals
    err = tmp_path / "serving_error.json"
    err.write_text(json.dumps({"serving_log_half_width": {"ttft": 0.3, "tpot": 0.1}}))
    w = _plan_json(capsys, [*base, "--concurrency", "4", "--serving-error", str(err)]).iloc[0]
    assert w["ttft_ms"] == pytest.approx(a["ttft_ms"].iloc[0])
    assert (w["ttft_low_ms"], w["ttft_high_ms"]) == pytest.approx((w["ttft_ms"] * np.exp(-0.3),
                                                                   w["ttft_ms"] * np.exp(0.3)))
    assert w["tpot_high_ms"] == pytest.approx(w["tpot_ms"] * np.exp(0.1))
    assert cli.main(["plan", *base, "--batch", "4", "--serving-error", str(err)]) == 2
    assert "--serving-error sets the vLLM server that --concurrency simulates" in capsys.readouterr().err


def test_concurrency_serves_with_vllm_settings_of_each_gpu_or_the_given_ones(fake_plan, capsys):
    """Each served row names the vLLM limits it was simulated with (vLLM's defaults: 8192 tokens and 1024
    sequences on H100, 2048 and 256 on L40S and A100) and its KV cache's dtype; the flags override them, and a
    smaller token budget chunks the 4 x 3000-token burst into more iterations, so TTFT grows."""
    base = ["--model", "llama-3.1-8b", "--isl", "3000", "--osl", "20", "--concurrency", "4"]
    a = _plan_json(capsys, [*base, "--gpus", "h100_sxm,l40s,a100_sxm4_80gb"]).set_index("gpu")
    assert a["max_num_batched_tokens"].to_dict() == {"h100_sxm": 8192, "l40s": 2048, "a100_sxm4_80gb": 2048}
    assert a["max_num_seqs"].to_dict() == {"h100_sxm": 1024, "l40s": 256, "a100_sxm4_80gb": 256}
    assert set(a["kv_cache_dtype"]) == {"bfloat16"}
    b = _plan_json(capsys, [*base, "--gpus", "h100_sxm", "--max-num-batched-tokens", "2048", "--max-num-seqs", "2",
                            "--kv-cache-dtype", "fp8"]).iloc[0]
    assert (b["max_num_batched_tokens"], b["max_num_seqs"], b["kv_cache_dtype"]) == (2048, 2, "fp8")
    assert b["ttft_ms"] > a.loc["h100_sxm", "ttft_ms"]
    cli.main(["plan", *base, "--gpus", "h100_sxm"])
    assert re.search(r"h100_sxm tp1: TTFT .* \(vLLM max_num_batched_tokens 8192, max_num_seqs 1024, bfloat16 KV "
                     r"cache\)", capsys.readouterr().out)
    # a static batch of 64 x 4112 tokens does not fit on L40S; the server queues instead, and the row is served
    big = _plan_json(capsys, ["--model", "llama-3.1-8b", "--isl", "4096", "--osl", "16", "--concurrency", "64",
                              "--gpus", "l40s"]).iloc[0]
    assert big["status"].startswith("does not fit") and big["serving_status"] == "ok" and big["ttft_ms"] > 0
    for flags, msg in ((["--max-num-seqs", "0"], "--max-num-seqs 0: expected an integer from 1 to 1,000,000"),
                       (["--kv-cache-dtype", "fp8", "--concurrency", "0"], "--concurrency 0: expected"),
                       (["--max-num-batched-tokens", "512", "--batch", "4"], "--max-num-batched-tokens sets the vLLM "
                                                                             "server that --concurrency simulates")):
        args = [a for a in base if a not in ("--concurrency", "4")] if "--batch" in flags else base
        assert cli.main(["plan", *args, "--gpus", "h100_sxm", *flags]) == 2
        assert msg in capsys.readouterr().err


def test_plan_refuses_what_the_model_or_the_overhead_cannot_mean_and_lists_each_gpu_once(fake_plan, capsys, tmp_path):
    # a request longer than Llama-3.1-8B's context (131072 tokens)
    assert cli.main(["plan", "--model", "llama-3.1-8b", "--isl", "131000", "--osl", "100", "--batch", "1",
                     "--gpus", "h100_sxm"]) == 2
    err = capsys.readouterr().err
    assert "request 1 has 131000 prompt + 100 output tokens, above llama-3.1-8b's context of 131072" in err
    # an overhead that would make iterations faster than their kernels
    oh = tmp_path / "overhead.json"
    oh.write_text('{"a_s": -5, "b_s": 0.001}')
    assert cli.main(["plan", "--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm", "--overhead", str(oh)]) == 2
    assert f"{oh}: a_s = -5: expected a number of seconds in [0, 3600]" in capsys.readouterr().err
    # a misspelled key is refused (the composition error would be silently lost), and so are a JSON bool or
    # string where a number belongs, and a width that overflows the bounds
    for text, message in (('{"a_s": 0, "b_s": 0, "compositon_log_half_width": {}}',
                           "unknown key 'compositon_log_half_width' (did you mean 'composition_log_half_width'?)"),
                          ('{"a_s": 0, "b_s": true}', "b_s = True: expected a number of seconds"),
                          ('{"a_s": "0.002", "b_s": 0}', "a_s = '0.002': expected a number of seconds"),
                          ('{"a_s": 1' + "0" * 400 + ', "b_s": 0}', "a_s = 1000"),
                          ('{"a_s": 0, "b_s": 0, "composition_log_half_width": {"prefill": 1e300, "decode_step": 0,'
                           ' "total": 0}}', "composition_log_half_width.prefill = 1e+300: expected a log half-width")):
        oh.write_text(text)
        assert cli.main(["plan", "--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm", "--overhead",
                         str(oh)]) == 2
        assert f"{oh}: {message}" in capsys.readouterr().err
    oh.write_text('{"a_s": 0.001}')
    assert cli.main(["plan", "--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm", "--overhead", str(oh)]) == 2
    assert "missing key 'b_s'" in capsys.readouterr().err
    # a server's concurrency needs one request shape, refused before any configuration is priced
    trace = Path(cli.EXAMPLE_MODELS).parent / "traces" / "16x2000x200.csv"
    assert cli.main(["plan", "--model", "llama-3.1-8b", "--trace", str(trace), "--gpus", "h100_sxm",
                     "--concurrency", "4"]) == 2
    assert "--concurrency needs --isl and --osl (not --trace)" in capsys.readouterr().err
    # a GPU or a TP size named twice is priced once
    df = _plan_json(capsys, ["--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm,h100_sxm", "--tp", "1,1"])
    assert len(df) == 1


def test_a_model_dtype_no_family_trained_on_names_the_config_field(tmp_path, capsys):
    cfg = json.loads((cli.EXAMPLE_MODELS / "llama-3.1-8b.json").read_text())
    f16 = tmp_path / "f16.json"
    f16.write_text(json.dumps({**cfg, "torch_dtype": "float16"}))
    assert cli.main(["plan", "--model", str(f16), *WORKLOAD, "--gpus", "h100_sxm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"synperf: error: {f16}: torch_dtype float16: no attention_prefill model was trained on "
                   "float16 (trained: bfloat16); the composer prices the model in its config's dtype")
    newer = tmp_path / "newer.json"        # transformers' newer key names the field in the message
    newer.write_text(json.dumps({**{k: v for k, v in cfg.items() if k != "torch_dtype"}, "dtype": "float16"}))
    assert cli.main(["e2e", "--model", str(newer), "--trace", str(_trace(tmp_path)), "--gpu", "h100_sxm"]) == 2
    assert capsys.readouterr().err.startswith(f"synperf: error: {newer}: dtype float16: no attention_prefill model")


def test_a_config_without_torch_dtype_is_priced_in_bfloat16_with_a_note(fake_plan, tmp_path, capsys):
    cfg = json.loads((cli.EXAMPLE_MODELS / "llama-3.1-8b.json").read_text())
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({k: v for k, v in cfg.items() if k not in ("torch_dtype", "dtype")}))
    assert cli.main(["plan", "--model", str(bare), *WORKLOAD, "--gpus", "h100_sxm"]) == 0
    err = capsys.readouterr().err
    assert "synperf: note: bare: the config names no torch_dtype; priced in bfloat16" in err
    assert cli.main(["plan", "--model", "llama-3.1-8b", *WORKLOAD, "--gpus", "h100_sxm"]) == 0
    assert "torch_dtype" not in capsys.readouterr().err
    # an FP8 MoE checkpoint without torch_dtype: the note names the experts' dtype too
    # a float32 checkpoint: vLLM's --dtype auto serves it in bfloat16, and so is it priced
    f32 = tmp_path / "f32.json"
    f32.write_text(json.dumps({**cfg, "torch_dtype": "float32"}))
    assert cli.main(["plan", "--model", str(f32), *WORKLOAD, "--gpus", "h100_sxm"]) == 0
    assert "synperf: note: f32: the config's torch_dtype is float32; priced in bfloat16" in capsys.readouterr().err
    minimax = P.resolve_model("minimax-m2.5", cli.EXAMPLE_MODELS, configured_experiments())
    assert "priced in bfloat16 (the routed experts in fp8_block, from quantization_config)" in P.dtype_note(minimax)
