"""Adapter for Vidur's ``mlp.csv`` profiles (github.com/microsoft/vidur).

One row per (model, TP degree, token count) holds the fp16 non-attention ops of
one transformer layer, times in milliseconds (``time_stats.<op>.median`` etc.).
Per-GPU shapes, with head dim ``d = E / n_head`` (public-data README):

* ``attn_pre_proj``: GEMM [T, E] x [E, (n_head + 2 n_kv_head) d / tp]
* ``attn_post_proj``: GEMM [T, E/tp] x [E/tp, E]
* ``mlp_up_proj``: GEMM [T, E] x [E, 2F/tp] (F/tp if not gated)
* ``mlp_down_proj``: GEMM [T, F/tp] x [F/tp, E]
* ``mlp_act``: SiLU-and-Mul [T, 2F/tp] -> [T, F/tp] (phi-2 uses GELU: dropped)
* ``input_layernorm``, ``post_attention_layernorm``: RMSNorm over E (phi-2 uses LayerNorm: dropped)

Every ``time_stats.<op>.*`` column goes through :data:`OPS`: an op that is not listed there, or is listed
as not modelled (``attn_rope``, ``add``, ``emb``), is counted as ``unsupported_op:vidur:<op>`` (rows with a
value). A file that lacks an op it always carries (:data:`REQUIRED_OPS`, plus ``post_attention_layernorm``
for RMSNorm models) is refused with an InputError naming the file and the column, so renamed columns cannot
make a family's rows vanish.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from synperf.data.ingest.common import (
    MS_TO_US,
    IngestResult,
    check_latency,
    config_gpu_map,
    find_files,
    finish,
    load,
    map_names,
    rel,
)

UPSTREAM_COMMIT = "7d47513"
SHAPE_COLUMNS = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "num_tokens",
                 "num_tensor_parallel_workers"]
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
NORM_OPS = ("input_layernorm", "post_attention_layernorm")
# models whose norm is LayerNorm and whose activation is GELU (not RMSNorm / SiLU&Mul)
NON_LLAMA_MODELS = {"microsoft/phi-2"}
#: every op of ``mlp.csv`` -> the family it is read as (None: measured but not a modelled family)
OPS = {**{op: "gemm" for op in GEMM_OPS}, **{op: "rmsnorm" for op in NORM_OPS}, "mlp_act": "silu_mul",
       "attn_rope": None, "add": None, "emb": None}
#: ops every ``mlp.csv`` carries (public-data README); RMSNorm models also carry ``post_attention_layernorm``
REQUIRED_OPS = GEMM_OPS + ("input_layernorm", "mlp_act")


def _op_frame(df: pd.DataFrame, op: str, path: Path) -> pd.DataFrame:
    col = f"time_stats.{op}.median"
    check_latency(df[col], path, col)
    out = pd.DataFrame({"latency_us": df[col].astype(float) * MS_TO_US, "latency_stat": "median"}, index=df.index)
    for stat in ("std", "min", "max"):
        c = f"time_stats.{op}.{stat}"
        if c in df.columns:
            out[f"latency_{stat}_us"] = df[c].astype(float) * MS_TO_US
    return out


def ingest(data_dir: Path, registry, cfg: Mapping[str, Any]) -> IngestResult:
    """Read every ``vidur/compute/<gpu>/<org>/<model>/mlp.csv``; latencies in microseconds.

    Args:
        data_dir: the public-data folder.
        registry: the GPU registry.
        cfg: the config block ``ingest.vidur``; its ``gpu_map`` (required) maps Vidur's GPU folder names
            (``a100``, ``a40``, ``h100``) to registry ids.

    Raises:
        InputError: ``gpu_map`` missing, unknown GPU folder, a missing shape column or a missing op an ``mlp.csv``
            always carries (:data:`REQUIRED_OPS`; the message names the file and the column), bad latency.
    """
    data_dir = Path(data_dir)
    gpu_map = config_gpu_map(cfg, "vidur", "gpu_map")
    dropped: Counter = Counter()
    frames, files = [], []
    for path in find_files(data_dir, "vidur/compute/*/*/*/mlp.csv", "vidur"):
        parts = path.relative_to(data_dir).parts  # vidur, compute, gpu, org, model, mlp.csv
        gpu = map_names(pd.Series([parts[2]]), gpu_map, path, "the folder name").iloc[0]
        if gpu not in registry.ids:
            registry[gpu]  # raises a clear error
        model = f"{parts[3]}/{parts[4]}"
        llama_like = model not in NON_LLAMA_MODELS
        required = REQUIRED_OPS + (("post_attention_layernorm",) if llama_like else ())
        df = load(path, SHAPE_COLUMNS + [f"time_stats.{op}.median" for op in required])
        for op in sorted({c.split(".")[1] for c in df.columns if c.startswith("time_stats.") and c.count(".") >= 2}):
            if OPS.get(op) is None:
                dropped[f"unsupported_op:vidur:{op}"] += int(df[f"time_stats.{op}.median"].notna().sum()
                                                            if f"time_stats.{op}.median" in df.columns else len(df))
        T = df["num_tokens"].astype("int64")
        E = df["n_embd"].astype("int64")
        F = df["n_expanded_embd"].astype("int64")
        tp = df["num_tensor_parallel_workers"].astype("int64")
        d = E // df["n_head"].astype("int64")
        gated = df["use_gated_mlp"].astype(str).str.lower().isin(["true", "1"])
        base = {
            "gpu": gpu, "dtype": "float16", "source": "vidur",
            # one profiling code version for every model folder: the same shape profiled for two models is one
            # measurement repeated (reduced to the median), the model stays in source_file
            "source_version": f"vidur@{UPSTREAM_COMMIT} sarathi-serve",
            "source_file": rel(path, data_dir),
        }
        shapes = {
            "attn_pre_proj": (T, (df["n_head"] + 2 * df["n_kv_head"]) * d // tp, E),
            "attn_post_proj": (T, E, E // tp),
            "mlp_up_proj": (T, (F * 2).where(gated, F) // tp, E),
            "mlp_down_proj": (T, E, F // tp),
        }
        for op, (m, n, k) in shapes.items():
            f = _op_frame(df, op, path).assign(kernel="gemm", implementation="cublas", m=m, n=n, k=k, batch=1, **base)
            frames.append(f)
        for op in NORM_OPS:
            col = f"time_stats.{op}.median"
            if col not in df.columns:  # phi-2 has no post-attention norm
                continue
            if not llama_like:
                dropped["unsupported_op:vidur:layernorm"] += len(df)
                continue
            frames.append(_op_frame(df, op, path).assign(
                kernel="rmsnorm", implementation="vllm_rms_norm", num_tokens=T, hidden_size=E, **base))
        keep = gated & llama_like
        dropped["unsupported_op:vidur:gelu"] += int((~keep).sum())
        sub = df[keep]
        if len(sub):
            frames.append(_op_frame(sub, "mlp_act", path).assign(
                kernel="silu_mul", implementation="vllm_silu_and_mul", num_tokens=T[keep],
                hidden_size=(F // tp)[keep], **base))
        files.append(rel(path, data_dir))
    return IngestResult(finish(frames, registry, "vidur"), dropped, files)
