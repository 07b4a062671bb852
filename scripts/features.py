"""Rule script: features, split and target for one experiment."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.features import experiment_features

sm = snakemake  # noqa: F821
experiment_features(sm.input.measurements, sm.wildcards.experiment, dict(sm.params.exp), sm.input.registry,
                    sm.wildcards.feature_set, int(sm.params.seed), sm.output.table, sm.output.meta,
                    measured_dir=sm.params.measured_dir)
