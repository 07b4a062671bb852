"""Pipeline stage: batch predict throughput of :func:`synperf.api.predict` on one CPU core.

The launches are the unseen-GPU rows of each experiment's feature table (their launch parameters and GPU only),
drawn with replacement (seeded) to ``n_launches`` per experiment, and predicted in one ``predict`` call per
experiment after a smaller first call (the cold start, timed on its own), with one torch thread and the process
pinned to one CPU where the OS allows it. Feature extraction (decomposer, scheduler, analyzer), the fingerprint
predictor's pipe times and correction, and the interval are all inside the timed calls.
"""

from __future__ import annotations

import os
import time

import pandas as pd

from synperf.data.io import read_table, write_json


def predict_throughput(experiments: dict, feature_tables: list[str], models_dir: str, registry_path: str,
                       out: str, n_launches: int = 20000, seed: int = 0, measured_dir: str | None = None,
                       warmup_launches: int = 1000) -> dict:
    """Time batch ``predict`` calls per experiment on one CPU core and write the rates (launches per second) as JSON.

    Per experiment, ``n_launches`` launches are drawn (with replacement, ``seed``) from the unseen-GPU rows of its
    feature table. The first call, on ``warmup_launches`` other launches (seed ``seed + 1``), is timed as the cold
    start (loading the model into the process caches); then the batch of
    ``n_launches`` is timed: the steady-state rate a caller predicting many launches gets.

    Args:
        experiments: experiment name -> its config entry (``kernel``), in the order of ``feature_tables``.
        feature_tables: each experiment's feature table (``split`` ``unseen`` rows are the launches).
        models_dir: the models folder (``models/``).
        n_launches: launches of the timed batch per experiment.
        warmup_launches: launches of the cold first call per experiment (> 0).

    Returns:
        The JSON written: ``per_experiment`` (``launches``, ``seconds``, ``launches_per_s`` of the timed batch;
        ``cold_launches``, ``cold_seconds``, ``cold_launches_per_s`` of the first call), ``launches``, ``seconds``
        and ``launches_per_s`` over all timed batches, ``cold_seconds`` and ``cold_launches_per_s`` over all first
        calls, ``threads`` and ``cpus`` (the affinity used).

    Raises:
        ValueError: ``n_launches`` or ``warmup_launches`` below 1.
    """
    import torch

    from synperf.api import predict
    from synperf.data.hardware import load_registry
    from synperf.data.schema import KERNEL_PARAMS

    if n_launches < 1 or warmup_launches < 1:
        raise ValueError(f"n_launches and warmup_launches must be >= 1, got {n_launches} and {warmup_launches}")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    torch.set_num_threads(1)
    registry = load_registry(registry_path, measured_dir)
    per = {}
    for (name, exp), table in zip(experiments.items(), feature_tables):
        kernel = exp["kernel"]
        t = read_table(table)
        t = t[t["split"].astype(str) == "unseen"]
        if t.empty:
            continue
        cols = [c for c in ("implementation", "dtype", "kv_cache_dtype", *KERNEL_PARAMS[kernel]) if c in t.columns]
        pool = t[["gpu", *dict.fromkeys(cols)]]

        def timed(n: int, random_state: int) -> float:
            launches = pool.sample(n=n, replace=True, random_state=random_state).reset_index(drop=True)
            params, gpus = launches.drop(columns="gpu"), launches["gpu"].astype(str).tolist()
            start = time.perf_counter()
            predict(kernel, params, gpus, experiment=name, models_dir=models_dir, registry=registry,
                    experiments=experiments, models="evaluation")
            return time.perf_counter() - start

        cold = timed(warmup_launches, seed + 1)
        secs = timed(n_launches, seed)
        per[name] = {"launches": n_launches, "seconds": secs, "launches_per_s": n_launches / secs,
                     "cold_launches": warmup_launches, "cold_seconds": cold,
                     "cold_launches_per_s": warmup_launches / cold}
    total_n = sum(v["launches"] for v in per.values())
    total_s = sum(v["seconds"] for v in per.values())
    cold_n = sum(v["cold_launches"] for v in per.values())
    cold_s = sum(v["cold_seconds"] for v in per.values())
    res = {"per_experiment": per, "launches": total_n, "seconds": total_s,
           "launches_per_s": total_n / total_s if total_s else float("nan"),
           "cold_launches": cold_n, "cold_seconds": cold_s,
           "cold_launches_per_s": cold_n / cold_s if cold_s else float("nan"), "threads": torch.get_num_threads(),
           "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}
    write_json(res, out)
    return res


def throughput_table(result: dict) -> pd.DataFrame:
    """One row per experiment of a :func:`predict_throughput` result, plus ``ALL``."""
    rows = [{"experiment": k, **v} for k, v in result["per_experiment"].items()]
    rows.append({"experiment": "ALL", "launches": result["launches"], "seconds": result["seconds"],
                 "launches_per_s": result["launches_per_s"]})
    return pd.DataFrame(rows)
