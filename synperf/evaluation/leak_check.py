"""The split contract, checked on the tables the models train on.

A split is honest when nothing measured on a test GPU or a held-out problem reaches training:

* no row of an unseen GPU is a training row or an early-stopping validation row;
* every training and validation row is on a seen GPU;
* no problem key (:func:`synperf.evaluation.split.problem_key`) of a held-out row on a seen GPU (``test_seen``) is
  also a training row's problem key;
* with a source-file split (``heldout_source_files``) no training row was read from a held-out file.

:func:`check_split` checks one experiment's feature table (the ``split`` and ``problem_key`` columns written
by :func:`synperf.pipeline.features.experiment_features`) and reports, per unseen GPU, the *twin share*: the share of
its rows whose problem key is a training row's on a seen GPU with an identical registry spec vector
(:func:`spec_vector`). A twin's measured latency is nearly the answer, so an unseen MAPE with a high twin
share measures lookup more than transfer. :func:`fold_leaks` checks one protocol fold the same way.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from synperf.data.io import InputError
from synperf.model.training import TrainConfig, training_rows

#: registry fields that are provenance or identity, not performance: left out of the spec vector
_NOT_SPEC = {"id", "name", "device_names", "raw", "sources_used", "datasheet_values", "memory_gb"}


class LeakError(InputError):
    """The split lets test data into training; the message names experiment, GPU and count."""


def spec_vector(spec) -> tuple:
    """Every performance field of a :class:`synperf.data.hardware.GPUSpec` (architecture, compute capability,
    SM count, clocks, bandwidths, caches, per-SM limits, peaks), in field order; identity and provenance
    fields (id, name, device names, sources, memory size) are left out. Two GPUs with equal vectors look
    identical to every feature set."""
    return tuple(getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in _NOT_SPEC)


def check_split(table: pd.DataFrame, exp_name: str, exp: dict, registry, training: dict | None = None,
                seed: int = 0) -> dict:
    """Check one experiment's feature table against the split contract.

    Args:
        table: feature table with ``gpu``, ``split`` and ``problem_key`` columns (``source_file`` too when
            ``exp`` has ``heldout_source_files``).
        exp: the experiment's config block (``seen``, ``unseen``, optional ``heldout_source_files``).
        registry: GPU registry (spec vectors for the twin share).
        training: the ``training`` config (``max_train_rows``, ``validation_frac``); its early-stopping
            validation rows (:func:`synperf.model.training.training_rows` with ``seed``) are checked too.

    Returns:
        ``{"experiment", "ok": True, "leaks": {check: 0, ...}, "rows": {split: count},
        "unseen": [{"gpu", "rows", "twin_gpus", "twin_share", "problem_share"}]}``; ``problem_share`` is the
        share of the GPU's rows whose problem key is among the training rows at all.

    Raises:
        LeakError: any check fails; one line naming the experiment, check, GPU(s) and row count.
        InputError: a needed column is missing.
    """
    need = ["gpu", "split", "problem_key"] + (["source_file"] if exp.get("heldout_source_files") else [])
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise InputError(f"leak check {exp_name}: the feature table lacks column(s) {missing}")
    gpu = table["gpu"].astype(str).to_numpy()
    split = table["split"].astype(str).to_numpy()
    pk = table["problem_key"].to_numpy()
    seen, unseen = set(map(str, exp["seen"])), set(map(str, exp.get("unseen", [])))
    train = split == "train"
    cfg = TrainConfig.from_dict({**(training or {}), "seed": seed})
    _, val_pos = training_rows(pd.Series(pk[train]), cfg)
    val = np.zeros(len(table), dtype=bool)
    val[np.flatnonzero(train)[val_pos]] = True
    heldout = np.isin(pk, pk[split == "test_seen"])
    checks = {
        "unseen_gpu_rows_in_training": train & np.isin(gpu, sorted(unseen)),
        "unseen_gpu_rows_in_validation": val & np.isin(gpu, sorted(unseen)),
        "non_seen_gpu_rows_in_training": train & ~np.isin(gpu, sorted(seen)),
        "heldout_problems_in_training": train & heldout,
        "heldout_rows_labelled_on_unseen_gpus": (split == "test_seen") & ~np.isin(gpu, sorted(seen)),
    }
    pattern = exp.get("heldout_source_files")
    if pattern:
        from_heldout_file = table["source_file"].astype("string").str.contains(pattern, regex=False)
        checks["heldout_file_rows_in_training"] = train & from_heldout_file.fillna(False).to_numpy(dtype=bool)
    for name, mask in checks.items():
        if mask.any():
            per_gpu = pd.Series(gpu[mask]).value_counts().sort_index()
            where = ", ".join(f"{g}: {n}" for g, n in per_gpu.items())
            raise LeakError(f"leak check {exp_name}: {name}: {int(mask.sum())} row(s) ({where})")
    vectors = {g: spec_vector(registry[g]) for g in sorted(set(gpu))}
    seen_gpus = sorted(seen & set(gpu))
    train_keys = {g: set(pk[train & (gpu == g)]) for g in seen_gpus}
    seen_keys = {g: set(pk[np.isin(split, ["train", "test_seen"]) & (gpu == g)]) for g in seen_gpus}
    all_train_keys = set(pk[train])
    unseen_rows = []
    for g in sorted(unseen & set(gpu)):
        keys = pk[gpu == g]
        twins = [s for s in seen_gpus if vectors[s] == vectors[g]]
        twin_train = set().union(*(train_keys[s] for s in twins)) if twins else set()
        twin_seen = set().union(*(seen_keys[s] for s in twins)) if twins else set()
        nearest, distance = nearest_spec(registry, g, seen_gpus)
        unseen_rows.append({
            "gpu": g, "rows": int(len(keys)), "twin_gpus": twins,
            "twin_share": float(np.isin(keys, list(twin_train)).mean()) if twin_train else 0.0,
            "twin_any_share": float(np.isin(keys, list(twin_seen)).mean()) if twin_seen else 0.0,
            "problem_share": float(np.isin(keys, list(all_train_keys)).mean()),
            "nearest_seen_gpu": nearest, "nearest_spec_max_rel_diff": distance,
        })
    return {"experiment": exp_name, "ok": True, "leaks": {k: 0 for k in checks},
            "rows": {k: int(v) for k, v in pd.Series(split).value_counts().sort_index().items()},
            "validation_rows": int(val.sum()), "unseen": unseen_rows}


def nearest_spec(registry, gpu: str, candidates) -> tuple[str | None, float]:
    """The candidate GPU whose numeric registry specs are closest to ``gpu``'s, and that distance: the largest
    relative difference ``|a - b| / max(a, b)`` over the numeric performance fields both define (0 = a twin;
    H200 against H100 is about 0.30, from its DRAM bandwidth)."""
    def numeric(spec):
        return {f.name: float(getattr(spec, f.name)) for f in dataclasses.fields(spec) if f.name not in _NOT_SPEC
                and isinstance(getattr(spec, f.name), (int, float)) and not isinstance(getattr(spec, f.name), bool)}

    target = numeric(registry[gpu])
    best, best_d = None, float("inf")
    for c in candidates:
        other = numeric(registry[c])
        common = [k for k in target if k in other and max(target[k], other[k]) > 0]
        d = max(abs(target[k] - other[k]) / max(target[k], other[k]) for k in common) if common else float("inf")
        if d < best_d:
            best, best_d = c, d
    return best, (round(best_d, 4) if best is not None else float("nan"))


def fold_leaks(labels: np.ndarray, gpu: np.ndarray, problem: np.ndarray, seen, unseen) -> dict[str, int]:
    """Leak counts of one protocol fold (row labels ``train``/``test_seen``/``unseen``/``unused``): training
    rows on GPUs outside ``seen`` or inside ``unseen``, and training rows whose problem key is held out on a
    seen GPU. All zero for an honest fold."""
    labels, gpu, problem = np.asarray(labels).astype(str), np.asarray(gpu).astype(str), np.asarray(problem)
    train = labels == "train"
    return {
        "unseen_gpu_rows_in_training": int((train & np.isin(gpu, list(unseen))).sum()),
        "non_seen_gpu_rows_in_training": int((train & ~np.isin(gpu, list(seen))).sum()),
        "heldout_problems_in_training": int((train & np.isin(problem, problem[labels == "test_seen"])).sum()),
    }


def check_model_meta(meta: dict, exp_name: str, exp: dict) -> None:
    """A trained model's ``meta.json`` lists only seen GPUs as training GPUs.

    Raises:
        LeakError: a training GPU is unseen (or not seen) for the experiment; the message names them.
    """
    train_gpus = set(map(str, meta.get("train_gpus", [])))
    bad = sorted(train_gpus & set(map(str, exp.get("unseen", [])))) + sorted(train_gpus - set(map(str, exp["seen"])))
    if bad:
        raise LeakError(f"leak check {exp_name}: model trained on GPU(s) {sorted(set(bad))} that are not seen GPUs "
                        f"of the experiment (seen {sorted(exp['seen'])})")
