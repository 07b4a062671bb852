"""The timing harness's arithmetic, on a fake clock (no GPU)."""

import math

import numpy as np
import pytest

from synperf.data.io import InputError
from synperf.gpu.profiling.timing import (
    HostTimer,
    TimingSettings,
    flush_bytes,
    graph_calls,
    iters_for_time,
    quantile,
    reps_for_budget,
    rotation_count,
    summarize,
)

MIB = 1 << 20


class FakeClock:
    """A clock that only moves when the fake kernel runs."""

    def __init__(self):
        self.now = 0.0
        self.calls = 0

    def __call__(self):
        return self.now

    def kernel(self, seconds):
        def run():
            self.now += seconds
            self.calls += 1
        return run


def test_quantile_matches_numpy_linear():
    rng = np.random.default_rng(0)
    xs = rng.lognormal(size=37)
    for q in (0.0, 0.1, 0.5, 0.9, 1.0):
        assert quantile(xs, q) == pytest.approx(np.quantile(xs, q))
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5   # even count: midway between the two middle values
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_summarize_gives_the_canonical_latency_columns():
    s = summarize([10.0, 11.0, 12.0, 13.0, 100.0])
    assert s["latency_us"] == 12.0                      # the median ignores the outlier
    assert s["latency_p10_us"] == pytest.approx(10.4)   # 10 + 0.4 * (11 - 10)
    assert s["latency_p90_us"] == pytest.approx(65.2)   # 13 + 0.6 * (100 - 13)
    assert (s["latency_min_us"], s["latency_max_us"], s["n_samples"]) == (10.0, 100.0, 5)
    with pytest.raises(ValueError):
        summarize([1.0, 0.0])
    with pytest.raises(ValueError):
        summarize([])


def test_repetitions_and_warmup_from_a_time_budget():
    assert iters_for_time(1e-3, 25e-3, 1, 10_000) == 25
    assert reps_for_budget(1e-3, 0.1, 10, 1000) == 100
    assert reps_for_budget(0.05, 0.1, 10, 1000) == 10        # slow kernel: the floor
    assert reps_for_budget(1e-7, 0.1, 10, 1000) == 1000      # fast kernel: the ceiling
    assert reps_for_budget(0.0, 0.1, 10, 1000) == 1000       # clock too coarse to see one call
    assert iters_for_time(0.3e-3, 1e-3, 1, 100) == 4         # rounds up


def test_flush_and_rotation_sizing():
    assert flush_bytes(50 * MIB) == 100 * MIB                # 2 x L2 (H100: 50 MiB)
    assert flush_bytes(int(40.5 * MIB), 2.0) == 81 * MIB     # rounded up to whole MiB
    assert flush_bytes(0) == MIB
    assert rotation_count(300 * MIB, 50 * MIB) == 1          # inputs alone exceed 5 x L2
    assert rotation_count(10 * MIB, 50 * MIB) == 26          # ceil(250 / 10) + 1
    assert rotation_count(200 * MIB, 50 * MIB) == 3          # ceil(250 / 200) + 1
    assert rotation_count(10 * MIB, 50 * MIB, max_bytes=100 * MIB) == 10
    assert rotation_count(16 * 1024, 50 * MIB, max_copies=64) == 64      # a 16 KiB input would need 16001
    assert graph_calls(10, 1) == 10
    assert graph_calls(10, 3) == 12                          # a multiple of the copies
    assert graph_calls(10, 26) == 26


def test_measure_protocol_on_a_fake_clock():
    clock = FakeClock()
    settings = TimingSettings(warmup_ms=25, budget_ms=100, min_reps=10, max_reps=1000, estimate_calls=3)
    timer = HostTimer(settings, clock=clock)
    res = timer.measure(clock.kernel(1e-3))
    # 1 first call + 3 estimate calls + 25 warm-up calls (25 ms / 1 ms) + 100 timed calls (100 ms / 1 ms)
    assert res.warmup_iters == 25
    assert len(res.samples_us) == 100
    assert clock.calls == 1 + 3 + 25 + 100
    stats = res.stats()
    assert stats["latency_us"] == pytest.approx(1000.0)
    assert stats["n_samples"] == 100
    assert res.method == "host_clock"
    assert res.estimate_us == pytest.approx(1000.0)


def test_slow_kernel_gets_the_minimum_repetitions():
    clock = FakeClock()
    timer = HostTimer(TimingSettings(warmup_ms=25, budget_ms=100, min_reps=10), clock=clock)
    res = timer.measure(clock.kernel(0.05))
    assert res.warmup_iters == 1                              # one call already exceeds 25 ms
    assert len(res.samples_us) == 10
    assert math.isclose(res.stats()["latency_us"], 50_000.0)


def test_settings_validate_and_layer():
    s = TimingSettings.from_dict({"method": "events", "budget_ms": 50}, {"method": "graph"}, None)
    assert s.method == "graph" and s.budget_ms == 50
    with pytest.raises(InputError, match="unknown key"):
        TimingSettings.from_dict({"budget": 3})
    with pytest.raises(InputError, match="method"):
        TimingSettings(method="cupti")
    with pytest.raises(InputError, match="min_reps"):
        TimingSettings(min_reps=5, max_reps=2)
