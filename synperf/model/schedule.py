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
the same for many task sets at once. The simulations give every task the slot a heap of
``(free time, order)`` keys would give it, but hand tasks out in rounds of NumPy operations:
per set, every slot that frees before the next possible push (:func:`_slot_sms`); for many
sets with integer costs, all sets together in one sweep over the free times
(:func:`_batch_busiest`).

Occupancy (:func:`ctas_per_sm`) follows the CUDA occupancy rules: resident CTAs
per SM are limited by warps, registers, shared memory and the CTA cap
(CUDA Programming Guide, "Compute Capabilities"; per-SM limits from
``config/gpus.yaml``).
"""

from __future__ import annotations

import heapq
import itertools
import math

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


#: simulated sets kept by :func:`_busiest_counts_many` (the oldest dropped first)
CACHE_SETS = 65536
_CACHE: dict = {}
#: fewer sets than this are simulated one at a time: a joint sweep costs a few NumPy calls per distinct time
BATCH_MIN_SETS = 32
#: the joint sweep hands the sets left over to per-set heaps when no more than this many tasks are left
TAIL_TASKS = 8192
_ORDERS = ("grouped", "interleaved", "descending")


def _busiest_counts(counts: tuple[int, ...], costs: tuple[float, ...], num_sms: int, slots: int, policy: str,
                    order: str) -> tuple[float, ...]:
    """Tasks of each class on the most-loaded SM of one set, by simulating it (per-set rounds, :func:`_slot_sms`)."""
    cls, c = _expand(counts, costs, order)
    sm_of = _slot_sms(c, num_sms, slots, policy)
    busiest = _busiest(sm_of, c, num_sms)
    return tuple(np.bincount(cls[sm_of == busiest], minlength=len(counts)).astype(float))


def _busiest_counts_many(keys: list[tuple]) -> list[tuple[float, ...]]:
    """:func:`_busiest_counts` of each key ``(counts, costs, num_sms, slots, policy, order)``, each distinct key
    simulated once while kept (the last :data:`CACHE_SETS` simulated are kept). The sets whose costs are integers
    (summing below 2**52) are simulated together (:func:`_batch_busiest`) when there are :data:`BATCH_MIN_SETS` of
    them; the others one at a time."""
    out = {key: _CACHE.get(key) for key in keys}  # each long key hashed as few times as can be
    todo = [k for k, v in out.items() if v is None]
    whole = [k for k in todo if _integer_costs(k[0], k[1])]
    if len(whole) >= BATCH_MIN_SETS:
        out.update(zip(whole, _batch_busiest(whole)))
    for key in todo:
        if out[key] is None:
            out[key] = _busiest_counts(*key)
        _CACHE[key] = out[key]
    for old in list(itertools.islice(_CACHE, max(0, len(_CACHE) - CACHE_SETS))):  # the oldest first
        del _CACHE[old]
    return [out[k] for k in keys]


def _integer_costs(counts: tuple[int, ...], costs: tuple[float, ...]) -> bool:
    """True when every cost is an integer in [1, 2**52) and the set's summed cost is below 2**52."""
    return (all(0.0 < c < 2.0 ** 52 and c == math.floor(c) for c in costs)
            and sum(n * c for n, c in zip(counts, costs)) < 2.0 ** 52)


