"""Profiler edge cases on the CPU: FP8 GEMM shapes torch._scaled_mm cannot run are skipped before any input is
allocated, with the reason per point; CUDA-graph timing with `l2: flush` over rotated copies that fit in L2 is
labelled warm-L2 in the point's provenance."""

from types import SimpleNamespace

import pytest

from synperf.gpu.profiling import launchers
from synperf.gpu.profiling.launchers import Case, Context, Unsupported
from synperf.gpu.profiling.launchers import gemm as gemm_launcher
from synperf.gpu.profiling.runner import make_measure
from synperf.gpu.profiling.sweep import latest_records, read_shards, run_sweep
from synperf.gpu.profiling.timing import (
    HostTimer,
    Timer,
    TimingResult,
    TimingSettings,
    label_l2_state,
    rotation_l2_state,
)

MIB = 1 << 20
FAST = dict(warmup_ms=0, budget_ms=1, min_reps=2, max_reps=3)


def _fp8(m, n, k):
    return {"kernel": "gemm_fp8", "dtype": "fp8", "m": m, "n": n, "k": k, "batch": 1}


@pytest.mark.parametrize("n,k,named", [(100, 64, "n=100"), (32, 72, "k=72"), (4100, 4099, "n=4100, k=4099")])
def test_fp8_shape_not_multiple_of_16_is_refused_before_allocation(n, k, named, monkeypatch):
    torch = pytest.importorskip("torch")
    allocated = []
    monkeypatch.setattr(gemm_launcher, "randn", lambda *a, **kw: allocated.append(a) or torch.zeros(1))
    with pytest.raises(Unsupported) as exc:
        gemm_launcher.prepare(_fp8(16, n, k), Context(device=torch.device("cpu")))
    assert str(exc.value) == (f"FP8 GEMM needs n and k to be multiples of 16 (torch._scaled_mm / cuBLASLt FP8), "
                              f"got {named}")
    assert allocated == []


def test_fp8_rule_leaves_m_free_and_bf16_alone():
    assert gemm_launcher.fp8_shape_problem(n=4096, k=14336) == ""
    assert gemm_launcher.fp8_shape_problem(n=4096, k=14336 // 8 + 4) != ""     # 1796: a tp=8 slice, 1796 % 16 = 4
    pytest.importorskip("torch")
    import torch

    case = gemm_launcher.prepare({"kernel": "gemm", "dtype": "bfloat16", "m": 3, "n": 100, "k": 72, "batch": 1},
                                 Context(device=torch.device("cpu")))
    assert case.implementation == "cublas"                                   # bf16 has no multiple-of-16 rule


def test_fp8_sweep_records_the_skip_reason_per_point(tmp_path):
    torch = pytest.importorskip("torch")
    settings = TimingSettings(**FAST)
    measure = make_measure("gemm_fp8", Context(device=torch.device("cpu")), HostTimer(settings), settings)
    pts = [_fp8(3, 32, 64), _fp8(16, 30, 64), _fp8(16, 32, 40)]
    stats = run_sweep(pts, measure, tmp_path, fingerprint="f")
    assert (stats.measured, stats.skipped) == (1, 2)
    recs = sorted(latest_records(read_shards(tmp_path), "f").values(), key=lambda r: (r["point"]["n"], r["point"]["k"]))
    assert [r["status"] for r in recs] == ["skipped", "skipped", "ok"]
    assert [r["category"] for r in recs[:2]] == ["unsupported", "unsupported"]
    assert recs[0]["reason"].endswith("got n=30") and recs[1]["reason"].endswith("got k=40")


# --------------------------------------------------------------------------------------------------------------
# graph mode, l2: flush, small inputs
# --------------------------------------------------------------------------------------------------------------

def test_rotation_l2_state_rule():
    assert rotation_l2_state(16 * 1024, 64, 50 * MIB) == "warm"             # 1 MiB of copies in a 50 MiB L2
    assert rotation_l2_state(10 * MIB, 26, 50 * MIB) == "cold"              # 260 MiB > 50 MiB
    assert rotation_l2_state(10 * MIB, 5, 50 * MIB) == "warm"               # exactly L2: not exceeded
    assert rotation_l2_state(0, 64, 50 * MIB) == "warm"                     # unknown input size: not shown cold


class FakeGraphTimer(Timer):
    """Stands in for CudaTimer.measure_rotating: records the copies it got."""

    def __init__(self, settings):
        super().__init__(settings)
        self.copies = None

    def measure_rotating(self, fns):
        self.copies = len(fns)
        return TimingResult(samples_us=[2.0, 2.0, 2.0], method="cuda_graph", l2_policy=f"rotate_{len(fns)}",
                            warmup_iters=1, calls_per_sample=64)


def _graph_measure(monkeypatch, input_bytes, l2, **timing):
    case = Case(fn=lambda: None, implementation="fake", rotate=lambda n: [lambda: None] * n, input_bytes=input_bytes)
    monkeypatch.setattr(launchers, "get_launcher", lambda kernel: SimpleNamespace(prepare=lambda p, c: case))
    settings = TimingSettings(method="graph", l2=l2, check=False, **FAST, **timing)
    timer = FakeGraphTimer(settings)
    ctx = SimpleNamespace(is_cuda=True, l2_bytes=50 * MIB)
    row, extra = make_measure("rmsnorm", ctx, timer, settings)({"kernel": "rmsnorm"})
    return timer, row, extra


def test_graph_flush_with_inputs_smaller_than_l2_is_labelled_warm(monkeypatch):
    timer, row, extra = _graph_measure(monkeypatch, 16 * 1024, "flush")     # 16 KiB RMSNorm inputs
    assert timer.copies == 64                                                # capped by max_rotations
    assert extra["l2_state"] == "warm" and extra["l2_policy"] == "rotate_64_warm_l2"
    assert "64 rotated input copies of 16384 B total 1048576 B <= L2 52428800 B" in extra["timing_note"]
    assert row["latency_us"] == 2.0


def test_graph_flush_with_enough_copies_is_cold(monkeypatch):
    timer, _, extra = _graph_measure(monkeypatch, 4 * MIB, "flush")          # ceil(250 / 4) + 1 = 64 copies
    assert timer.copies == 64 and extra["l2_state"] == "cold" and extra["l2_policy"] == "rotate_64"
    assert "timing_note" not in extra
    _, _, extra = _graph_measure(monkeypatch, 4 * MIB, "flush", max_rotation_bytes=40 * MIB)   # 10 copies, 40 MiB
    assert extra["l2_state"] == "warm" and extra["l2_policy"] == "rotate_10_warm_l2"


def test_hot_and_events_states():
    res = TimingResult(samples_us=[1.0], method="cuda_events", l2_policy="flush_100MiB", warmup_iters=1)
    assert label_l2_state(res, "flush", 16, 1, 50 * MIB).extra["l2_state"] == "cold"
    res = TimingResult(samples_us=[1.0], method="cuda_graph", l2_policy="rotate_1", warmup_iters=1)
    assert label_l2_state(res, "hot", 16, 1, 50 * MIB).extra["l2_state"] == "warm"
    assert res.l2_policy == "rotate_1"                                       # hot was asked for: no relabel
