# synperf: kernel latency prediction on seen and unseen GPUs. Thin on purpose: configuration, validation,
# rule modules and the default target. All logic lives in the `synperf` package.
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.20")

sys.path.insert(0, workflow.basedir)
from synperf.data.checks import check_data_dir, check_references
from synperf.data.download import load_manifest
from synperf.data.hardware import load_registry


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


validate(config, "workflow/schemas/config.schema.yaml")
REGISTRY = load_registry(config["gpu_registry"])
check_references(config, REGISTRY)
MANIFEST = load_manifest(config["public_data_manifest"])
check_data_dir(config)
EXPERIMENTS = sorted(config["experiments"])
# the package's code is an input of every step, so editing e.g. a feature set reruns what depends on it
# (the profiler's and the characterization's code are left out: editing them must not retrain every model)
SYNPERF_CODE = sorted(str(p) for p in Path(workflow.basedir, "synperf").rglob("*.py")
                      if not {"profiling", "characterize"} & set(p.parts))


FEATURE_SET = config["feature_set"]
COMPARE_SETS = [fs for fs in config.get("compare_feature_sets", []) if fs != FEATURE_SET]
ABLATION = config.get("ablation", {})


wildcard_constraints:
    experiment="|".join(EXPERIMENTS),
    source="|".join(config["ingest"]["sources"]),
    feature_set="v1|v2|v2_paper|v2_launch",
    group="all|math|memory",


include: "rules/download.smk"
include: "rules/ingest.smk"
include: "rules/features.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/protocols.smk"
include: "rules/selection.smk"
include: "rules/report.smk"
include: "rules/profile.smk"
include: "rules/characterize.smk"


rule all:
    default_target: True
    input:
        "results/report.md",
