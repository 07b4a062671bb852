"""Scheduling simulator: which SM runs which task (SynPerf method, module 2).

Two schedulers:

* :func:`round_robin` (hardware block scheduler, the default for conventional
  launches): CTAs are dispatched in grid order; the first wave goes round-robin
  over the SMs, filling each SM up to its occupancy (``slots_per_sm`` concurrent
  CTAs); afterwards each CTA goes to the slot that frees first.
* :func:`min_heap` (software scheduler of persistent kernels, e.g. FlashInfer's
  and FlashAttention-3's Hopper paths, CUTLASS persistent GEMMs): each work packet
  goes to the SM with the least accumulated cost (ties: lowest SM id).

Both return per-SM task lists. :func:`busiest_sm` reduces per-class task sets to
the demand vector of the most-loaded SM, with a closed form for uniform tasks and
an exact simulation (cached) for small heterogeneous sets; :func:`busiest_sm_sets` does
the same for many task sets at once.

Occupancy (:func:`ctas_per_sm`) follows the CUDA occupancy rules: resident CTAs
per SM are limited by warps, registers, shared memory and the CTA cap
(CUDA Programming Guide, "Compute Capabilities"; per-SM limits from
``config/gpus.yaml``).
"""

from __future__ import annotations

import heapq
import math
from functools import lru_cache

import numpy as np

#: above this many tasks :func:`busiest_sm` uses the list-scheduling bound instead of simulating
SIMULATE_MAX_TASKS = 2_000


