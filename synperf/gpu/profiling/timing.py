"""The one timing harness: every profiled kernel (:mod:`synperf.gpu.profiling`) and every hardware
characterization microbenchmark (:mod:`synperf.gpu.characterize`) is timed here.

Protocol (one :meth:`Timer.measure` call per sweep point or microbenchmark):

1. one untimed call: absorbs JIT compilation (Triton, FlashInfer), autotuning and
   cuBLAS heuristic selection, lazy module loading;
2. an estimate: ``estimate_calls`` separately timed calls give the per-call time (their median)
   and the wall time per call (kernel plus cold-L2 preparation);
3. warm-up *by time*, not by count: ``ceil(warmup_ms / per-call time)`` untimed calls
   (Triton ``do_bench`` and FlashInfer ``bench_gpu_time`` both warm up for 25 ms),
   so a 3 µs RMSNorm and a 30 ms GEMM get comparable clock and cache states;
4. calls per sample: one, or with ``sample_ms > 0`` a batch of ``ceil(sample_ms / per-call time)``
   calls (at most :data:`MAX_CALLS_PER_SAMPLE`) between one timing pair, so a sample lasts about
   ``sample_ms`` and event and launch overheads stay small against it (the characterization's
   sustained rates); a sample's value is its time divided by its calls;
5. repetitions (samples) from a time budget: ``ceil(budget_ms / wall per sample)``, clamped to
   ``[min_reps, max_reps]`` (``min_reps == max_reps`` fixes the count);
6. statistics over the samples (:func:`summarize`): median (the label), p10/p90, min/max, std.

A ``during`` context manager given to :meth:`Timer.measure` is entered after the warm-up and left
once the timed samples have finished on the device (the characterization samples NVML clocks there).

Cold L2 between repetitions ("cold" = the kernel's inputs are not in the L2 cache when it
starts, as in serving where other layers ran in between):

* ``method: events`` (default): before every timed call a buffer of ``flush_factor`` x the
  L2 size (FlashInfer's choice: 2 x L2 from the device properties) is zeroed outside the timed
  region; a CUDA event pair brackets the one kernel call. Because zeroing 100 MB takes tens of
  microseconds on the GPU, the kernel launch is already queued when the start event fires, so the
  host launch latency stays outside the measurement.
* ``method: graph``: ``calls`` kernel calls are captured in one CUDA graph over rotating copies of
  the inputs (enough copies that their total exceeds 5 x L2, FlashInfer's ``calculate_rotation_count``
  rule) and every replay is timed with one event pair; a sample is the replay time divided by
  ``calls``. This removes host launch gaps for kernels made of several short launches (fused MoE)
  or dominated by launch cost (RMSNorm, SiLU&Mul at small token counts).
* ``l2: hot`` keeps the cache warm (no flush, one input copy), for comparison.

The arithmetic (quantiles, repetition counts, flush sizing, rotation counts) lives in pure
functions, tested on a fake clock (``tests/test_profiling_timing.py``). :class:`HostTimer` times
with a host clock (CPU runs and tests); :class:`CudaTimer` with CUDA events.

Sources: Triton ``triton/testing.py`` ``do_bench`` and ``do_bench_cudagraph``; FlashInfer
``flashinfer/testing/utils.py`` ``bench_gpu_time`` (cold L2 default, 2 x L2 flush, rotation rule);
``docs`` of ``torch.cuda.Event`` and ``torch.cuda.graph``.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, ContextManager, Mapping, Sequence

import numpy as np

from synperf.data.io import InputError

MIB = 1 << 20

METHODS = ("events", "graph")
L2_POLICIES = ("flush", "hot")

#: most untimed warm-up calls of one measurement
MAX_WARMUP_CALLS = 100_000
#: most calls batched into one sample when ``sample_ms > 0``
MAX_CALLS_PER_SAMPLE = 10_000


@dataclass(frozen=True)
class TimingSettings:
    """Timing knobs; config keys ``profiling.timing`` (overridable per sweep file, ``timing:``) and
    ``characterize.settings.timing`` (over :data:`synperf.gpu.characterize.benchmarks.CHARACTERIZE_TIMING`).

    Attributes:
        method: ``events`` (one CUDA event pair per sample, L2 flush before each) or ``graph``
            (CUDA-graph replay of ``graph_calls`` calls over rotating input copies).
        l2: ``flush`` (cold L2 between repetitions) or ``hot``.
        warmup_ms: warm-up duration, milliseconds.
        budget_ms: time budget for the timed repetitions, milliseconds.
        min_reps, max_reps: clamp of the repetition (sample) count.
        sample_ms: target length of one sample, milliseconds: calls are batched between one event pair
            until a sample lasts about this long; 0: one call per sample. Needs ``method: events`` and
            ``l2: hot`` (no flush can run between the calls of a batch).
        estimate_calls: separately timed calls for the per-call estimate.
        flush_factor: flush buffer size in multiples of the L2 size.
        graph_calls: kernel calls unrolled in one CUDA graph (rounded up to a multiple of the
            rotation count).
        rotation_factor: in graph mode, input copies are added until they exceed this many L2 sizes.
        max_rotation_bytes: cap on the memory spent on rotated input copies, bytes.
        max_rotations: cap on the number of input copies (tiny inputs would otherwise need thousands;
            below ``rotation_factor x L2 / max_rotations`` bytes per copy, part of the inputs stays in L2).
        check: run the reference check once per shape before timing.
    """

    method: str = "events"
    l2: str = "flush"
    warmup_ms: float = 25.0
    budget_ms: float = 100.0
    min_reps: int = 10
    max_reps: int = 1000
    sample_ms: float = 0.0
    estimate_calls: int = 3
    flush_factor: float = 2.0
    graph_calls: int = 10
    rotation_factor: float = 5.0
    max_rotation_bytes: int = 4 << 30
    max_rotations: int = 64
    check: bool = True

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"timing.method: {self.method!r} is not one of {list(METHODS)}")
        if self.l2 not in L2_POLICIES:
            raise InputError(f"timing.l2: {self.l2!r} is not one of {list(L2_POLICIES)}")
        if self.min_reps < 1 or self.max_reps < self.min_reps:
            raise InputError(f"timing: need 1 <= min_reps <= max_reps, got {self.min_reps}, {self.max_reps}")
        if self.warmup_ms < 0 or self.budget_ms <= 0:
            raise InputError("timing: warmup_ms must be >= 0 and budget_ms > 0")
        if self.estimate_calls < 1:
            raise InputError(f"timing.estimate_calls: {self.estimate_calls} is not >= 1")
        if self.sample_ms < 0:
            raise InputError(f"timing.sample_ms: {self.sample_ms} is not >= 0")
        if self.sample_ms > 0 and (self.method != "events" or self.l2 != "hot"):
            raise InputError(f"timing.sample_ms: batching calls ({self.sample_ms} ms per sample) needs method: events "
                             f"and l2: hot, got method: {self.method}, l2: {self.l2}")

    @classmethod
    def from_dict(cls, *layers: Mapping[str, Any] | None, key: str = "timing") -> "TimingSettings":
        """Settings from dicts applied in order (later ones win).

        Args:
            layers: dicts of field values (None: nothing).
            key: the config key the dicts come from, named in errors (``profiling.timing``,
                ``characterize.settings.timing``).

        Raises:
            InputError: an unknown key or an invalid value, naming ``key``.
        """
        known = {f.name for f in fields(cls)}
        merged: dict[str, Any] = {}
        for layer in layers:
            for name, value in (layer or {}).items():
                if name not in known:
                    raise InputError(f"{key}: unknown key {name!r}; expected one of {sorted(known)}")
                merged[name] = value
        try:
            return cls(**merged)
        except InputError as exc:
            msg = str(exc)
            raise InputError(key + msg[len("timing"):] if msg.startswith("timing") else msg) from None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------
# pure arithmetic
# ----------------------------------------------------------------------------------------------

def quantile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) with linear interpolation between order statistics
    (NumPy's default ``linear`` method, Hyndman & Fan type 7).

    Raises:
        ValueError: no samples, or ``q`` outside [0, 1].
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("quantile of no samples")
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(samples_us: Sequence[float]) -> dict[str, float | int]:
    """Canonical latency columns from per-call samples in microseconds.

    Returns ``latency_us`` (median), ``latency_p10_us``, ``latency_p90_us``, ``latency_min_us``,
    ``latency_max_us``, ``latency_std_us`` (population std) and ``n_samples``.

    Raises:
        ValueError: no samples, or a sample that is not finite and > 0.
    """
    xs = np.asarray(list(samples_us), dtype="float64")
    if xs.size == 0:
        raise ValueError("no timing samples")
    if not np.all(np.isfinite(xs)) or np.any(xs <= 0):
        raise ValueError(f"timing samples must be finite and > 0 µs, got min {xs.min()}")
    return {
        "latency_us": quantile(xs, 0.5),
        "latency_p10_us": quantile(xs, 0.1),
        "latency_p90_us": quantile(xs, 0.9),
        "latency_min_us": float(xs.min()),
        "latency_max_us": float(xs.max()),
        "latency_std_us": float(xs.std()),
        "n_samples": int(xs.size),
    }


def iters_for_time(per_iter_s: float, total_s: float, lo: int, hi: int) -> int:
    """Iterations of ``per_iter_s`` seconds that fill ``total_s`` seconds, clamped to ``[lo, hi]``.

    A non-positive per-iteration time (a clock too coarse to see one call) gives ``hi``.
    """
    if per_iter_s <= 0 or not math.isfinite(per_iter_s):
        return hi
    return int(min(hi, max(lo, math.ceil(total_s / per_iter_s))))


def calls_per_sample(per_call_s: float, sample_s: float) -> int:
    """Calls batched into one sample so it lasts about ``sample_s`` seconds (calls of ``per_call_s``
    seconds), at least 1 and at most :data:`MAX_CALLS_PER_SAMPLE`; ``sample_s <= 0`` gives 1."""
    if sample_s <= 0:
        return 1
    return iters_for_time(per_call_s, sample_s, 1, MAX_CALLS_PER_SAMPLE)


def reps_for_budget(per_rep_s: float, budget_s: float, min_reps: int, max_reps: int) -> int:
    """Timed repetitions that fit a budget of ``budget_s`` seconds (each costing ``per_rep_s``
    seconds of wall time, cold-L2 preparation included), clamped to ``[min_reps, max_reps]``."""
    return iters_for_time(per_rep_s, budget_s, min_reps, max_reps)


def flush_bytes(l2_bytes: int, factor: float = 2.0) -> int:
    """Size of the L2 flush buffer: ``factor`` x the L2 size, rounded up to whole MiB, at least 1 MiB.

    Writing a buffer twice the L2 size evicts the previous kernel's lines (FlashInfer
    ``bench_gpu_time`` uses 2 x L2; Triton ``do_bench`` a fixed 256 MB).
    """
    want = max(float(l2_bytes) * factor, MIB)
    return int(math.ceil(want / MIB) * MIB)


def rotation_count(input_bytes: int, l2_bytes: int, factor: float = 5.0, max_bytes: int | None = None,
                   max_copies: int | None = None) -> int:
    """Input copies to rotate through so a graph replay reads inputs that are not in L2.

    FlashInfer's rule (``calculate_rotation_count``): one copy when the inputs alone exceed
    ``factor`` x L2, else ``ceil(factor x L2 / input_bytes) + 1`` copies, at least 2. ``max_bytes``
    caps the memory spent on copies and ``max_copies`` their number (never below one copy).
    """
    if input_bytes <= 0:
        return 1
    if input_bytes >= factor * l2_bytes:
        return 1
    n = max(2, math.ceil(factor * l2_bytes / input_bytes) + 1)
    if max_bytes is not None:
        n = min(n, int(max_bytes // input_bytes))
    if max_copies is not None:
        n = min(n, int(max_copies))
    return int(max(1, n))


def rotation_l2_state(input_bytes: int, copies: int, l2_bytes: int) -> str:
    """L2 state a graph replay over rotated input copies gives: ``"cold"`` or ``"warm"``.

    Cold when the copies together exceed the L2 size (``copies x input_bytes > l2_bytes``): a copy's lines
    are evicted before the replay comes back to it. Otherwise (a capped rotation count, or inputs of unknown
    size, ``input_bytes <= 0``) part of the inputs stays in L2 between calls and the point is warm-L2.
    Sizes in bytes.
    """
    return "cold" if input_bytes > 0 and int(copies) * int(input_bytes) > int(l2_bytes) else "warm"


def label_l2_state(result: "TimingResult", l2: str, input_bytes: int, copies: int, l2_bytes: int) -> "TimingResult":
    """Record in ``result.extra["l2_state"]`` whether the timed calls started with a cold or warm L2.

    ``l2`` is the requested policy (``flush`` or ``hot``). Host-clock timing (CPU) is ``"none"``; events timing with a
    flush is cold, ``hot`` is warm; a CUDA-graph replay with ``l2: flush`` is what :func:`rotation_l2_state` says, and a
    warm one also gets ``_warm_l2`` appended to ``l2_policy`` and the reason in ``note``. Returns ``result``.
    """
    if result.method == "host_clock":
        result.extra["l2_state"] = "none"
    elif l2 == "hot":
        result.extra["l2_state"] = "warm"
    elif result.method != "cuda_graph":
        result.extra["l2_state"] = "cold" if result.l2_policy.startswith("flush") else "warm"
    else:
        state = rotation_l2_state(input_bytes, copies, l2_bytes)
        result.extra["l2_state"] = state
        if state == "warm":
            result.l2_policy += "_warm_l2"
            why = (f"{copies} rotated input cop{'y' if copies == 1 else 'ies'} of {input_bytes} B total "
                   f"{copies * max(input_bytes, 0)} B <= L2 {l2_bytes} B: inputs partly L2-resident (warm L2)")
            result.note = f"{result.note}; {why}" if result.note else why
    return result


def graph_calls(settings_calls: int, rotations: int) -> int:
    """Kernel calls captured in one graph: at least ``settings_calls``, a multiple of ``rotations``
    so every input copy is used equally often."""
    r = max(1, int(rotations))
    return int(math.ceil(max(settings_calls, r) / r) * r)


# ----------------------------------------------------------------------------------------------
# timers
# ----------------------------------------------------------------------------------------------

@dataclass
class TimingResult:
    """Samples of one measurement and how they were taken.

    Attributes:
        samples_us: per-call latency samples, microseconds.
        method: ``cuda_events``, ``cuda_graph`` or ``host_clock``.
        l2_policy: ``flush_<MiB>MiB``, ``rotate_<n>``, ``hot`` or ``none``.
        warmup_iters: untimed calls (or replays) after the estimate.
        calls_per_sample: kernel calls behind one sample (a batch when ``sample_ms > 0``; graph replays
            unroll several); each sample is already divided by it.
        estimate_us: per-call estimate from step 2, microseconds.
        note: why a fallback was taken, if one was.
    """

    samples_us: list[float]
    method: str
    l2_policy: str
    warmup_iters: int
    calls_per_sample: int = 1
    estimate_us: float = 0.0
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def stats(self) -> dict[str, float | int]:
        """:func:`summarize` of the samples (microseconds)."""
        return summarize(self.samples_us)

    def describe(self) -> dict[str, Any]:
        """Per-point provenance: everything but the samples."""
        return {"timing_method": self.method, "l2_policy": self.l2_policy, "warmup_iters": self.warmup_iters,
                "calls_per_sample": self.calls_per_sample, "estimate_us": self.estimate_us,
                **({"timing_note": self.note} if self.note else {}), **self.extra}


class Timer:
    """The measurement protocol of the module docstring; subclasses supply the clock primitives.

    Args:
        settings: the timing knobs.
        clock: wall clock in seconds (``time.perf_counter``; a fake in tests).
        sync: blocks until queued device work is done (``torch.cuda.synchronize``; no-op on CPU).
    """

    method = "host_clock"

    def __init__(self, settings: TimingSettings, clock: Callable[[], float] = time.perf_counter,
                 sync: Callable[[], None] = lambda: None):
        self.settings = settings
        self.clock = clock
        self.sync = sync

    # primitives ---------------------------------------------------------------------------
    def prepare(self) -> None:
        """Cold-L2 preparation before one timed call (no-op here)."""

    def l2_policy(self) -> str:
        return "none"

    def time_calls(self, fn: Callable[[], Any], n: int, calls: int = 1) -> list[float]:
        """Take ``n`` samples of ``calls`` calls of ``fn`` each, every sample timed separately after
        :meth:`prepare`; seconds per call of each sample (the sample's time divided by ``calls``)."""
        out = []
        for _ in range(n):
            self.prepare()
            self.sync()
            t0 = self.clock()
            for _ in range(calls):
                fn()
            self.sync()
            out.append((self.clock() - t0) / calls)
        return out

    # protocol -----------------------------------------------------------------------------
    def measure(self, fn: Callable[[], Any], during: ContextManager | None = None) -> TimingResult:
        """Time ``fn`` (one kernel launch, no host synchronisation inside) by the module's protocol.

        Args:
            fn: one launch.
            during: entered after the warm-up, left once the timed samples have finished (None: nothing).

        Returns:
            The per-call samples (microseconds) and how they were taken.
        """
        s = self.settings
        fn()
        self.sync()
        t0 = self.clock()
        est = self.time_calls(fn, s.estimate_calls)
        wall_per_call = (self.clock() - t0) / s.estimate_calls
        per_call = float(np.median(est))
        n_warm = iters_for_time(per_call, s.warmup_ms * 1e-3, 1, MAX_WARMUP_CALLS)
        for _ in range(n_warm):
            fn()
        self.sync()
        cps = calls_per_sample(per_call, s.sample_ms * 1e-3)
        wall_per_rep = wall_per_call + (cps - 1) * per_call
        reps = reps_for_budget(wall_per_rep, s.budget_ms * 1e-3, s.min_reps, s.max_reps)
        with during if during is not None else contextlib.nullcontext():
            samples = self.time_calls(fn, reps, cps)
        return TimingResult(samples_us=[x * 1e6 for x in samples], method=self.method,
                            l2_policy=self.l2_policy(), warmup_iters=n_warm, calls_per_sample=cps,
                            estimate_us=per_call * 1e6)

    def measure_rotating(self, fns: Sequence[Callable[[], Any]]) -> TimingResult:
        """Graph mode stand-in off the GPU: time the first copy like :meth:`measure`."""
        return self.measure(fns[0])


class HostTimer(Timer):
    """Host-clock timing (CPU runs, tests). ``l2`` is ignored: there is nothing to flush."""


class CudaTimer(Timer):
    """CUDA-event timing on one device, with an L2 flush buffer or CUDA-graph replay.

    Events are recorded on torch's current stream, so launches enqueued there (torch ops, CuPy kernels
    launched on that stream) are timed.

    Args:
        settings: the timing knobs.
        device: a ``torch.device`` of type ``cuda``.
        l2_bytes: the device's L2 size in bytes (``torch.cuda.get_device_properties().L2_cache_size``).
        torch_module: the ``torch`` module (None: imported); tests pass a stand-in with ``cuda.Event``
            and ``cuda.synchronize``.
        clock: wall clock in seconds for the estimate's wall time per call.
    """

    method = "cuda_events"

    def __init__(self, settings: TimingSettings, device, l2_bytes: int, torch_module=None,
                 clock: Callable[[], float] = time.perf_counter):
        if torch_module is None:
            import torch as torch_module
        torch = torch_module
        self.torch = torch
        self.device = device
        self.l2_bytes = int(l2_bytes)
        super().__init__(settings, clock=clock, sync=lambda: torch.cuda.synchronize(device))
        self.flush_buf = None
        if settings.l2 == "flush":
            self.flush_buf = torch.empty(flush_bytes(self.l2_bytes, settings.flush_factor), dtype=torch.int8,
                                         device=device)

    def prepare(self) -> None:
        if self.flush_buf is not None:
            self.flush_buf.zero_()

    def l2_policy(self) -> str:
        if self.flush_buf is None:
            return "hot"
        return f"flush_{self.flush_buf.numel() // MIB}MiB"

    def time_calls(self, fn: Callable[[], Any], n: int, calls: int = 1) -> list[float]:
        """``n`` samples of ``calls`` calls, one CUDA event pair around each sample (after :meth:`prepare`),
        enqueued without host synchronisation and read after one synchronize; seconds per call."""
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            self.prepare()
            starts[i].record()
            for _ in range(calls):
                fn()
            ends[i].record()
        torch.cuda.synchronize(self.device)
        return [s.elapsed_time(e) * 1e-3 / calls for s, e in zip(starts, ends)]  # elapsed_time is in ms

    def measure_rotating(self, fns: Sequence[Callable[[], Any]]) -> TimingResult:
        """Graph mode: capture ``graph_calls`` calls cycling over ``fns`` (one per input copy) in one
        CUDA graph and time replays; falls back to :meth:`measure` on the first copy (events, L2 flush)
        when capture fails, saying why in ``note``."""
        torch = self.torch
        s = self.settings
        fns = list(fns)
        n_calls = graph_calls(s.graph_calls, len(fns))
        graph = None
        try:
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):  # run every copy once off the default stream before capture
                for f in fns:
                    f()
            torch.cuda.current_stream(self.device).wait_stream(side)
            torch.cuda.synchronize(self.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(n_calls):
                    fns[i % len(fns)]()
            graph.replay()  # the first replay uploads the graph
            torch.cuda.synchronize(self.device)
        except Exception as exc:  # capture is not possible for every library call
            graph = None
            torch.cuda.synchronize(self.device)
            res = self.measure(fns[0])
            res.note = f"graph capture failed ({type(exc).__name__}: {str(exc)[:200]}); timed with events"
            return res
        try:
            t0 = self.clock()
            graph.replay()
            torch.cuda.synchronize(self.device)
            wall_per_rep = self.clock() - t0
            n_warm = iters_for_time(wall_per_rep, s.warmup_ms * 1e-3, 1, MAX_WARMUP_CALLS)
            for _ in range(n_warm):
                graph.replay()
            reps = reps_for_budget(wall_per_rep, s.budget_ms * 1e-3, s.min_reps, s.max_reps)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            for i in range(reps):
                starts[i].record()
                graph.replay()
                ends[i].record()
            torch.cuda.synchronize(self.device)
            samples = [st.elapsed_time(en) * 1e3 / n_calls for st, en in zip(starts, ends)]
        finally:
            del graph
        return TimingResult(samples_us=samples, method="cuda_graph", l2_policy=f"rotate_{len(fns)}",
                            warmup_iters=n_warm, calls_per_sample=n_calls, estimate_us=wall_per_rep / n_calls * 1e6)
