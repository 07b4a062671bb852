"""Rule script: the distinct kernel launches the serving simulator prices on the serving experiments' seen GPUs."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.data.io import write_parquet
from synperf.pipeline.rule import run
from synperf.serving.logo import record_launches
from synperf.serving.silicon import public_inputs, read_silicon

sm = snakemake  # noqa: F821


def main():
    registry, collectives, silicon = public_inputs(sm.input.registry, sm.params.measured_dir, sm.params.data_dir,
                                                   sm.params.e2e.get("collective_gpu_map"))
    launches = record_launches(read_silicon(silicon), Path(sm.input.examples[0]).parent, registry=registry,
                               collectives=collectives, experiments=dict(sm.params.experiments),
                               gpus=list(sm.params.gpus))
    write_parquet(launches, sm.output[0])
    print(launches.groupby(["experiment", "gpu"]).size().to_string())


run(sm, main)
