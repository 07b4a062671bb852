"""The per-GPU lock: one timing process per GPU, even outside Snakemake's ``gpu`` resource.

:func:`gpu_lock` takes an exclusive ``fcntl.flock`` on a lock file named after the GPU's UUID (in
``$SYNPERF_GPU_LOCK_DIR`` or the system temp folder) for the whole sweep or characterization.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import logging
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Iterator

from synperf.gpu.profiling import ProfilingError
from synperf.gpu.profiling.nvml import uuid_hex

log = logging.getLogger("synperf.gpu.profiling")


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
