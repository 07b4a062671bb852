# Names and path helpers shared by the rule files, which the Snakefile includes after this one; what each stage
# reads and writes, derived from the config once.
import json
import os
import subprocess
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from synperf.data.hardware import measured_files
from synperf.gpu.characterize.run import no_gpu_message
from synperf.gpu.profiling import PROFILED_KERNELS, parse_capability, supports_kernel


def code_inputs(script):
    """The synperf modules a rule script imports, transitively (read with ast, synperf/imports.py), are the
    rule's code inputs, so editing e.g. a feature set reruns what depends on it and editing the report reruns only
    the report (the profiler's and the characterization's code are imported by no pipeline rule). Paths relative
    to the working folder, so a moved or copied checkout with its outputs and .snakemake/ reruns nothing."""
    return [os.path.relpath(p) for p in code_closure(Path(workflow.basedir, script))]


# ---- ingest
def source_files(wildcards):
    """The manifest's kernel-latency files of one source, under the configured data folder: the ingest rule's
    inputs (the end-to-end inputs, E2E_PREFIXES, are the e2e rule's)."""
    prefix = f"{wildcards.source}/"
    return [
        f"{config['public_data_dir']}/{p}" for p in MANIFEST if p.startswith(prefix) and not p.startswith(E2E_PREFIXES)
    ]


def e2e_files():
    """The manifest's end-to-end inputs (real runs, model configs, traces, collective tables) under the configured
    data folder: the e2e rule's inputs."""
    return [f"{config['public_data_dir']}/{p}" for p in MANIFEST if p.startswith(E2E_PREFIXES)]


OWN_MEASUREMENTS = sorted(str(p) for p in Path(config["measurements_dir"]).glob("*/*.parquet"))


# ---- features
# the measured hardware files merged over the registry (none when characterize.use_measured is false)
MEASURED_FILES = [str(p) for p in measured_files(MEASURED_DIR)]


def feature_outputs(ext):
    """Every built feature set's table (``parquet``) or meta (``json``) of one experiment (wildcard left in)."""
    return expand(f"results/features/{{fs}}/{{{{experiment}}}}.{ext}", fs=FEATURE_SETS_BUILT)


# ---- train
COMPARE_TRAINING = {**config["training"], **(config.get("compare_training") or {})}


def model_outputs(models):
    """Output paths of the (feature set, group) models of one experiment (wildcard left in)."""
    names = [f"{fs}-{g}" for fs, g in models]
    return {
        "models": [f"models/{{experiment}}/{n}/model.pt" for n in names],
        "metas": [f"models/{{experiment}}/{n}/meta.json" for n in names],
        "predictions": [f"results/predictions/{{experiment}}/{n}.parquet" for n in names],
        "mape": [f"results/tables/mape/{{experiment}}/{n}.csv" for n in names],
    }


def fingerprint_files(experiments):
    """Each experiment's fingerprint predictor, the file `synperf.api.predict` answers from."""
    return [f"models/{e}/fingerprint.joblib" for e in experiments]


def primary_fs(experiment):
    """The experiment's primary feature set (synperf.model.features.primary_feature_set)."""
    return primary_feature_set(config["experiments"][experiment], FEATURE_SET)


def primary_file(pattern, experiment):
    """`pattern` with `{fs}` the experiment's primary feature set and `{experiment}` filled in."""
    return pattern.format(fs=primary_fs(experiment), experiment=experiment)


def primary_input(pattern):
    """An input function: `pattern` of `primary_file` for the rule's `experiment` wildcard."""
    return lambda wc: primary_file(pattern, wc.experiment)


def model_specs(models, experiment):
    """Per model: feature set, group, budget, its feature table and whether it is the experiment's primary model
    (the rule script adds the output paths). The primary one trains with `training`, the others with
    `compare_training`."""
    return [
        {
            "feature_set": fs,
            "group": g,
            "primary": (fs, g) == (primary_fs(experiment), "all"),
            "training": config["training"] if (fs, g) == (primary_fs(experiment), "all") else COMPARE_TRAINING,
            "table": f"results/features/{fs}/{{experiment}}.parquet",
            "meta": f"results/features/{fs}/{{experiment}}.json",
        }
        for fs, g in models
    ]


