"""Training configuration and training-row split of the efficiency MLP, without torch.

What a fit is given (:class:`TrainConfig`) and which rows it fits and validates on (:func:`training_rows`), plus the
hashes recorded in a model's ``meta.json`` (:func:`data_hash`, :func:`groups_sha256`). The leak check and the
selection stage read these without importing the network code (:mod:`synperf.model.estimator`, which re-exports
them), so their jobs start without loading torch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class TrainConfig:
    """Hyper-parameters of one MLP fit.

    The defaults are the pipeline's: config/config.yaml ``training`` lists the same values for every key it has
    (``tests/test_estimator.py`` keeps them equal), so a library caller and a pipeline run train alike.
    ``min_steps_per_epoch``, ``efficiency_min``, ``seed`` and ``threads`` are not in ``training``: the first comes
    from the experiment's chosen recipe (``selection.recipes``), the others from the pipeline.
    """

    hidden_sizes: list[int] = field(default_factory=lambda: [256, 128, 64])
    dropout: float = 0.1
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 1024
    min_steps_per_epoch: int = 0
    max_epochs: int = 300
    early_stopping_patience: int = 15
    lr_patience: int = 8
    lr_factor: float = 0.6
    min_lr: float = 1e-6
    grad_clip: float = 1.0
    validation_frac: float = 0.2
    max_train_rows: int = 20000
    loss: str = "mre"
    efficiency_max: float = 1.0
    efficiency_min: float = 1e-4
    seed: int = 0
    threads: int = 1

    @classmethod
    def from_dict(cls, d: dict | None) -> "TrainConfig":
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise KeyError(f"training config: unknown key(s) {sorted(unknown)}")
        return cls(**d)


def data_hash(df: pd.DataFrame) -> str:
    """sha256 over the row hashes of a table: identifies the training data."""
    h = pd.util.hash_pandas_object(df.reset_index(drop=True), index=False).to_numpy()
    return hashlib.sha256(h.tobytes()).hexdigest()


def groups_sha256(groups) -> str:
    """sha256 (hex) of the distinct values of ``groups`` (1-D, any dtype; compared as strings, sorted): identifies
    a set of problems whatever the row order."""
    values = sorted(set(pd.Series(np.asarray(groups)).astype(str)))
    return hashlib.sha256("\n".join(values).encode()).hexdigest()


def training_rows(groups: pd.Series, cfg: TrainConfig, rng: np.random.Generator | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the fitted and of the early-stopping validation rows among ``len(groups)`` training rows.

    The rows are first capped at ``cfg.max_train_rows`` (seeded subsample), then ``validation_frac`` of the
    distinct ``groups`` values (problem keys) go to validation whole, so validation never shares a problem with
    the fitted rows. ``rng`` defaults to ``np.random.default_rng(cfg.seed)``; :func:`train` passes its own
    generator in the same state, so calling this with the same ``groups`` and ``cfg`` gives :func:`train`'s
    split.

    Returns:
        ``(fit, validation)``: sorted int arrays of row positions.
    """
    rng = rng if rng is not None else np.random.default_rng(cfg.seed)
    idx = np.arange(len(groups))
    if cfg.max_train_rows and len(idx) > cfg.max_train_rows:
        idx = np.sort(rng.choice(idx, cfg.max_train_rows, replace=False))
    g = pd.Series(np.asarray(groups)[idx])
    uniq = g.unique()
    val_groups = set(rng.choice(uniq, max(1, int(round(cfg.validation_frac * len(uniq)))), replace=False))
    is_val = g.isin(val_groups).to_numpy()
    return idx[~is_val], idx[is_val]
