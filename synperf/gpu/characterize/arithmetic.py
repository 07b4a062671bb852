"""Host-side arithmetic of the characterization: work per launch, buffer sizes, rates from elapsed times,
clock bookkeeping. Pure functions of numbers, tested on fake timings (``tests/test_characterize.py``).

Units: bytes (B), FLOP, seconds (s), MHz; rates in GB/s (1e9 B/s), TFLOP/s (1e12 FLOP/s) and B/clk/SM,
the units of the registry fields they feed (:data:`synperf.data.hardware.MEASURED_FIELDS`). Warm-up, calls per
sample and sample statistics are the timing harness's (:mod:`synperf.gpu.profiling.timing`).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from synperf.gpu.profiling.nvml import THROTTLE_REASONS
from synperf.gpu.profiling.timing import quantile

MIB = 1 << 20
FLOAT4_BYTES = 16


# ------------------------------------------------------------------------------------------------
# work per launch
# ------------------------------------------------------------------------------------------------

def copy_bytes(buffer_bytes: int) -> int:
    """DRAM traffic of one copy of ``buffer_bytes``: read once and written once (STREAM "Copy" counts
    ``2 x N x sizeof``; McCalpin, STREAM, https://www.cs.virginia.edu/stream/ref.html). GPU L2s
    write-allocate without fetching fully written sectors, so no read-for-ownership is added."""
    return 2 * int(buffer_bytes)


def l2_read_bytes(buffer_bytes: int, passes: int) -> int:
    """Bytes ``l2_read`` loads per launch: the buffer, ``passes`` times (loads only; no stores happen)."""
    return int(buffer_bytes) * int(passes)


def smem_read_bytes_per_block(threads: int, iters: int, unroll: int, bytes_per_load: int = FLOAT4_BYTES) -> int:
    """Shared-memory bytes one ``smem_read`` block loads inside its timed loop (the tile fill is outside)."""
    return int(threads) * int(iters) * int(unroll) * int(bytes_per_load)


def fma_flops(blocks: int, threads: int, iters: int, unroll: int, chains: int) -> int:
    """FLOP of one ``fma_fp32`` launch: every thread runs ``iters x unroll x chains`` FMAs of 2 FLOP each."""
    return 2 * int(blocks) * int(threads) * int(iters) * int(unroll) * int(chains)


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOP of one dense GEMM ``C[m, n] = A[m, k] @ B[k, n]``: ``2 m n k`` (one multiply and one add per MAC)."""
    return 2 * int(m) * int(n) * int(k)


# ------------------------------------------------------------------------------------------------
# sizes
# ------------------------------------------------------------------------------------------------

def dram_buffer_bytes(l2_bytes: int, free_bytes: int | None = None, factor: float = 8.0,
                      min_bytes: int = 256 * MIB, max_bytes: int = 2048 * MIB) -> int:
    """Size of each of the two copy buffers: ``factor`` x L2 (so the L2 cannot hold a useful part of them),
    clamped to ``[min_bytes, max_bytes]`` and to a quarter of the free memory, rounded down to whole MiB.

    Raises:
        ValueError: less than 64 MiB would be left.
    """
    want = max(float(min_bytes), factor * float(l2_bytes))
    want = min(want, float(max_bytes))
    if free_bytes is not None:
        want = min(want, float(free_bytes) / 4)
    out = int(want // MIB) * MIB
    if out < 64 * MIB:
        raise ValueError(f"only {out} B for the DRAM copy buffers (free memory {free_bytes} B); need >= 64 MiB")
    return out


def l2_buffer_bytes(l2_bytes: int, threads_total: int, fraction: float = 0.25) -> int:
    """Size of the ``l2_read`` buffer: ``fraction`` of the L2 (well inside it: Hopper and Ampere split the
    L2 in two partitions, and a buffer near the full size would spill to DRAM), rounded down to a whole
    number of float4 loads per thread so every thread does the same number of loads.

    Raises:
        ValueError: the result would be empty (tiny L2 or a huge grid).
    """
    per_round = int(threads_total) * FLOAT4_BYTES
    out = int(fraction * l2_bytes) // per_round * per_round
    if out <= 0:
        raise ValueError(f"L2 of {l2_bytes} B is too small for one float4 per thread of {threads_total} threads")
    return out


def grid_blocks(sm_count: int, blocks_per_sm: int) -> int:
    """Blocks of a launch that gives every SM ``blocks_per_sm`` blocks (a whole number of waves)."""
    return int(sm_count) * int(blocks_per_sm)


# ------------------------------------------------------------------------------------------------
# rates
# ------------------------------------------------------------------------------------------------

def gbps(n_bytes: float, seconds: float) -> float:
    """GB/s (1e9 B/s) of ``n_bytes`` moved in ``seconds``."""
    _check_seconds(seconds)
    return float(n_bytes) / float(seconds) / 1e9


def tflops(flops: float, seconds: float) -> float:
    """TFLOP/s (1e12 FLOP/s) of ``flops`` done in ``seconds``."""
    _check_seconds(seconds)
    return float(flops) / float(seconds) / 1e12


def per_clk_per_sm(rate_per_s: float, sm_count: int, sm_clock_mhz: float | None) -> float | None:
    """A GPU-wide rate per second (B/s, FLOP/s) as a rate per SM clock per SM; None without a clock."""
    if not sm_clock_mhz or sm_clock_mhz <= 0:
        return None
    return float(rate_per_s) / (int(sm_count) * float(sm_clock_mhz) * 1e6)


def _check_seconds(seconds: float) -> None:
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"elapsed time must be finite and > 0 s, got {seconds}")


def per_call_seconds(stats: Mapping[str, float | int]) -> dict[str, float | int]:
    """Per-launch times in seconds from :func:`synperf.gpu.profiling.timing.summarize` statistics (µs):
    ``best_s`` (the fastest sample), ``median_s``, ``p90_s`` and ``n_samples``.

    The characterization reports the rate of the *best* sample, as BabelStream does for bandwidth
    (Deakin et al., "Evaluating attainable memory bandwidth of parallel programming models via
    BabelStream", IJCSE 2018): each sample is a batch of launches of a few milliseconds, so the best one is
    a sustained rate, not a single lucky launch; the median is kept beside it.

    Raises:
        KeyError: ``stats`` lacks ``latency_min_us``, ``latency_us``, ``latency_p90_us`` or ``n_samples``.
    """
    return {"best_s": float(stats["latency_min_us"]) * 1e-6, "median_s": float(stats["latency_us"]) * 1e-6,
            "p90_s": float(stats["latency_p90_us"]) * 1e-6, "n_samples": int(stats["n_samples"])}


def rate_record(work_per_call: float, times: Mapping[str, float], unit: str) -> dict[str, float]:
    """``value`` (from the best time) and ``value_median`` in ``unit`` (``GB/s`` for bytes, ``TFLOP/s`` for
    FLOP) of ``work_per_call`` done per launch, from :func:`per_call_seconds` output.

    Raises:
        ValueError: another unit, or a time that is not finite and > 0.
    """
    fn = {"GB/s": gbps, "TFLOP/s": tflops}.get(unit)
    if fn is None:
        raise ValueError(f"unit {unit!r}: expected GB/s or TFLOP/s")
    return {"value": fn(work_per_call, times["best_s"]), "value_median": fn(work_per_call, times["median_s"])}


def smem_bytes_per_clk(stamps: Sequence[Sequence[int]], bytes_per_block: int) -> dict[str, Any]:
    """Shared-memory bytes per SM clock per SM from ``smem_read``'s per-block stamps.

    Args:
        stamps: one ``(smid, clock64 at start, clock64 at end)`` per block; ``clock64`` counts the cycles of
            the block's own SM, so start and end of blocks on the same SM are comparable.
        bytes_per_block: :func:`smem_read_bytes_per_block`.

    Per SM: ``bytes of its blocks / (latest end - earliest start)``. Returns the median over SMs as
    ``value`` (B/clk/SM) and ``min``, ``max``, ``n_sms``, ``blocks_per_sm_min`` / ``_max``.

    Raises:
        ValueError: no stamps, or an SM whose span is not positive (the kernel did not run).
    """
    per_sm: dict[int, list[tuple[int, int]]] = {}
    for smid, t0, t1 in stamps:
        per_sm.setdefault(int(smid), []).append((int(t0), int(t1)))
    if not per_sm:
        raise ValueError("no smem_read stamps")
    rates = []
    for smid, spans in sorted(per_sm.items()):
        cycles = max(t1 for _, t1 in spans) - min(t0 for t0, _ in spans)
        if cycles <= 0:
            raise ValueError(f"SM {smid}: clock64 span {cycles} cycles is not positive")
        rates.append(len(spans) * int(bytes_per_block) / cycles)
    counts = [len(v) for v in per_sm.values()]
    return {"value": quantile(rates, 0.5), "min": min(rates), "max": max(rates), "n_sms": len(rates),
            "blocks_per_sm_min": min(counts), "blocks_per_sm_max": max(counts)}


# ------------------------------------------------------------------------------------------------
# clocks
# ------------------------------------------------------------------------------------------------

def summarize_clocks(snapshots: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The clocks observed during one benchmark, from NVML snapshots
    (:meth:`synperf.gpu.profiling.nvml.Nvml.snapshot`: ``sm_clock_mhz``, ``mem_clock_mhz``, ``temperature_c``,
    ``power_w``, ``clock_event_reason_names``) taken before, during (sampled) and after the timed samples.

    Returns ``source`` (``nvml``, or ``none`` when no snapshot had an SM clock), ``sm_clock_mhz`` (median of
    the samples: the clock the rate was measured at), ``sm_clock_mhz_min`` / ``_max``, ``mem_clock_mhz``
    (median), ``n_samples``, ``throttled`` (a power or thermal clock-event reason was seen),
    ``clock_event_reasons`` (every reason seen, sorted), ``temperature_c_max``, ``power_w_max``.
    """
    snaps = [s for s in snapshots if s]
    sm = [float(s["sm_clock_mhz"]) for s in snaps if s.get("sm_clock_mhz")]
    mem = [float(s["mem_clock_mhz"]) for s in snaps if s.get("mem_clock_mhz")]
    temps = [float(s["temperature_c"]) for s in snaps if s.get("temperature_c") is not None]
    power = [float(s["power_w"]) for s in snaps if s.get("power_w") is not None]
    reasons = sorted({r for s in snaps for r in (s.get("clock_event_reason_names") or [])})
    if not sm:
        return {"source": "none", "sm_clock_mhz": None, "n_samples": 0, "throttled": False,
                "clock_event_reasons": reasons}
    return {
        "source": "nvml",
        "sm_clock_mhz": quantile(sm, 0.5),
        "sm_clock_mhz_min": min(sm),
        "sm_clock_mhz_max": max(sm),
        "mem_clock_mhz": quantile(mem, 0.5) if mem else None,
        "n_samples": len(sm),
        "throttled": bool(set(reasons) & THROTTLE_REASONS),
        "clock_event_reasons": reasons,
        "temperature_c_max": max(temps) if temps else None,
        "power_w_max": max(power) if power else None,
    }


def ratio(value: float | None, reference: float | None) -> float | None:
    """``value / reference``, or None when either is missing or the reference is not positive."""
    if value is None or reference is None or not reference > 0:
        return None
    return float(value) / float(reference)