def ctas_per_sm(spec, threads_per_cta: int, smem_per_cta_bytes: float = 0.0, regs_per_thread: int = 0) -> int:
    """Resident CTAs per SM for a launch configuration (>= 1).

    Args:
        spec: a :class:`synperf.data.hardware.GPUSpec`.
        threads_per_cta: threads per CTA.
        smem_per_cta_bytes: dynamic + static shared memory per CTA, bytes.
        regs_per_thread: registers per thread (0 = not limiting).

    Raises:
        ValueError: ``threads_per_cta`` < 1, or one CTA does not fit on an SM.
    """
    if threads_per_cta < 1:
        raise ValueError(f"threads_per_cta must be >= 1, got {threads_per_cta}")
    warps = math.ceil(threads_per_cta / 32)
    limits = [spec.max_ctas_per_sm, spec.max_warps_per_sm // warps]
    if smem_per_cta_bytes > 0:
        limits.append(int(spec.smem_per_sm_kb * 1024 // smem_per_cta_bytes))
    if regs_per_thread > 0:
        limits.append(spec.regs_per_sm // (regs_per_thread * warps * 32))
    n = min(limits)
    if n < 1:
        raise ValueError(f"a CTA of {threads_per_cta} threads, {smem_per_cta_bytes:.0f} B shared memory and "
                         f"{regs_per_thread} registers/thread does not fit on an SM of {spec.id}")
    return int(n)


def _round_robin_sms(costs: list[float], num_sms: int, slots_per_sm: int) -> list[int]:
    """SM of each task under :func:`round_robin` (``costs``: a list of Python floats, grid order)."""
    n = len(costs)
    first = min(n, num_sms * slots_per_sm)
    sm_of = [i % num_sms for i in range(first)]  # first wave: breadth-first over SMs, then each SM's next slot
    heap = [(costs[i], i, i % num_sms) for i in range(first)]  # (time the slot frees, order of the slot, sm)
    heapq.heapify(heap)
    # the (time, order) keys are unique, so replacing the top gives the same pops as a pop followed by a push
    for i in range(first, n):
        t, order, sm = heap[0]
        sm_of.append(sm)
        heapq.heapreplace(heap, (t + costs[i], order, sm))
    return sm_of


def _min_heap_sms(costs: list[float], num_sms: int) -> list[int]:
    """SM of each task under :func:`min_heap` (``costs``: a list of Python floats, in the given order)."""
    heap = [(0.0, sm) for sm in range(num_sms)]
    sm_of = []
    for c in costs:  # the (load, sm) keys are unique: replacing the top equals a pop followed by a push
        load, sm = heap[0]
        sm_of.append(sm)
        heapq.heapreplace(heap, (load + c, sm))
    return sm_of


def _slot_sms(c: np.ndarray, num_sms: int, slots_per_sm: int, policy: str) -> np.ndarray:
    """SM of each task (int64 array), the same as :func:`_round_robin_sms` (``hardware``) or :func:`_min_heap_sms`
    (``persistent``) of ``c.tolist()``, in rounds of NumPy operations instead of a pop and a push per task.

    Both schedulers keep one key ``(time the slot frees, order)`` per slot (``order``: the slot's first-wave position
    for ``hardware``, its SM for ``persistent``) and give each task, in turn, the slot of the smallest key. With
    ``t`` the smallest time and ``m`` the smallest cost of the next ``len(slots)`` tasks (``m > 0``), every slot whose
    time is below ``t + m`` pops before any time pushed in the meantime (each such time is at least ``t + m``, as the
    sum ``time + cost`` rounds monotonically), so one round hands the next tasks to those slots in key order at
    once. Costs that are not finite and positive, or a round that makes no progress (``t + m == t`` in floating
    point), fall back to the per-task heap.
    """
    n = len(c)
    if not (np.isfinite(c).all() and (c > 0).all()):
        return _heap_sms(c, num_sms, slots_per_sm, policy)
    if policy == "persistent":
        first, time, sm = 0, np.zeros(num_sms), np.arange(num_sms)
    else:
        first = min(n, num_sms * slots_per_sm)
        time, sm = c[:first].copy(), np.arange(first) % num_sms
    sm_of = np.empty(n, dtype="int64")
    sm_of[:first] = sm[:first]
    p, width = first, len(time)
    while p < n:
        t = time.min()
        cut = t + c[p:p + width].min()
        if not cut > t:
            return _heap_sms(c, num_sms, slots_per_sm, policy)
        ready = np.flatnonzero(time < cut)
        if len(ready) > 1 and (time[ready] != t).any():
            ready = ready[np.argsort(time[ready], kind="stable")]  # key order: time, then slot order (ascending)
        ready = ready[:n - p]
        k = len(ready)
        sm_of[p:p + k] = sm[ready]
        time[ready] += c[p:p + k]
        p += k
    return sm_of


def _heap_sms(c: np.ndarray, num_sms: int, slots_per_sm: int, policy: str) -> np.ndarray:
    costs = c.tolist()
    return np.asarray(_min_heap_sms(costs, num_sms) if policy == "persistent"
                      else _round_robin_sms(costs, num_sms, slots_per_sm), dtype="int64")


def _per_sm(sm_of: list[int], num_sms: int) -> list[list[int]]:
    per_sm: list[list[int]] = [[] for _ in range(num_sms)]
    for i, sm in enumerate(sm_of):
        per_sm[sm].append(i)
    return per_sm


def round_robin(costs, num_sms: int, slots_per_sm: int = 1) -> list[list[int]]:
    """Hardware scheduler: per-SM lists of task indices (ascending).

    Args:
        costs: task durations in any consistent unit (e.g. cycles), in grid order.
        num_sms: SMs.
        slots_per_sm: resident CTAs per SM (occupancy).
    """
    costs = np.asarray(costs, dtype="float64").tolist()
    return _per_sm(_round_robin_sms(costs, num_sms, slots_per_sm), num_sms)


def min_heap(costs, num_sms: int) -> list[list[int]]:
    """Software (persistent) scheduler: each task, in the given order, to the least-loaded SM (ties: lowest SM
    id); per-SM lists of task indices (ascending)."""
    costs = np.asarray(costs, dtype="float64").tolist()
    return _per_sm(_min_heap_sms(costs, num_sms), num_sms)


def _expand(counts: tuple[int, ...], costs: tuple[float, ...], order: str) -> tuple[np.ndarray, np.ndarray]:
    k = len(counts)
    n = np.asarray(counts, dtype="int64")
    cls = np.repeat(np.arange(k), n)
    if order == "interleaved":  # grid order cycles through the classes (e.g. q-tiles of one head, then the next)
        # task j of class c sits at key j * k + c; the keys are unique, so any sort gives the same order
        rank = np.arange(len(cls)) - np.repeat(np.cumsum(n) - n, n)
        cls = cls[np.argsort(rank * k + cls, kind="stable")]
    elif order == "descending":  # longest first (FA3 / FlashInfer persistent schedulers)
        cls = cls[np.argsort(-np.asarray(costs)[cls], kind="stable")]
    return cls, np.asarray(costs, dtype="float64")[cls]


def _busiest(sm_of: np.ndarray, c: np.ndarray, num_sms: int) -> int:
    """The SM with the largest summed cost, ties to the lowest id; each SM's sum is ``c[its tasks].sum()``
    (NumPy's pairwise sum over its tasks in order).

    The sums are first taken in one sequential pass (``np.bincount``); they differ from the pairwise ones by less
    than ``2 n eps`` relative (n tasks per SM), so only the SMs within 1e-9 of the sequential maximum can hold the
    pairwise maximum, and only theirs are summed again. Integer-valued costs (below 2**53 in total) sum exactly in
    any order and need no second pass.
    """
    loads = np.bincount(sm_of, weights=c, minlength=num_sms)
    top = loads.max()
    if np.all(c == np.floor(c)) and top < 2.0 ** 53:
        return int(np.argmax(loads))
    cand = np.flatnonzero(loads >= top * (1.0 - 1e-9))
    exact = [c[sm_of == sm].sum() for sm in cand]
    return int(cand[int(np.argmax(exact))])


@lru_cache(maxsize=65536)
def _busiest_counts(counts: tuple[int, ...], costs: tuple[float, ...], num_sms: int, slots: int, policy: str,
                    order: str) -> tuple[float, ...]:
    cls, c = _expand(counts, costs, order)
    sm_of = _slot_sms(c, num_sms, slots, policy)
    busiest = _busiest(sm_of, c, num_sms)
    return tuple(np.bincount(cls[sm_of == busiest], minlength=len(counts)).astype(float))


def busiest_sm(counts, costs, num_sms: int, slots_per_sm: int = 1, policy: str = "hardware",
               order: str = "interleaved") -> np.ndarray:
    """Tasks of each class on the most-loaded SM.

    Args:
        counts: tasks per class (ints).
        costs: cost of one task of each class (e.g. its tensor cycles; only ratios matter).
        num_sms, slots_per_sm: machine shape and occupancy.
        policy: ``hardware`` (:func:`round_robin`) or ``persistent`` (:func:`min_heap`).
        order: task order: ``interleaved`` (grid order cycles through the classes), ``grouped``
            (all tasks of class 0, then class 1, ...) or ``descending`` (longest first).

    Returns:
        float array, per class, of the tasks on the SM with the largest summed cost. One
        class: ``ceil(n / num_sms)`` exactly (both schedulers). Above
        :data:`SIMULATE_MAX_TASKS` tasks: the list-scheduling bound, i.e. every class spread
        evenly (``n_c / num_sms``) plus one task of the costliest class.
    """
    counts = np.asarray(counts).astype("int64")
    return busiest_sm_sets(counts, costs, [len(counts)], num_sms, slots_per_sm, policy, order)


def busiest_sm_sets(counts, costs, classes, num_sms, slots_per_sm=1, policy="hardware",
                    order="interleaved") -> np.ndarray:
    """:func:`busiest_sm` of many task sets at once.

    Args:
        counts, costs: tasks per class and cost of one task of each class, the classes of every set one set after
            the other.
        classes: classes per set (ints), summing to ``len(counts)``.
        num_sms, slots_per_sm, policy, order: as :func:`busiest_sm`, one value for every set or one per set.

    Returns:
        float array shaped like ``counts``: per class, the tasks on its set's most-loaded SM. Sets of one class
        with tasks and sets above :data:`SIMULATE_MAX_TASKS` tasks take their closed forms column-wise; each other
        set is simulated once per distinct (classes, costs, machine, policy, order).

    Raises:
        ValueError: an unknown policy.
    """
    counts = np.asarray(counts).astype("int64")
    costs = np.asarray(costs, dtype="float64")
    classes = np.asarray(classes, dtype="int64")
    m = len(classes)
    sms, slots = (np.broadcast_to(np.asarray(v, dtype="int64"), (m,)) for v in (num_sms, slots_per_sm))
    policy, order = (np.broadcast_to(np.asarray(v, dtype=object), (m,)) for v in (policy, order))
    unknown = set(policy.tolist()) - {"hardware", "persistent"}
    if unknown:
        raise ValueError(f"unknown scheduling policy {sorted(unknown)[0]!r}")
    of = np.repeat(np.arange(m), classes)  # the set of each class
    starts = np.cumsum(classes) - classes
    total = np.bincount(of, weights=counts, minlength=m)
    nonzero = np.bincount(of, weights=counts > 0, minlength=m)
    out = np.zeros(len(counts))
    one = (nonzero == 1)[of] & (counts > 0)
    out[one] = np.ceil(counts[one] / sms[of[one]])
    bound = (nonzero > 1) & (total > SIMULATE_MAX_TASKS)
    if bound.any():  # every class spread evenly plus one task of the costliest class (its first, on a tie)
        on = bound[of]
        out[on] = counts[on].astype(float) / sms[of[on]]
        key = np.where(counts > 0, costs, -1.0)
        top = np.full(m, -np.inf)
        np.maximum.at(top, of[on], key[on])
        at = np.flatnonzero(on & (key == top[of]))
        out[at[np.unique(of[at], return_index=True)[1]]] += 1.0
    for i in np.flatnonzero((nonzero > 1) & (total <= SIMULATE_MAX_TASKS)):
        cls = slice(starts[i], starts[i] + classes[i])
        out[cls] = _busiest_counts(tuple(counts[cls].tolist()), tuple(costs[cls].tolist()), int(sms[i]),
                                   int(slots[i]), str(policy[i]), str(order[i]))
    return out
