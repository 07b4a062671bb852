"""Rule script: the distinct kernel launches the serving simulator prices on the serving experiments' seen GPUs."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.data.hardware import load_registry
from synperf.data.io import write_parquet
from synperf.e2e.collectives import CollectiveModel
from synperf.pipeline.rule import run
from synperf.serving.logo import record_launches
from synperf.serving.silicon import read_silicon

sm = snakemake  # noqa: F821


def main():
    registry = load_registry(sm.input.registry, sm.params.measured_dir)
    data = Path(sm.params.data_dir)
    collectives = CollectiveModel.from_dir(data / "pipeweave" / "dataset" / "collective", registry,
                                           sm.params.e2e.get("collective_gpu_map"))
    launches = record_launches(read_silicon(data / "aiconfigurator" / "silicon_sample_public.csv"),
                               Path(sm.input.examples[0]).parent, registry=registry, collectives=collectives,
                               experiments=dict(sm.params.experiments), gpus=list(sm.params.gpus))
    write_parquet(launches, sm.output[0])
    print(launches.groupby(["experiment", "gpu"]).size().to_string())


run(sm, main)
