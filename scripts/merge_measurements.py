"""Rule script: merge source tables and our own measurements, check them against physics, reduce duplicates."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.merge import merge_measurements
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: merge_measurements(list(sm.input.tables), list(sm.input.summaries), list(sm.input.own),
                                   sm.input.registry, sm.output.table, sm.output.summary,
                                   measured_dir=sm.params.measured_dir, quality=sm.params.quality))
