"""A damaged or missing artefact of the train stage is refused in one line naming its file, never read as another
model or silently skipped."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from synperf.api import launch_table, predict
from synperf.data.io import InputError, read_artefact
from synperf.model.estimator import TrainConfig, TrainedModel, train
from synperf.model.features import build_features

_GPUS = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"
GEMM = {"m": [2 ** i for i in range(12)] * 3, "n": [1024] * 12 + [4096] * 12 + [8192] * 12, "k": 4096,
        "dtype": "bfloat16"}


@pytest.fixture(scope="module")
def model_dir(registry, tmp_path_factory):
    """A tiny v1 GEMM model (two epochs on synthetic latencies), saved as the train stage saves one."""
    t = launch_table("gemm", GEMM, "h100_sxm", registry)
    ff = build_features(t, registry, "v1")
    latency = ff.frame["theoretical_time_us"].to_numpy() * 2.0 + 5.0
    model = train(ff, latency, np.arange(len(t)) % 12, TrainConfig(max_epochs=2, batch_size=8),
                  log=lambda *_: None)
    model.meta["feature_set"] = "v1"
    d = tmp_path_factory.mktemp("models") / "gemm" / "v1-all"
    model.save(d)
    return d


def _copy(src, tmp_path):
    import shutil

    dst = tmp_path / "gemm" / "v1-all"
    shutil.copytree(src, dst)
    return dst


def _truncate(f):
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("name, kind", [("model.pt", "model"), ("encoder.joblib", "joblib"), ("meta.json", "JSON")])
def test_a_truncated_model_file_is_named_with_the_stage_that_writes_it(model_dir, tmp_path, registry, name, kind):
    d = _copy(model_dir, tmp_path)
    params = {k: v[:3] if isinstance(v, list) else v for k, v in GEMM.items()}
    ok = predict("gemm", params, "h100_sxm", models_dir=tmp_path, registry=registry, predictor="mlp")
    assert ok["prediction_path"].tolist() == [f"mlp:{d}"] * 3 and (ok["predicted_latency_us"] > 0).all()
    _truncate(d / name)
    with pytest.raises(InputError) as err:
        TrainedModel.load(d)
    msg = str(err.value)
    assert re.fullmatch(rf"{re.escape(str(d / name))}: not a valid {kind} file \(truncated\?\) \(.+\); rerun the "
                        r"train stage", msg), msg
    assert "\n" not in msg and len(msg) < len(str(d)) + 220  # torch's paragraph-long message is cut


def test_meta_without_its_keys_and_a_foreign_encoder_are_refused(model_dir, tmp_path):
    d = _copy(model_dir, tmp_path)
    (d / "meta.json").write_text('{"feature_set": "v1"}')
    with pytest.raises(InputError, match=rf"^{re.escape(str(d / 'meta.json'))}: missing \['encoder', "
                                         r"'train_config'\]; rerun the train stage$"):
        TrainedModel.load(d)
    d = _copy(model_dir, tmp_path / "b")
    import joblib

    joblib.dump({"not": "an encoder"}, d / "encoder.joblib")
    with pytest.raises(InputError, match=r"encoder.joblib: expected an Encoder, found dict; rerun the train stage$"):
        TrainedModel.load(d)
    d = _copy(model_dir, tmp_path / "c")
    import torch

    torch.save({"w": torch.zeros(2)}, d / "model.pt")
    with pytest.raises(InputError, match=r"model.pt: weights do not fit the network of meta.json \(RuntimeError: "
                                         r"Error\(s\) in loading state_dict"):
        TrainedModel.load(d)


def test_an_invalid_fingerprint_file_is_refused_by_name(tmp_path, registry):
    from synperf.model.fingerprint import FINGERPRINT_FILE, FingerprintModel

    (tmp_path / FINGERPRINT_FILE).write_bytes(b"\x80\x04\x95")
    with pytest.raises(InputError, match=r"fingerprint.joblib: not a valid joblib file \(truncated\?\)"):
        FingerprintModel.load(tmp_path / FINGERPRINT_FILE)
    with pytest.raises(InputError, match=r"absent.joblib: file not found; rerun the train stage$"):
        FingerprintModel.load(tmp_path / "absent.joblib")
    # predict names the file and the target that writes it
    (tmp_path / "gemm").mkdir()
    with pytest.raises(InputError, match=r"gemm: no trained model \(no fingerprint.joblib, the fingerprint predictor "
                                         r"of 'gemm'\); run the pipeline"):
        predict("gemm", {"m": 8, "n": 1024, "k": 4096, "dtype": "bfloat16"}, "h100_sxm", models_dir=tmp_path,
                registry=registry)


def test_read_artefact_refuses_an_unknown_suffix(tmp_path):
    (tmp_path / "m.pkl").write_bytes(b"")
    with pytest.raises(InputError, match=r"m.pkl: unsupported artefact format '.pkl'"):
        read_artefact(tmp_path / "m.pkl")


def test_a_config_that_is_not_yaml_is_named(tmp_path):
    from synperf.api import _config

    (tmp_path / "c.yaml").write_text("experiments: [gemm\n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(tmp_path / 'c.yaml'))}: not valid YAML \("):
        _config(tmp_path / "c.yaml")
    assert _config(tmp_path / "absent.yaml") == {}


def test_pipeline_stages_name_a_damaged_features_meta_and_ingest_summary(tmp_path):
    from synperf.pipeline.merge import merge_measurements
    from synperf.pipeline.train import train_experiment

    meta = tmp_path / "gemm.json"
    meta.write_text('{"numeric": ["flops"')
    with pytest.raises(InputError, match=rf"^{re.escape(str(meta))}: not a valid JSON file \(truncated\?\) "
                                         r"\(JSONDecodeError: .+\); rerun the features stage$"):
        train_experiment(str(tmp_path / "gemm.parquet"), str(meta), "gemm", {"kernel": "gemm", "seen": ["h100_sxm"]},
                         {}, 0, 1, str(tmp_path / "out"))
    import pandas as pd

    from synperf.data.schema import conform

    table = tmp_path / "vidur.parquet"
    conform(pd.DataFrame([{"gpu": "h100_sxm", "kernel": "gemm", "implementation": "cublas", "dtype": "bfloat16",
                           "m": 64, "n": 4096, "k": 4096, "batch": 1, "latency_us": 30.0, "latency_stat": "mean",
                           "source": "vidur", "source_version": "v1", "source_file": "f"}])).to_parquet(table)
    summary = tmp_path / "vidur.json"
    summary.write_text('{"rows": 3}')
    with pytest.raises(InputError, match=rf"^{re.escape(str(summary))}: missing \['dropped'\]; rerun the ingest "
                                         r"stage$"):
        merge_measurements([str(table)], [str(summary)], [], str(_GPUS), str(tmp_path / "all.parquet"),
                           str(tmp_path / "s.json"))
