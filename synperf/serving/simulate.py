"""One serving configuration end to end: schedule (vLLM rules), price (kernel predictors), TTFT/TPOT summary."""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from ._deps import CollectiveModel, ModelConfig, Overhead, Registry, default_registry, predict, quadrature_bounds
from .metrics import kv_cache_tokens, request_times, summarize
from .price import price_schedule
from .scheduler import SchedulerConfig, simulate

#: requests served per configuration, per unit of concurrency, when the caller does not say (the silicon rows do
#: not record how many requests their benchmark sent)
REQUESTS_PER_CONCURRENCY = 10


def serve(model: ModelConfig, gpu: str, tp: int, isl, osl, concurrency: int, *, num_requests: int | None = None,
          gemm_dtype: str = "bfloat16", config: SchedulerConfig | None = None, start: str = "steady",
          client_delay: bool = True, predict_fn: Callable = predict,
          models_dir: str | os.PathLike | None = None, registry: Registry | None = None,
          collectives: CollectiveModel | None = None, overhead: Overhead = Overhead()) -> dict:
    """TTFT and TPOT (mean, median, p90; ms) of ``num_requests`` requests (default
    :data:`REQUESTS_PER_CONCURRENCY` x ``concurrency``) of ``isl`` prompt and ``osl`` output tokens (scalars or
    per-request arrays) served by vLLM in a closed loop at ``concurrency`` on ``tp`` GPUs ``gpu``; ``start`` how the
    first wave arrives (:func:`.scheduler.simulate`), whose requests are left out of the summaries (warm-up) when the
    trace has more; ``client_delay`` (default on) makes a replacement miss the step already under way when it
    arrives (:func:`.scheduler.simulate`).

    ``config`` defaults to vLLM's defaults for a >= 70 GiB GPU with the KV cache of :func:`.metrics.kv_cache_tokens`.
    The result also has ``*_low_ms``/``*_high_ms`` for the means when the kernel predictors give intervals (NaN
    otherwise, with ``interval`` saying so), ``iterations``, ``preemptions``, ``kv_cache_tokens``, per-family
    seconds (``s_<family>``) and ``seen_<family>`` (the GPU is one of that family's training GPUs).

    Raises:
        InputError: from :func:`.scheduler.simulate` or :func:`.price.price_schedule`.
    """
    registry = registry or default_registry()
    n = int(num_requests or REQUESTS_PER_CONCURRENCY * concurrency)
    p = np.broadcast_to(np.asarray(isl, dtype="int64"), (n,))
    o = np.broadcast_to(np.asarray(osl, dtype="int64"), (n,))
    if config is None:
        config = SchedulerConfig(kv_cache_tokens=kv_cache_tokens(model, tp, gpu, registry, gemm_dtype))
    sched = simulate(p, o, concurrency, config, start=start, client_delay=client_delay)
    priced = price_schedule(sched, model, gpu, tp, gemm_dtype=gemm_dtype, predict_fn=predict_fn,
                            models_dir=models_dir, registry=registry, collectives=collectives, overhead=overhead)
    ttft, tpot = request_times(sched, priced.latency_s)
    keep = sched.measured
    row = {**summarize(ttft[keep], "ttft"), **summarize(tpot[keep], "tpot")}
    if priced.low_s is not None:
        deltas = {f: (priced.family_low_s[f], priced.family_high_s[f]) for f in priced.family_low_s}
        for i, name in enumerate(("ttft", "tpot")):
            def metric(lat, i=i):
                return float(np.nanmean(request_times(sched, lat)[i][keep]))
            row[f"{name}_low_ms"], row[f"{name}_high_ms"] = quadrature_bounds(metric, priced.latency_s, deltas)
        row["interval"] = ("80%: fully correlated within a kernel model, independent across models "
                           "(synperf.e2e.intervals)")
    else:
        row.update(ttft_low_ms=np.nan, ttft_high_ms=np.nan, tpot_low_ms=np.nan, tpot_high_ms=np.nan,
                   interval="no kernel intervals recorded by the models")
    row.update(iterations=sched.iterations, requests=n, measured_requests=int(keep.sum()),
               preemptions=int(sched.preemptions.sum()), kv_cache_tokens=config.kv_cache_tokens)
    row.update({f"s_{k}": v for k, v in priced.family_s.items()})
    row.update({f"seen_{k}": v for k, v in priced.seen.items()})
    return row


def plan_serving(df, model: ModelConfig, isl: int, osl: int, concurrency: int, *, registry: Registry,
                 collectives: CollectiveModel | None = None, models_dir: str | os.PathLike | None = None,
                 overhead: Overhead = Overhead(), predict_fn: Callable = predict):
    """``synperf plan --concurrency``: the plan table ``df`` (:func:`synperf.e2e.plan.plan`) with ``ttft_ms``,
    ``tpot_ms`` and their ``*_low_ms``/``*_high_ms`` bounds from :func:`serve` at ``concurrency`` for every priced
    row with ``pp`` 1 (the serving simulator has no pipeline parallelism; other rows keep NaN). The linear layers
    are priced in the model's dtype.

    Raises:
        InputError: from :func:`serve`.
    """
    out = df.copy()
    cols = ["ttft_ms", "ttft_low_ms", "ttft_high_ms", "tpot_ms", "tpot_low_ms", "tpot_high_ms"]
    for c in cols:
        out[c] = np.nan
    for i, r in out[(out["status"] == "ok") & (out["pp"] == 1)].iterrows():
        res = serve(model, r["gpu"], int(r["tp"]), isl, osl, concurrency, gemm_dtype=model.dtype,
                    predict_fn=predict_fn, models_dir=models_dir, registry=registry, collectives=collectives,
                    overhead=overhead)
        out.loc[i, cols] = [res["ttft_mean_ms"], res["ttft_low_ms"], res["ttft_high_ms"], res["tpot_mean_ms"],
                            res["tpot_low_ms"], res["tpot_high_ms"]]
    return out
