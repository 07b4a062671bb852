"""Adapter for aiconfigurator's vLLM collector tables (github.com/ai-dynamo/aiconfigurator).

Layout: ``aiconfigurator/<gpu>/{gemm,attention,moe}/vllm/<version>/*.parquet``;
``latency`` is in milliseconds (mean over timed runs). Known-bad rows, from the
public-data README: L40S prefill rows run by ``vllm_flashinfer`` (fp8 KV), and
isolated GEMM spikes (a latency more than 3x both neighbours along ``m`` for the
same GPU, dtype, n, k).

Unmodelled inputs are dropped and counted, never read as something else:

* a table file with no reader in :data:`_TABLES` (e.g. an MLA table) counts its rows as
  ``unsupported_table:aiconfigurator:<file name>``;
* a ``kernel_source`` not listed for its family (:data:`GEMM_SOURCES`, :data:`MOE_IMPLEMENTATIONS`; attention
  labels pass through unchanged and must be listed in
  :data:`synperf.data.implementations.IMPLEMENTATIONS`) counts as
  ``unsupported_implementation:<family>:<kernel_source>``; a GEMM dtype not in :data:`GEMM_KERNEL` as
  ``unsupported_dtype:gemm:<dtype>``.

Every row read is thus either in the table or under one dropped-rows key.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from synperf.data.implementations import IMPLEMENTATIONS
from synperf.data.ingest.common import MS_TO_US, IngestResult, check_latency, find_files, finish, load, rel
from synperf.data.io import InputError

UPSTREAM_COMMIT = "095f58a"
_COMMON = ["device", "version", "kernel_source", "latency"]

GEMM_KERNEL = {"bfloat16": "gemm", "fp8": "gemm_fp8", "fp8_block": "gemm_fp8"}
# bf16 vllm_default goes to torch.nn.functional.linear (cuBLAS); fp8 paths quantize the activation
# inside the timing (public-data README).
GEMM_IMPL = {"bfloat16": "cublas", "fp8": "vllm_fp8_per_tensor", "fp8_block": "vllm_fp8_block"}
MOE_IMPLEMENTATIONS = {"vllm_fused_moe": "triton_fused_moe"}
#: GEMM ``kernel_source`` labels read (the implementation then follows the dtype, :data:`GEMM_IMPL`)
GEMM_SOURCES = ("vllm_default",)
SPIKE_FACTOR = 3.0


def _base(df: pd.DataFrame, path: Path, root: Path, registry) -> pd.DataFrame:
    check_latency(df["latency"], path, "latency")
    gpu = df["device"].map(lambda n: registry.id_for_device_name(n, str(path)))
    return pd.DataFrame({
        "gpu": gpu,
        "latency_us": df["latency"].astype(float) * MS_TO_US,
        "latency_stat": "mean",
        "source": "aiconfigurator",
        "source_version": f"aiconfigurator@{UPSTREAM_COMMIT} vllm {df['version'].iloc[0]}" if len(df) else "",
        "source_file": rel(path, root),
    }, index=df.index)


def gemm_spikes(gpu: pd.Series, dtype: pd.Series, m: pd.Series, n: pd.Series, k: pd.Series,
                latency: pd.Series, factor: float = SPIKE_FACTOR) -> pd.Series:
    """Mark isolated spikes: latency > ``factor`` x both neighbours along m for the same (gpu, dtype, n, k).

    Duplicate keys are compared through their median. Returns a boolean mask aligned with the inputs.
    """
    d = pd.DataFrame({"gpu": gpu, "dtype": dtype, "m": m, "n": n, "k": k, "lat": latency})
    med = d.groupby(["gpu", "dtype", "n", "k", "m"], sort=True)["lat"].median().reset_index()
    grp = med.groupby(["gpu", "dtype", "n", "k"], sort=False)["lat"]
    prev, nxt = grp.shift(1), grp.shift(-1)
    spike = (med["lat"] > factor * prev) & (med["lat"] > factor * nxt)
    keys = med.loc[spike.fillna(False), ["gpu", "dtype", "n", "k", "m"]]
    if keys.empty:
        return pd.Series(False, index=d.index)
    marked = d.merge(keys.assign(_spike=True), on=["gpu", "dtype", "n", "k", "m"], how="left")["_spike"]
    return pd.Series(marked.fillna(False).to_numpy(dtype=bool), index=d.index)


def _drop_unsupported_sources(df, allowed, family, dropped):
    """Rows whose ``kernel_source`` is in ``allowed``; the others are counted per label."""
    unsupported = ~df["kernel_source"].astype(str).isin(list(allowed))
    for ks, cnt in df.loc[unsupported, "kernel_source"].astype(str).value_counts().items():
        dropped[f"unsupported_implementation:{family}:{ks}"] += int(cnt)
    return df[~unsupported]


def _gemm(df, path, root, registry, dropped):
    df = _drop_unsupported_sources(df.copy(), GEMM_SOURCES, "gemm", dropped)
    unsupported = ~df["gemm_dtype"].isin(list(GEMM_KERNEL))
    for dt, cnt in df.loc[unsupported, "gemm_dtype"].value_counts().items():
        dropped[f"unsupported_dtype:gemm:{dt}"] += int(cnt)
    df = df[~unsupported]
    out = _base(df, path, root, registry)
    out["kernel"] = df["gemm_dtype"].map(GEMM_KERNEL)
    out["implementation"] = df["gemm_dtype"].map(GEMM_IMPL)
    out["dtype"] = df["gemm_dtype"]
    out["m"], out["n"], out["k"], out["batch"] = df["m"], df["n"], df["k"], 1
    spikes = gemm_spikes(out["gpu"], out["dtype"], out["m"], out["n"], out["k"], out["latency_us"])
    dropped["known_bad:isolated_gemm_spike"] += int(spikes.sum())
    return out[~spikes.to_numpy()]


def _attention(df, path, root, registry, dropped, kernel):
    df = df.copy()
    if "window_size" not in df.columns:
        df["window_size"] = 0
    if kernel == "attention_prefill":
        bad = (df["device"] == "NVIDIA L40S") & (df["kernel_source"] == "vllm_flashinfer")
        dropped["known_bad:l40s_flashinfer_prefill"] += int(bad.sum())
        df = df[~bad]
    df = _drop_unsupported_sources(df, IMPLEMENTATIONS[kernel], kernel, dropped)
    out = _base(df, path, root, registry)
    out["kernel"] = kernel
    out["implementation"] = df["kernel_source"]
    out["dtype"] = df["attn_dtype"]
    out["batch_size"] = df["batch_size"]
    out["seq_len"] = df["isl"]
    # prefill: causal over the prompt; decode: KV length = step in this collector generation (README)
    out["kv_len"] = df["isl"] if kernel == "attention_prefill" else df["step"]
    out["num_heads"] = df["num_heads"]
    out["num_kv_heads"] = df["num_key_value_heads"]
    out["head_dim"] = df["head_dim"]
    out["kv_cache_dtype"] = df["kv_cache_dtype"]
    out["window_size"] = df["window_size"]
    return out


def _moe(df, path, root, registry, dropped):
    df = _drop_unsupported_sources(df.copy(), MOE_IMPLEMENTATIONS, "fused_moe", dropped)
    out = _base(df, path, root, registry)
    out["kernel"] = "fused_moe"
    out["implementation"] = df["kernel_source"].map(MOE_IMPLEMENTATIONS)
    out["dtype"] = df["moe_dtype"]
    for src, dst in [("num_tokens", "num_tokens"), ("hidden_size", "hidden_size"), ("inter_size", "inter_size"),
                     ("topk", "topk"), ("num_experts", "num_experts"), ("moe_tp_size", "moe_tp_size"),
                     ("moe_ep_size", "moe_ep_size"), ("distribution", "distribution")]:
        out[dst] = df[src]
    out["moe_stage"] = "full"
    return out


_TABLES = {
    "gemm_perf.parquet": (["gemm_dtype", "m", "n", "k"], _gemm),
    "context_attention_perf.parquet": (
        ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "attn_dtype", "kv_cache_dtype"],
        lambda *a: _attention(*a, kernel="attention_prefill")),
    "generation_attention_perf.parquet": (
        ["batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim", "attn_dtype",
         "kv_cache_dtype"],
        lambda *a: _attention(*a, kernel="attention_decode")),
    "moe_perf.parquet": (["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                          "moe_tp_size", "moe_ep_size", "distribution"], _moe),
}


def _row_count(path: Path) -> int:
    """Rows of a Parquet file from its footer (the file is not decoded).

    Raises:
        InputError: the file is not readable Parquet (names the file).
    """
    import pyarrow.parquet as pq

    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for truncated or foreign files
        raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None


def ingest(data_dir: Path, registry, cfg: dict | None = None) -> IngestResult:
    """Read every aiconfigurator table under ``data_dir/aiconfigurator``.

    Tables without a reader and rows with an unmodelled ``kernel_source`` or dtype are dropped and counted
    (module docstring).

    Raises:
        InputError: a file is unreadable, lacks a column, has a bad latency, or
            names a GPU that is not in the registry.
    """
    data_dir = Path(data_dir)
    dropped: Counter = Counter()
    frames, files = [], []
    for path in find_files(data_dir, "aiconfigurator/*/*/vllm/*/*.parquet", "aiconfigurator"):
        cols, fn = _TABLES.get(path.name, (None, None))
        if fn is None:
            dropped[f"unsupported_table:aiconfigurator:{path.name}"] += _row_count(path)
            files.append(rel(path, data_dir))
            continue
        df = load(path, _COMMON + cols)
        frames.append(fn(df, path, data_dir, registry, dropped))
        files.append(rel(path, data_dir))
    return IngestResult(finish(frames, registry, "aiconfigurator"), dropped, files)
