"""Per-family efficiency MLP (SynPerf performance estimator, method.md section 4).

Input: the feature set's numeric features as ``log1p(x)`` (``linear`` ones as they
are), standardised with the training rows' mean and std, plus one-hot categorical
features. Network: hidden layers (default 256, 128, 64), each Linear, BatchNorm1d,
ReLU, :class:`MaskDropout`; output Linear then ``efficiency_max · sigmoid``.

Deliberate difference from the published layer order (Linear, ReLU, BatchNorm1d):
we normalise before the ReLU. With ReLU first, a unit that fires only for rare rows
(e.g. GEMMs with m <= 4) has a tiny batch variance, BatchNorm multiplies it by ~40,
and the sigmoid saturates at ~1e-11 for those rows, where its gradient vanishes and
they never recover (found by ``tests/test_estimator.py``). Standardised inputs are
also clipped at +-8 sigma. Prediction:
``latency_us = theoretical_time_us / efficiency``.

Training (defaults follow the published recipe, with epoch budgets from config):
AdamW, ReduceLROnPlateau, gradient clipping, early stopping on a validation split
of the seen GPUs' training rows; loss ``mre`` (mean relative error of efficiency,
the paper's) or ``pinball:<q>`` (quantile loss, e.g. 0.8 for a P80 ceiling).
Everything is seeded; the model directory holds ``model.pt`` (state dict) and
``meta.json`` (features, transforms, categorical levels, training GPUs, data hash,
hyper-parameters, training curve).
"""

from __future__ import annotations

import copy
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from synperf.data.io import InputError, atomic_path, brief_error, read_artefact, write_json
from synperf.model.features import FeatureFrame
from synperf.model.training import TrainConfig, data_hash, groups_sha256, training_rows

__all__ = ["CLIP_SIGMA", "EfficiencyMLP", "Encoder", "MaskDropout", "TrainConfig", "TrainedModel",
           "batch_rows", "data_hash", "fit_network", "groups_sha256", "loss_fn", "train", "training_rows"]


