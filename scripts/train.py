"""Rule script: train one experiment's efficiency MLP."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

import contextlib

from synperf.pipeline.train import train_experiment

sm = snakemake  # noqa: F821
with open(sm.log[0], "w") as log, contextlib.redirect_stdout(log):
    train_experiment(sm.input.table, sm.input.meta, sm.wildcards.experiment, dict(sm.params.exp),
                     dict(sm.params.training), int(sm.params.seed), sm.threads,
                     str(Path(sm.output.model).parent), group=sm.wildcards.group)
