"""The timing harness's arithmetic, on a fake clock (no GPU)."""

import math

import numpy as np
import pytest

from synperf.data.io import InputError
from synperf.gpu.profiling.timing import (
    MAX_CALLS_PER_SAMPLE,
    CudaTimer,
    HostTimer,
    TimingSettings,
    calls_per_sample,
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
    with pytest.raises(InputError, match="estimate_calls"):
        TimingSettings(estimate_calls=0)


def test_settings_errors_name_the_config_key():
    with pytest.raises(InputError, match=r"^characterize\.settings\.timing: unknown key 'warmup'"):
        TimingSettings.from_dict({"warmup": 3}, key="characterize.settings.timing")
    with pytest.raises(InputError, match=r"^profiling\.timing\.method: 'cupti'"):
        TimingSettings.from_dict({"method": "cupti"}, key="profiling.timing")


def test_batched_samples_need_events_and_a_hot_l2():
    assert TimingSettings(sample_ms=5, l2="hot").sample_ms == 5
    with pytest.raises(InputError, match="sample_ms.*l2: flush"):
        TimingSettings(sample_ms=5)                                  # the default l2 is flush
    with pytest.raises(InputError, match="sample_ms.*method: graph"):
        TimingSettings(sample_ms=5, l2="hot", method="graph")
    with pytest.raises(InputError, match="sample_ms"):
        TimingSettings(sample_ms=-1, l2="hot")


def test_calls_per_sample():
    assert calls_per_sample(1e-3, 5e-3) == 5
    assert calls_per_sample(2e-3, 5e-3) == 3                         # rounds up: at least the target length
    assert calls_per_sample(10e-3, 5e-3) == 1                        # one call already exceeds it
    assert calls_per_sample(1e-3, 0.0) == 1                          # no batching
    assert calls_per_sample(0.0, 5e-3) == MAX_CALLS_PER_SAMPLE       # clock too coarse to see one call
    assert calls_per_sample(1e-9, 5e-3) == MAX_CALLS_PER_SAMPLE == 10_000


class Entered:
    """A ``during`` context manager that records the fake kernel's call count on entry and exit."""

    def __init__(self, clock):
        self.clock, self.at = clock, []

    def __enter__(self):
        self.at.append(self.clock.calls)

    def __exit__(self, *exc):
        self.at.append(self.clock.calls)


def test_batched_measure_on_a_fake_clock():
    clock = FakeClock()
    settings = TimingSettings(l2="hot", warmup_ms=3, sample_ms=3, min_reps=4, max_reps=4)
    during = Entered(clock)
    res = HostTimer(settings, clock=clock).measure(clock.kernel(1e-3), during=during)
    assert (res.warmup_iters, res.calls_per_sample, len(res.samples_us)) == (3, 3, 4)
    assert res.samples_us == pytest.approx([1000.0] * 4)              # a sample's time / its 3 calls
    # 1 untimed + 3 estimate + 3 warm-up calls before `during`; the 4 samples of 3 calls inside it
    assert during.at == [7, 19] and clock.calls == 19


def test_budget_counts_a_batch_as_one_repetition():
    clock = FakeClock()
    settings = TimingSettings(l2="hot", warmup_ms=0, sample_ms=4, budget_ms=40, min_reps=1, max_reps=100)
    res = HostTimer(settings, clock=clock).measure(clock.kernel(1e-3))
    assert res.calls_per_sample == 4 and len(res.samples_us) == 10    # 40 ms / (4 calls x 1 ms)


class FakeCudaEvent:
    """torch.cuda.Event stand-in on the fake clock (the fake launches run synchronously)."""

    clock = None

    def __init__(self, enable_timing=True):
        self.t = None

    def record(self):
        self.t = FakeCudaEvent.clock()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3                                 # ms, like torch


class FakeBuffer:
    def __init__(self, nbytes):
        self.nbytes, self.zeroed = nbytes, 0

    def zero_(self):
        self.zeroed += 1

    def numel(self):
        return self.nbytes


def fake_torch(clock):
    FakeCudaEvent.clock = clock
    syncs = []
    cuda = type("cuda", (), {"Event": FakeCudaEvent, "synchronize": staticmethod(lambda *a: syncs.append(1))})
    return type("torch", (), {"cuda": cuda, "int8": "int8",
                              "empty": staticmethod(lambda n, dtype, device: FakeBuffer(n))}), syncs


def test_cuda_timer_times_batches_between_one_event_pair():
    clock = FakeClock()
    torch, syncs = fake_torch(clock)
    settings = TimingSettings(l2="hot", warmup_ms=2, sample_ms=5, min_reps=3, max_reps=3)
    timer = CudaTimer(settings, "cuda:0", 50 * MIB, torch_module=torch, clock=clock)
    res = timer.measure(clock.kernel(0.5e-3))
    assert (res.method, res.l2_policy, res.calls_per_sample, res.warmup_iters) == ("cuda_events", "hot", 10, 4)
    assert res.samples_us == pytest.approx([500.0] * 3) and res.estimate_us == pytest.approx(500.0)
    assert clock.calls == 1 + 3 + 4 + 3 * 10


def test_cuda_timer_flushes_the_l2_before_every_timed_call():
    clock = FakeClock()
    torch, _ = fake_torch(clock)
    settings = TimingSettings(warmup_ms=1, budget_ms=5, min_reps=5, max_reps=5)
    timer = CudaTimer(settings, "cuda:0", 50 * MIB, torch_module=torch, clock=clock)
    res = timer.measure(clock.kernel(1e-3))
    assert res.l2_policy == "flush_100MiB" and timer.flush_buf.numel() == 100 * MIB
    assert timer.flush_buf.zeroed == 3 + 5                            # every estimate call and every sample
    assert res.calls_per_sample == 1 and len(res.samples_us) == 5