def _batch_busiest(keys: list[tuple]) -> list[tuple[float, ...]]:
    """:func:`_busiest_counts` of sets with integer costs > 0 (summing below 2**52), simulated all at once.

    Each set keeps one key ``(time the slot frees, order)`` per slot, as :func:`_round_robin_sms` and
    :func:`_min_heap_sms` do. The sets are independent, so their pops can be taken in one sweep over the times at
    which a slot frees, in increasing order, all sets at once: at time ``t`` the slots of a set that free at ``t``
    pop in slot order and take its next tasks, and the times they push, ``t + cost``, are later than ``t`` (costs
    are integers >= 1 and the sums exact). The busiest SM's load is then an exact sum in any order.
    """
    m = len(keys)
    cls, cost, n, k = _expand_many(keys)
    off = np.cumsum(n) - n
    sms = np.array([key[2] for key in keys], dtype="int64")
    persistent = np.array([key[4] == "persistent" for key in keys])
    width = np.where(persistent, sms, np.minimum(n, sms * np.array([key[3] for key in keys], dtype="int64")))
    ptr = np.where(persistent, 0, width)  # next task of each set: a hardware launch's first wave is placed
    ev_set = np.repeat(np.arange(m), width)
    ev_slot = np.arange(len(ev_set)) - np.repeat(np.cumsum(width) - width, width)
    sm_of = np.empty(len(cost), dtype="int64")
    hw = ~persistent[ev_set]
    first = off[ev_set[hw]] + ev_slot[hw]
    sm_of[first] = ev_slot[hw] % sms[ev_set[hw]]
    ev_time = np.zeros(len(ev_set))
    ev_time[hw] = cost[first]
    live = ptr[ev_set] < n[ev_set]
    stride = int(width.max()) if m else 1
    buckets: dict = {}
    times: list = []
    _push(buckets, times, ev_time[live], ev_set[live] * stride + ev_slot[live])
    while times:
        if int((n - ptr).sum()) <= TAIL_TASKS:  # few tasks left: per-task heaps cost less than a sweep
            _finish_with_heaps(buckets, times, stride, ptr, n, off, cost, sms, sm_of)
            break
        t = heapq.heappop(times)
        ev = buckets.pop(t)
        ev = np.sort(ev[0] if len(ev) == 1 else np.concatenate(ev), kind="stable")  # sorted runs: merged
        s, slot = np.divmod(ev, stride)
        new_set = np.empty(len(ev), dtype=bool)
        new_set[0] = True
        np.not_equal(s[1:], s[:-1], out=new_set[1:])
        start = np.flatnonzero(new_set)
        seg = np.diff(np.append(start, len(ev)))
        task = ptr[s] + (np.arange(len(ev)) - np.repeat(start, seg))
        head = s[start]
        ptr[head] = np.minimum(ptr[head] + seg, n[head])
        ok = task < n[s]
        ev, s, slot, at = ev[ok], s[ok], slot[ok], off[s[ok]] + task[ok]
        sm_of[at] = slot % sms[s]
        more = ptr[s] < n[s]
        _push(buckets, times, t + cost[at[more]], ev[more])
    # the busiest SM of each set (ties: the lowest id) and its tasks per class
    task_set = np.repeat(np.arange(m), n)
    smax = int(sms.max()) if m else 1
    loads = np.bincount(task_set * smax + sm_of, weights=cost, minlength=m * smax).reshape(m, smax)
    busiest = np.argmax(loads, axis=1)
    on = sm_of == busiest[task_set]
    per_class = np.bincount((cls + np.repeat(np.cumsum(k) - k, n))[on], minlength=int(k.sum()))
    per_class = per_class.astype(float).tolist()
    ends = np.cumsum(k).tolist()
    return [tuple(per_class[e - len(key[0]):e]) for e, key in zip(ends, keys)]


