"""Rule script: few-shot calibration chosen on the seen GPUs and scored on the unseen GPUs, table and figure."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.fewshot_summary import fewshot_stage
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: fewshot_stage(list(sm.params.experiments), list(sm.input.path_rows), list(sm.input.protocol_rows),
                              [str(Path(p).parent) for p in sm.input.path_choices], sm.output.table, sm.output.choice,
                              sm.output.figure, figure_experiments=list(sm.params.figure_experiments),
                              configs=dict(sm.params.configs)))
