# GPU profiling (docs/profiling.md). Not part of `rule all`: profiling needs an NVIDIA GPU and is asked for
# explicitly. One job per (GPU, kernel) writes data/measurements/<gpu>/<kernel>.parquet (canonical schema) and
# <kernel>.provenance.json beside it; the next `snakemake --cores all` merges the Parquet into training/report.
#   snakemake --cores all profile_local         every kernel family on this machine's GPU (id detected)
#   snakemake --workflow-profile workflow/profiles/slurm profile_all --config 'profiling={gpus: [h100_sxm]}'
#                                               one job per (listed GPU type, kernel) on a SLURM cluster
import json
import os
import subprocess
import sys

from snakemake.exceptions import WorkflowError

from synperf.gpu.profiling import PROFILED_KERNELS, parse_capability, supports_kernel

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


rule profile_local:
    input:
        profile_local_targets,


rule profile_all:
    input:
        profile_all_targets,


rule profile_kernel:
    # No `input:` on purpose: existing measurement files are inputs of merge_measurements, and a sweep file newer
    # than them must never make a GPU-less `snakemake --cores all` re-profile them. For the same reason the
    # provenance sidecar (<kernel>.provenance.json, written before the Parquet) is not a declared output: a
    # hand-placed Parquet without one must not look incomplete. To re-profile: --forcerun profile_kernel
    # (finished points are kept: the sweep resumes from its shards unless the timing settings changed).
    output:
        config["measurements_dir"] + "/{gpu}/{kernel}.parquet",
    log:
        "results/logs/profile_{gpu}_{kernel}.log",
    wildcard_constraints:
        gpu="|".join(sorted(REGISTRY.ids)),
        kernel="|".join(PROFILED_KERNELS),
    resources:
        gpu=1,
    params:
        python=sys.executable,
        entry=os.path.join(workflow.basedir, "scripts", "profile.py"),
        sweep=lambda wc: f"{SWEEPS_DIR}/{wc.kernel}.yaml",
        registry=config["gpu_registry"],
        profiling=json.dumps(PROFILING, sort_keys=True),
    # shell, not script: a script newer than its output reruns the job (see scripts/profile.py)
    shell:
        "{params.python:q} {params.entry:q} --kernel {wildcards.kernel} --gpu {wildcards.gpu} --sweep {params.sweep:q}"
        " --out {output:q} --registry {params.registry:q} --profiling {params.profiling:q} --log {log:q}"
