"""Rule script: leave-one-seen-GPU-out score of one experiment's candidate feature sets (progress in the rule's log)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.rule import run
from synperf.pipeline.selection import score_selection

sm = snakemake  # noqa: F821
run(sm, lambda: score_selection(list(zip(sm.input.tables, sm.input.metas, sm.output.tables)), sm.wildcards.experiment,
                                sm.input.registry, int(sm.params.seed), dict(sm.params.training), sm.threads,
                                measured_dir=sm.params.measured_dir, recipes=dict(sm.params.recipes),
                                recipe_features=(sm.input.primary_table, sm.input.primary_meta),
                                out_recipes=sm.output.get("recipes"), out_recipe=sm.output.get("recipe")))
