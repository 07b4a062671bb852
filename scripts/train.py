"""Rule script: train and score the models of one experiment (progress in the rule's log)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.rule import run
from synperf.pipeline.train import train_models

sm = snakemake  # noqa: F821
exp = sm.wildcards.experiment
models = [{**m, "table": m["table"].format(experiment=exp), "meta": m["meta"].format(experiment=exp),
           "model_dir": str(Path(model).parent), "predictions": pred, "mape": mape}
          for m, model, pred, mape in zip(sm.params.models, sm.output.models, sm.output.predictions, sm.output.mape)]
models.sort(key=lambda m: not m.get("primary"))  # the primary model first
fingerprint = ({"table": sm.input.fp_table, "meta": sm.input.fp_meta, "registry": sm.input.registry,
                "measured_dir": sm.params.measured_dir, "max_train_rows": sm.params.fp_max_train_rows,
                "out": sm.output.fingerprint} if "fingerprint" in sm.output.keys() else None)
run(sm, lambda: train_models(exp, dict(sm.params.exp), models, int(sm.params.seed), sm.threads,
                             recipe=sm.input.get("recipe"), fingerprint=fingerprint))
