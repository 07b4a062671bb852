"""Rule script: features, split and target for one experiment, every feature set."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.features import experiment_features
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
outputs = dict(zip(sm.params.feature_sets, zip(sm.output.tables, sm.output.metas)))
run(sm, lambda: experiment_features(sm.input.measurements, sm.wildcards.experiment, dict(sm.params.exp),
                                    sm.input.registry, outputs, int(sm.params.seed),
                                    measured_dir=sm.params.measured_dir))
