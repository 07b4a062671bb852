"""The profiling rules on a machine without a GPU: explicit targets fail clearly, the default target never
profiles, the cluster target plans one `gpu=1` job per (GPU type, kernel)."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from synperf.data.schema import conform

REPO = Path(__file__).resolve().parent.parent


def snakemake(*args):
    """Run snakemake; Snakemake prints its errors on stdout, so stderr is merged into ``.out``."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    proc.out = proc.stdout
    return proc


def has_gpu():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU: profile_local would plan real jobs")
def test_profile_local_without_gpu_fails_with_the_reason():
    proc = snakemake("-n", "profile_local")
    assert proc.returncode != 0
    assert "no NVIDIA GPU visible" in proc.out and "profiling needs one" in proc.out, proc.out[-2000:]
    assert "docs/profiling.md" in proc.out


def test_profile_all_plans_one_gpu_job_per_type_and_kernel():
    proc = snakemake("-n", "profile_all", "--config", "profiling={gpus: [h100_sxm, a100_sxm4_80gb]}")
    assert proc.returncode == 0, proc.out[-3000:]
    out = proc.out
    for kernel in ("gemm", "gemm_fp8", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul", "fused_moe"):
        assert f"data/measurements/h100_sxm/{kernel}.parquet" in out
    assert "data/measurements/a100_sxm4_80gb/gemm.parquet" in out
    assert "data/measurements/a100_sxm4_80gb/gemm_fp8.parquet" not in out      # no FP8 Tensor Cores on A100
    jobs = [line for line in out.splitlines() if line.strip().startswith("resources:") and "gpu=1" in line]
    assert len(jobs) == 13                                                      # 7 + 6 timing jobs, gpu=1 each


def test_profile_all_needs_gpu_types():
    proc = snakemake("-n", "profile_all")
    assert proc.returncode != 0 and "profiling.gpus is empty" in proc.out


def test_default_target_never_profiles(tmp_path):
    """An own measurement file matches the profiling rule's output; the default DAG must not re-profile it,
    even when it is older than the sweep files (a rule input would make a GPU-less run try to)."""
    d = tmp_path / "measurements" / "h100_sxm"
    d.mkdir(parents=True)
    conform(pd.DataFrame([{"gpu": "h100_sxm", "kernel": "rmsnorm", "implementation": "x", "dtype": "bfloat16",
                           "num_tokens": 1, "hidden_size": 4096, "latency_us": 3.0, "latency_stat": "median",
                           "source": "synperf_profiler", "source_version": "t"}])).to_parquet(d / "rmsnorm.parquet")
    os.utime(d / "rmsnorm.parquet", (1e9, 1e9))                                  # 2001: older than any sweep file
    proc = snakemake("-n", "--config", f"measurements_dir={tmp_path / 'measurements'}")
    assert proc.returncode == 0, proc.out[-3000:]
    planned = {line.split()[1] for line in proc.out.splitlines() if line.startswith(("rule ", "localrule "))}
    assert "merge_measurements:" in planned and "all:" in planned
    assert "profile_kernel:" not in planned


def test_default_profile_caps_the_gpu_resource():
    profile = yaml.safe_load((REPO / "profiles/default/profile.yaml").read_text())
    assert profile["resources"] == {"gpu": 1}
    slurm = yaml.safe_load((REPO / "workflow/profiles/slurm/profile.yaml").read_text())
    assert slurm["executor"] == "slurm"
    assert {"slurm_partition", "gpu_model"} <= set(slurm["set-resources"]["profile_kernel"])


def test_default_profile_rate_limiter_reevaluates_rarely_and_never_limits():
    """The job rate limiter's re-evaluation period (one re-check of every ready job's inputs per timespan and per
    finished job) is at least 10 s, at most 30 s (a run waits that long after its last job), and its limit is at
    least Snakemake's default of 100 jobs, far above the jobs a run starts in that time (at most one per core)."""
    from snakemake.settings.types import MaxJobsPerTimespan

    profile = yaml.safe_load((REPO / "profiles/default/profile.yaml").read_text())
    limit = MaxJobsPerTimespan.parse_choice(profile["max-jobs-per-timespan"])
    assert 10 <= limit.timespan <= 30
    assert limit.max_jobs >= 100
