# synperf: kernel latency prediction on seen and unseen GPUs. Thin on purpose: configuration, validation,
# rule modules and the default target. All logic lives in the `synperf` package.
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.20")

sys.path.insert(0, workflow.basedir)
from synperf.data.checks import check_data_dir, check_references
from synperf.data.download import E2E_PREFIXES, load_manifest
from synperf.data.hardware import load_registry
from synperf.evaluation.goals import CORE_FAMILIES
from synperf.imports import code_closure
from synperf.model.features import FEATURE_SETS, check_feature_set_names, primary_feature_set


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


validate(config, "workflow/schemas/config.schema.yaml")
# measured GPU values (rules/characterize.smk) merged over the registry's datasheet ones, unless
# characterize.use_measured is false; every rule that loads the registry gets the same two paths
HARDWARE_DIR = config.get("hardware_measurements_dir", "data/hardware")
MEASURED_DIR = HARDWARE_DIR if (config.get("characterize") or {}).get("use_measured", True) else None
REGISTRY = load_registry(config["gpu_registry"], MEASURED_DIR)
check_references(config, REGISTRY)
check_feature_set_names(config)
MANIFEST = load_manifest(config["public_data_manifest"])
check_data_dir(config)
EXPERIMENTS = sorted(config["experiments"])


# the configured feature set: every experiment's primary one unless its entry names another (`feature_set`), the
# leave-one-out folds' default and the ablation's and the P80 ceiling models'
FEATURE_SET = config["feature_set"]
COMPARE_SETS = [fs for fs in config.get("compare_feature_sets", []) if fs != FEATURE_SET]
ABLATION = config.get("ablation", {})
SELECTION = config.get("selection") or {"candidates": [FEATURE_SET]}
# training recipes chosen per experiment on the seen GPUs (rules/selection.smk); the experiment's primary, comparison
# and ablation MLPs train with the chosen one (the leave-one-out protocol folds with `training` as configured)
RECIPES = SELECTION.get("recipes") or {}
RECIPE_CHOICE = "results/selection/{experiment}/recipe.json"
RECIPE_INPUT = {"recipe": RECIPE_CHOICE} if RECIPES else {}
# every feature set some rule reads: the primary one, the compared ones and the selection candidates (built
# together, per experiment, by the `features` rule)
FEATURE_SETS_BUILT = list(dict.fromkeys([FEATURE_SET, *COMPARE_SETS, *SELECTION["candidates"]]))


wildcard_constraints:
    experiment="|".join(EXPERIMENTS),
    source="|".join(config["ingest"]["sources"]),
    feature_set="|".join(FEATURE_SETS),
    group="all|math|memory",


include: "rules/common.smk"
include: "rules/download.smk"
include: "rules/ingest.smk"
include: "rules/features.smk"
include: "rules/train.smk"
include: "rules/protocols.smk"
include: "rules/selection.smk"
include: "rules/e2e.smk"
include: "rules/serving.smk"
include: "rules/ceiling.smk"
include: "rules/fewshot.smk"
include: "rules/deploy.smk"
include: "rules/report.smk"
include: "rules/profile.smk"
include: "rules/characterize.smk"


# the report and, as products in their own right, the fingerprint predictors `synperf.api.predict` reads (so a
# missing one retrains its experiment even when everything that read it is up to date)
rule all:
    default_target: True
    input:
        "results/report.md",
        fingerprint_files(EXPERIMENTS),
