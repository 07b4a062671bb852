"""Rule script: leave-one-GPU-out TTFT/TPOT of the priced vLLM rows (synperf.serving.logo.score_logo)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.data.hardware import load_registry
from synperf.e2e.collectives import CollectiveModel
from synperf.pipeline.rule import run
from synperf.serving.logo import read_predictions, score_logo

sm = snakemake  # noqa: F821


def main():
    registry = load_registry(sm.input.registry, sm.params.measured_dir)
    data = Path(sm.params.data_dir)
    collectives = CollectiveModel.from_dir(data / "pipeweave" / "dataset" / "collective", registry,
                                           sm.params.e2e.get("collective_gpu_map"))
    tables = score_logo(data / "aiconfigurator" / "silicon_sample_public.csv", Path(sm.input.examples[0]).parent,
                        sm.input.scores, read_predictions(sm.input.predictions), str(Path(sm.output.scores).parent),
                        registry=registry, collectives=collectives, experiments=dict(sm.params.experiments),
                        models_dir=str(Path(sm.input.models[0]).parents[2]), baseline_csv=sm.input.baseline)
    print(tables["serving_logo_mape"].to_string(index=False))


run(sm, main)
