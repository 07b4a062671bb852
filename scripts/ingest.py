"""Rule script: one public source -> canonical measurement table."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.ingest import ingest_source
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821


def main():
    ingest_source(sm.wildcards.source, sm.params.data_dir, sm.input.registry, dict(sm.params.cfg),
                  sm.output.table, sm.output.summary, measured_dir=sm.params.measured_dir,
                  listed_files=list(sm.input.files))


run(sm, main)
