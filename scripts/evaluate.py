"""Rule script: predictions and MAPE tables for one experiment."""
from pathlib import Path

from synperf.pipeline import evaluate_experiment

sm = snakemake  # noqa: F821
evaluate_experiment(sm.input.table, sm.input.meta, str(Path(sm.input.model).parent), sm.wildcards.experiment,
                    sm.output.predictions, sm.output.mape)
