"""Benchmark: the serving simulator on a 1,000-request trace (target: under 10 s on one core).

    python3 benchmarks/serving_trace.py [--requests 1000] [--concurrency 64] [--gpu h100_sxm] [--tp 4]
                                        [--model llama-3.1-70b] [--models-dir models] [--collectives DIR]

A random trace (seed 0; prompts uniform in 256..8192 tokens, outputs uniform in 16..1024) served in a closed loop
by :func:`synperf.serving.scheduler.simulate` with vLLM's defaults and the KV cache of
:func:`synperf.serving.metrics.kv_cache_tokens`, then priced by :func:`synperf.serving.price.price_schedule` (one
``predict`` per kernel family, fp8 linear layers). Printed: iterations, distinct launches per family, seconds for
scheduling, pricing and TTFT/TPOT, and the TTFT/TPOT summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from synperf.e2e._deps import default_paths, load_registry, predict  # noqa: E402
from synperf.e2e.collectives import CollectiveModel  # noqa: E402
from synperf.e2e.model_config import load_model_config  # noqa: E402
from synperf.serving.metrics import kv_cache_tokens, request_times, summarize  # noqa: E402
from synperf.serving.price import price_schedule  # noqa: E402
from synperf.serving.scheduler import SchedulerConfig, simulate  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--gpu", default="h100_sxm")
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--collectives", default=str(REPO.parent / "shared/public-data/pipeweave/dataset/collective"))
    a = ap.parse_args(argv)
    d = default_paths()
    reg = load_registry(d["registry"], d["measured_dir"])
    cfg = yaml.safe_load(Path(d["config"]).read_text())
    coll = CollectiveModel.from_dir(a.collectives, reg, cfg["e2e"]["collective_gpu_map"])
    model = load_model_config(REPO / "examples" / "models" / f"{a.model}.json")
    rng = np.random.default_rng(0)
    p, o = rng.integers(256, 8193, a.requests), rng.integers(16, 1025, a.requests)
    calls = []

    def counting_predict(family, params, gpu, **kw):
        calls.append((family, len(params)))
        return predict(family, params, gpu, **kw)

    t0 = time.perf_counter()
    sched = simulate(p, o, a.concurrency, SchedulerConfig(kv_cache_tokens=kv_cache_tokens(model, a.tp, a.gpu, reg,
                                                                                         "fp8")))
    t1 = time.perf_counter()
    priced = price_schedule(sched, model, a.gpu, a.tp, gemm_dtype="fp8", predict_fn=counting_predict,
                            models_dir=a.models_dir, registry=reg, collectives=coll)
    t2 = time.perf_counter()
    ttft, tpot = request_times(sched, priced.latency_s)
    t3 = time.perf_counter()
    print(f"{a.requests} requests, concurrency {a.concurrency}, {a.model} on {a.tp} x {a.gpu}: "
          f"{sched.iterations} iterations, {int(sched.preemptions.sum())} preemptions")
    print("predict calls (family, distinct launches):", calls)
    print(f"schedule {t1 - t0:.2f} s, price {t2 - t1:.2f} s, TTFT/TPOT {t3 - t2:.3f} s, total {t3 - t0:.2f} s")
    print({**summarize(ttft, "ttft"), **summarize(tpot, "tpot")})


if __name__ == "__main__":
    main()
