"""aiconfigurator's measured serving runs (``silicon_sample_public.csv``): which rows the serving simulator prices,
and every other row counted by reason.

The file (public data README, section "aiconfigurator/silicon_sample_public.csv") has one row per measured serving
point: ``backend``, ``model_path`` (Hugging Face id), ``system``, ``precision``, ``gemm_quant_mode``, ``mode``
(agg/disagg), ``isl``/``osl`` (tokens), ``batch_size`` (the client's concurrency), ``tp_size``/``pp_size``,
``silicon_ttft_ms``/``silicon_tpot_ms``.

A row is priced when it is a vLLM aggregated run of a model with a shipped config (:data:`MODELS`; the MoE ones,
:data:`MOE_MODELS`, with FP8 experts, ``moe_tp_size == tp_size``, ``moe_ep_size`` 1 and ``attention_dp_size`` 1:
each expert's intermediate width split over the TP ranks, vLLM's default without expert parallelism), pipeline
parallelism 1, and linear layers in a modelled dtype: ``gemm_quant_mode`` fp8 (vLLM's per-tensor FP8 linear) or
empty (no quantization: the checkpoint's bf16; these rows also have an empty ``precision``). Every other row gets
the first reason of :data:`REASONS` that applies; the last of them, :data:`DUPLICATE`, marks a row that repeats
an earlier one in everything but its origin (the file carries some measurements twice, from two source dumps).
The public data README lists no known-bad rows of this file, so no row is refused as known-bad; rows whose measured
TTFT is dominated by queueing behind a full KV cache are priced
like the others (the simulator models the cache and its preemptions).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ._deps import InputError

#: Hugging Face id -> shipped example config (examples/models/<name>.json) of the dense models the rows name
MODELS = {"meta-llama/Llama-3.1-70B": "llama-3.1-70b", "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
          "Qwen/Qwen3-32B": "qwen3-32b",
          "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5", "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b-fp8"}
#: Hugging Face ids of the MoE models among :data:`MODELS` (priced with tensor-parallel experts only)
MOE_MODELS = ("MiniMaxAI/MiniMax-M2.5", "Qwen/Qwen3-235B-A22B-FP8")
#: Hugging Face ids of MoE models with multi-head latent attention (refused: MLA attention not modelled)
MLA_MODELS = ("moonshotai/Kimi-K2.5",)
#: the file's ``system`` -> registry id
SYSTEMS = {"h100_sxm": "h100_sxm", "h200_sxm": "h200_sxm", "b200_sxm": "b200", "gb200": "gb200"}
#: ``gemm_quant_mode`` -> the linear layers' dtype the predictors price (empty = unquantized bf16 checkpoint)
GEMM_DTYPES = {"fp8": "fp8", "": "bfloat16"}
#: the reason of a row that repeats an earlier row in every column but ``id`` and ``silicon_data_source`` (the same
#: measurement carried by two source dumps of the file): counted once, so that it does not weigh twice in a MAPE
DUPLICATE = "duplicate of an earlier row (same configuration and measured TTFT/TPOT, another source dump)"
#: columns that name a row's origin, not its measurement (left out of the duplicate test)
ORIGIN_COLUMNS = ("id", "silicon_data_source")
REASONS = ("other framework", "disaggregated serving", "MLA attention not modelled", "fp4 weights", "int4 weights",
           "other quantization", "MoE experts not in the checkpoint's fp8 dtype", "pipeline parallel",
           "expert parallel or attention data parallel (MoE TP != TP)", "unsupported model (no shipped config)",
           "GPU not in registry", DUPLICATE)
COLUMNS = ("backend", "model_path", "system", "precision", "gemm_quant_mode", "mode", "isl", "osl", "batch_size",
           "tp_size", "pp_size", "silicon_ttft_ms", "silicon_tpot_ms")
#: columns required only when a row names one of :data:`MOE_MODELS`
MOE_COLUMNS = ("moe_quant_mode", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def read_silicon(path: str | os.PathLike) -> pd.DataFrame:
    """The file as a DataFrame with a ``reason`` column (empty string = priced), ``model`` (example name),
    ``gpu`` (registry id), ``gemm_dtype``, ``tp``, ``concurrency``.

    Raises:
        InputError: unreadable file or a missing column (named; :data:`MOE_COLUMNS` only with MoE rows).
    """
    p = Path(path)
    try:
        df = pd.read_csv(p)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise InputError(f"{p}: cannot read: {e}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{p}: missing columns {missing}")
    df = df.copy()
    absent = [c for c in MOE_COLUMNS if c not in df.columns]
    if absent and df["model_path"].isin(MOE_MODELS).any():
        raise InputError(f"{p}: missing columns {absent} (needed by the MoE rows)")
    for c in absent:
        df[c] = pd.NA
    q = df["gemm_quant_mode"].fillna("").astype(str)
    prec = df["precision"].fillna("").astype(str)
    reason = pd.Series("", index=df.index)

    def mark(cond, why):
        reason[(reason == "") & cond] = why

    mark(df["backend"] != "vllm", "other framework")
    mark(df["mode"] != "agg", "disaggregated serving")
    mark(df["model_path"].isin(MLA_MODELS), "MLA attention not modelled")
    mark((prec == "fp4") | q.str.contains("fp4"), "fp4 weights")
    mark((prec == "int4") | q.str.contains("int4"), "int4 weights")
    mark(~q.isin(list(GEMM_DTYPES)), "other quantization")
    moe = df["model_path"].isin(MOE_MODELS)
    mark(moe & (df["moe_quant_mode"].fillna("").astype(str) != "fp8"), "MoE experts not in the checkpoint's fp8 dtype")
    mark(df["pp_size"].fillna(1) != 1, "pipeline parallel")
    tp = df["tp_size"].fillna(1)
    mark(moe & ((df["moe_tp_size"].fillna(tp) != tp) | (df["moe_ep_size"].fillna(1) != 1)
                | (df["attention_dp_size"].fillna(1) != 1)),
         "expert parallel or attention data parallel (MoE TP != TP)")
    mark(~df["model_path"].isin(list(MODELS)), "unsupported model (no shipped config)")
    mark(~df["system"].isin(list(SYSTEMS)), "GPU not in registry")
    mark(df.duplicated(subset=[c for c in df.columns if c not in ORIGIN_COLUMNS], keep="first"), DUPLICATE)
    df["reason"] = reason
    df["model"] = df["model_path"].map(MODELS)
    df["gpu"] = df["system"].map(SYSTEMS)
    df["gemm_dtype"] = q.map(GEMM_DTYPES)
    df["tp"] = df["tp_size"].fillna(1).astype(int)
    df["concurrency"] = df["batch_size"].fillna(0).astype(int)
    return df


def counts_by_reason(df: pd.DataFrame) -> pd.DataFrame:
    """Rows per reason (``priced`` for the priced ones), every row counted once: columns ``reason``, ``rows``."""
    r = df["reason"].where(df["reason"] != "", "priced")
    out = r.value_counts().rename_axis("reason").reset_index(name="rows")
    return out.sort_values(["reason"], key=lambda s: s.map(lambda x: (x != "priced", x))).reset_index(drop=True)


def public_inputs(registry_file: str | os.PathLike, measured_dir: str | os.PathLike | None,
                  data_dir: str | os.PathLike, collective_gpu_map: dict | None = None):
    """What the serving rules read from the public data folder ``data_dir``: ``(registry, collectives,
    silicon_csv)``: the GPU registry (``registry_file`` with the characterization records of ``measured_dir``), the
    pipeweave NCCL tables (``pipeweave/dataset/collective``, :meth:`synperf.e2e.collectives.CollectiveModel.from_dir`
    with the config's ``e2e.collective_gpu_map``) and aiconfigurator's silicon file
    (``aiconfigurator/silicon_sample_public.csv``).

    Raises:
        InputError: as :func:`synperf.data.hardware.load_registry` and
            :meth:`synperf.e2e.collectives.CollectiveModel.from_dir`.
    """
    from ._deps import CollectiveModel, load_registry

    registry = load_registry(registry_file, measured_dir)
    data = Path(data_dir)
    collectives = CollectiveModel.from_dir(data / "pipeweave" / "dataset" / "collective", registry,
                                           collective_gpu_map)
    return registry, collectives, data / "aiconfigurator" / "silicon_sample_public.csv"
