# Hardware characterization (docs/profiling.md, "Hardware characterization"; synperf/gpu/characterize). Not part of
# `rule all`: it needs an NVIDIA GPU and is asked for explicitly. It measures the local GPU's achievable DRAM, L2
# and shared-memory bandwidth, GEMM throughput per dtype and FP32 FMA throughput, with the SM clock NVML observed
# during each, and writes <hardware_measurements_dir>/<gpu>.json; synperf.data.hardware.load_registry merges those
# values over the datasheet ones of config/gpus.yaml.
#   snakemake --cores all characterize_local        this machine's GPU (id detected as for profile_local)
#   snakemake --cores all data/hardware/h100_sxm.json   the same, checking the visible GPU is that one
# Its helpers (characterize_local_target, and local_gpu_id, the subprocess GPU detection) are in rules/common.smk.
import json
import os
import sys


rule characterize_local:
    input:
        characterize_local_target,


rule characterize_gpu:
    # No `input:` on purpose (as profile_kernel): a committed data/hardware/<gpu>.json must never make a
    # GPU-less run re-measure it. To measure again: --forcerun characterize_gpu.
    output:
        f"{HARDWARE_DIR}/{{gpu}}.json",
    log:
        "results/logs/characterize_{gpu}.log",
    wildcard_constraints:
        gpu="|".join(sorted(REGISTRY.ids)),
    conda:
        "../environment.yml"
    resources:
        gpu=1,
    params:
        python=sys.executable,
        entry=os.path.join(workflow.basedir, "scripts", "characterize.py"),
        registry=config["gpu_registry"],
        settings=json.dumps(CHARACTERIZE.get("settings") or {}, sort_keys=True),
    shell:
        "{params.python:q} {params.entry:q} --gpu {wildcards.gpu} --out {output:q} --registry {params.registry:q}"
        " --settings {params.settings:q} --log {log:q}"
