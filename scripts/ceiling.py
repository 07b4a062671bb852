"""Rule script: P80 ceiling models, gap analysis and fused-MoE config suggestions."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

import json

from synperf.data.hardware import load_registry
from synperf.evaluation.ceiling import run as run_ceiling
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821


def main():
    registry = load_registry(sm.input.registry, sm.params.measured_dir)
    summary = run_ceiling(str(Path(sm.input.tables[0]).parents[1]), sm.params.feature_set, dict(sm.params.experiments),
                          dict(sm.params.training), dict(sm.params.ceiling), int(sm.params.seed), sm.threads,
                          sm.params.data_dir, dict(sm.params.gpu_map), registry, sm.output.models,
                          str(Path(sm.output.summary).parent))
    print(json.dumps(summary, indent=2))


run(sm, main)
