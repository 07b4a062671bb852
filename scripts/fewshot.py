"""Rule script: few-shot calibration chosen on the seen GPUs and scored on the unseen GPUs, table and figure."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.fewshot_summary import fewshot_summary
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: fewshot_summary(list(sm.input.rows), sm.output.table, sm.output.choice, sm.output.figure,
                                figure_experiments=list(sm.params.figure_experiments)))
