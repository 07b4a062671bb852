"""Rule script: check one experiment's split against the contract (no test data in training)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.leaks import check_leaks

sm = snakemake  # noqa: F821
check_leaks(sm.input.table, sm.wildcards.experiment, dict(sm.params.exp), sm.input.registry,
            dict(sm.params.training), int(sm.params.seed), sm.output.report, measured_dir=sm.params.measured_dir)
Path(sm.log[0]).write_text(Path(sm.output.report).read_text() + "\n")
