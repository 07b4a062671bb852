"""The sweep: measure every point of a grid, survive failures, resume after a kill, merge atomically.

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
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import socket
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from synperf.data.io import write_json, write_parquet
from synperf.data.schema import COLUMNS, conform, validate
from synperf.gpu.profiling import SOURCE, ProfilingError
from synperf.gpu.profiling.grids import point_key

log = logging.getLogger("synperf.gpu.profiling")

#: messages of CUDA errors after which the context is unusable (cudaError_t descriptions)
FATAL_CUDA_ERRORS = ("illegal memory access", "unspecified launch failure", "device-side assert",
                     "misaligned address", "illegal instruction", "an illegal", "launch timed out",
                     "uncorrectable ECC", "GPU is lost")


class FatalDeviceError(ProfilingError):
    """A failure that leaves the CUDA context unusable: the sweep stops; the rerun resumes after the point."""


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
