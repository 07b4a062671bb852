"""Rule script: few-shot with the fingerprint predictor on each experiment's unseen GPUs, table and figure."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.fewshot import fewshot_stage
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: fewshot_stage(list(sm.params.experiments), list(sm.input.models), list(sm.input.tables),
                              dict(sm.params.kernels), sm.input.registry, sm.params.measured_dir, sm.output.table,
                              sm.output.choice, sm.output.figure,
                              figure_experiments=list(sm.params.figure_experiments)))
