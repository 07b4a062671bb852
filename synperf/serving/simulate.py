"""One serving configuration end to end: schedule (vLLM rules), price (kernel predictors), TTFT/TPOT summary."""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
import pandas as pd

from ._deps import (
    GPU_MEMORY_UTILIZATION,
    CollectiveModel,
    InputError,
    ModelConfig,
    Overhead,
    Registry,
    default_registry,
    predict,
    quadrature_bounds,
    widen,
)
from .metrics import kv_cache_tokens, request_times, summarize, vllm_batch_defaults
from .price import kv_cache_dtype_of, price_schedule
from .scheduler import KVCapacityError, SchedulerConfig, simulate

#: requests of the simulated steady state, per unit of concurrency, when the caller does not say (its first wave is
#: the warm-up, left out of the summaries)
REQUESTS_PER_CONCURRENCY = 10
#: rounds of a benchmark's profiling phase: aiconfigurator's benchmark template sends ``concurrency * 20`` requests
#: after ``concurrency * 2`` warm-up requests (``--num-requests``, ``--warmup-request-count`` of aiperf in
#: ``src/aiconfigurator/generator/config/backend_templates/benchmark/bench_run.sh.j2``, github.com/ai-dynamo/
#: aiconfigurator at commit 095f58a51c4c), and aiperf waits for every warm-up response before profiling starts
#: (aiperf docs, "Warmup Phase Configuration", Grace Period), so the profiling phase begins with a burst of
#: ``concurrency`` requests on an idle engine
BENCHMARK_ROUNDS = 20


