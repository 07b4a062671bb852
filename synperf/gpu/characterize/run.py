"""Run the characterization microbenchmarks on the local GPU and write ``<out_dir>/<gpu>.json``.

The GPU side (torch, CuPy/NVRTC, NVML) is imported lazily inside the functions that need it; the
orchestration (:func:`run_benchmarks`, :func:`synperf.gpu.characterize.records.build_document`) takes the timer,
the clock source and the benchmark preparers as arguments, so the tests drive it on the CPU with fake timings.

Every benchmark is timed by the profiling harness, :meth:`synperf.gpu.profiling.timing.Timer.measure` on a
:class:`~synperf.gpu.profiling.timing.CudaTimer`, with the settings ``CharacterizeSettings.timing``
(defaults :data:`~synperf.gpu.characterize.benchmarks.CHARACTERIZE_TIMING`): one untimed launch (NVRTC/cuBLAS
heuristics, first touch of the buffers), a per-launch estimate from 3 separately timed launches, warm-up by time
(``warmup_ms``: clocks ramp up, the L2 benchmark's buffer becomes resident; no L2 flush), then ``min_reps``
(= ``max_reps``) samples, each a batch of launches lasting about ``sample_ms`` between one CUDA event pair. The
rate is taken from the best sample (BabelStream's convention,
:func:`synperf.gpu.characterize.arithmetic.per_call_seconds`); the median is recorded beside it. NVML is sampled
every ``clock_period_ms`` on a host thread while the samples run (:class:`ClockSampler`, the harness's
``during``), plus once before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from synperf.data.io import InputError
from synperf.gpu.characterize import arithmetic as ar
from synperf.gpu.characterize.benchmarks import (
    BENCHMARKS,
    MIB,
    BenchmarkSkipped,
    CharacterizeSettings,
    Prepared,
)
from synperf.gpu.characterize.device import GPU
from synperf.gpu.characterize.records import build_document, build_record, datasheet_reference, write_document
from synperf.gpu.profiling import NoGPUError, ProfilingError
from synperf.gpu.profiling.timing import CudaTimer, Timer

log = logging.getLogger("synperf.gpu.characterize")


class ClockSampler:
    """Context manager: NVML snapshots on entry, every ``period_s`` on a host thread, and on exit.

    Args:
        snapshot: returns one state dict (:meth:`synperf.gpu.profiling.nvml.GPUIdentity.snapshot`), or None
            (no NVML: nothing is sampled).
        period_s: sampling period.

    The GPU runs the queued launches while the main thread waits in ``synchronize`` (which releases the
    GIL), so the thread's samples fall inside the timed work.
    """

    def __init__(self, snapshot: Callable[[], Mapping[str, Any]] | None, period_s: float = 0.005):
        self.snapshot = snapshot
        self.period_s = float(period_s)
        self.samples: list[Mapping[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _take(self) -> None:
        try:
            snap = self.snapshot()
        except Exception as exc:  # a failing NVML query must not fail the measurement
            log.debug("NVML snapshot failed: %s", exc)
            return
        if snap:
            self.samples.append(snap)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._take()

    def __enter__(self) -> "ClockSampler":
        if self.snapshot is not None:
            self._take()
            self._thread = threading.Thread(target=self._loop, name="nvml-clock-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._take()

    def summary(self) -> dict[str, Any]:
        """:func:`synperf.gpu.characterize.arithmetic.summarize_clocks` of the samples."""
        return ar.summarize_clocks(self.samples)



def run_benchmarks(preparers: Mapping[str, Callable[[], Prepared]], timer: Timer, *,
                   snapshot: Callable[[], Mapping[str, Any]] | None, settings: CharacterizeSettings,
                   sm_count: int, spec=None, cleanup: Callable[[], None] | None = None
                   ) -> tuple[dict[str, dict], dict[str, str]]:
    """Prepare, time and record every benchmark of ``settings.benchmarks`` that has a preparer.

    Args:
        preparers: key -> a callable returning :class:`Prepared` (raising :class:`BenchmarkSkipped` when the
            benchmark cannot run here).
        timer: the timing harness (:class:`~synperf.gpu.profiling.timing.CudaTimer` on the GPU; its
            ``measure(fn, during=...)`` is called once per benchmark with the clock sampler as ``during``).
        snapshot: NVML state reader for :class:`ClockSampler` (None: no clocks).
        sm_count: SMs of the GPU.
        spec: the GPU's datasheet :class:`~synperf.data.hardware.GPUSpec` (None: unknown GPU, no comparison).
        cleanup: called after each benchmark (free GPU memory).

    Returns:
        (measurements key -> record, skipped key -> reason). A benchmark that fails (out of memory, a
        compile error) is skipped with its reason; the others still run.
    """
    measurements: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for key in settings.benchmarks:
        info = BENCHMARKS[key]
        if key not in preparers:
            skipped[key] = "no implementation on this device"
            continue
        t0 = time.monotonic()
        prepared = None
        try:
            prepared = preparers[key]()
            ctx = prepared.context() if prepared.context is not None else contextlib.nullcontext()
            with ctx:
                sampler = ClockSampler(snapshot, settings.clock_period_ms * 1e-3)
                timing = timer.measure(prepared.fn, during=sampler)
            extra = prepared.after() if prepared.after is not None else {}
            measurements[key] = build_record(info, prepared, timing, sampler.summary(), sm_count,
                                             datasheet_reference(spec, key), extra)
            m = measurements[key]
            log.info("%-10s %10.1f %-8s (%s; SM clock %s MHz; %.1f s)", key, m["value"], m["unit"],
                     "datasheet %.4g, ratio %.3f" % (m["datasheet_value"], m["ratio_to_datasheet"])
                     if m["ratio_to_datasheet"] is not None else "no datasheet value",
                     m["clocks"].get("sm_clock_mhz"), time.monotonic() - t0)
        except BenchmarkSkipped as exc:
            skipped[key] = str(exc)
            log.info("%-10s skipped: %s", key, exc)
        except Exception as exc:  # OOM, NVRTC error, cuBLAS error: record and go on
            skipped[key] = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
            log.warning("%-10s failed: %s: %s", key, type(exc).__name__, exc)
        finally:
            del prepared
            if cleanup is not None:
                cleanup()
    return measurements, skipped



def no_gpu_message(detection_message: str) -> str:
    """The message when characterization is asked for without a usable NVIDIA GPU, keeping the reason the
    profiling detection (:func:`synperf.gpu.profiling.nvml.require_cuda`) gave, e.g. a CPU-only torch build."""
    m = re.search(r"no NVIDIA GPU visible \((?P<why>.*)\): profiling needs one", detection_message, re.S)
    why = f" ({m.group('why')})" if m else (f" ({detection_message})" if detection_message else "")
    return (f"no NVIDIA GPU visible{why}: hardware characterization needs one; run "
            "`snakemake --cores all characterize_local` on a machine with an NVIDIA GPU, its driver, a CUDA build "
            "of torch and CuPy (pip install -e '.[gpu]'). The default target (`snakemake --cores all`) never "
            "characterizes and needs no GPU; without data/hardware/<gpu>.json the registry uses datasheet values.")


def characterize(out_dir: str | Path, *, registry_path: str | Path, gpu: str | None = None,
                 settings: CharacterizeSettings | Mapping[str, Any] | None = None,
                 allow_unknown: bool = False) -> Path:
    """Measure the local GPU (torch device 0, after ``CUDA_VISIBLE_DEVICES``) and write ``<out_dir>/<gpu>.json``.

    Args:
        out_dir: output folder (``data/hardware`` for the registry; the device smoke script uses
            ``OUT/hardware``).
        gpu: the registry id the visible GPU must have (the rule's wildcard); None: whatever it is.
        registry_path: GPU registry (the config's ``gpu_registry``); read datasheet-only.
        settings: :class:`CharacterizeSettings` or a dict of its fields.
        allow_unknown: a GPU missing from the registry is measured under a slug id (no datasheet comparison).

    Returns:
        The written file.

    Raises:
        NoGPUError: no CUDA device visible (the message says how to run it).
        ProfilingError: another GPU than ``gpu``, an unknown GPU, the GPU lock timed out, or no benchmark
            produced a value.
    """
    from synperf.data.hardware import load_registry
    from synperf.gpu.profiling.launchers import Context
    from synperf.gpu.profiling.lock import gpu_lock
    from synperf.gpu.profiling.nvml import local_gpu, require_cuda
    from synperf.gpu.profiling.provenance import environment

    if not isinstance(settings, CharacterizeSettings):
        settings = CharacterizeSettings.from_dict(settings)
    start = time.monotonic()
    try:
        torch = require_cuda()
    except NoGPUError as exc:
        raise NoGPUError(no_gpu_message(str(exc))) from None
    registry = load_registry(registry_path, use_measured=False)
    identity = local_gpu(registry, allow_unknown=allow_unknown)
    if gpu is not None and identity.gpu_id != gpu:
        raise ProfilingError(
            f"this job characterizes {gpu!r} but the visible GPU is {identity.name!r} ({identity.uuid}), registry "
            f"id {identity.gpu_id!r}; run it where a {gpu} is visible (CUDA_VISIBLE_DEVICES), or ask for "
            f"data/hardware/{identity.gpu_id}.json (`snakemake --cores all characterize_local` does this).")
    spec = registry.gpus.get(identity.gpu_id)
    torch.cuda.set_device(0)
    dev = GPU(torch, settings)
    snapshot = identity.snapshot if identity.nvml is not None else None
    if snapshot is None:
        log.warning("NVML unavailable: no SM clocks will be recorded (install nvidia-ml-py)")
    with gpu_lock(identity.uuid, timeout_s=settings.lock_timeout_s):
        log.info("characterizing %s (%s, %d SMs, L2 %.0f MiB, SM %d.%d)", identity.gpu_id, identity.name,
                 dev.sm_count, dev.l2_bytes / MIB, *dev.capability)
        timer = CudaTimer(settings.timing, dev.device, dev.l2_bytes, torch_module=torch)
        measurements, skipped = run_benchmarks(dev.preparers(), timer, snapshot=snapshot,
                                               settings=settings, sm_count=dev.sm_count, spec=spec,
                                               cleanup=dev.cleanup)
    if not measurements:
        raise ProfilingError(f"hardware characterization of {identity.gpu_id}: no benchmark produced a value "
                             f"({skipped})")
    ctx = Context(device=dev.device, capability=dev.capability, l2_bytes=dev.l2_bytes,
                  flashinfer_error="not used")
    env = environment(identity, ctx, None)
    env.pop("flashinfer", None)
    env["cupy"] = getattr(dev._cupy, "__version__", None) if dev._cupy is not None else None
    doc = build_document(identity.gpu_id, measurements, skipped, device_name=identity.name, uuid=identity.uuid,
                         compute_capability=f"{dev.capability[0]}.{dev.capability[1]}", sm_count=dev.sm_count,
                         l2_bytes=dev.l2_bytes, environment=env, settings=settings,
                         seconds=time.monotonic() - start, identity_note=identity.note)
    path = write_document(doc, out_dir)
    log.info("wrote %s (%d measured, %d skipped, %.0f s)", path, len(measurements), len(skipped),
             time.monotonic() - start)
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line of the ``characterize_gpu`` rule (``scripts/characterize.py``):
    ``--out data/hardware/<gpu>.json --gpu <gpu> [--registry FILE] [--settings JSON] [--log FILE]``.
    Exit 1 with the message (no traceback) when the GPU is missing or wrong."""
    import json

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--out", required=True, type=Path, help="output file <dir>/<gpu>.json")
    ap.add_argument("--gpu", default=None, help="registry id the visible GPU must have")
    ap.add_argument("--registry", default="config/gpus.yaml", help="GPU registry (default: %(default)s)")
    ap.add_argument("--settings", default="{}", help="CharacterizeSettings fields as JSON")
    ap.add_argument("--log", default=None, type=Path)
    args = ap.parse_args(argv)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log is not None:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(args.log, mode="a"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers,
                        force=True)
    gpu = args.gpu or args.out.stem
    if args.out.name != f"{gpu}.json":
        log.error("--out must be <dir>/%s.json, got %s", gpu, args.out)
        return 2
    try:
        characterize(args.out.parent, gpu=gpu, registry_path=args.registry,
                     settings=json.loads(args.settings))
    except (ProfilingError, InputError) as exc:  # a clear message instead of a traceback
        log.error("characterize %s: %s", gpu, exc)
        return 1
    return 0
