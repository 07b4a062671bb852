"""Rule script: check one experiment's split against the contract (no test data in training)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.leaks import check_leaks
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: check_leaks(dict(zip(sm.input.tables, sm.output.reports)), sm.wildcards.experiment,
                            dict(sm.params.exp), sm.input.registry, dict(sm.params.training), int(sm.params.seed),
                            measured_dir=sm.params.measured_dir))
