"""Rule script: summary of the protocol evaluation."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.report import protocol_report

sm = snakemake  # noqa: F821
protocol_report(list(sm.input.tables), sm.output.md, sm.output.summary)
