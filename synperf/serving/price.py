"""Price a :class:`~.scheduler.Schedule`: every iteration's latency from the kernel predictors, in a few bulk calls.

Per iteration ``i`` with ``T`` scheduled tokens, ``B`` scheduled requests, ``D`` decodes (mean KV length ``K``) and
prefill chunks ``(q, kv)`` on one GPU of a ``tp``-way tensor-parallel model with ``L`` layers (seconds)::

    latency_i = L * (qkv(T) + o(T) + gate_up(T) + down(T))          GEMMs in the linear layers' dtype
              + lm_head(B)                                           bf16 GEMM, M = B (vLLM computes logits for the
                                                                     last token of every scheduled request),
                                                                     N = vocab / tp (vocab-parallel LM head)
              + L * (decode_attention(D, K) + sum_chunks prefill_attention(1, q, kv))
              + (2 L + 1) * rmsnorm(T, hidden) [+ Qwen3's per-head q/k norms]
              + L * silu_mul(T, intermediate / tp)
              + 2 L * all_reduce(T * hidden * 2 bytes, tp)           (tp > 1; pipeweave NCCL tables)
              + overhead.a_s + overhead.b_s * B

An MoE model (:attr:`ModelConfig.is_moe`) replaces ``gate_up``/``down``/``silu_mul`` by ``L * (router(T) +
fused_moe(T))``: the router a bf16 GEMM (N = experts, K = hidden, replicated) and one ``fused_moe`` launch at
``T`` tokens with the full ``inter_size`` and ``moe_tp_size = tp`` (each expert's intermediate width split over the
TP ranks, no expert parallelism), dtype :attr:`ModelConfig.moe_dtype` (``fp8_block`` for block-FP8 checkpoints);
MiniMax-M2's per-layer q/k norms are RMSNorms of width heads x head_dim.

The shapes are those of :func:`synperf.e2e.workload.forward_ops` (same QKV/MLP widths and sharding), except the two
places where a mixed iteration differs from the e2e composer's all-prefill or all-decode one: attention is priced
as one decode launch over the iteration's decodes plus one prefill launch per chunk (whose ``kv_len`` includes the
chunk's earlier context), and the LM head is vocab-parallel. The vLLM FlashAttention backend runs decodes and
chunks in one varlen launch; pricing them apart adds a launch's fixed cost per chunk.

Each family is predicted once over its distinct launches (distinct ``T``, ``B``, (``D``, ``K``) and chunks; ``K``
rounded to the KV block size, :data:`KV_ROUND`), so a trace of thousands of iterations costs one ``predict`` call
per family. When the predictor returns ``predicted_latency_low_us``/``predicted_latency_high_us``, the change of
every iteration's latency with every launch of one kernel model at its low (high) bound is recorded per model
(``family_low_s``/``family_high_s``), for the rule of :mod:`synperf.e2e.intervals` (fully correlated within a
model, independent across models, shifts in quadrature); ``low_s``/``high_s`` keep every launch at its bound at
once (all models correlated, the conservative extreme). Collectives and overhead count at their point value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from ._deps import (
    CollectiveModel,
    InputError,
    ModelConfig,
    Overhead,
    Registry,
    default_registry,
    predict,
    trained_on,
)
from .scheduler import Schedule

#: decode KV lengths are rounded to this many tokens before pricing (vLLM's KV block size)
KV_ROUND = 16
#: the linear layers' dtype -> (kernel family, experiment) that prices them: fp8 is vLLM's per-tensor FP8 linear
#: (activation quantization inside the timing), the aiconfigurator-trained ``gemm_fp8_aiconfigurator`` experiment
GEMM_ROUTES = {"bfloat16": ("gemm", None), "fp8": ("gemm_fp8", "gemm_fp8_aiconfigurator")}
#: activations, attention and the LM head run in bf16 in both cases
ACT_DTYPE = "bfloat16"
#: the KV cache's dtype for a linear-layer dtype: fp8 linear layers serve with an fp8 KV cache (``--kv-cache-dtype
#: fp8``), as aiconfigurator's generator configures an fp8 checkpoint (aic-core ``sdk/models/helpers.py``,
#: ``_infer_quant_modes_from_raw_config``); bf16 ones with vLLM's default (``auto``: the model dtype). The silicon
#: sample does not record the cache's dtype, and its fp8 rows of bf16 checkpoints quantized at load time
#: (``meta-llama/Llama-3.1-70B``, ``Qwen/Qwen3-32B``) would get vLLM's ``auto`` cache without that flag;
#: docs/serving.md gives what each choice does to the scores
KV_CACHE_DTYPES = {"bfloat16": "bfloat16", "fp8": "fp8"}


def kv_cache_dtype_of(gemm_dtype: str, kv_cache_dtype: str | None = None) -> str:
    """The KV cache's dtype: ``kv_cache_dtype`` when given (one of :data:`KV_CACHE_DTYPES`' values), else the one
    :data:`KV_CACHE_DTYPES` gives linear layers in ``gemm_dtype``.

    Raises:
        InputError: an unknown ``kv_cache_dtype``, or no default for ``gemm_dtype``.
    """
    if kv_cache_dtype is None:
        if gemm_dtype not in KV_CACHE_DTYPES:
            raise InputError(f"gemm_dtype {gemm_dtype!r}: expected one of {list(KV_CACHE_DTYPES)}")
        return KV_CACHE_DTYPES[gemm_dtype]
    if kv_cache_dtype not in set(KV_CACHE_DTYPES.values()):
        raise InputError(f"kv_cache_dtype {kv_cache_dtype!r}: expected one of {sorted(set(KV_CACHE_DTYPES.values()))}")
    return kv_cache_dtype


@dataclass
class PricedSchedule:
    """Per-iteration latencies (seconds) of a schedule: ``latency_s`` (point), ``low_s``/``high_s`` (None without
    kernel intervals), the per-family seconds summed over the trace (``family_s``), per kernel model (family and
    experiment) the per-iteration change with its launches at their low/high bound (``family_low_s``/
    ``family_high_s``, seconds; empty without kernel intervals), the model folders used and
    whether the GPU was one of each family's training GPUs (``seen``: None where the model does not say,
    :func:`synperf.e2e.compose.trained_on`)."""

    latency_s: np.ndarray
    low_s: np.ndarray | None
    high_s: np.ndarray | None
    family_s: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    seen: dict = field(default_factory=dict)
    family_low_s: dict = field(default_factory=dict)
    family_high_s: dict = field(default_factory=dict)


class _Bulk:
    """Collect launch rows per (family, experiment), predict each group once, answer per row."""

    def __init__(self, predict_fn: Callable, gpu: str, kw: dict):
        self.predict_fn, self.gpu, self.kw = predict_fn, gpu, kw
        self.groups: dict[tuple, list[pd.DataFrame]] = {}
        self.out: dict[tuple, pd.DataFrame] = {}

    def add(self, family: str, rows: pd.DataFrame, experiment: str | None = None) -> tuple:
        key = (family, experiment)
        self.groups.setdefault(key, []).append(rows)
        return key, sum(len(f) for f in self.groups[key]) - len(rows), len(rows)

    def run(self):
        for key, frames in self.groups.items():
            family, experiment = key
            table = pd.concat(frames, ignore_index=True)
            kw = dict(self.kw)
            if experiment:
                kw["experiment"] = experiment
            out = self.predict_fn(family, table, self.gpu, **kw).reset_index(drop=True)
            if len(out) != len(table) or not np.all(np.asarray(out["predicted_latency_us"], float) > 0):
                raise InputError(f"predictor for {family!r}: expected {len(table)} positive latencies")
            self.out[key] = out

    def get(self, handle, col="predicted_latency_us") -> np.ndarray:
        key, start, n = handle
        o = self.out[key]
        v = o[col].to_numpy(dtype="float64")[start:start + n] if col in o.columns else np.full(n, np.nan)
        if col != "predicted_latency_us":
            v = np.where(np.isnan(v), o["predicted_latency_us"].to_numpy(dtype="float64")[start:start + n], v)
        return v

    def has_intervals(self) -> bool:
        return any("predicted_latency_low_us" in o.columns and o["predicted_latency_low_us"].notna().any()
                   for o in self.out.values())


def price_schedule(sched: Schedule, model: ModelConfig, gpu: str, tp: int, *, gemm_dtype: str = "bfloat16",
                   predict_fn: Callable = predict, models_dir: str | os.PathLike | None = None,
                   registry: Registry | None = None, collectives: CollectiveModel | None = None,
                   overhead: Overhead = Overhead(), kv_cache_dtype: str | None = None) -> PricedSchedule:
    """Every iteration's latency of ``sched`` for ``model`` at tensor parallelism ``tp`` on registry GPU ``gpu``
    (module docstring). ``predict_fn(family, params, gpu, models_dir=, registry=[, experiment=])`` as
    :func:`synperf.api.predict`. ``kv_cache_dtype`` (vLLM's ``--kv-cache-dtype``: ``bfloat16`` or ``fp8``) is
    the cache the attention launches read; default :func:`kv_cache_dtype_of` ``gemm_dtype``.

    Raises:
        InputError: a ``gemm_dtype`` not in :data:`GEMM_ROUTES`, a ``kv_cache_dtype`` not in
            :data:`KV_CACHE_DTYPES`, ``tp`` > 1 without ``collectives``, the sharding errors of
            :meth:`ModelConfig.shard`, or a predictor error.
    """
    if gemm_dtype not in GEMM_ROUTES:
        raise InputError(f"gemm_dtype {gemm_dtype!r} is not modelled; expected one of {list(GEMM_ROUTES)}")
    kv_cache_dtype = kv_cache_dtype_of(gemm_dtype, kv_cache_dtype)
    if tp > 1 and collectives is None:
        raise InputError("tp > 1 needs the collective tables (pipeweave dataset/collective)")
    registry = registry or default_registry()
    registry[gpu]
    sm = model.shard(tp, 1)
    L, h, hd = model.num_layers, model.hidden_size, model.head_dim
    bulk = _Bulk(predict_fn, gpu, {"models_dir": models_dir, "registry": registry})
    T, B, D, K = sched.num_tokens, sched.num_seqs, sched.num_decode, sched.decode_kv_sum
    active = T > 0   # idle iterations (the engine waiting for an arrival) cost nothing
    T, B = np.maximum(T, 1), np.maximum(B, 1)
    uT, iT = np.unique(T, return_inverse=True)
    uB, iB = np.unique(B, return_inverse=True)
    fam, exp = GEMM_ROUTES[gemm_dtype]
    linears = {"qkv_proj": (sm.qkv_out, h), "o_proj": (h, sm.attn_out)}
    if not model.is_moe:
        linears.update(gate_up_proj=(2 * sm.intermediate_size, h), down_proj=(h, sm.intermediate_size))
    elif sm.shared_expert_intermediate_size:
        si = sm.shared_expert_intermediate_size
        linears.update(shared_gate_up_proj=(2 * si, h), shared_down_proj=(h, si))
    gemm_rows = pd.concat([pd.DataFrame({"m": uT, "n": n, "k": k}) for n, k in linears.values()], ignore_index=True)
    g_handle = bulk.add(fam, gemm_rows.assign(dtype=gemm_dtype), exp)
    lm_handle = bulk.add("gemm", pd.DataFrame({"m": uB, "n": model.vocab_size // tp, "k": h, "dtype": ACT_DTYPE}))
    norm_rows = [pd.DataFrame({"num_tokens": uT, "hidden_size": h})]
    if model.qk_norm and model.qk_norm_type == "per_layer":
        norm_rows += [pd.DataFrame({"num_tokens": uT, "hidden_size": sm.num_heads * hd}),
                      pd.DataFrame({"num_tokens": uT, "hidden_size": sm.num_kv_heads * hd})]
    elif model.qk_norm:
        norm_rows += [pd.DataFrame({"num_tokens": uT * sm.num_heads, "hidden_size": hd}),
                      pd.DataFrame({"num_tokens": uT * sm.num_kv_heads, "hidden_size": hd})]
    n_handle = bulk.add("rmsnorm", pd.concat(norm_rows, ignore_index=True).assign(dtype=ACT_DTYPE))
    silu_width = sm.shared_expert_intermediate_size if model.is_moe else sm.intermediate_size
    s_handle = bulk.add("silu_mul", pd.DataFrame({"num_tokens": uT, "hidden_size": silu_width,
                                                  "dtype": ACT_DTYPE})) if silu_width else None
    r_handle = m_handle = None
    if model.is_moe:  # router GEMM (replicated, activation dtype) and one fused-MoE launch per layer
        r_handle = bulk.add("gemm", pd.DataFrame({"m": uT, "n": model.num_experts, "k": h, "dtype": ACT_DTYPE}))
        m_handle = bulk.add("fused_moe", pd.DataFrame({
            "num_tokens": uT, "hidden_size": h, "inter_size": model.moe_intermediate_size,
            "topk": model.num_experts_per_tok, "num_experts": model.num_experts, "moe_tp_size": tp, "moe_ep_size": 1,
            "moe_stage": "full", "dtype": model.moe_dtype or gemm_dtype}))
    att = {"num_heads": sm.num_heads, "num_kv_heads": sm.num_kv_heads, "head_dim": hd, "dtype": ACT_DTYPE,
           "kv_cache_dtype": kv_cache_dtype}
    dec = D > 0
    kv_mean = np.where(dec, np.maximum(1, np.round(K / np.maximum(D, 1) / KV_ROUND) * KV_ROUND), 0).astype("int64")
    dkey = pd.DataFrame({"batch_size": D[dec], "kv_len": kv_mean[dec]})
    udec = dkey.drop_duplicates().reset_index(drop=True)
    d_handle = bulk.add("attention_decode", udec.assign(seq_len=1, **att)) if len(udec) else None
    ch = sched.chunks
    ckey = pd.DataFrame({"seq_len": ch[:, 1], "kv_len": ch[:, 2]})
    uch = ckey.drop_duplicates().reset_index(drop=True)
    p_handle = bulk.add("attention_prefill", uch.assign(batch_size=1, **att)) if len(uch) else None
    bulk.run()

    n_it = len(T)
    sides = ["predicted_latency_us"] + (["predicted_latency_low_us", "predicted_latency_high_us"]
                                        if bulk.has_intervals() else [])
    comm = np.zeros(n_it)
    if tp > 1:
        comm = 2 * L * collectives.latency_us("all_reduce", uT * h * 2, tp, gpu)[iT] / 1e6
    ov = overhead(B)
    part_model = {"gemm": g_handle[0], "lm_head": lm_handle[0], "rmsnorm": n_handle[0],
                  "attention_decode": ("attention_decode", None), "attention_prefill": ("attention_prefill", None)}
    for name, handle in (("silu_mul", s_handle), ("fused_moe", m_handle)):
        if handle is not None:
            part_model[name] = handle[0]
    results, family_s, side_parts = [], {}, {}
    for side in sides:
        g = bulk.get(g_handle, side).reshape(len(linears), len(uT)).sum(axis=0)
        lm = bulk.get(lm_handle, side)
        nr = bulk.get(n_handle, side).reshape(-1, len(uT))
        norms = (2 * L + 1) * nr[0] + (L * nr[1:].sum(axis=0) if len(nr) > 1 else 0.0)
        silu = L * bulk.get(s_handle, side) if s_handle is not None else np.zeros(len(uT))
        if r_handle is not None:
            g = g + bulk.get(r_handle, side)
        parts = {"gemm": L * g[iT] / 1e6, "lm_head": lm[iB] / 1e6, "rmsnorm": norms[iT] / 1e6,
                 "silu_mul": silu[iT] / 1e6, "attention_decode": np.zeros(n_it), "attention_prefill": np.zeros(n_it)}
        if m_handle is not None:
            parts["fused_moe"] = L * bulk.get(m_handle, side)[iT] / 1e6
        if d_handle is not None:
            lat = dkey.merge(udec.assign(_l=bulk.get(d_handle, side)), on=["batch_size", "kv_len"], how="left")["_l"]
            parts["attention_decode"][dec] = L * lat.to_numpy() / 1e6
        if p_handle is not None:
            lat = ckey.merge(uch.assign(_l=bulk.get(p_handle, side)), on=["seq_len", "kv_len"], how="left")["_l"]
            parts["attention_prefill"] = np.bincount(ch[:, 0], weights=L * lat.to_numpy() / 1e6, minlength=n_it)
        results.append((sum(parts.values()) + comm + ov) * active)
        side_parts[side] = parts
        if side == "predicted_latency_us":
            family_s = {k: float((v * active).sum()) for k, v in parts.items()}
            family_s.update(all_reduce=float((comm * active).sum()), overhead=float(np.sum(ov * active)))
    models = {f"{k[0]}" + (f" ({k[1]})" if k[1] else ""): str(o.attrs.get("model_dir", "(not reported)"))
              for k, o in bulk.out.items()}
    seen = {f"{k[0]}" + (f" ({k[1]})" if k[1] else ""): trained_on(o, gpu) for k, o in bulk.out.items()}
    low, high = (results[1], results[2]) if len(results) == 3 else (None, None)
    fam_low, fam_high = {}, {}
    if low is not None:
        point = side_parts["predicted_latency_us"]
        for name, key in part_model.items():
            label = f"{key[0]}" + (f" ({key[1]})" if key[1] else "")
            for side, acc in (("predicted_latency_low_us", fam_low), ("predicted_latency_high_us", fam_high)):
                acc[label] = acc.get(label, 0.0) + (side_parts[side][name] - point[name]) * active
    return PricedSchedule(results[0], low, high, family_s, models, seen, fam_low, fam_high)

