"""``synperf e2e`` command line (fake kernel predictor at the model edge; real predict for the no-model error)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from test_e2e_compose import FakePredictor

import synperf.cli as cli
from synperf.e2e.compose import compose_trace


@pytest.fixture
def fake_cli(monkeypatch):
    monkeypatch.setattr(cli, "compose_trace", functools.partial(compose_trace, predict_fn=FakePredictor()))


def test_cli_prints_latencies_and_shares(public_data, fake_cli, capsys):
    pw = public_data / "pipeweave"
    rc = cli.main(["e2e", "--model", str(pw / "config/Qwen3-32B.json"), "--trace", str(pw / "workload/arxiv_12.csv"),
                   "--gpu", "b200", "--tp", "2", "--collectives", str(pw / "dataset/collective")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "12 requests, batch 12, 182 iterations" in out
    prefill = float(re.search(r"prefill latency\s+([\d.]+) s", out).group(1))
    total = float(re.search(r"total latency\s+([\d.]+) s", out).group(1))
    assert 0 < prefill < total
    shares = [float(x) for x in re.findall(r"^  \S+\s+([\d.]+) %$", out, flags=re.M)]
    assert sum(shares) == pytest.approx(100.0, abs=0.5) and "all_reduce" in out
    assert "proxy h100_sxm, bandwidth part scaled by 900/1800" in out   # B200: no NCCL table


def test_cli_errors(public_data, tmp_path, capsys):
    pw = public_data / "pipeweave"
    base = ["e2e", "--model", str(pw / "config/Qwen2.5-14B.json"), "--trace", str(pw / "workload/arxiv_8.csv")]
    assert cli.main(base + ["--gpu", "no_such_gpu"]) == 2
    assert "unknown GPU id" in capsys.readouterr().err
    assert cli.main(base + ["--gpu", "h100_sxm", "--models-dir", str(tmp_path)]) == 2   # real predict, no models
    assert "no trained model" in capsys.readouterr().err
    assert cli.main(base + ["--gpu", "h100_sxm", "--group-iterations", "0"]) == 2
    assert "--group-iterations 0: expected an integer >= 1" in capsys.readouterr().err
    mla = tmp_path / "mla.json"
    mla.write_text('{"hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61, "vocab_size": 1,'
                   ' "intermediate_size": 18432, "kv_lora_rank": 512}')
    assert cli.main(["e2e", "--model", str(mla), "--trace", str(pw / "workload/arxiv_8.csv"), "--gpu", "h100_sxm"]) == 2
    assert "kv_lora_rank" in capsys.readouterr().err
    # Llama-3.1-70B in bf16 (141 GB of weights) on one 24 GB L4, as synperf plan marks it
    big = str(Path(cli.EXAMPLE_MODELS) / "llama-3.1-70b.json")
    assert cli.main(["e2e", "--model", big, "--trace", str(pw / "workload/arxiv_8.csv"), "--gpu", "l4"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"llama-3.1-70b at tp=1 pp=1 does not fit l4: needs 1\d\d\.\d GB per GPU of 21\.6 GB usable",
                     err), err


def test_cli_refuses_a_pipeline_whose_stages_span_nodes(public_data, fake_cli, capsys):
    pw = public_data / "pipeweave"
    base = ["e2e", "--model", str(Path(cli.EXAMPLE_MODELS) / "llama-3.1-70b.json"), "--trace",
            str(pw / "workload/arxiv_8.csv"), "--gpu", "b200", "--collectives", str(pw / "dataset/collective")]
    assert cli.main(base + ["--tp", "8", "--pp", "2"]) == 2
    assert ("TP 8 x PP 2 = 16 GPUs span nodes: the pipeline's send/recv between nodes runs over the network, which "
            "the NCCL tables (one node, at most 8 GPUs) do not measure; not modelled") in capsys.readouterr().err
    assert cli.main(base + ["--tp", "4", "--pp", "2"]) == 0   # one node: priced
    assert "send_recv" in capsys.readouterr().out


def test_cli_reads_the_collective_gpu_map_from_the_config(public_data, fake_cli, tmp_path, capsys):
    pw = public_data / "pipeweave"
    base = ["e2e", "--model", str(pw / "config/Qwen3-32B.json"), "--trace", str(pw / "workload/arxiv_12.csv"),
            "--gpu", "b200", "--tp", "2", "--collectives", str(pw / "dataset/collective")]
    cfg = tmp_path / "config.yaml"
    cfg.write_text("e2e: {real_gpu_map: {A100: a100_sxm4_80gb}}\n")
    assert cli.main(base + ["--config", str(cfg)]) == 2
    assert "config key e2e.collective_gpu_map: missing or empty" in capsys.readouterr().err
    assert cli.main(base + ["--config", str(tmp_path / "none.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"--config {tmp_path / 'none.yaml'}: not a file" in err


def test_one_output_token_has_no_decode_step_and_prints_no_nan(fake_cli, tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("num_prefill_tokens,output_tokens\n100,1\n200,1\n")
    assert cli.main(["e2e", "--model", str(Path(cli.EXAMPLE_MODELS) / "llama-3.1-8b.json"), "--trace", str(trace),
                     "--gpu", "h100_sxm"]) == 0
    out = capsys.readouterr().out
    assert "median decode step            - (no decode step: every request has one output token)" in out
    assert "nan" not in out
