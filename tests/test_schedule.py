"""Scheduler invariants, checked against brute force on tiny inputs."""

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest

from synperf.model.schedule import busiest_sm, ctas_per_sm, min_heap, round_robin


@pytest.mark.parametrize("seed", range(20))
def test_no_task_lost_or_duplicated_and_busiest_at_least_mean(seed):
    rng = np.random.default_rng(seed)
    costs = rng.integers(1, 10, size=rng.integers(1, 40))
    sms = int(rng.integers(1, 9))
    for per_sm in (round_robin(costs, sms, int(rng.integers(1, 4))), min_heap(costs, sms)):
        flat = sorted(t for tasks in per_sm for t in tasks)
        assert flat == list(range(len(costs)))
        loads = [costs[t].sum() if t else 0 for t in per_sm]
        assert max(loads) >= costs.sum() / sms


def brute_force_min_makespan(costs, sms):
    best = math.inf
    for assign in itertools.product(range(sms), repeat=len(costs)):
        loads = np.zeros(sms)
        for c, s in zip(costs, assign):
            loads[s] += c
        best = min(best, loads.max())
    return best


@pytest.mark.parametrize("seed", range(15))
def test_greedy_schedulers_are_within_the_list_scheduling_bound(seed):
    rng = np.random.default_rng(100 + seed)
    costs = rng.integers(1, 8, size=int(rng.integers(2, 8))).astype(float)
    sms = int(rng.integers(2, 4))
    opt = brute_force_min_makespan(costs, sms)
    rr = max(sum(costs[t]) for t in round_robin(costs, sms, 1))
    mh = max(sum(costs[t]) for t in min_heap(costs, sms))
    desc = np.sort(costs)[::-1]
    lpt = max(sum(desc[t]) for t in min_heap(desc, sms))
    # Graham: greedy list scheduling <= (2 - 1/m) OPT; LPT <= (4/3 - 1/(3m)) OPT
    assert opt <= rr <= (2 - 1 / sms) * opt + 1e-9
    assert opt <= mh <= (2 - 1 / sms) * opt + 1e-9
    assert opt <= lpt <= (4 / 3 - 1 / (3 * sms)) * opt + 1e-9


def test_round_robin_first_wave_is_breadth_first():
    per_sm = round_robin(np.ones(6), 3, 2)
    assert per_sm == [[0, 3], [1, 4], [2, 5]]


def test_uniform_tasks_closed_form():
    for n, sms in [(1, 132), (132, 132), (133, 132), (1000, 108)]:
        assert busiest_sm([n], [1.0], sms).tolist() == [math.ceil(n / sms)]


def test_busiest_counts_match_the_explicit_simulation():
    counts, costs, sms = [3, 3, 3], [1.0, 2.0, 3.0], 4
    per_class = busiest_sm(counts, costs, sms, 1, "hardware", "interleaved")
    order = np.array([0, 1, 2] * 3)
    per_sm = round_robin(np.array(costs)[order], sms, 1)
    loads = [np.array(costs)[order[t]].sum() for t in per_sm]
    busiest = per_sm[int(np.argmax(loads))]
    assert per_class.tolist() == np.bincount(order[busiest], minlength=3).tolist()


def test_occupancy_limits():
    a100 = SimpleNamespace(id="a100", max_ctas_per_sm=32, max_warps_per_sm=64, smem_per_sm_kb=164, regs_per_sm=65536)
    assert ctas_per_sm(a100, 128) == 16                       # warps: 64 / 4
    assert ctas_per_sm(a100, 128, smem_per_cta_bytes=64 * 1024) == 2   # 164 KiB / 64 KiB
    assert ctas_per_sm(a100, 256, regs_per_thread=128) == 2   # 65536 / (128 * 256)
    with pytest.raises(ValueError, match="does not fit"):
        ctas_per_sm(a100, 128, smem_per_cta_bytes=200 * 1024)


def _reference_busiest(counts, costs, sms, slots, policy, order):
    """The simulation written out plainly: tasks in grid order, a pop and a push per task, each SM's load summed
    over its own tasks, the first most-loaded SM."""
    import heapq

    k = len(counts)
    cls = [c for c in range(k) for _ in range(counts[c])]
    if order == "interleaved":
        cls = [c for j in range(max(counts)) for c in range(k) if j < counts[c]]
    elif order == "descending":
        cls = sorted(cls, key=lambda c: -costs[c])
    cost = np.array([costs[c] for c in cls])
    per_sm = [[] for _ in range(sms)]
    if policy == "persistent":
        heap = [(0.0, sm) for sm in range(sms)]
        for i, c in enumerate(cost):
            load, sm = heapq.heappop(heap)
            per_sm[sm].append(i)
            heapq.heappush(heap, (load + c, sm))
    else:
        heap = []
        for i in range(len(cost)):
            if i < sms * slots:
                sm = i % sms
                heapq.heappush(heap, (cost[i], i, sm))
            else:
                t, rank, sm = heapq.heappop(heap)
                heapq.heappush(heap, (t + cost[i], rank, sm))
            per_sm[sm].append(i)
    loads = [cost[t].sum() if t else 0.0 for t in per_sm]
    busiest = per_sm[int(np.argmax(loads))]
    return np.bincount(np.array(cls)[busiest], minlength=k).astype(float)


