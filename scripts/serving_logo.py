"""Rule script: leave-one-GPU-out TTFT/TPOT of the priced vLLM rows (synperf.serving.logo.score_logo)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.rule import run
from synperf.serving.logo import read_predictions, score_logo
from synperf.serving.silicon import public_inputs

sm = snakemake  # noqa: F821


def main():
    registry, collectives, silicon = public_inputs(sm.input.registry, sm.params.measured_dir, sm.params.data_dir,
                                                   sm.params.e2e.get("collective_gpu_map"))
    tables = score_logo(silicon, Path(sm.input.examples[0]).parent, sm.input.scores,
                        read_predictions(sm.input.predictions), str(Path(sm.output.scores).parent),
                        registry=registry, collectives=collectives, experiments=dict(sm.params.experiments),
                        models_dir=str(Path(sm.input.models[0]).parents[1]), baseline_csv=sm.input.baseline)
    print(tables["serving_logo_mape"].to_string(index=False))


run(sm, main)
