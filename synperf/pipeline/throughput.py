"""Pipeline stage: batch predict throughput of :func:`synperf.api.predict` on one CPU core.

The launches are the unseen-GPU rows of each experiment's feature table (their launch parameters and GPU only),
drawn with replacement (seeded) to ``n_launches`` per experiment, and predicted in one ``predict`` call per
experiment, with one torch thread and the process pinned to one CPU where the OS allows it. Feature extraction
(decomposer, scheduler, analyzer), the MLP and the chosen path are all inside the timed call.
"""

from __future__ import annotations

import os
import time

import pandas as pd

from synperf.data.io import read_table, write_json


def predict_throughput(experiments: dict, feature_tables: list[str], models_dir: str, registry_path: str,
                       out: str, n_launches: int = 20000, seed: int = 0, measured_dir: str | None = None) -> dict:
    """Time one batch ``predict`` per experiment and write the rates (launches per second) as JSON.

    Args:
        experiments: experiment name -> its config entry (``kernel``), in the order of ``feature_tables``.
        feature_tables: each experiment's feature table (``split`` ``unseen`` rows are the launches).
        models_dir: the models folder (``models/``).
        n_launches: launches per experiment.

    Returns:
        The JSON written: ``per_experiment`` (``launches``, ``seconds``, ``launches_per_s``), ``launches``,
        ``seconds`` and ``launches_per_s`` over all experiments, ``threads`` and ``cpus`` (the affinity used).
    """
    import torch

    from synperf.api import predict
    from synperf.data.hardware import load_registry
    from synperf.data.schema import KERNEL_PARAMS

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
        launches = t[["gpu", *dict.fromkeys(cols)]].sample(n=n_launches, replace=True, random_state=seed)
        launches = launches.reset_index(drop=True)
        params, gpus = launches.drop(columns="gpu"), launches["gpu"].astype(str).tolist()
        start = time.perf_counter()
        predict(kernel, params, gpus, experiment=name, models_dir=models_dir, registry=registry)
        secs = time.perf_counter() - start
        per[name] = {"launches": n_launches, "seconds": secs, "launches_per_s": n_launches / secs}
    total_n = sum(v["launches"] for v in per.values())
    total_s = sum(v["seconds"] for v in per.values())
    res = {"per_experiment": per, "launches": total_n, "seconds": total_s,
           "launches_per_s": total_n / total_s if total_s else float("nan"), "threads": torch.get_num_threads(),
           "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}
    write_json(res, out)
    return res


def throughput_table(result: dict) -> pd.DataFrame:
    """One row per experiment of a :func:`predict_throughput` result, plus ``ALL``."""
    rows = [{"experiment": k, **v} for k, v in result["per_experiment"].items()]
    rows.append({"experiment": "ALL", "launches": result["launches"], "seconds": result["seconds"],
                 "launches_per_s": result["launches_per_s"]})
    return pd.DataFrame(rows)
