"""The efficiency MLP on a small real slice: learns, is seeded, round-trips through disk."""

import numpy as np
import pytest
import torch

from synperf.data.ingest import vidur
from synperf.data.schema import reduce_duplicates
from synperf.evaluation.split import shape_key
from synperf.model.estimator import EfficiencyMLP, MaskDropout, TrainConfig, TrainedModel, loss_fn, train
from synperf.model.features import build_features


@pytest.fixture(scope="module")
def gemm_slice(public_data, registry, ingest_config):
    t = vidur.ingest(public_data, registry, ingest_config["vidur"]).table
    t, _ = reduce_duplicates(t[(t.kernel == "gemm") & (t.gpu == "a100_sxm4_80gb")])
    return t.sample(3000, random_state=0).reset_index(drop=True)


def fit(df, registry, **kw):
    ff = build_features(df, registry, "v1")
    cfg = TrainConfig(max_epochs=kw.pop("max_epochs", 40), early_stopping_patience=10, batch_size=256, **kw)
    return ff, train(ff, df["latency_us"], shape_key(df), cfg, log=lambda *_: None)


@pytest.mark.xdist_group("gemm_slice")
def test_mlp_beats_a_constant_efficiency(gemm_slice, registry):
    ff, model = fit(gemm_slice, registry)
    pred = model.predict_latency_us(ff)
    mape = np.mean(np.abs(pred - gemm_slice["latency_us"]) / gemm_slice["latency_us"]) * 100
    eff = ff.frame["theoretical_time_us"] / gemm_slice["latency_us"]
    const = ff.frame["theoretical_time_us"] / eff.median()
    const_mape = np.mean(np.abs(const - gemm_slice["latency_us"]) / gemm_slice["latency_us"]) * 100
    assert mape < 0.6 * const_mape, (mape, const_mape)


@pytest.mark.xdist_group("gemm_slice")
def test_training_is_seeded_and_saved_models_predict_the_same(gemm_slice, registry, tmp_path):
    ff, m1 = fit(gemm_slice, registry, max_epochs=5)
    _, m2 = fit(gemm_slice, registry, max_epochs=5)
    p1 = m1.predict_latency_us(ff)
    assert np.allclose(p1, m2.predict_latency_us(ff))
    m1.save(tmp_path / "m")
    loaded = TrainedModel.load(tmp_path / "m")
    assert np.allclose(p1, loaded.predict_latency_us(ff), rtol=1e-6)
    assert loaded.meta["train_config"]["max_epochs"] == 5


def test_output_is_a_bounded_efficiency():
    net = EfficiencyMLP(3, [8], 0.0, efficiency_max=1.5)
    net.eval()
    y = net(torch.randn(64, 3) * 100)
    assert (y >= 0).all() and (y <= 1.5).all()


def test_losses():
    p, t = torch.tensor([0.5, 1.0]), torch.tensor([0.25, 1.0])
    assert float(loss_fn("mre")(p, t)) == pytest.approx(0.5)          # (1.0 + 0) / 2
    pin = loss_fn("pinball:0.8")
    # under-prediction costs q, over-prediction 1-q (relative residuals)
    assert float(pin(torch.tensor([0.5]), torch.tensor([1.0]))) == pytest.approx(0.8 * 0.5)
    assert float(pin(torch.tensor([1.5]), torch.tensor([1.0]))) == pytest.approx(0.2 * 0.5)
    with pytest.raises(ValueError):
        loss_fn("huber")


def test_unknown_training_key_is_rejected():
    with pytest.raises(KeyError, match="lr_warmup"):
        TrainConfig.from_dict({"lr_warmup": 3})


def test_encoder_reports_categories_it_never_saw():
    """The sklearn encoder: log1p + standardise numeric, one-hot categoricals, and an unseen level is named."""
    import pandas as pd

    from synperf.model.estimator import Encoder

    tr = pd.DataFrame({"flops": [1e3, 1e6, 1e9], "ratio": [0.5, 1.0, 1.5], "impl": ["fa2", "fa3", "fa2"]})
    enc = Encoder(["flops", "ratio"], ["ratio"], ["impl"]).fit(tr)
    assert enc.names == ["flops", "ratio", "impl=fa2", "impl=fa3"]
    x = enc.transform(tr)
    # log1p then standardised: mean 0, unit variance over the training rows; one-hot columns exact
    assert abs(float(x[:, 0].mean())) < 1e-6 and abs(float(x[:, 0].std()) - 1.0) < 1e-5
    assert x[:, 2:].tolist() == [[1, 0], [0, 1], [1, 0]]
    assert list(enc.unknown) == ["", "", ""]
    te = pd.DataFrame({"flops": [1e6, 1e6], "ratio": [1.0, 1.0], "impl": ["fa3", "vllm_flash_attn_fa4"]})
    y = enc.transform(te)
    assert y[1, 2:].tolist() == [0, 0] and list(enc.unknown) == ["", "impl=vllm_flash_attn_fa4"]
    # a value far outside the training range is clipped at 8 sigma, not passed through
    far = enc.transform(pd.DataFrame({"flops": [1e30], "ratio": [100.0], "impl": ["fa2"]}))
    assert far[0, 0] == 8.0 and far[0, 1] == 8.0


def test_training_defaults_live_in_one_place():
    """The config's `training` block and TrainConfig's defaults are the same values, key by key."""
    from dataclasses import fields
    from pathlib import Path

    import yaml

    from synperf.model.estimator import TrainConfig

    config = Path(__file__).resolve().parent.parent / "config" / "config.yaml"
    training = yaml.safe_load(config.read_text())["training"]
    defaults = {f.name: getattr(TrainConfig(), f.name) for f in fields(TrainConfig)}
    assert set(training) <= set(defaults)
    assert {k: defaults[k] for k in training} == training


def test_mask_dropout_zeroes_p_of_the_inputs_and_keeps_the_expectation():
    x = torch.ones(4096, 64)
    drop = MaskDropout(0.1, seed=3).train()
    y = drop(x)
    zeroed = float((y == 0).float().mean())
    assert abs(zeroed - 0.1) < 0.005
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - 6554 / 65536)))
    assert abs(float(y.mean()) - 1.0) < 0.01
    assert torch.equal(MaskDropout(0.1, seed=3).train()(x), y)  # seeded
    assert not torch.equal(drop(x), y)  # a new mask per call
    assert torch.equal(drop.eval()(x), x)  # identity in evaluation mode
    xg = torch.ones(8, 4, requires_grad=True)
    out = MaskDropout(0.5, seed=0).train()(xg)
    out.sum().backward()
    assert torch.equal(xg.grad, out.detach())  # gradient = mask x scale
    with pytest.raises(ValueError, match="dropout probability"):
        MaskDropout(1.0)
