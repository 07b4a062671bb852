"""Rule script: the Markdown report, its tables and figure."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.report import build_report

sm = snakemake  # noqa: F821
build_report(list(sm.input.mape), sm.input.merge, list(sm.input.model_meta), list(sm.input.feature_meta),
             sm.output.md, sm.output.mape, sm.output.summary, sm.output.counts, sm.output.dropped,
             sm.output.figure, experiments=dict(sm.params.experiments),
             compare_tables=list(sm.input.compare), ablation_tables=list(sm.input.ablation),
             out_compare=sm.output.compare, out_ablation=sm.output.ablation)