@pytest.mark.parametrize("seed", range(6))
def test_busiest_sm_equals_the_plain_simulation_including_near_ties(seed):
    # integer costs (exact ties between SMs), random reals, and tenths (sums that round differently by order)
    rng = np.random.default_rng(seed)
    for trial in range(60):
        k, sms, slots = int(rng.integers(2, 30)), int(rng.integers(2, 140)), int(rng.integers(1, 4))
        counts = [int(x) for x in rng.integers(0, 50, size=k)]
        if sum(counts) == 0 or sum(n > 0 for n in counts) < 2:
            continue
        costs = [[float(x) for x in rng.integers(1, 20, size=k)], [float(x) for x in rng.random(k) * 10],
                 [round(float(x) * 0.1, 1) for x in rng.integers(1, 5, size=k)]][trial % 3]
        for policy in ("hardware", "persistent"):
            for order in ("interleaved", "grouped", "descending"):
                got = busiest_sm(counts, costs, sms, slots, policy, order)
                assert got.tolist() == _reference_busiest(counts, costs, sms, slots, policy, order).tolist(), (
                    counts, costs, sms, slots, policy, order)


def _random_sets(seed, n_sets, integer=True):
    rng = np.random.default_rng(seed)
    sets = []
    while len(sets) < n_sets:
        k = int(rng.integers(2, 12))
        counts = [int(x) for x in rng.integers(0, 60, size=k)]
        if sum(n > 0 for n in counts) < 2:
            continue
        costs = ([float(x) for x in rng.integers(1, [3, 20, 300][len(sets) % 3], size=k)] if integer
                 else [round(float(x), 1) for x in rng.random(k) * 5 + 0.1])
        policy = ("hardware", "persistent")[len(sets) % 2]
        order = ("interleaved", "grouped", "descending")[len(sets) % 3]
        sets.append((counts, costs, int(rng.integers(1, 40)), int(rng.integers(1, 4)), policy, order))
    return sets


@pytest.mark.parametrize("integer", [True, False])
def test_many_sets_at_once_equal_the_plain_simulation_of_each(integer):
    # busiest_sm_sets simulates many sets with integer costs in one sweep over time, the others one at a time
    from synperf.model import schedule

    sets = _random_sets(7 if integer else 8, 300, integer)
    args = ([n for s in sets for n in s[0]], [c for s in sets for c in s[1]], [len(s[0]) for s in sets],
            [s[2] for s in sets], [s[3] for s in sets], [s[4] for s in sets], [s[5] for s in sets])
    schedule._CACHE.clear()
    got = schedule.busiest_sm_sets(*args)
    ref = np.concatenate([_reference_busiest(*s) for s in sets])
    assert got.tolist() == ref.tolist()


def test_joint_sweep_equals_the_per_set_simulation():
    from synperf.model.schedule import _batch_busiest, _busiest_counts

    keys = [(tuple(c), tuple(x), sms, slots, policy, order)
            for c, x, sms, slots, policy, order in _random_sets(9, 400)]
    assert _batch_busiest(keys) == [_busiest_counts(*k) for k in keys]


@pytest.mark.parametrize("seed", range(4))
def test_rounds_hand_out_tasks_as_the_per_task_heap(seed):
    # the rounds of _slot_sms against the heap, with zero costs, tiny costs after a huge one, reals and ties
    from synperf.model.schedule import _min_heap_sms, _round_robin_sms, _slot_sms

    rng = np.random.default_rng(seed)
    for trial in range(200):
        n, sms, slots = int(rng.integers(0, 300)), int(rng.integers(1, 20)), int(rng.integers(1, 4))
        c = [rng.integers(1, 6, n).astype(float), rng.random(n) * 10, np.round(rng.integers(1, 5, n) * 0.1, 1),
             np.where(rng.random(n) < 0.2, 0.0, rng.integers(1, 4, n).astype(float)),
             np.r_[1e17, rng.random(n)][:n]][trial % 5]
        assert _slot_sms(c, sms, slots, "hardware").tolist() == _round_robin_sms(c.tolist(), sms, slots)
        assert _slot_sms(c, sms, slots, "persistent").tolist() == _min_heap_sms(c.tolist(), sms)
