"""Rule script: features, split and target for one experiment."""
from synperf.pipeline import experiment_features

sm = snakemake  # noqa: F821
experiment_features(sm.input.measurements, sm.wildcards.experiment, dict(sm.params.exp), sm.input.registry,
                    sm.params.feature_set, int(sm.params.seed), sm.output.table, sm.output.meta)
