"""The canonical measurement table: the one place that documents its columns.

One row is one measured launch configuration of one kernel on one GPU.
Every adapter in :mod:`synperf.data.ingest` and the profiler write this table, and
every reader validates it with :func:`validate`.

Columns (units in the names; nullable parameters are ``<NA>`` where they do not
apply to a kernel family):

=====================  ========  ==============================================================
column                 type      meaning
=====================  ========  ==============================================================
gpu                    str       GPU id from ``config/gpus.yaml`` (e.g. ``h100_sxm``)
kernel                 str       one of :data:`KERNELS`
implementation         str       the code that ran (``cublas``, ``vllm_flash_attn``,
                                 ``triton_fused_moe``, ``sarathi_rmsnorm``, ...)
dtype                  str       compute dtype: ``bfloat16``, ``float16``, ``float32``,
                                 ``fp8`` (per-tensor scaled), ``fp8_block`` (128x128 block scaled)
m, n, k                Int64     GEMM: ``y[m, n] = x[m, k] @ W[n, k]^T``
batch                  Int64     GEMM: independent GEMMs in the launch (bmm batch; 1 otherwise)
batch_size             Int64     attention: sequences in the batch
seq_len                Int64     attention: query tokens per sequence (prefill: prompt length,
                                 decode: 1)
kv_len                 Int64     attention: keys per sequence the query attends to before masking
                                 (prefill: prompt length, causal; decode: tokens in the KV cache)
num_heads              Int64     attention: query heads on this GPU
num_kv_heads           Int64     attention: key/value heads on this GPU
head_dim               Int64     attention: head dimension
kv_cache_dtype         str       attention: KV-cache dtype (``bfloat16``, ``fp8``)
window_size            Int64     attention: sliding window in tokens, 0 = full attention
num_tokens             Int64     RMSNorm, SiLU&Mul, fused MoE: token rows entering the kernel
hidden_size            Int64     RMSNorm: normalised width; SiLU&Mul: output width (input is
                                 ``2 * hidden_size``); fused MoE: model hidden size
inter_size             Int64     fused MoE: expert intermediate size before MoE tensor parallelism
topk                   Int64     fused MoE: experts per token
num_experts            Int64     fused MoE: global expert count
moe_tp_size            Int64     fused MoE: tensor-parallel degree inside each expert
moe_ep_size            Int64     fused MoE: expert-parallel degree
distribution           str       fused MoE: token-to-expert routing (``balanced``,
                                 ``power_law_<alpha>``, ``random``)
moe_stage              str       fused MoE: ``full`` (w13 GEMM, SiLU&Mul, w2 GEMM),
                                 ``w13`` or ``w2`` (one grouped GEMM)
block_size_m/n/k       Int64     fused MoE Triton config (when recorded)
group_size_m           Int64     fused MoE Triton config
num_warps, num_stages  Int64     fused MoE Triton config
latency_us             float64   the source's central latency, microseconds (> 0)
latency_stat           str       what ``latency_us`` is: ``mean``, ``median``, ``mean_of_5_fastest``
latency_std_us         float64   spread where the source has it (else <NA>)
latency_min_us         float64   "
latency_max_us         float64   "
latency_p10_us         float64   " (our profiler)
latency_p90_us         float64   " (our profiler)
n_samples              Int64     timed repetitions behind ``latency_us`` where known
n_duplicates           Int64     raw rows with this key that were reduced to their median (>= 1)
kernel_name            str       launched kernel's name where the source records it (NeuSight)
grid_ctas              Int64     CTAs in the main kernel's grid where recorded (NeuSight)
source                 str       ``aiconfigurator``, ``vidur``, ``neusight``, ``pipeweave``,
                                 ``synperf_profiler``
source_version         str       upstream commit and framework version
source_file            str       file the row came from, relative to the data root
=====================  ========  ==============================================================

The key of a row is every column except the latency, spread, sample-count and
provenance columns (:data:`KEY_COLUMNS`). Rows of one key from one source and source
version are reduced to their median by :func:`reduce_duplicates`; measurements of one
key by different sources or versions stay separate rows (:data:`MERGE_KEY_COLUMNS`),
and how far they disagree is reported by :func:`synperf.data.quality.duplicate_spread`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.data.io import InputError

KERNELS: tuple[str, ...] = (
    "gemm",
    "gemm_fp8",
    "attention_prefill",
    "attention_decode",
    "rmsnorm",
    "silu_mul",
    "fused_moe",
)

IDENTITY_COLUMNS: dict[str, str] = {
    "gpu": "str",
    "kernel": "str",
    "implementation": "str",
    "dtype": "str",
}

PARAM_COLUMNS: dict[str, str] = {
    "m": "Int64",
    "n": "Int64",
    "k": "Int64",
    "batch": "Int64",
    "batch_size": "Int64",
    "seq_len": "Int64",
    "kv_len": "Int64",
    "num_heads": "Int64",
    "num_kv_heads": "Int64",
    "head_dim": "Int64",
    "kv_cache_dtype": "str",
    "window_size": "Int64",
    "num_tokens": "Int64",
    "hidden_size": "Int64",
    "inter_size": "Int64",
    "topk": "Int64",
    "num_experts": "Int64",
    "moe_tp_size": "Int64",
    "moe_ep_size": "Int64",
    "distribution": "str",
    "moe_stage": "str",
    "block_size_m": "Int64",
    "block_size_n": "Int64",
    "block_size_k": "Int64",
    "group_size_m": "Int64",
    "num_warps": "Int64",
    "num_stages": "Int64",
}

MEASURE_COLUMNS: dict[str, str] = {
    "latency_us": "float64",
    "latency_stat": "str",
    "latency_std_us": "float64",
    "latency_min_us": "float64",
    "latency_max_us": "float64",
    "latency_p10_us": "float64",
    "latency_p90_us": "float64",
    "n_samples": "Int64",
    "n_duplicates": "Int64",
}

LAUNCH_COLUMNS: dict[str, str] = {
    "kernel_name": "str",
    "grid_ctas": "Int64",
}

PROVENANCE_COLUMNS: dict[str, str] = {
    "source": "str",
    "source_version": "str",
    "source_file": "str",
}

COLUMNS: dict[str, str] = {
    **IDENTITY_COLUMNS,
    **PARAM_COLUMNS,
    **MEASURE_COLUMNS,
    **LAUNCH_COLUMNS,
    **PROVENANCE_COLUMNS,
}

KEY_COLUMNS: tuple[str, ...] = tuple(IDENTITY_COLUMNS) + tuple(PARAM_COLUMNS)
#: what duplicates are reduced over: the key plus who measured it (never merged across sources or versions)
MERGE_KEY_COLUMNS: tuple[str, ...] = KEY_COLUMNS + ("source", "source_version")

#: Parameters that must be present (non-null) for each kernel family.
KERNEL_PARAMS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "batch"),
    "gemm_fp8": ("m", "n", "k", "batch"),
    "attention_prefill": ("batch_size", "seq_len", "kv_len", "num_heads", "num_kv_heads", "head_dim",
                          "kv_cache_dtype", "window_size"),
    "attention_decode": ("batch_size", "seq_len", "kv_len", "num_heads", "num_kv_heads", "head_dim",
                         "kv_cache_dtype", "window_size"),
    "rmsnorm": ("num_tokens", "hidden_size"),
    "silu_mul": ("num_tokens", "hidden_size"),
    "fused_moe": ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                  "moe_ep_size", "moe_stage"),
}

#: The launch problem of each family: what a caller asks the kernel to compute, not how it is computed
#: (implementation, dtype and its scaling, KV-cache dtype, MoE routing and stage, Triton tuning config) nor
#: where (GPU). Every
#: variant of one problem shares its problem key (:func:`synperf.evaluation.split.problem_key`), so held-out problems
#: and early-stopping validation groups hold out all variants of a problem together.
PROBLEM_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "batch"),
    "gemm_fp8": ("m", "n", "k", "batch"),
    "attention_prefill": ("batch_size", "seq_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "window_size"),
    "attention_decode": ("batch_size", "seq_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "window_size"),
    "rmsnorm": ("num_tokens", "hidden_size"),
    "silu_mul": ("num_tokens", "hidden_size"),
    "fused_moe": ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"),
}

_REQUIRED = ("gpu", "kernel", "implementation", "dtype", "latency_us", "latency_stat", "n_duplicates",
             "source", "source_version")


def conform(df: pd.DataFrame, where: str = "table") -> pd.DataFrame:
    """Return ``df`` with exactly the canonical columns, in order, with canonical dtypes.

    Missing optional columns are added as all-null; ``n_duplicates`` defaults to 1.
    Extra columns are dropped.

    Raises:
        InputError: a value cannot be converted to its column's type; names ``where`` (e.g. the file), the first
            offending row (0-based position), the column, the value and the expected type.
    """
    out = {}
    for col, typ in COLUMNS.items():
        if col in df.columns:
            values = df[col]
        elif col == "n_duplicates":
            values = pd.Series(1, index=df.index)
        else:  # an absent optional column: all null, of its type (no conversion to run)
            out[col] = pd.Series(pd.NA if typ != "float64" else np.nan, index=df.index,
                                 dtype="string" if typ == "str" else typ)
            continue
        try:
            if typ == "str":
                out[col] = values.astype("string")
            elif typ == "Int64":
                out[col] = (
                    pd.to_numeric(values, errors="raise").astype("Int64") if len(values) else values.astype("Int64")
                )
            else:
                out[col] = pd.to_numeric(values, errors="raise").astype("float64")
        except (TypeError, ValueError) as exc:
            numeric = pd.to_numeric(values, errors="coerce")
            bad = np.flatnonzero(numeric.isna().to_numpy() & values.notna().to_numpy())
            if typ == "Int64" and not len(bad):
                bad = np.flatnonzero((numeric.notna() & (numeric % 1 != 0)).to_numpy())
            if len(bad):
                value = values.iloc[bad[0]]
                shown = repr(value.item() if hasattr(value, "item") else value)
                raise InputError(f"{where}: row {bad[0]}, column {col!r}: {shown} is not "
                                 f"{'an integer' if typ == 'Int64' else 'a number'}") from exc
            raise InputError(f"{where}: column {col!r}: cannot convert to {typ} ({exc})") from exc
    # one frame from the converted columns' arrays (positional: no index alignment, dtypes kept)
    return pd.DataFrame({c: (v.array if isinstance(v.dtype, pd.api.extensions.ExtensionDtype) else v.to_numpy())
                         for c, v in out.items()}, index=pd.RangeIndex(len(df)))


def validate(df: pd.DataFrame, where: str, gpu_ids: set[str] | None = None) -> pd.DataFrame:
    """Check that ``df`` is a canonical measurement table; return it unchanged.

    Args:
        df: the table.
        where: file or step name used in error messages.
        gpu_ids: when given, every ``gpu`` must be one of these registry ids.

    Raises:
        InputError: naming ``where``, the first offending row (0-based position)
            and what was expected: a missing or mistyped column, a null required
            value, an unknown kernel or GPU, a missing kernel parameter, a
            non-finite or non-positive latency.
    """
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{where}: missing canonical column(s) {missing}")
    for col, typ in COLUMNS.items():
        dt = df[col].dtype
        ok = (
            (typ == "str" and (pd.api.types.is_string_dtype(dt) or df[col].isna().all()))
            or (typ == "Int64" and pd.api.types.is_integer_dtype(dt))
            or (typ == "float64" and pd.api.types.is_float_dtype(dt))
        )
        if not ok:
            raise InputError(f"{where}: column {col!r} has dtype {dt}, expected {typ}")

    def first_bad(mask: pd.Series, what: str) -> None:
        if mask.any():
            pos = int(np.flatnonzero(mask.to_numpy())[0])
            row = df.iloc[pos]
            ident = {c: row[c] for c in ("gpu", "kernel", "source_file") if c in df.columns}
            raise InputError(f"{where}: row {pos} {ident}: {what} ({int(mask.sum())} row(s) affected)")

    for col in _REQUIRED:
        first_bad(df[col].isna(), f"{col!r} is null, expected a value")
    first_bad(~df["kernel"].isin(KERNELS), f"unknown kernel, expected one of {list(KERNELS)}")
    if gpu_ids is not None:
        first_bad(~df["gpu"].isin(sorted(gpu_ids)), "gpu is not an id in config/gpus.yaml")
    lat = df["latency_us"].to_numpy(dtype="float64")
    first_bad(pd.Series(~np.isfinite(lat) | (lat <= 0), index=df.index),
              "latency_us must be a finite number > 0")
    first_bad(df["n_duplicates"] < 1, "n_duplicates must be >= 1")
    for kernel, params in KERNEL_PARAMS.items():
        sel = df["kernel"] == kernel
        if not sel.any():
            continue
        for p in params:
            first_bad(sel & df[p].isna(), f"kernel {kernel!r} needs parameter {p!r}")
            if COLUMNS[p] == "Int64":
                first_bad(sel & (df[p].fillna(1) < 0), f"parameter {p!r} must be >= 0")
    return df


def reduce_duplicates(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Reduce rows with the same key, source and source version (:data:`MERGE_KEY_COLUMNS`) to one row
    with the median latency.

    Spread columns take the median too, ``n_samples`` and ``n_duplicates`` are
    summed, ``source_file`` and the launch columns are taken from the first row. Rows
    of one key from different sources or versions are kept apart. Returns the reduced
    table and the number of rows removed.
    """
    if df.empty:
        return df, 0
    keys = list(MERGE_KEY_COLUMNS)
    grouped = df.groupby(keys, dropna=False, sort=False)
    sizes = grouped["latency_us"].transform("size")
    if (sizes == 1).all():
        return df, 0
    single = df[sizes == 1]
    multi = df[sizes > 1]
    g = multi.groupby(keys, dropna=False, sort=False)
    agg: dict[str, str] = {c: "median" for c in MEASURE_COLUMNS if COLUMNS[c] == "float64"}
    agg.update({"n_samples": "sum", "n_duplicates": "sum", "latency_stat": "first"})
    agg.update({c: "first" for c in {**LAUNCH_COLUMNS, **PROVENANCE_COLUMNS} if c not in keys})
    red = g.agg(agg).reset_index()
    red["n_samples"] = red["n_samples"].where(red["n_samples"] > 0, pd.NA)
    out = conform(pd.concat([single, red], ignore_index=True))
    return out, len(df) - len(out)
