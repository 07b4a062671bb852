"""TTFT and TPOT per request from a priced schedule, their summaries, and the KV-cache capacity vLLM would have.

Per request (milliseconds), with ``t_end[i]`` the end time of iteration ``i`` (cumulative sum of the iteration
latencies) and the arrival at ``t_end[arrival]`` (0 for requests that arrive at the start):

* TTFT = ``t_end[first_token] - t_arrival`` (queueing, prefill chunks and the iterations they share);
* TPOT = ``(t_end[finish] - t_end[first_token]) / (output_tokens - 1)`` (requests with one output token have none),
  the definition of vLLM's ``benchmark_serving`` (``(e2e latency - TTFT) / (output_len - 1)``).

KV-cache capacity (tokens per GPU), :func:`kv_cache_tokens`: vLLM sizes the cache as ``gpu_memory_utilization``
(default 0.9) of the GPU's memory minus the weights and the peak activation of a profiling run
(``vllm/v1/worker/gpu_worker.py``, ``determine_available_memory``), here::

    (usable_memory_gb * 1e9 - weights - ACTIVATION_GB * 1e9) / (2 * L * max(1, kv_heads / tp) * head_dim * kv bytes)

``usable_memory_gb`` is :func:`synperf.e2e.plan.usable_memory_gb` (``gpu_memory_utilization``, default 0.9, of the
memory CUDA reports, from the registry's datasheet capacity), the capacity ``synperf plan`` checks; weights
= linear layers at the GEMM dtype's bytes (an fp8 MoE checkpoint's routed experts, ``ModelConfig.moe_dtype``, at 1
byte whatever the GEMM dtype) plus the vocab-parallel embedding and LM head in bf16
(:func:`synperf.e2e.plan.weight_bytes`), divided by ``tp``; :data:`synperf.e2e.plan.ACTIVATION_GB` (4 GB, a round
allowance) for activations and CUDA graphs; ``kv bytes`` per element of the KV cache's dtype
(:data:`synperf.serving.price.KV_CACHE_DTYPES`: 1 for the fp8 cache of an fp8 checkpoint, 2 for bf16).

Scheduler limits, :func:`vllm_batch_defaults`: vLLM's ``EngineArgs.get_batch_defaults`` for its OpenAI API server
gives 8192 tokens per iteration and 1024 sequences on a GPU whose memory CUDA reports at >= 70 GiB and whose device
name does not contain "a100" (H100, H200, B200, GB200, H20, RTX PRO 6000), else 2048 and 256 (A100, A40, L40S, L4);
the rule as vLLM's own test ``test_defaults_with_usage_context`` (``tests/engine/test_arg_utils.py``) states it.
"""

from __future__ import annotations

import numpy as np

from ._deps import (
    ACTIVATION_GB,
    GPU_MEMORY_UTILIZATION,
    InputError,
    ModelConfig,
    Registry,
    usable_memory_gb,
    weight_bytes,
)
from .price import kv_cache_dtype_of
from .scheduler import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    SMALL_GPU_MAX_NUM_BATCHED_TOKENS,
    SMALL_GPU_MAX_NUM_SEQS,
    Schedule,
)

GEMM_BYTES = {"bfloat16": 2, "fp8": 1}
#: bytes per KV-cache element by the KV cache's dtype
KV_BYTES = {"bfloat16": 2, "fp8": 1}
#: the device memory (GiB, as CUDA reports it) from which vLLM takes its larger scheduler defaults
LARGE_GPU_GIB = 70


