"""Rule script: the primary feature set chosen on the seen GPUs, and the selection table."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.rule import run
from synperf.pipeline.selection import choose_feature_set

sm = snakemake  # noqa: F821


def main():
    choose_feature_set(list(sm.input.scores), sm.params.configured, dict(sm.params.training), sm.output.table,
                       sm.output.choice, experiments=dict(sm.params.experiments))
    print(Path(sm.output.choice).read_text())


run(sm, main)
