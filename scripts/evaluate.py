"""Rule script: predictions and MAPE tables for one experiment."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)


from synperf.pipeline.evaluate import evaluate_experiment

sm = snakemake  # noqa: F821
evaluate_experiment(sm.input.table, sm.input.meta, str(Path(sm.input.model).parent), sm.wildcards.experiment,
                    sm.output.predictions, sm.output.mape)
