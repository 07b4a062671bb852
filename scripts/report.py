"""Rule script: the Markdown report, its tables and figure."""
from synperf.report import build_report

sm = snakemake  # noqa: F821
build_report(list(sm.input.mape), sm.input.merge, list(sm.input.model_meta), list(sm.input.feature_meta),
             sm.output.md, sm.output.mape, sm.output.summary, sm.output.counts, sm.output.dropped,
             sm.output.figure)
