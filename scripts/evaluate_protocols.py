"""Rule script: every method under the evaluation protocols for one experiment (progress in the rule's log)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.protocols import evaluate_protocols
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: evaluate_protocols(
    sm.input.table, sm.input.meta, sm.wildcards.experiment, dict(sm.params.exp), sm.input.registry,
    int(sm.params.seed), dict(sm.params.training), list(sm.params.names),
    list(sm.params.methods) if sm.params.methods else None, sm.threads, sm.output.table, out_cdf=sm.output.cdf,
    model_dir=str(Path(sm.input.model).parent), measured_dir=sm.params.measured_dir, out_rows=sm.output.rows,
    experiments=dict(sm.params.experiments),
    feature_tables=dict(zip(sm.params.candidates, zip(sm.input.candidate_tables, sm.input.candidate_metas))),
    feature_scores=list(sm.input.feature_scores), configured_feature_set=sm.params.feature_set,
    serving_launches=sm.input.serving_launches, out_launches=sm.output.serving_logo, logo_gpus=sm.params.logo_gpus))
