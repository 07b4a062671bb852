"""Rule script: one experiment's unseen and leave-one-seen-GPU-out predictions for the few-shot simulation."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.fewshot import fewshot_rows
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: fewshot_rows(sm.input.features, sm.input.meta, str(Path(sm.input.path_choice).parent),
                             sm.wildcards.experiment, sm.input.registry, dict(sm.params.training),
                             int(sm.params.seed), sm.threads, sm.output[0], measured_dir=sm.params.measured_dir,
                             recipe=sm.input.get("recipe")))
