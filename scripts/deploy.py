"""Rule script: train one experiment's deploy model on every measured GPU (progress in the rule's log)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.rule import run
from synperf.pipeline.train import train_models

sm = snakemake  # noqa: F821
exp = sm.wildcards.experiment
model = {"feature_set": sm.params.feature_set, "group": "all", "primary": True, "training": dict(sm.params.training),
         "table": sm.input.table, "meta": sm.input.meta, "model_dir": sm.output.mlp}
fingerprint = {"table": sm.input.fp_table, "meta": sm.input.fp_meta, "registry": sm.input.registry,
               "measured_dir": sm.params.measured_dir, "max_train_rows": sm.params.fp_max_train_rows,
               "out": sm.output.fingerprint}
run(sm, lambda: train_models(exp, dict(sm.params.exp), [model], int(sm.params.seed), sm.threads,
                             recipe=sm.input.get("recipe"), deploy=True,
                             fingerprint=fingerprint))
