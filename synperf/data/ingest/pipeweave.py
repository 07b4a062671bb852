"""Adapter for the SynPerf/PipeWeave authors' public data (github.com/zksainx/pipeweave).

* ``dataset/gemm_fp8_{train,test}.csv``: FP8 scaled-mm GEMMs (M, N, K), ``avg_duration``
  in microseconds, GPU in ``hardware``. The paper's split: train H20 and H800,
  test H100 and H200 (plus held-out problems on H20 and H800).
* ``pipetuning_test/moe_dse/moe_dse_<GPU>_{99,99_5,top3}.csv``: Triton fused-MoE
  design-space sweeps, one grouped GEMM per row (``weight_type`` w13 = gate_up,
  w2 = down) with its config; ``avg_duration`` in microseconds over
  ``sample_count`` runs. The three files per GPU are nested subsets of one sweep,
  so exact copies across them are removed (counted as ``nested_subset_copy``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from synperf.data.ingest.common import (
    IngestResult,
    check_latency,
    config_gpu_map,
    find_files,
    finish,
    load,
    map_names,
    rel,
)

UPSTREAM_COMMIT = "55e0317"
FP8_COLUMNS = ["M", "N", "K", "avg_duration", "hardware"]
MOE_COLUMNS = ["weight_type", "M", "E", "topk", "H", "N", "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
               "GROUP_SIZE_M", "num_warps", "num_stages", "avg_duration", "sample_count"]


def _fp8(data_dir: Path, registry) -> tuple[list[pd.DataFrame], list[Path]]:
    frames, files = [], find_files(data_dir, "pipeweave/dataset/gemm_fp8_*.csv", "pipeweave FP8 GEMM")
    for path in files:
        df = load(path, FP8_COLUMNS)
        check_latency(df["avg_duration"], path, "avg_duration")
        frames.append(pd.DataFrame({
            "gpu": df["hardware"].map(lambda n: registry.id_for_device_name(n, str(path))),
            "kernel": "gemm_fp8", "implementation": "torch_scaled_mm", "dtype": "fp8",
            "m": df["M"], "n": df["N"], "k": df["K"], "batch": 1,
            "latency_us": df["avg_duration"].astype(float), "latency_stat": "mean",
            "source": "pipeweave", "source_version": f"pipeweave@{UPSTREAM_COMMIT}",
            "source_file": rel(path, data_dir),
        }))
    return frames, files


def _moe(data_dir: Path, registry, gpu_map: dict[str, str], dropped: Counter):
    files = find_files(data_dir, "pipeweave/pipetuning_test/moe_dse/moe_dse_*.csv", "pipeweave MoE sweep")
    raw = []
    for path in files:
        token = path.stem[len("moe_dse_"):]
        for suffix in ("_99_5", "_99", "_top3"):
            if token.endswith(suffix):
                token = token[: -len(suffix)]
                break
        gpu = map_names(pd.Series([token]), gpu_map, path, "the file name").iloc[0]
        registry[gpu]
        df = load(path, MOE_COLUMNS)
        check_latency(df["avg_duration"], path, "avg_duration")
        raw.append(df[MOE_COLUMNS].assign(_gpu=gpu, _file=rel(path, data_dir)))
    if not raw:
        return [], files
    df = pd.concat(raw, ignore_index=True)
    before = len(df)
    # the files print the same mean with different float digits (9.569667 vs 9.5696666...): compare at 1 ns
    df = df.assign(_dur_ns=df["avg_duration"].mul(1000).round())
    df = df.drop_duplicates(subset=[c for c in MOE_COLUMNS if c != "avg_duration"] + ["_dur_ns", "_gpu"],
                            keep="first")
    dropped["nested_subset_copy:pipeweave_moe"] += before - len(df)
    out = pd.DataFrame({
        "gpu": df["_gpu"], "kernel": "fused_moe", "implementation": "triton_fused_moe", "dtype": "bfloat16",
        "num_tokens": df["M"], "hidden_size": df["H"], "inter_size": df["N"], "topk": df["topk"],
        "num_experts": df["E"], "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "random",
        "moe_stage": df["weight_type"].astype(str),
        "block_size_m": df["BLOCK_SIZE_M"], "block_size_n": df["BLOCK_SIZE_N"], "block_size_k": df["BLOCK_SIZE_K"],
        "group_size_m": df["GROUP_SIZE_M"], "num_warps": df["num_warps"], "num_stages": df["num_stages"],
        "latency_us": df["avg_duration"].astype(float), "latency_stat": "mean", "n_samples": df["sample_count"],
        "source": "pipeweave", "source_version": f"pipeweave@{UPSTREAM_COMMIT}", "source_file": df["_file"],
    })
    return [out], files


def ingest(data_dir: Path, registry, cfg: Mapping[str, Any]) -> IngestResult:
    """Read the pipeweave FP8 GEMM tables and fused-MoE sweeps; latencies in microseconds.

    Args:
        data_dir: the public-data folder.
        registry: the GPU registry; the FP8 tables' ``hardware`` names are its ``device_names``.
        cfg: the config block ``ingest.pipeweave``; its ``moe_gpu_map`` (required) maps the GPU token of
            ``moe_dse_<GPU>_*.csv`` (``A100``, ``PRO6000S``, ...) to registry ids.

    Raises:
        InputError: ``moe_gpu_map`` missing, unknown GPU, missing column, bad latency.
    """
    data_dir = Path(data_dir)
    dropped: Counter = Counter()
    gpu_map = config_gpu_map(cfg, "pipeweave", "moe_gpu_map")
    f1, files1 = _fp8(data_dir, registry)
    f2, files2 = _moe(data_dir, registry, gpu_map, dropped)
    return IngestResult(finish(f1 + f2, registry, "pipeweave"), dropped, [rel(p, data_dir) for p in files1 + files2])