def serve(model: ModelConfig, gpu: str, tp: int, isl, osl, concurrency: int, *, num_requests: int | None = None,
          gemm_dtype: str = "bfloat16", max_num_batched_tokens: int | None = None,
          max_num_seqs: int | None = None, start: str = "steady",
          client_delay: bool = True, benchmark_rounds: int | None = BENCHMARK_ROUNDS, predict_fn: Callable = predict,
          models_dir: str | os.PathLike | None = None, registry: Registry | None = None,
          collectives: CollectiveModel | None = None, overhead: Overhead = Overhead(),
          gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, kv_cache_dtype: str | None = None) -> dict:
    """TTFT and TPOT (mean, median, p90; ms) of ``num_requests`` requests (default
    :data:`REQUESTS_PER_CONCURRENCY` x ``concurrency``) of ``isl`` prompt and ``osl`` output tokens (scalars or
    per-request arrays) served by vLLM in a closed loop at ``concurrency`` on ``tp`` GPUs ``gpu``; ``start`` how the
    first wave arrives (:func:`.scheduler.simulate`), whose requests are left out of the summaries (warm-up) when the
    trace has more; ``client_delay`` (default on) makes a replacement miss the step already under way when it
    arrives (:func:`.scheduler.simulate`).

    ``benchmark_rounds`` (default :data:`BENCHMARK_ROUNDS`; None = the steady state alone) summarises what a benchmark
    client measures: a profiling phase of ``benchmark_rounds * concurrency`` requests that starts with a burst of
    ``concurrency`` requests on an idle engine. Its first wave is simulated on its own (``start="burst"``, one wave);
    the later rounds are the steady state's measured requests, weighted to ``benchmark_rounds - 1`` waves. The
    two are simulated apart because a deterministic loop with equal output lengths keeps a burst's waves in lock
    step for ever, which the measured TTFTs at low concurrency (about one prefill) rule out.

    The scheduler has vLLM's limits ``max_num_batched_tokens`` and ``max_num_seqs``, each by default vLLM's own for
    ``gpu`` (:func:`.metrics.vllm_batch_defaults`), and the KV cache of :func:`.metrics.kv_cache_tokens` at
    ``gpu_memory_utilization``. ``kv_cache_dtype`` (vLLM's ``--kv-cache-dtype``) sizes that cache and prices the
    attention launches on it; default :func:`.price.kv_cache_dtype_of` ``gemm_dtype``.
    The result also has ``*_low_ms``/``*_high_ms`` for the means when the kernel predictors give intervals (NaN
    otherwise, with ``interval`` saying so), ``iterations``, ``preemptions``, ``kv_cache_tokens``, per-family
    seconds (``s_<family>``), ``seen_<family>`` (the GPU is one of that family's training GPUs), and the
    ``max_num_batched_tokens``, ``max_num_seqs`` and ``kv_cache_dtype`` used.

    Raises:
        InputError: a limit below 1, ``max_num_batched_tokens`` below ``max_num_seqs`` (vLLM refuses it;
            :class:`.scheduler.SchedulerConfig`), from :func:`.scheduler.simulate` or :func:`.price.price_schedule`.
        KVCapacityError: the KV cache cannot hold one block or one request (an :class:`InputError`).
    """
    registry = registry or default_registry()
    n = int(num_requests or REQUESTS_PER_CONCURRENCY * concurrency)
    p = np.broadcast_to(np.asarray(isl, dtype="int64"), (n,))
    o = np.broadcast_to(np.asarray(osl, dtype="int64"), (n,))
    tokens, seqs = vllm_batch_defaults(gpu, registry)
    tokens = tokens if max_num_batched_tokens is None else int(max_num_batched_tokens)
    seqs = seqs if max_num_seqs is None else int(max_num_seqs)
    kv_tokens = kv_cache_tokens(model, tp, gpu, registry, gemm_dtype, gpu_memory_utilization, kv_cache_dtype)
    try:
        config = SchedulerConfig(tokens, seqs, kv_cache_tokens=kv_tokens)
    except KVCapacityError:
        raise
    except InputError as e:   # say which limit was vLLM's default rather than the caller's
        default = [n for n, v in (("max_num_batched_tokens", max_num_batched_tokens), ("max_num_seqs", max_num_seqs))
                   if v is None]
        raise InputError(f"{e}" + (f"; {' and '.join(default)}: vLLM's default on {gpu}" if default else "")) from None
    parts = [_served(simulate(p, o, concurrency, config, start=start, client_delay=client_delay),
                     model, gpu, tp, gemm_dtype, predict_fn, models_dir, registry, collectives, overhead,
                     kv_cache_dtype)]
    if benchmark_rounds is not None:
        if int(benchmark_rounds) < 1:
            raise InputError(f"serve: benchmark_rounds must be >= 1, got {benchmark_rounds}")
        first = simulate(p[:concurrency], o[:concurrency], concurrency, config, start="burst")
        parts.insert(0, _served(first, model, gpu, tp, gemm_dtype, predict_fn, models_dir, registry, collectives,
                                overhead, kv_cache_dtype))
    weights = _wave_weights(parts, benchmark_rounds)
    sched, priced = parts[-1]["sched"], parts[-1]["priced"]
    row = {**summarize(np.concatenate([q["ttft"] for q in parts]), "ttft", weights),
           **summarize(np.concatenate([q["tpot"] for q in parts]), "tpot", weights)}
    if priced.low_s is not None:
        for name in ("ttft", "tpot"):
            w = [float(x.sum()) for x in np.split(weights, np.cumsum([len(q[name]) for q in parts])[:-1])]
            for side in ("low", "high"):
                row[f"{name}_{side}_ms"] = float(np.dot([q[f"{name}_{side}"] for q in parts], w) / sum(w))
        row["interval"] = ("80%: fully correlated within a kernel model, independent across models "
                           "(synperf.e2e.intervals)")
    else:
        row.update(ttft_low_ms=np.nan, ttft_high_ms=np.nan, tpot_low_ms=np.nan, tpot_high_ms=np.nan,
                   interval="no kernel intervals recorded by the models")
    keep = sched.measured
    row.update(iterations=sched.iterations, requests=n, measured_requests=int(keep.sum()),
               preemptions=int(sum(q["sched"].preemptions.sum() for q in parts)),
               kv_cache_tokens=config.kv_cache_tokens, max_num_batched_tokens=config.max_num_batched_tokens,
               max_num_seqs=config.max_num_seqs, kv_cache_dtype=kv_cache_dtype_of(gemm_dtype, kv_cache_dtype))
    row.update({f"s_{k}": v for k, v in priced.family_s.items()})
    row.update({f"seen_{k}": v for k, v in priced.seen.items()})
    return row