def vllm_batch_defaults(gpu: str, registry: Registry) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` vLLM's OpenAI API server defaults to on ``gpu`` (module docstring):
    the larger pair where the memory CUDA reports (:func:`synperf.e2e.plan.usable_memory_gb` at utilization 1,
    from the registry's ``memory_gb`` and memory family) is at least :data:`LARGE_GPU_GIB` GiB and neither the
    registry name nor a ``device_names`` entry contains "a100"; else the smaller pair.

    Raises:
        InputError: ``gpu`` is not in the registry.
    """
    spec = registry[gpu]
    large = usable_memory_gb(registry, gpu, 1.0) * 1e9 >= LARGE_GPU_GIB * 2 ** 30
    if large and not any("a100" in n.lower() for n in (spec.name, *spec.device_names)):
        return DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS
    return SMALL_GPU_MAX_NUM_BATCHED_TOKENS, SMALL_GPU_MAX_NUM_SEQS


def kv_cache_tokens(model: ModelConfig, tp: int, gpu: str, registry: Registry, gemm_dtype: str = "bfloat16",
                    utilization: float = GPU_MEMORY_UTILIZATION, kv_cache_dtype: str | None = None) -> int:
    """KV-cache tokens one GPU holds (module docstring) with ``utilization`` of its memory for the engine; may be
    <= 0 when the weights do not fit. ``kv_cache_dtype``: as :func:`synperf.serving.price.kv_cache_dtype_of`.

    Raises:
        InputError: a ``gemm_dtype`` without a byte size, an unknown ``kv_cache_dtype``, or the model cannot be
            sharded ``tp`` ways.
    """
    if gemm_dtype not in GEMM_BYTES:
        raise InputError(f"gemm_dtype {gemm_dtype!r}: expected one of {list(GEMM_BYTES)}")
    kv_cache_dtype = kv_cache_dtype_of(gemm_dtype, kv_cache_dtype)
    sm = model.shard(tp, 1)
    mem = usable_memory_gb(registry, gpu, utilization) * 1e9
    weights = weight_bytes(model, tp, 1, linear_bytes=GEMM_BYTES[gemm_dtype], embedding_bytes=2)
    per_token = 2 * model.num_layers * sm.num_kv_heads * model.head_dim * KV_BYTES[kv_cache_dtype]
    return int((mem - weights - ACTIVATION_GB * 1e9) // per_token)


def request_times(sched: Schedule, latency_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) per request in milliseconds (TPOT NaN for one-token outputs)."""
    lat = np.asarray(latency_s, dtype="float64")
    if len(lat) != sched.iterations:
        raise InputError(f"request_times: {len(lat)} latencies for {sched.iterations} iterations")
    t_end = np.cumsum(lat)
    t_arr = np.where(sched.arrival < 0, 0.0, t_end[np.maximum(sched.arrival, 0)])
    t_first = t_end[sched.first_token]
    ttft = (t_first - t_arr) * 1e3
    steps = sched.output_tokens - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(steps > 0, (t_end[sched.finish] - t_first) * 1e3 / np.maximum(steps, 1), np.nan)
    return ttft, tpot


def summarize(values: np.ndarray, name: str, weights: np.ndarray | None = None) -> dict:
    """``<name>_mean_ms``, ``<name>_median_ms``, ``<name>_p90_ms`` of the finite values, each value counted with its
    ``weights`` (default 1) as that many copies of it: quantiles are numpy's linear ones of the sample with every
    value repeated by its weight (fractional weights stretch the same rule)."""
    v = np.asarray(values, dtype="float64")
    w = np.ones(len(v)) if weights is None else np.asarray(weights, dtype="float64")
    if w.shape != v.shape:
        raise InputError(f"summarize: {len(w)} weights for {len(v)} values")
    ok = np.isfinite(v) & (w > 0)
    v, w = v[ok], w[ok]
    if not len(v):
        return {f"{name}_{s}_ms": np.nan for s in ("mean", "median", "p90")}
    order = np.argsort(v, kind="stable")
    vs, cum = v[order], np.cumsum(w[order])

    def at(x):
        return vs[min(int(np.searchsorted(cum, x, side="right")), len(vs) - 1)]

    def quantile(q):
        h = max(cum[-1] - 1.0, 0.0) * q
        lo = np.floor(h)
        return float(at(lo) + (h - lo) * (at(lo + 1) - at(lo)))

    return {f"{name}_mean_ms": float(np.average(v, weights=w)), f"{name}_median_ms": quantile(0.5),
            f"{name}_p90_ms": quantile(0.9)}
