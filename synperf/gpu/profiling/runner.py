"""Profile one kernel family on the local GPU: the settings, measuring one point, one (GPU, kernel) sweep end to end.

The sweep bookkeeping (shards, resume, skips, merge) is :mod:`synperf.gpu.profiling.sweep`, the per-GPU lock
:mod:`synperf.gpu.profiling.lock`, the environment and fingerprint :mod:`synperf.gpu.profiling.provenance`.
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from synperf.data.io import InputError
from synperf.gpu.profiling import ProfilingError, supports_kernel
from synperf.gpu.profiling.grids import Grid, estimate_seconds, load_grid, minutes, short_points
from synperf.gpu.profiling.lock import gpu_lock
from synperf.gpu.profiling.nvml import GPUIdentity, clock_drop, is_throttled
from synperf.gpu.profiling.provenance import environment, fingerprint_of, source_version_of
from synperf.gpu.profiling.sweep import MeasureFn, SweepStats, merge_shards, run_sweep
from synperf.gpu.profiling.timing import HostTimer, Timer, TimingSettings, label_l2_state, rotation_count

log = logging.getLogger("synperf.gpu.profiling")


# ------------------------------------------------------------------------------------------------
# settings
# ------------------------------------------------------------------------------------------------

@dataclass
class ProfileSettings:
    """The config block ``profiling`` (``config/config.yaml``), with defaults.

    Attributes:
        timing: ``profiling.timing`` (see :class:`synperf.gpu.profiling.timing.TimingSettings`).
        smoke: use the reduced ``smoke`` grids.
        short: measure only this many points per kernel, drawn from the grid by the short-sweep rule
            (:func:`synperf.gpu.profiling.grids.short_points`); None: the whole grid.
        retry_skipped: measure again the points a previous run skipped.
        seed: base seed of the random inputs.
        lock_dir: folder of the per-GPU lock files (default ``$SYNPERF_GPU_LOCK_DIR`` or the temp folder).
        lock_timeout_s: give up waiting for a busy GPU after this many seconds (None: wait).
    """

    timing: dict[str, Any] = field(default_factory=dict)
    smoke: bool = False
    short: int | None = None
    retry_skipped: bool = False
    seed: int = 0
    lock_dir: str | None = None
    lock_timeout_s: float | None = None

    @classmethod
    def from_config(cls, cfg: dict | None) -> "ProfileSettings":
        cfg = dict(cfg or {})
        keys = {"timing", "smoke", "short", "retry_skipped", "seed", "lock_dir", "lock_timeout_s"}
        return cls(**{k: cfg[k] for k in keys if k in cfg and cfg[k] is not None})


# ------------------------------------------------------------------------------------------------
# measuring one point
# ------------------------------------------------------------------------------------------------

def make_measure(kernel: str, ctx, timer: Timer, timing: TimingSettings,
                 identity: GPUIdentity | None = None) -> MeasureFn:
    """The ``measure`` of :func:`run_sweep` for one kernel: prepare the case, check it against the
    reference once, sample NVML, time it, sample NVML again."""
    from synperf.gpu.profiling.launchers import get_launcher

    launcher = get_launcher(kernel)

    def measure(point: dict) -> tuple[dict, dict]:
        t0 = time.perf_counter()
        case = launcher.prepare(point, ctx)
        if timing.check and case.check is not None:
            case.check()
        before = identity.snapshot() if identity is not None else {}
        copies = 1
        if timing.method == "graph" and case.rotate is not None and ctx.is_cuda:
            copies = 1 if timing.l2 == "hot" else rotation_count(
                case.input_bytes, ctx.l2_bytes, timing.rotation_factor, timing.max_rotation_bytes,
                timing.max_rotations)
            result = timer.measure_rotating(case.rotate(copies))
        else:
            result = timer.measure(case.fn)
        label_l2_state(result, timing.l2, case.input_bytes, copies, ctx.l2_bytes)
        after = identity.snapshot() if identity is not None else {}
        row = {"implementation": case.implementation, **case.config, **result.stats()}
        extra = {**result.describe(), "details": case.details, "nvml_before": before, "nvml_after": after,
                 "sm_clock_drop": clock_drop(before.get("sm_clock_mhz"), after.get("sm_clock_mhz")),
                 "throttled": is_throttled(before.get("clock_event_reasons"))
                 or is_throttled(after.get("clock_event_reasons")),
                 "gpu_uuid": identity.uuid if identity is not None else None,
                 "point_seconds": round(time.perf_counter() - t0, 4)}
        return row, extra

    return measure


def free_memory(ctx) -> Callable[[str], None]:
    """``on_error`` hook: drop cached inputs and return cached GPU memory after a failed point."""

    def hook(category: str) -> None:
        ctx.cache.clear()
        gc.collect()
        if ctx.is_cuda:
            import torch

            torch.cuda.empty_cache()

    return hook


# ------------------------------------------------------------------------------------------------
# one (GPU, kernel) sweep end to end
# ------------------------------------------------------------------------------------------------

def make_context(device, seed: int = 0, use_flashinfer: bool = True):
    """A launcher :class:`~synperf.gpu.profiling.launchers.Context` for ``device`` (CUDA: capability and L2
    from the device properties, FlashInfer imported if present)."""
    import torch

    from synperf.gpu.profiling.launchers import Context, load_flashinfer

    device = torch.device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        fi, why = load_flashinfer() if use_flashinfer else (None, "disabled")
        l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)  # older torch: assume an H100-sized L2
        return Context(device=device, capability=(props.major, props.minor), l2_bytes=l2, flashinfer=fi,
                       flashinfer_error=why, seed=seed)
    return Context(device=device, flashinfer=None, flashinfer_error="FlashInfer needs a CUDA device", seed=seed)


def sweep_kernel(kernel: str, points: list[dict], out_parquet: str | Path, *, gpu: str, ctx, timer: Timer,
                 timing: TimingSettings, identity: GPUIdentity | None, meta: dict | None = None,
                 gpu_ids: set[str] | None = None, retry_skipped: bool = False, deadline: float | None = None,
                 source_file: str | None = None) -> tuple[SweepStats, pd.DataFrame]:
    """Run (or resume) the sweep of one kernel and merge it to ``out_parquet`` and its provenance sidecar.

    Returns:
        the run's statistics and the merged canonical table.
    """
    out_parquet = Path(out_parquet)
    shard_dir = out_parquet.parent / ".shards" / out_parquet.stem
    env = dict(meta or {})
    fp = fingerprint_of(timing, env)
    measure = make_measure(kernel, ctx, timer, timing, identity)
    stats = run_sweep(points, measure, shard_dir, fingerprint=fp, retry_skipped=retry_skipped,
                      deadline=deadline, on_error=free_memory(ctx))
    df = merge_shards(shard_dir, points, fingerprint=fp, gpu=gpu, kernel=kernel,
                      source_version=source_version_of(env),
                      source_file=source_file or f"{gpu}/{out_parquet.name}", out_parquet=out_parquet,
                      out_provenance=out_parquet.with_suffix(".provenance.json"),
                      meta={**env, "timing": timing.as_dict(), "run": stats.__dict__}, gpu_ids=gpu_ids)
    return stats, df


def profile_kernel(kernel: str, gpu: str, sweep: str | Path, out_parquet: str | Path, *,
                   registry_path: str | Path, profiling: dict | None = None) -> SweepStats:
    """Profile one kernel family on the local GPU (the body of the ``profile_kernel`` rule).

    Checks that the visible GPU (torch device 0, after ``CUDA_VISIBLE_DEVICES``) is the registry GPU
    ``gpu`` (matched by UUID through NVML), takes the GPU lock, sweeps ``sweep`` and writes
    ``out_parquet`` plus ``<kernel>.provenance.json`` beside it.

    Raises:
        NoGPUError: no CUDA device.
        ProfilingError: another GPU than ``gpu``, an unknown GPU, or a kernel this GPU cannot run.
        InputError: a bad sweep file.
    """
    from synperf.data.hardware import load_registry
    from synperf.gpu.profiling.nvml import local_gpu, require_cuda

    settings = ProfileSettings.from_config(profiling)
    torch = require_cuda()
    registry = load_registry(registry_path)
    identity = local_gpu(registry)
    if identity.gpu_id != gpu:
        raise ProfilingError(
            f"this job profiles {gpu!r} but the visible GPU is {identity.name!r} ({identity.uuid}), registry id "
            f"{identity.gpu_id!r}. Run it where a {gpu} is visible (SLURM: check the partition/gres mapping in "
            "workflow/profiles/slurm/profile.yaml; locally: CUDA_VISIBLE_DEVICES), or ask for "
            f"data/measurements/{identity.gpu_id}/{kernel}.parquet (`snakemake profile_local` does this).")
    cap = torch.cuda.get_device_capability(0)
    ok, why = supports_kernel(kernel, cap)
    if not ok:
        raise ProfilingError(f"{why}; `profile_local` leaves this kernel out on this GPU")
    grid: Grid = load_grid(sweep, smoke=settings.smoke)
    if settings.short:
        grid.points = short_points(grid.points, int(settings.short), registry[gpu], seed=settings.seed)
    try:
        timing = TimingSettings.from_dict(settings.timing, grid.timing)
    except InputError as exc:
        raise InputError(f"profiling.timing / {sweep}: {exc}") from None
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    with gpu_lock(identity.uuid, settings.lock_dir, settings.lock_timeout_s):
        ctx = make_context(device, seed=settings.seed)
        fi_version = (getattr(ctx.flashinfer, "__version__", "unknown") if ctx.flashinfer is not None else None)
        meta = environment(identity, ctx, fi_version)
        meta.update(sweep_file=str(sweep), sweep_sha256=grid.sha256, smoke=grid.smoke, short=settings.short)
        try:
            est = estimate_seconds(grid.points, registry[gpu], timing)
            log.info("%s on %s: %d points, roofline estimate %s", kernel, gpu, len(grid.points), minutes(est))
        except Exception as exc:  # the estimate is informative only
            log.info("%s on %s: %d points (no estimate: %s)", kernel, gpu, len(grid.points), exc)
        if meta.get("nvml_note"):
            log.warning("%s", meta["nvml_note"])
        timer = timer_for(ctx, timing)
        stats, df = sweep_kernel(kernel, grid.points, out_parquet, gpu=gpu, ctx=ctx, timer=timer, timing=timing,
                                 identity=identity, meta=meta, gpu_ids=registry.ids,
                                 retry_skipped=settings.retry_skipped)
    log.info("%s on %s: %d rows written to %s (%d measured now, %d skipped, %d from earlier runs, %.0f s)",
             kernel, gpu, len(df), out_parquet, stats.measured, stats.skipped, stats.already_done, stats.seconds)
    return stats


def timer_for(ctx, timing: TimingSettings) -> Timer:
    """:class:`~synperf.gpu.profiling.timing.CudaTimer` on a CUDA context, else a host-clock timer."""
    if ctx.is_cuda:
        from synperf.gpu.profiling.timing import CudaTimer

        return CudaTimer(timing, ctx.device, ctx.l2_bytes)
    return HostTimer(timing)