def _served(sched, model, gpu, tp, gemm_dtype, predict_fn, models_dir, registry, collectives, overhead,
            kv_cache_dtype=None) -> dict:
    """One schedule priced: its measured requests' TTFT and TPOT (ms) and, with kernel intervals, the bounds of
    their means (:func:`synperf.e2e.intervals.quadrature_bounds`)."""
    priced = price_schedule(sched, model, gpu, tp, gemm_dtype=gemm_dtype, predict_fn=predict_fn,
                            models_dir=models_dir, registry=registry, collectives=collectives, overhead=overhead,
                            kv_cache_dtype=kv_cache_dtype)
    keep = sched.measured
    ttft, tpot = request_times(sched, priced.latency_s)
    out = {"sched": sched, "priced": priced, "ttft": ttft[keep], "tpot": tpot[keep]}
    if priced.low_s is not None:
        deltas = {f: (priced.family_low_s[f], priced.family_high_s[f]) for f in priced.family_low_s}
        for i, name in enumerate(("ttft", "tpot")):
            def metric(lat, i=i):
                v = request_times(sched, lat)[i][keep]
                v = v[np.isfinite(v)]   # one-token outputs have no TPOT
                return float(v.mean()) if len(v) else float("nan")
            out[f"{name}_low"], out[f"{name}_high"] = quadrature_bounds(metric, priced.latency_s, deltas)
    return out


def _wave_weights(parts: list[dict], rounds: int | None) -> np.ndarray:
    """Per measured request of ``parts`` (first wave, then steady state; or the steady state alone), the weight that
    makes the steady state's requests count as ``rounds - 1`` waves beside one first wave."""
    if len(parts) == 1:
        return np.ones(len(parts[0]["ttft"]))
    first, steady = len(parts[0]["ttft"]), len(parts[1]["ttft"])
    w_steady = (rounds - 1) * first / steady if steady else 0.0
    return np.concatenate([np.ones(first), np.full(steady, w_steady)])


