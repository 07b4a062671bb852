"""Provenance of a sweep: the environment (GPU, driver, library versions), the resume fingerprint, source_version."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from synperf.gpu.profiling.nvml import GPUIdentity
from synperf.gpu.profiling.timing import TimingSettings


def _version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:
        return None
    return str(getattr(mod, "__version__", "unknown"))


def git_commit(repo: Path | None = None) -> str | None:
    """``git rev-parse HEAD`` of the synperf checkout (None outside a git checkout)."""
    repo = repo or Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
    except Exception:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def environment(identity: GPUIdentity | None, ctx, flashinfer_version: str | None) -> dict[str, Any]:
    """Environment provenance of a sweep: GPU identity (NVML), driver, CUDA, torch, Triton, FlashInfer,
    Python and synperf versions, the host and the visible-device mask."""
    import torch

    from synperf import __version__

    env: dict[str, Any] = {
        "synperf": __version__, "git_commit": git_commit(), "python": sys.version.split()[0],
        "torch": torch.__version__, "cuda_runtime": torch.version.cuda, "triton": _version("triton"),
        "flashinfer": flashinfer_version, "host": socket.gethostname(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device": str(ctx.device), "compute_capability": f"{ctx.capability[0]}.{ctx.capability[1]}",
        "l2_bytes": ctx.l2_bytes,
    }
    if identity is not None:
        env.update(gpu_name=identity.name, gpu_uuid=identity.uuid, nvml=identity.identity,
                   nvml_note=identity.note or None,
                   driver_version=identity.identity.get("driver_version"),
                   cuda_driver_version=identity.identity.get("cuda_driver_version"))
    if ctx.is_cuda:
        props = torch.cuda.get_device_properties(ctx.device)
        env.update(sm_count=props.multi_processor_count, memory_bytes=props.total_memory,
                   cudnn=torch.backends.cudnn.version())
    return env


def fingerprint_of(timing: TimingSettings, env: dict[str, Any]) -> str:
    """Identity of the measurement conditions: timing settings plus library and driver versions.

    Not the GPU's UUID: a job resubmitted to another node with the same GPU type resumes the sweep (every
    point records the UUID it was measured on).
    """
    keys = ("torch", "cuda_runtime", "triton", "flashinfer", "driver_version")
    blob = json.dumps({"timing": timing.as_dict(), **{k: env.get(k) for k in keys}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def source_version_of(env: dict[str, Any]) -> str:
    """The ``source_version`` column: synperf version and commit, torch, CUDA, driver, Triton, FlashInfer."""
    commit = (env.get("git_commit") or "nogit")[:10]
    return (f"synperf {env.get('synperf')} ({commit}); torch {env.get('torch')}; cuda {env.get('cuda_runtime')}; "
            f"driver {env.get('driver_version')}; triton {env.get('triton')}; flashinfer {env.get('flashinfer')}")
