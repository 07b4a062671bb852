"""Rule script: leave-one-seen-GPU-out score of one experiment's feature set (progress in the rule's log)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

import contextlib

from synperf.pipeline.selection import score_selection

sm = snakemake  # noqa: F821
with open(sm.log[0], "w") as log, contextlib.redirect_stdout(log):
    score_selection(sm.input.table, sm.input.meta, sm.wildcards.experiment, sm.input.registry, int(sm.params.seed),
                    dict(sm.params.training), sm.threads, sm.output.table, measured_dir=sm.params.measured_dir)