def plan_serving(df, model: ModelConfig, isl: int, osl: int, concurrency: int, *, registry: Registry,
                 collectives: CollectiveModel | None = None, models_dir: str | os.PathLike | None = None,
                 overhead: Overhead = Overhead(), predict_fn: Callable = predict,
                 serving_error: dict[str, float] | None = None, kv_cache_dtype: str | None = None,
                 max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None):
    """``synperf plan --concurrency``: the plan table ``df`` (:func:`synperf.e2e.plan.plan`) with ``ttft_ms``,
    ``tpot_ms`` and their ``*_low_ms``/``*_high_ms`` bounds from :func:`serve` at ``concurrency``, the vLLM settings
    each row was served with (``max_num_batched_tokens``, ``max_num_seqs``, ``kv_cache_dtype``) and
    ``serving_status``: ``ok``, or why the row has no TTFT/TPOT. Every row with ``pp`` 1 whose weights can be sharded
    so is served, including those whose static batch does not fit (a server queues and preempts instead); a row
    :func:`serve` refuses with a :class:`.scheduler.KVCapacityError` (the weights leave no KV block, one request
    exceeds the cache) says so; any other refusal stops the plan. The linear
    layers are priced in the model's dtype, the KV cache sized at each row's ``gpu_memory_utilization`` (the
    plan's); ``kv_cache_dtype``, ``max_num_batched_tokens`` and ``max_num_seqs`` go to :func:`serve` (None: its
    defaults, vLLM's for each GPU). ``serving_error`` (``{"ttft": c, "tpot": c}``,
    :func:`.error.read_serving_error`) widens the kernel bounds by the simulator's own error
    (:func:`synperf.e2e.intervals.widen`); None: kernel bounds only.

    Raises:
        InputError: from :func:`serve` other than a KV-capacity refusal: ``max_num_batched_tokens`` below
            ``max_num_seqs`` (given, or vLLM's default on a row's GPU), a family without a trained model.
    """
    out = df.copy()
    cols = ["ttft_ms", "ttft_low_ms", "ttft_high_ms", "tpot_ms", "tpot_low_ms", "tpot_high_ms"]
    settings = {"max_num_batched_tokens": "Int64", "max_num_seqs": "Int64", "kv_cache_dtype": "string"}
    for c in cols:
        out[c] = np.nan
    for c, dtype in {**settings, "serving_status": "string"}.items():
        out[c] = pd.Series(pd.NA, index=out.index, dtype=dtype)
    for i, r in out.iterrows():
        status = str(r["status"])
        if int(r["pp"]) != 1:
            out.loc[i, "serving_status"] = "not modelled: the serving simulator has no pipeline parallelism (pp 1)"
            continue
        if status != "ok" and not status.startswith("does not fit"):
            out.loc[i, "serving_status"] = status
            continue
        try:
            res = serve(model, r["gpu"], int(r["tp"]), isl, osl, concurrency, gemm_dtype=model.dtype,
                        predict_fn=predict_fn, models_dir=models_dir, registry=registry, collectives=collectives,
                        overhead=overhead, gpu_memory_utilization=float(r.get("gpu_memory_utilization",
                                                                              GPU_MEMORY_UTILIZATION)),
                        kv_cache_dtype=kv_cache_dtype, max_num_batched_tokens=max_num_batched_tokens,
                        max_num_seqs=max_num_seqs)
        except KVCapacityError as e:   # this configuration cannot serve (no KV room): said on its row
            out.loc[i, "serving_status"] = f"not served: {e}"
            continue
        for m in ("ttft", "tpot"):
            if serving_error:
                res[f"{m}_low_ms"], res[f"{m}_high_ms"] = widen(res[f"{m}_mean_ms"], res[f"{m}_low_ms"],
                                                                res[f"{m}_high_ms"], serving_error[m])
        out.loc[i, cols] = [res["ttft_mean_ms"], res["ttft_low_ms"], res["ttft_high_ms"], res["tpot_mean_ms"],
                            res["tpot_low_ms"], res["tpot_high_ms"]]
        for c in settings:
            out.loc[i, c] = res[c]
        out.loc[i, "serving_status"] = "ok"
    return out


def serving_lines(df, concurrency: int, serving_error: str | None) -> list[str]:
    """The lines ``synperf plan --concurrency`` prints under its table: per served row of ``df``
    (:func:`plan_serving`) TTFT and TPOT with their 80% bounds and the vLLM settings it was served with, then how
    the intervals were made (``serving_error``: the file that widened them, or None)."""
    lines = []
    for r in df.itertuples():
        if r.serving_status != "ok":
            lines.append(f"{r.gpu} tp{r.tp} pp{r.pp}: no TTFT/TPOT ({r.serving_status})")
            continue
        tpot = (f"{r.tpot_ms:.2f} ms [{r.tpot_low_ms:.2f}-{r.tpot_high_ms:.2f}]" if not pd.isna(r.tpot_ms)
                else "- (one output token)")
        lines.append(f"{r.gpu} tp{r.tp}: TTFT {r.ttft_ms:.1f} ms [{r.ttft_low_ms:.1f}-{r.ttft_high_ms:.1f}], TPOT "
                     f"{tpot} at concurrency {concurrency} (vLLM max_num_batched_tokens {r.max_num_batched_tokens}, "
                     f"max_num_seqs {r.max_num_seqs}, {r.kv_cache_dtype} KV cache)"
                     + ("" if r.status == "ok" else "; the static batch above does not fit, the server queues"))
    lines.append("(TTFT/TPOT intervals: " + (f"kernel errors plus the serving simulator's error measured on real runs, "
                                             f"{serving_error})" if serving_error else
                                             "kernel errors only; --serving-error results/serving/serving_error.json "
                                             "adds the simulator's error measured on real serving runs)"))
    return lines