def _expand_many(keys: list[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_expand` of every set of ``keys`` (``(counts, costs, num_sms, slots, policy, order)``, integer costs),
    one set after the other: (class of each task, its cost, tasks per set, classes per set)."""
    m = len(keys)
    k = np.array([len(key[0]) for key in keys], dtype="int64")
    counts = np.array([c for key in keys for c in key[0]], dtype="int64")
    costs = np.array([c for key in keys for c in key[1]], dtype="float64")
    first_class = np.cumsum(k) - k
    n = np.bincount(np.repeat(np.arange(m), k), weights=counts, minlength=m).astype("int64")
    flat = np.repeat(np.arange(len(counts)), counts)  # class (numbered over all sets) of each task, grouped order
    task_set = np.repeat(np.arange(m), n)
    order = np.array([_ORDERS.index(key[5]) for key in keys], dtype="int64")
    # interleaved sets whose classes have equal counts cycle through their classes: task j is of class j % k
    same = np.minimum.reduceat(counts, first_class) == np.maximum.reduceat(counts, first_class) if m else order
    cyclic = ((order == 1) & same)[task_set]
    local = np.arange(len(flat)) - np.repeat(np.cumsum(n) - n, n)
    flat[cyclic] = first_class[task_set[cyclic]] + local[cyclic] % k[task_set[cyclic]]
    sort = np.flatnonzero(((order == 2) | ((order == 1) & ~same))[task_set])
    if len(sort):  # the other interleaved and the descending sets: a stable sort on set, then the order's key
        f, ts = flat[sort], task_set[sort]
        rank = sort - np.repeat(np.cumsum(counts) - counts, counts)[sort]  # task's place in its class
        primary = np.where(order[ts] == 1, rank * k[ts] + (f - first_class[ts]), -costs[f])
        lo, span = primary.min(), primary.max() - primary.min() + 1.0  # integers: exact in float64
        flat[sort] = f[np.argsort(ts * span + (primary - lo), kind="stable")]
    return flat - np.repeat(first_class, n), costs[flat], n, k


def _finish_with_heaps(buckets: dict, times: list, stride: int, ptr, n, off, cost, sms, sm_of) -> None:
    """Place the remaining tasks of :func:`_batch_busiest`'s sets from its pending slot keys (``buckets`` by free
    time): one heap of ``(time, slot)`` per set, a pop and a push per task, as :func:`_round_robin_sms`."""
    heaps: dict = {}
    for t in times:
        for part in buckets[t]:
            for key in part.tolist():
                heaps.setdefault(key // stride, []).append((t, key % stride))
    for s, heap in heaps.items():
        heapq.heapify(heap)
        lo, hi, m = int(off[s] + ptr[s]), int(off[s] + n[s]), int(sms[s])
        slots = []
        for c in cost[lo:hi].tolist():
            t, slot = heap[0]
            slots.append(slot)
            heapq.heapreplace(heap, (t + c, slot))
        sm_of[lo:hi] = np.asarray(slots, dtype="int64") % m


def _push(buckets: dict, times: list, t: np.ndarray, ev: np.ndarray) -> int:
    """Add the slot keys ``ev`` to the buckets of their free times ``t`` (a new time goes on the heap ``times``);
    the number added."""
    if len(t) == 0:
        return 0
    order = np.argsort(t, kind="stable")
    t, ev = t[order], ev[order]
    new_time = np.empty(len(t), dtype=bool)
    new_time[0] = True
    np.not_equal(t[1:], t[:-1], out=new_time[1:])
    cut = np.flatnonzero(new_time).tolist()
    for tv, a, b in zip(t[cut].tolist(), cut, cut[1:] + [len(t)]):
        part = ev[a:b]
        if tv in buckets:
            buckets[tv].append(part)
        else:
            buckets[tv] = [part]
            heapq.heappush(times, tv)
    return len(t)


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
    counts, costs, classes, sms, of, total, nonzero, sim, keys = _sets(counts, costs, classes, num_sms,
                                                                       slots_per_sm, policy, order)
    m = len(classes)
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
    starts = np.cumsum(classes) - classes
    for i, res in zip(sim, _busiest_counts_many(keys)):
        out[starts[i]:starts[i] + classes[i]] = res
    return out


def _sets(counts, costs, classes, num_sms, slots_per_sm, policy, order):
    """The arguments of :func:`busiest_sm_sets` as arrays (one machine, policy and order per set), the set of each
    class, tasks and classes with tasks per set, and the sets to simulate with their :func:`_busiest_counts` keys."""
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
    sim = np.flatnonzero((nonzero > 1) & (total <= SIMULATE_MAX_TASKS))
    keys = [(tuple(counts[starts[i]:starts[i] + classes[i]].tolist()),
             tuple(costs[starts[i]:starts[i] + classes[i]].tolist()), int(sms[i]), int(slots[i]), str(policy[i]),
             str(order[i])) for i in sim]
    return counts, costs, classes, sms, of, total, nonzero, sim, keys
