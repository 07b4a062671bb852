"""Rule script: the primary feature set chosen on the seen GPUs, and the selection table."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.selection import choose_feature_set

sm = snakemake  # noqa: F821
choose_feature_set(list(sm.input.scores), sm.params.configured, dict(sm.params.training), sm.output.table,
                   sm.output.choice)
Path(sm.log[0]).write_text(Path(sm.output.choice).read_text() + "\n")
