# GPU profiling (docs/profiling.md). Not part of `rule all`: profiling needs an NVIDIA GPU and is asked for
# explicitly. One job per (GPU, kernel) writes data/measurements/<gpu>/<kernel>.parquet (canonical schema) and
# <kernel>.provenance.json beside it; the next `snakemake --cores all` merges the Parquet into training/report.
#   snakemake --cores all profile_local         every kernel family on this machine's GPU (id detected)
#   snakemake --workflow-profile workflow/profiles/slurm profile_all --config 'profiling={gpus: [h100_sxm]}'
#                                               one job per (listed GPU type, kernel) on a SLURM cluster
# Its helpers (the targets, local_gpu_id: the subprocess GPU detection) are in rules/common.smk.
import json
import os
import sys

from synperf.gpu.profiling import PROFILED_KERNELS


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
        f"{config['measurements_dir']}/{{gpu}}/{{kernel}}.parquet",
    log:
        "results/logs/profile_{gpu}_{kernel}.log",
    wildcard_constraints:
        gpu="|".join(sorted(REGISTRY.ids)),
        kernel="|".join(PROFILED_KERNELS),
    conda:
        "../environment.yml"
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
