"""The sweep runner: measure every point of a grid, survive failures, resume after a kill, merge atomically.

Layout for one (GPU, kernel)::

    data/measurements/<gpu>/<kernel>.parquet          canonical rows (the rule's output), written last
    data/measurements/<gpu>/<kernel>.provenance.json  environment, per-point clocks/timing, skipped points
    data/measurements/<gpu>/.shards/<kernel>/*.jsonl  one append-only shard per run, one JSON line per point

* **Shards and resume.** Every finished point (measured *or* skipped) is appended to the run's shard as
  one JSON line, flushed and fsync'ed before the next point starts. A killed run loses at most the point
  in flight (a torn last line is ignored when read). The next run reads every shard, treats each point
  whose latest record carries the same *fingerprint* (timing settings and library versions) as done, and
  measures only the rest; changing the timing settings or upgrading torch/FlashInfer/Triton therefore
  re-measures everything. Skipped points are not retried unless ``retry_skipped`` is set.
* **Failures.** An exception at one point (out of memory, a kernel error, a reference mismatch, a missing
  library) is recorded as ``skipped`` with its reason and the sweep goes on. Errors that poison the CUDA
  context (illegal memory access, device-side assert) are recorded and then stop the process: the rerun
  resumes after the bad point.
* **Merge.** When the sweep is done, the latest record of every point of the *current* grid is merged
  into the canonical table (:func:`synperf.data.schema.conform` + :func:`~synperf.data.schema.validate`), written
  atomically (:func:`synperf.data.io.write_parquet`), after the provenance sidecar.
* **One job per GPU.** :func:`gpu_lock` takes an exclusive ``fcntl.flock`` on a lock file named after
  the GPU's UUID (in ``$SYNPERF_GPU_LOCK_DIR`` or the system temp folder) for the whole sweep, so two
  timing processes never share a GPU even outside Snakemake's ``gpu`` resource.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import gc
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from synperf.data.io import InputError, write_json, write_parquet
from synperf.data.schema import COLUMNS, conform, validate
from synperf.gpu.profiling import SOURCE, ProfilingError, supports_kernel
from synperf.gpu.profiling.grids import Grid, estimate_seconds, load_grid, minutes, point_key, short_points
from synperf.gpu.profiling.nvml import GPUIdentity, clock_drop, is_throttled, uuid_hex
from synperf.gpu.profiling.timing import HostTimer, Timer, TimingSettings, label_l2_state, rotation_count

log = logging.getLogger("synperf.gpu.profiling")

#: messages of CUDA errors after which the context is unusable (cudaError_t descriptions)
FATAL_CUDA_ERRORS = ("illegal memory access", "unspecified launch failure", "device-side assert",
                     "misaligned address", "illegal instruction", "an illegal", "launch timed out",
                     "uncorrectable ECC", "GPU is lost")


class FatalDeviceError(ProfilingError):
    """A failure that leaves the CUDA context unusable: the sweep stops; the rerun resumes after the point."""


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
# shards
# ------------------------------------------------------------------------------------------------

class ShardWriter:
    """Append-only JSON-lines shard of one run (``<dir>/<utc time>-<host>-<pid>-<random>.jsonl``)."""

    def __init__(self, shard_dir: str | Path):
        self.dir = Path(shard_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        self.path = self.dir / f"{stamp}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}.jsonl"
        self._fh = None

    def append(self, record: dict) -> None:
        """Write one record and make it durable (flush + fsync) before returning."""
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        self._fh.write(json.dumps(record, sort_keys=True, default=_json_default) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def read_shards(shard_dir: str | Path) -> list[dict]:
    """Every complete record of every shard in ``shard_dir``, in file then line order (oldest first).

    A line that does not parse (the torn tail of a killed run) is ignored.
    """
    d = Path(shard_dir)
    if not d.is_dir():
        return []
    out = []
    for path in sorted(d.glob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and "key" in rec and "status" in rec:
                    out.append(rec)
    return out


def latest_records(records: list[dict], fingerprint: str) -> dict[str, dict]:
    """The latest record per point key among those made with ``fingerprint`` (by ``finished_at``)."""
    latest: dict[str, dict] = {}
    for rec in records:
        if rec.get("fingerprint") != fingerprint:
            continue
        prev = latest.get(rec["key"])
        if prev is None or rec.get("finished_at", "") >= prev.get("finished_at", ""):
            latest[rec["key"]] = rec
    return latest


# ------------------------------------------------------------------------------------------------
# failures
# ------------------------------------------------------------------------------------------------

def classify_failure(exc: BaseException) -> str:
    """Short category of a failed point: ``out_of_memory``, ``reference_mismatch``, ``unsupported``,
    ``cuda_fatal`` or ``kernel_error``."""
    from synperf.gpu.profiling.launchers import ReferenceMismatch, Unsupported

    msg = str(exc)
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in msg.lower():
        return "out_of_memory"
    if isinstance(exc, ReferenceMismatch):
        return "reference_mismatch"
    if isinstance(exc, Unsupported):
        return "unsupported"
    if is_fatal(exc):
        return "cuda_fatal"
    return "kernel_error"


def is_fatal(exc: BaseException) -> bool:
    """Whether ``exc`` is a CUDA error after which the context cannot be used (see :data:`FATAL_CUDA_ERRORS`)."""
    msg = str(exc)
    return "CUDA" in msg and any(s.lower() in msg.lower() for s in FATAL_CUDA_ERRORS)


# ------------------------------------------------------------------------------------------------
# the sweep
# ------------------------------------------------------------------------------------------------

@dataclass
class SweepStats:
    """What one :func:`run_sweep` call did.

    Attributes:
        total: points in the grid.
        already_done: points a previous run finished (same fingerprint).
        measured, skipped: points finished by this run.
        not_run: points left because the deadline passed.
        seconds: wall time of this run.
    """

    total: int
    already_done: int = 0
    measured: int = 0
    skipped: int = 0
    not_run: int = 0
    seconds: float = 0.0


MeasureFn = Callable[[dict], tuple[dict, dict]]


def run_sweep(points: list[dict], measure: MeasureFn, shard_dir: str | Path, *, fingerprint: str,
              retry_skipped: bool = False, deadline: float | None = None,
              on_error: Callable[[str], None] | None = None,
              clock: Callable[[], float] = time.monotonic) -> SweepStats:
    """Measure the points not finished yet, appending one shard record per point.

    Args:
        points: the grid (:func:`synperf.gpu.profiling.grids.expand`).
        measure: ``point -> (row, extra)``: canonical column values and per-point provenance; raises on
            failure.
        shard_dir: ``.shards/<kernel>`` folder.
        fingerprint: identity of the measurement conditions; records with another fingerprint do not count
            as done.
        retry_skipped: measure skipped points again.
        deadline: ``clock()`` value after which no new point starts (the smoke script's time box).
        on_error: called with the failure category after a failed point (e.g. to free cached GPU memory).

    Raises:
        FatalDeviceError: after recording a point whose error poisons the CUDA context.
        KeyboardInterrupt, SystemExit: propagate at once (the shard keeps what was finished).
    """
    t_start = clock()
    done = latest_records(read_shards(shard_dir), fingerprint)
    finished = {k for k, r in done.items() if r["status"] == "ok" or (r["status"] == "skipped" and not retry_skipped)}
    stats = SweepStats(total=len(points))
    todo = [p for p in points if point_key(p) not in finished]
    stats.already_done = len(points) - len(todo)
    if stats.already_done:
        log.info("resuming: %d of %d points already finished in %s", stats.already_done, len(points), shard_dir)
    writer = ShardWriter(shard_dir)
    try:
        for i, point in enumerate(todo):
            if deadline is not None and clock() > deadline:
                stats.not_run = len(todo) - i
                log.warning("time budget spent: %d points not run", stats.not_run)
                break
            key = point_key(point)
            t0 = clock()
            rec: dict[str, Any] = {"key": key, "fingerprint": fingerprint, "point": point}
            try:
                row, extra = measure(point)
                rec.update(status="ok", row=row, extra=extra)
                stats.measured += 1
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # one point's failure must not stop the sweep
                category = classify_failure(exc)
                rec.update(status="skipped", category=category,
                           reason=f"{category}: {type(exc).__name__}: {str(exc)[:500]}")
                stats.skipped += 1
                log.warning("skipped %s: %s", _short(point), rec["reason"])
            rec["seconds"] = round(clock() - t0, 4)
            rec["finished_at"] = _dt.datetime.now(_dt.timezone.utc).isoformat()
            writer.append(rec)
            if rec["status"] == "skipped":
                if rec["category"] == "cuda_fatal":
                    raise FatalDeviceError(
                        f"{rec['reason']}: the CUDA context is unusable, stopping. The point is recorded as "
                        f"skipped in {writer.path}; rerun to resume after it.")
                if on_error is not None:  # outside the except block: the traceback no longer pins the tensors
                    on_error(rec["category"])
            if (stats.measured + stats.skipped) % 25 == 0:
                log.info("%d/%d points done (%d skipped)", stats.already_done + stats.measured + stats.skipped,
                         len(points), stats.skipped)
    finally:
        writer.close()
    stats.seconds = clock() - t_start
    return stats


def _short(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items() if k not in ("kernel",) and not isinstance(v, dict))


def merge_shards(shard_dir: str | Path, points: list[dict], *, fingerprint: str, gpu: str, kernel: str,
                 source_version: str, source_file: str, out_parquet: str | Path, out_provenance: str | Path,
                 meta: dict | None = None, gpu_ids: set[str] | None = None) -> pd.DataFrame:
    """Merge the latest record of every point of ``points`` into the canonical table and its sidecar.

    The provenance JSON (written first) holds ``meta`` (environment, settings), counts, every skipped
    point with its reason, and per measured point its key, implementation, timing method, L2 policy,
    NVML state before/after and launcher details. The Parquet is written last, atomically: its presence
    means the sweep finished.

    Raises:
        ProfilingError: no point of the grid was measured (the message lists the skip reasons).
        InputError: the rows fail :func:`synperf.data.schema.validate`.
    """
    latest = latest_records(read_shards(shard_dir), fingerprint)
    rows, measured, skipped, missing = [], [], [], []
    for p in points:
        key = point_key(p)
        rec = latest.get(key)
        if rec is None:
            missing.append({"key": key, "point": p})
        elif rec["status"] == "ok":
            row = {k: v for k, v in p.items() if k in COLUMNS}
            row.update(rec["row"])
            row.update(gpu=gpu, kernel=kernel, source=SOURCE, source_version=source_version,
                       source_file=source_file, latency_stat="median", n_duplicates=1)
            rows.append(row)
            measured.append({"key": key, "point": p, "implementation": rec["row"].get("implementation"),
                             "latency_us": rec["row"].get("latency_us"), **rec.get("extra", {}),
                             "seconds": rec.get("seconds"), "finished_at": rec.get("finished_at")})
        else:
            skipped.append({"key": key, "point": p, "reason": rec.get("reason"), "category": rec.get("category")})
    reasons = Counter(s["category"] for s in skipped)
    if not rows:
        first = "; ".join(f"{s['reason']}" for s in skipped[:3]) or "no point finished"
        raise ProfilingError(f"{kernel} on {gpu}: none of the {len(points)} points was measured "
                             f"({dict(reasons)}; first: {first}); details in {shard_dir}")
    df = conform(pd.DataFrame(rows))
    validate(df, str(out_parquet), gpu_ids)
    prov = {
        **(meta or {}),
        "gpu": gpu, "kernel": kernel, "fingerprint": fingerprint, "source_version": source_version,
        "counts": {"points": len(points), "measured": len(rows), "skipped": len(skipped), "not_run": len(missing)},
        "skip_reasons": dict(reasons),
        "skipped": skipped,
        "not_run": missing,
        "points": measured,
        "written_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
    }
    write_json(prov, out_provenance)
    write_parquet(df, out_parquet)
    return df


# ------------------------------------------------------------------------------------------------
# the GPU lock
# ------------------------------------------------------------------------------------------------

def lock_path(uuid: str, lock_dir: str | Path | None = None) -> Path:
    """``<lock_dir>/synperf-gpu-<uuid hex>.lock``; default folder ``$SYNPERF_GPU_LOCK_DIR`` or the temp dir."""
    d = Path(lock_dir or os.environ.get("SYNPERF_GPU_LOCK_DIR") or tempfile.gettempdir())
    return d / f"synperf-gpu-{uuid_hex(uuid)}.lock"


@contextlib.contextmanager
def gpu_lock(uuid: str, lock_dir: str | Path | None = None, timeout_s: float | None = None,
             poll_s: float = 2.0) -> Iterator[Path]:
    """Hold an exclusive ``fcntl.flock`` on the GPU's lock file for the duration of the block.

    Waits (polling every ``poll_s`` seconds, logging who holds it) until the lock is free.

    Raises:
        ProfilingError: still busy after ``timeout_s`` seconds.
    """
    path = lock_path(uuid, lock_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        writable = True
    except PermissionError:  # another user's lock file: a read-only descriptor can still be flock'ed
        fd = os.open(path, os.O_RDONLY)
        writable = False
    try:
        start = time.monotonic()
        warned = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = path.read_text(errors="replace").strip() or "another process"
                if timeout_s is not None and time.monotonic() - start >= timeout_s:
                    raise ProfilingError(f"GPU {uuid} is busy ({path} held by {holder}); gave up after "
                                         f"{timeout_s:g} s") from None
                if not warned:
                    log.warning("GPU %s is busy (%s held by %s): waiting", uuid, path, holder)
                    warned = True
                time.sleep(poll_s)
        if writable:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                         f"{_dt.datetime.now(_dt.timezone.utc).isoformat()}\n".encode())
        yield path
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


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
# environment
# ------------------------------------------------------------------------------------------------

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
