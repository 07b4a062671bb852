"""Rule script: one public source -> canonical measurement table."""
from synperf.pipeline import ingest_source

sm = snakemake  # noqa: F821
ingest_source(sm.wildcards.source, sm.params.data_dir, sm.input.registry, dict(sm.params.cfg),
              sm.output.table, sm.output.summary)