class MaskDropout(nn.Module):
    """Inverted dropout whose mask is drawn by a seeded NumPy generator: in training mode each element is zeroed
    with probability ``p`` (rounded to a multiple of 1/65536) and the rest are scaled by ``1 / (1 - p)``; in
    evaluation mode the input passes unchanged. Same expectation as ``torch.nn.Dropout``.

    Why not ``torch.nn.Dropout``: on CPU its mask comes from ``bernoulli_``, which took about a fifth of a training
    step of the default network (1024-row batches, one thread; measured with ``torch.profiler``); 16-bit integers
    from NumPy's PCG64 compared against a threshold cost about a quarter of that.

    Args:
        p: drop probability in [0, 1).
        seed: seed (or ``numpy.random.SeedSequence``) of the mask generator.

    Raises:
        ValueError: ``p`` outside [0, 1).
    """

    def __init__(self, p: float, seed=0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p
        self.threshold = int(round(p * 65536))
        self.scale = np.float32(1.0 / (1.0 - self.threshold / 65536))
        self.rng = np.random.default_rng(seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.threshold == 0:
            return x
        keep = self.rng.integers(0, 65536, size=tuple(x.shape), dtype=np.uint16) >= self.threshold
        mask = keep.astype(np.float32)
        mask *= self.scale
        return x * torch.from_numpy(mask)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class EfficiencyMLP(nn.Module):
    """MLP mapping a feature vector [batch, n_in] to an efficiency in (0, efficiency_max).

    Hidden blocks are Linear, BatchNorm1d, ReLU, Dropout (see the module docstring for why
    BatchNorm comes before the ReLU).
    """

    def __init__(self, n_in: int, hidden: list[int], dropout: float, efficiency_max: float = 1.0, seed: int = 0):
        super().__init__()
        layers: list[nn.Module] = []
        prev = n_in
        seeds = np.random.SeedSequence(seed).spawn(len(hidden))
        for h, s in zip(hidden, seeds):
            layers += [nn.Linear(prev, h), nn.BatchNorm1d(h), nn.ReLU(), MaskDropout(dropout, s)]
            prev = h
        layers.append(nn.Linear(prev, 1))
        self.body = nn.Sequential(*layers)
        self.efficiency_max = efficiency_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.efficiency_max * torch.sigmoid(self.body(x)).squeeze(-1)


def loss_fn(kind: str):
    """Return ``f(pred, target) -> scalar`` for ``mre`` (mean relative error of the efficiency, the paper's),
    ``log_ratio`` (mean ``|log(pred / target)|``, symmetric in over- and under-prediction) or ``pinball:<q>``.

    Raises:
        ValueError: unknown loss name or q outside (0, 1).
    """
    if kind == "mre":
        return lambda p, t: (torch.abs(p - t) / t).mean()
    if kind == "log_ratio":  # |log(p / t)|: over- and under-prediction by the same factor cost the same
        return lambda p, t: torch.abs(torch.log(p) - torch.log(t)).mean()
    if kind.startswith("pinball:"):
        q = float(kind.split(":", 1)[1])
        if not 0 < q < 1:
            raise ValueError(f"pinball quantile must be in (0, 1), got {q}")

        def pinball(p, t):
            r = (t - p) / t
            return torch.maximum(q * r, (q - 1) * r).mean()

        return pinball
    raise ValueError(f"unknown loss {kind!r}; expected 'mre', 'log_ratio' or 'pinball:<q>'")


CLIP_SIGMA = 8.0


class Encoder:
    """Feature transform fitted on training rows (scikit-learn ``ColumnTransformer``): ``log1p`` then
    ``StandardScaler`` for the numeric features, ``StandardScaler`` for the linear ones, ``OneHotEncoder`` for the
    categorical ones; standardised values are clipped at +-:data:`CLIP_SIGMA`.

    A parameter a row does not have (e.g. no recorded Triton config, ``<NA>``) is encoded as 0 before the scaler.
    A categorical value not seen in training has no column of its own: it is encoded as all zeros and reported,
    never silently, in :attr:`unknown` after each :meth:`transform` (and by ``api.predict`` per row).
    """

    def __init__(self, numeric: list[str], linear: list[str], categorical: list[str]):
        self.numeric = [c for c in numeric if c not in linear]
        self.linear = list(linear)
        self.categorical = list(categorical)
        self.transformer = None
        self.unknown: pd.Series | None = None

    def _dense(self, frame: pd.DataFrame) -> pd.DataFrame:
        num = frame[self.numeric].astype("float64").fillna(0.0).clip(lower=0.0)
        lin = frame[self.linear].astype("float64").fillna(0.0)
        cat = frame[self.categorical].astype(str)
        return pd.concat([num, lin, cat], axis=1).set_axis(self.numeric + self.linear + self.categorical, axis=1)

    def _make(self):
        from sklearn.compose import ColumnTransformer
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

        return ColumnTransformer([
            ("log1p", make_pipeline(FunctionTransformer(np.log1p, feature_names_out="one-to-one"), StandardScaler()),
             self.numeric),
            ("linear", StandardScaler(), self.linear),
            ("onehot", OneHotEncoder(handle_unknown="ignore", sparse_output=False, dtype=np.float64), self.categorical),
        ], sparse_threshold=0.0)

    def fit(self, frame: pd.DataFrame) -> "Encoder":
        self.transformer = self._make().fit(self._dense(frame))
        return self

    @property
    def levels(self) -> dict[str, list[str]]:
        """Categorical levels seen in training, per column."""
        if not self.categorical:
            return {}
        cats = self.transformer.named_transformers_["onehot"].categories_
        return {c: [str(v) for v in lv] for c, lv in zip(self.categorical, cats)}

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """Encoded features, float32 ``[rows, len(names)]``; sets :attr:`unknown` (per row, the
        ``column=value`` pairs not seen in training, ``""`` when none).

        Raises:
            ValueError: a non-finite value after the transform (a NaN/inf feature).
        """
        dense = self._dense(frame)
        out = self.transformer.transform(dense)
        n_scaled = len(self.numeric) + len(self.linear)
        out[:, :n_scaled] = np.clip(out[:, :n_scaled], -CLIP_SIGMA, CLIP_SIGMA)
        unknown = pd.Series("", index=frame.index, dtype=object)
        for c, lv in self.levels.items():
            miss = ~dense[c].isin(lv)
            if miss.any():
                unknown[miss] = unknown[miss] + np.where(unknown[miss] == "", "", ";") + c + "=" + dense.loc[miss, c]
        self.unknown = unknown
        if not np.isfinite(out).all():
            raise ValueError("non-finite feature value after transform; check the feature set for NaN/inf")
        return out.astype("float32")

    @property
    def names(self) -> list[str]:
        return self.numeric + self.linear + [f"{c}={v}" for c, lv in self.levels.items() for v in lv]

    def to_dict(self) -> dict:
        """A readable description (column lists, scaler means and scales, levels) for ``meta.json``; the fitted
        transformer itself is saved by :meth:`TrainedModel.save`."""
        ct = self.transformer
        desc = {"numeric": self.numeric, "linear": self.linear, "categorical": self.categorical, "levels": self.levels}
        if self.numeric:
            sc = ct.named_transformers_["log1p"][-1]
            desc["log1p_mean"], desc["log1p_scale"] = sc.mean_.tolist(), sc.scale_.tolist()
        if self.linear:
            sc = ct.named_transformers_["linear"]
            desc["linear_mean"], desc["linear_scale"] = sc.mean_.tolist(), sc.scale_.tolist()
        return desc


@dataclass
class TrainedModel:
    """A fitted estimator: network, encoder and metadata."""

    net: EfficiencyMLP
    encoder: Encoder
    meta: dict

    def predict_efficiency(self, ff: FeatureFrame, batch: int = 2048) -> np.ndarray:
        """Efficiency per row of ``ff.frame`` (float64, in (0, efficiency_max)).

        The rows go through the network ``batch`` at a time: in evaluation mode every layer treats rows
        independently, and blocks of 2,048 rows keep a layer's activations (2,048 x 256 float32, 2 MB) in cache,
        where 20,000 rows at once made the BatchNorm and ReLU passes memory-bound (about 1.5x slower on one core;
        the outputs were bit-identical on this project's CPU machines).
        """
        x = self.encoder.transform(ff.frame)
        self.net.eval()
        out = []
        with torch.no_grad():
            for i in range(0, len(x), batch):
                out.append(self.net(torch.from_numpy(x[i:i + batch])).numpy())
        return np.concatenate(out).astype("float64") if out else np.zeros(0)

    def predict_latency_us(self, ff: FeatureFrame) -> np.ndarray:
        """``theoretical_time_us / efficiency`` per row, microseconds (efficiency floored at
        ``efficiency_min`` so an underflowing sigmoid never gives an infinite latency)."""
        eff = np.maximum(self.predict_efficiency(ff), self.meta["train_config"]["efficiency_min"])
        return ff.frame["theoretical_time_us"].to_numpy(dtype="float64") / eff

    def save(self, directory: str | os.PathLike) -> None:
        """Write ``model.pt`` (network weights), ``encoder.joblib`` (the fitted :class:`Encoder`) and ``meta.json``
        atomically into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        import joblib

        with atomic_path(directory / "model.pt") as tmp:
            torch.save(self.net.state_dict(), tmp)
        with atomic_path(directory / "encoder.joblib") as tmp:
            joblib.dump(self.encoder, tmp)
        write_json({**self.meta, "encoder": self.encoder.to_dict()}, directory / "meta.json")

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "TrainedModel":
        """Load a model written by :meth:`save`.

        Raises:
            InputError: ``model.pt``, ``encoder.joblib`` or ``meta.json`` missing, truncated or not what
                :meth:`save` writes (:func:`synperf.data.io.read_artefact`); the message names the file.
        """
        directory = Path(directory)
        meta = read_artefact(directory / "meta.json", keys=("encoder", "train_config"))
        meta.pop("encoder")
        enc = read_artefact(directory / "encoder.joblib")
        if not isinstance(enc, Encoder):
            raise InputError(f"{directory / 'encoder.joblib'}: expected an Encoder, found {type(enc).__name__}; "
                             "rerun the train stage")
        cfg = meta["train_config"]
        net = EfficiencyMLP(len(enc.names), cfg["hidden_sizes"], cfg["dropout"], cfg["efficiency_max"])
        try:
            net.load_state_dict(read_artefact(directory / "model.pt"))
        except (RuntimeError, TypeError, AttributeError) as exc:  # weights of another shape, or not a state dict
            raise InputError(f"{directory / 'model.pt'}: weights do not fit the network of meta.json "
                             f"({brief_error(exc)}); rerun the train stage") from None
        net.eval()
        return cls(net, enc, meta)


def fit_network(net: nn.Module, batch_loss, n_rows: int, cfg: TrainConfig, val_loss=None, *,
                optimizer_lr: float | None = None) -> dict:
    """The one training loop of every network here (the efficiency MLP and the NeuSight baseline's).

    Seeded mini-batch AdamW over ``n_rows`` rows (``cfg.lr``, ``cfg.weight_decay``, batches of
    :func:`batch_rows` rows,
    gradient norm clipped at ``cfg.grad_clip``, up to ``cfg.max_epochs`` epochs). With ``val_loss`` (a callable
    returning the validation loss) the step size follows ReduceLROnPlateau (``lr_patience``, ``lr_factor``,
    ``min_lr``), training stops after ``early_stopping_patience`` epochs without improvement and the best epoch's
    weights are restored; without it every epoch runs and the last weights stay.

    Args:
        batch_loss: ``f(row_positions: LongTensor) -> scalar loss`` of one mini-batch.
        optimizer_lr: step size overriding ``cfg.lr``.

    Returns:
        ``{"best_val_loss", "epochs_run", "curve"}``; ``curve`` is ``[(epoch, mean train loss, val loss), ...]``
        (val loss NaN without ``val_loss``).
    """
    opt = torch.optim.AdamW(net.parameters(), lr=optimizer_lr or cfg.lr, weight_decay=cfg.weight_decay)
    sched = (torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=cfg.lr_patience, factor=cfg.lr_factor,
                                                        min_lr=cfg.min_lr) if val_loss is not None else None)
    gen = torch.Generator().manual_seed(cfg.seed)
    batch = batch_rows(n_rows, cfg)
    best, best_state, since, curve = float("inf"), None, 0, []
    for epoch in range(cfg.max_epochs):
        net.train()
        perm = torch.randperm(n_rows, generator=gen)
        total = 0.0
        for i in range(0, n_rows, batch):
            b = perm[i:i + batch]
            if len(b) < 2:  # BatchNorm needs 2 rows
                continue
            opt.zero_grad()
            loss = batch_loss(b)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
            opt.step()
            total += float(loss.detach()) * len(b)
        if val_loss is None:
            curve.append((epoch, total / max(n_rows, 1), float("nan")))
            continue
        net.eval()
        with torch.no_grad():
            val = float(val_loss())
        sched.step(val)
        curve.append((epoch, total / max(n_rows, 1), val))
        if val < best - 1e-6:
            best, best_state, since = val, copy.deepcopy(net.state_dict()), 0
        else:
            since += 1
            if since >= cfg.early_stopping_patience:
                break
    if best_state is not None:
        net.load_state_dict(best_state)
    net.eval()
    return {"best_val_loss": best, "epochs_run": len(curve), "curve": curve, "batch_size": batch}


#: smallest mini-batch :func:`batch_rows` shrinks to
MIN_BATCH_ROWS = 64


def batch_rows(n_rows: int, cfg: TrainConfig) -> int:
    """Rows per mini-batch: ``cfg.batch_size``, or with ``cfg.min_steps_per_epoch`` > 0 the largest power of two
    that gives at least that many steps per epoch over ``n_rows`` rows, between :data:`MIN_BATCH_ROWS` and
    ``cfg.batch_size``. A small training table (a few thousand rows) then takes as many optimiser steps per
    epoch as a large one instead of one or two.
    """
    if cfg.min_steps_per_epoch <= 0 or n_rows <= 0:
        return cfg.batch_size
    fit = 2 ** int(np.floor(np.log2(max(n_rows / cfg.min_steps_per_epoch, 1.0))))
    return int(min(cfg.batch_size, max(MIN_BATCH_ROWS, fit)))


def train(ff: FeatureFrame, latency_us: pd.Series, groups: pd.Series, cfg: TrainConfig,
          extra_meta: dict | None = None, log=print) -> TrainedModel:
    """Fit an efficiency MLP on the rows of ``ff.frame``.

    Args:
        ff: features of the training rows (seen GPUs, training shapes).
        latency_us: measured latency per row, microseconds (> 0).
        groups: a problem key per row (:func:`synperf.evaluation.split.problem_key`); the validation split holds out
            whole groups (:func:`validation_mask`) so early stopping sees unseen problems.
        cfg: hyper-parameters.
        extra_meta: stored in ``meta.json`` (e.g. training GPUs, data hash).

    Returns:
        The model with the best validation loss; its meta records ``n_train_rows``, ``n_val_rows`` and
        ``validation_groups_sha256`` (:func:`groups_sha256` of the validation rows' ``groups``), so that a caller
        reproducing the split with :func:`training_rows` can check it got the same validation problems.
    """
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(max(1, cfg.threads))
    rng = np.random.default_rng(cfg.seed)
    frame = ff.frame
    eff = (frame["theoretical_time_us"] / latency_us).to_numpy(dtype="float64")
    n_clipped = int(((eff > cfg.efficiency_max * 0.999) | (eff < cfg.efficiency_min)).sum())
    eff = eff.clip(cfg.efficiency_min, cfg.efficiency_max * 0.999)
    tr, va = training_rows(groups, cfg, rng)
    if len(tr) == 0 or len(va) == 0:
        raise ValueError(f"too few training rows ({len(tr) + len(va)}) for a validation split")
    enc = Encoder(ff.numeric, ff.linear, ff.categorical).fit(frame.iloc[tr])
    x_tr = torch.from_numpy(enc.transform(frame.iloc[tr]))
    x_va = torch.from_numpy(enc.transform(frame.iloc[va]))
    y_tr = torch.from_numpy(eff[tr].astype("float32"))
    y_va = torch.from_numpy(eff[va].astype("float32"))
    net = EfficiencyMLP(x_tr.shape[1], cfg.hidden_sizes, cfg.dropout, cfg.efficiency_max, seed=cfg.seed)
    lossf = loss_fn(cfg.loss)
    fitted = fit_network(net, lambda b: lossf(net(x_tr[b]), y_tr[b]), len(x_tr), cfg,
                         val_loss=lambda: lossf(net(x_va), y_va))
    best, curve = fitted["best_val_loss"], fitted["curve"]
    meta = {
        "train_config": asdict(cfg),
        "n_train_rows": int(len(tr)),
        "n_val_rows": int(len(va)),
        "validation_groups_sha256": groups_sha256(np.asarray(groups)[va]),
        "n_target_clipped": n_clipped,
        "best_val_loss": best,
        "epochs_run": len(curve),
        "batch_size": fitted["batch_size"],
        "curve": [[e, round(a, 6), round(b, 6)] for e, a, b in curve],
        **(extra_meta or {}),
    }
    log(f"trained: {len(tr)} rows, {len(va)} validation rows, {len(curve)} epochs, best val loss {best:.4f}")
    return TrainedModel(net, enc, meta)
