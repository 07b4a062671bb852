"""Rule script: batch predict throughput on one CPU core."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.rule import run
from synperf.pipeline.throughput import predict_throughput

sm = snakemake  # noqa: F821
run(sm, lambda: print(predict_throughput(dict(sm.params.experiments), list(sm.input.features),
                                         str(Path(sm.input.models[0]).parents[1]), sm.input.registry,
                                         sm.output[0], n_launches=int(sm.params.n_launches),
                                         measured_dir=sm.params.measured_dir)))