# every experiment trains one model per feature set of `feature_set` and `compare_feature_sets` (its primary one
# among them, checked by synperf.model.features.check_feature_set_names)
TRAINED = [(FEATURE_SET, "all")] + [(fs, "all") for fs in COMPARE_SETS]
ABLATED = [(FEATURE_SET, g) for g in ABLATION.get("groups", [])]


# ---- protocols
PROTOCOLS = config.get("protocols", {})
PROTOCOL_NAMES = PROTOCOLS.get("names", ["configured", "logo", "loao"])
PROTOCOL_EXPERIMENTS = list(PROTOCOLS.get("experiments", EXPERIMENTS))
PROTOCOL_EXPERIMENTS += [e for e in PROTOCOLS.get("configured_only", []) if e not in PROTOCOL_EXPERIMENTS]


def protocol_names(experiment):
    """Protocols run for one experiment: all configured names, or only `configured` for `configured_only`, plus
    `logo` for a `configured_only` experiment the serving simulator prices (rule serving_logo needs its folds)."""
    if experiment in PROTOCOLS.get("experiments", EXPERIMENTS):
        return PROTOCOL_NAMES
    return ["configured"] + (["logo"] if experiment in SERVING_LOGO_EXPERIMENTS else [])


def serving_only_logo_gpus(experiment):
    """The GPUs whose leave-one-GPU-out folds a `configured_only` experiment runs for rule serving_logo (its seen
    GPUs, where the serving rows need a model that left them out); None (every fold) for the other experiments."""
    if experiment in PROTOCOLS.get("experiments", EXPERIMENTS) or experiment not in SERVING_LOGO_EXPERIMENTS:
        return None
    return list(config["experiments"][experiment]["seen"])


# ---- selection
SELECTION_EXPERIMENTS = list(SELECTION.get("experiments") or EXPERIMENTS)
# Training recipes (`selection.recipes`, overrides of `training`) are scored on each experiment's primary set in
# the same job; the experiment's models then train with the recipe its scores chose (RECIPE_CHOICE, see the Snakefile).
RECIPE_OUTPUTS = {"recipes": "results/selection/{experiment}/recipes.csv", "recipe": RECIPE_CHOICE} if RECIPES else {}


# ---- few-shot calibration and goals
# experiments with unseen GPUs (the few-shot simulation's); the core families the goals are stated over
FEWSHOT_EXPERIMENTS = [e for e in EXPERIMENTS if config["experiments"][e].get("unseen") and e in PROTOCOL_EXPERIMENTS]
CORE_EXPERIMENTS = [e for e in CORE_FAMILIES if e in EXPERIMENTS]


# ---- report
def mape_tables(experiments, feature_set, group):
    """The MAPE tables of one (feature set, group) model per experiment."""
    return [f"results/tables/mape/{e}/{feature_set}-{group}.csv" for e in experiments]


def benchmark_files():
    """The benchmark file of every job the report depends on (rules/*.smk `benchmark:` paths)."""
    per_exp = {
        "features": EXPERIMENTS,
        "check_leaks": EXPERIMENTS,
        "train": EXPERIMENTS,
        "train_ablation": ABLATION.get("experiments", []) if ABLATED else [],
        "score_selection": SELECTION_EXPERIMENTS,
        "evaluate_protocols": PROTOCOL_EXPERIMENTS,
    }
    files = [f"results/benchmarks/ingest_source/{s}.tsv" for s in config["ingest"]["sources"]]
    files += [f"results/benchmarks/{r}/{e}.tsv" for r, exps in per_exp.items() for e in exps]
    return files + [
        f"results/benchmarks/{r}.tsv"
        for r in ("merge_measurements", "choose_feature_set", "e2e", "ceiling", "fewshot", "predict_throughput")
    ]


# ---- ceiling
CEILING = config.get("ceiling") or {}
CEILING_TABLES = [
    "calibration",
    "underperforming",
    "worst_launches",
    "moe_default_gaps",
    "moe_underperforming",
    "moe_demo_comparison",
    "moe_suggestions",
    "moe_suggestion_summary",
]
# the authors' comparison files the ceiling reads (pipeweave moe_dse/improve and demo/)
CEILING_COMPARISON_FILES = [
    f"{config['public_data_dir']}/{p}"
    for p in MANIFEST
    if p.startswith(("pipeweave/pipetuning_test/moe_dse/improve/", "pipeweave/pipetuning_test/demo/"))
]


