"""Rule script: end-to-end latency of every configuration with a real serving run, scored against it."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

import functools
import time

from synperf.api import predict
from synperf.data.hardware import load_registry
from synperf.e2e.evaluate import run_e2e_evaluation
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821


def main():
    registry = load_registry(sm.input.registry, sm.params.measured_dir)
    models_dir = str(Path(sm.input.models[0]).parents[1])
    t0 = time.time()
    res = run_e2e_evaluation(sm.params.data_dir, sm.input.registry, models_dir, str(Path(sm.output.configs).parent),
                             dict(sm.params.e2e),
                             predict_fn=functools.partial(predict, models="evaluation"),
                             registry=registry)
    print(res["summary"].to_string(index=False))
    print(f"e2e: {len(res['configs'])} configurations in {time.time() - t0:.1f} s")


run(sm, main)
