"""Rule script: serving-level TTFT/TPOT of every priced vLLM row of aiconfigurator's silicon sample."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

import time

from synperf.pipeline.rule import run
from synperf.serving.score import score_silicon
from synperf.serving.silicon import public_inputs

sm = snakemake  # noqa: F821


def main():
    registry, collectives, silicon = public_inputs(sm.input.registry, sm.params.measured_dir, sm.params.data_dir,
                                                   sm.params.e2e.get("collective_gpu_map"))
    t0 = time.time()
    tables = score_silicon(silicon, Path(sm.input.examples[0]).parent,
                           str(Path(sm.output.scores).parent), registry=registry, collectives=collectives,
                           models_dir=str(Path(sm.input.models[0]).parents[1]), baseline_csv=sm.input.baseline,
                           experiments=sm.params.experiments)
    print(tables["serving_mape"].to_string(index=False))
    print(f"serving: {len(tables['serving_scores'])} rows in {time.time() - t0:.1f} s")


run(sm, main)