# ---- scheduling
# Job priorities (Snakemake runs the ready job with the highest first): a later stage before an earlier one, so an
# experiment's chain goes on as soon as it can, and among experiments the one with the most protocol folds (a
# proxy of its cost) first, so the longest jobs start early instead of running alone at the end. The few-shot
# simulation, the longest job only the report waits for, starts as soon as its inputs exist, beside the ablation models.
STAGE_RANK = {
    "train_ablation": 1,
    "features": 2,
    "check_leaks": 3,
    "score_selection": 4,
    "ceiling": 4,
    "e2e": 4,
    "train": 5,
    "evaluate_protocols": 6,
    "fewshot": 7,
}


def stage_priority(stage):
    """Priority function of a rule of `stage` (see STAGE_RANK)."""

    def priority(wildcards):
        exp = wildcards.get("experiment")
        if exp is None:
            return 100 * STAGE_RANK[stage]
        e = config["experiments"][exp]
        n_gpus = len(e["seen"]) + len(e.get("unseen", []))
        return 100 * STAGE_RANK[stage] + len(protocol_names(exp)) * n_gpus

    return priority


# ---- profile (rules/profile.smk)
PROFILING = config.get("profiling") or {}
PROFILE_KERNELS = list(PROFILING.get("kernels") or PROFILED_KERNELS)
SWEEPS_DIR = PROFILING.get("sweeps_dir", "config/sweeps")
_LOCAL_GPU = {}


def local_gpu_id():
    """Registry id of this machine's GPU (torch device 0 -> UUID -> NVML name -> config/gpus.yaml), found
    in a subprocess so this Snakemake process never holds a CUDA context; fails with the reason."""
    if "gpu" not in _LOCAL_GPU:
        path = os.pathsep.join(p for p in (workflow.basedir, os.environ.get("PYTHONPATH")) if p)
        proc = subprocess.run(
            [sys.executable, "-m", "synperf.gpu.profiling.nvml", "--registry", config["gpu_registry"]],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        if proc.returncode != 0:
            raise WorkflowError(proc.stderr.strip() or f"GPU detection failed (exit {proc.returncode})")
        _LOCAL_GPU["gpu"] = json.loads(proc.stdout)["gpu"]
    return _LOCAL_GPU["gpu"]


def kernels_for(gpu):
    """The configured kernels this GPU can run (no FP8 GEMM below compute capability 8.9)."""
    cap = parse_capability(REGISTRY[gpu].compute_capability)
    return [k for k in PROFILE_KERNELS if supports_kernel(k, cap)[0]]


def profile_targets(gpus):
    return [f"{config['measurements_dir']}/{gpu}/{kernel}.parquet" for gpu in gpus for kernel in kernels_for(gpu)]


def profile_local_targets(wildcards):
    return profile_targets([local_gpu_id()])


def profile_all_targets(wildcards):
    gpus = PROFILING.get("gpus") or []
    if not gpus:
        raise WorkflowError(
            "profile_all: config key profiling.gpus is empty; list the registry ids of the GPU types to profile, "
            "e.g. --config 'profiling={gpus: [h100_sxm, a100_sxm4_80gb]}', and submit with "
            "--workflow-profile workflow/profiles/slurm (docs/profiling.md). On one GPU machine use profile_local."
        )
    for gpu in gpus:
        REGISTRY[gpu]  # unknown id: InputError naming it
    if workflow.local_exec and not workflow.dryrun:
        local_gpu_id()  # running the jobs here: stop now, with the reason, if there is no GPU
    return profile_targets(gpus)


# ---- characterize (rules/characterize.smk)
CHARACTERIZE = config.get("characterize") or {}


def characterize_local_target(wildcards):
    """<hardware_measurements_dir>/<local gpu id>.json, or a clear error without a (known) GPU."""
    try:
        gpu = local_gpu_id()
    except WorkflowError as exc:
        msg = str(exc)
        if "no NVIDIA GPU visible" in msg:
            msg = no_gpu_message(msg)
        raise WorkflowError(f"characterize_local: {msg}") from None
    return f"{HARDWARE_DIR}/{gpu}.json"


# ---- deploy models (rules/deploy.smk)
DEPLOY_FILES = ["fingerprint.joblib"]


def deploy_outputs(experiments):
    """The deploy target's files: each experiment's fingerprint predictor and primary MLP under models/deploy/."""
    return [
        f
        for e in experiments
        for f in [f"models/deploy/{e}/mlp"] + [f"models/deploy/{e}/{name}" for name in DEPLOY_FILES]
    ]
