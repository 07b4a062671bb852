"""Task sets: the output of a kernel decomposer (SynPerf method, module 1).

A task is one CTA of a conventional launch, or one work packet (output tile, q-tile)
of a persistent kernel. Tasks come in classes of identical tasks; each class has
per-task demands on the math pipes (Tensor/MMA, FMA, XU) and bytes loaded from
global memory. :meth:`TaskSet.summary` places them on SMs with
:mod:`synperf.model.schedule` and returns the demands at GPU level and on the most-loaded
SM, the inputs of the feature analyzer (:mod:`synperf.model.features.v2`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from synperf.model.schedule import busiest_sm

DEMANDS = ("tensor_ops", "fma_ops", "xu_ops", "load_bytes")

#: columns every vectorised decomposer returns (one row per launch)
SUMMARY_COLUMNS = (
    "num_tasks", "ctas_per_sm", "persistent",
    "tensor_all_ops", "fma_all_ops", "xu_all_ops", "load_all_bytes", "dram_bytes", "store_bytes",
    "sm_max_tensor_ops", "sm_max_fma_ops", "sm_max_xu_ops", "sm_max_load_bytes", "sm_max_tasks",
)


@dataclass
class TaskSet:
    """Tasks of one launch (or of a sequence of launches, summed), grouped in classes of identical tasks.

    Attributes:
        counts: tasks per class.
        tensor_ops, fma_ops, xu_ops: per-task operations: Tensor-core FLOP (2 per MAC), FP32 FMA-pipe
            instructions, XU (MUFU) results.
        load_bytes: per-task bytes loaded from global memory (served by L2 or DRAM).
        dram_bytes: bytes the launch must read from DRAM at least once (unique inputs).
        store_bytes: bytes written to global memory.
        ctas_per_sm: resident CTAs per SM (occupancy).
        policy: ``hardware`` (round-robin block scheduler) or ``persistent`` (software min-heap).
        order: grid order of the classes (see :func:`synperf.model.schedule.busiest_sm`).
        dims: per-class description of the task (tile sizes), for humans and tests.
        sched_cost: per-class cost used for placing tasks (default: :meth:`cost`, the task's
            largest pipe or load cycles on one SM).
    """

    counts: np.ndarray
    tensor_ops: np.ndarray
    fma_ops: np.ndarray
    xu_ops: np.ndarray
    load_bytes: np.ndarray
    dram_bytes: float
    store_bytes: float
    ctas_per_sm: int
    policy: str = "hardware"
    order: str = "interleaved"
    dims: list[dict] = field(default_factory=list)
    sched_cost: np.ndarray | None = None

    def __post_init__(self):
        n = len(self.counts)
        for name in DEMANDS:
            arr = np.broadcast_to(np.asarray(getattr(self, name), dtype="float64"), (n,)).copy()
            setattr(self, name, arr)
        self.counts = np.asarray(self.counts, dtype="int64")

    @property
    def num_tasks(self) -> int:
        return int(self.counts.sum())

    def cost(self, spec, dtype: str | None = None) -> np.ndarray:
        """Per-task cost for scheduling: the largest of its pipe and load cycles on one SM."""
        tensor_rate = spec.tensor_ops_per_clk_per_sm(dtype) if dtype else 1.0
        dram_per_sm = spec.dram_bw_gbps * 1e9 / spec.clock_hz / spec.sm_count
        return np.maximum.reduce([self.tensor_ops / tensor_rate, self.fma_ops / spec.fma_ops_per_clk_per_sm,
                                  self.xu_ops / spec.xu_ops_per_clk_per_sm, self.load_bytes / dram_per_sm,
                                  np.full(len(self.counts), 1e-9)])

    def summary(self, spec, dtype: str | None = None, sequential_launches: bool = False) -> dict:
        """Demands at GPU level and on the most-loaded SM (keys of :data:`SUMMARY_COLUMNS`).

        With ``sequential_launches`` every class is its own launch (e.g. fused MoE's w13 GEMM, SiLU&Mul and
        w2 GEMM run one after another): each launch's busiest SM takes ceil(n / SMs) of its tasks and the
        launches add up; otherwise all tasks share one launch and are placed by the scheduler.
        """
        if sequential_launches:
            per_sm = np.ceil(self.counts / spec.sm_count)
        else:
            cost = self.sched_cost if self.sched_cost is not None else self.cost(spec, dtype)
            per_sm = busiest_sm(self.counts, cost, spec.sm_count, self.ctas_per_sm, self.policy, self.order)
        out = {"num_tasks": float(self.num_tasks), "ctas_per_sm": float(self.ctas_per_sm),
               "persistent": float(self.policy == "persistent"), "dram_bytes": float(self.dram_bytes),
               "store_bytes": float(self.store_bytes), "sm_max_tasks": float(per_sm.sum())}
        for name, key in (("tensor_ops", "tensor"), ("fma_ops", "fma"), ("xu_ops", "xu")):
            v = getattr(self, name)
            out[f"{key}_all_ops"] = float((v * self.counts).sum())
            out[f"sm_max_{key}_ops"] = float((v * per_sm).sum())
        out["load_all_bytes"] = float((self.load_bytes * self.counts).sum())
        out["sm_max_load_bytes"] = float((self.load_bytes * per_sm).sum())
        return out


def set_sums(values: np.ndarray, classes) -> np.ndarray:
    """Per task set, the sum of ``values`` over its classes, bit for bit as ``values[..., set].sum()`` gives it
    (NumPy's pairwise summation over each set's classes in order).

    Integer values whose absolute sum is below 2**53 sum exactly in any order: such sums are taken in one pass
    (``np.add.reduceat``). Of the other sets, those of more than 64 classes are summed slice by slice, the shorter
    ones per class count k as the rows of a C-contiguous (sets, k) block, which NumPy sums pairwise per row, as it
    sums a 1-d array.

    Args:
        values: shape ``(n,)`` or ``(rows, n)``, the classes of every set one set after the other.
        classes: classes per set (ints), summing to ``n``.

    Returns:
        shape ``(len(classes),)`` or ``(rows, len(classes))``.
    """
    classes = np.asarray(classes, dtype="int64")
    v = np.atleast_2d(values)
    starts = np.cumsum(classes) - classes
    out = np.zeros((len(v), len(classes)))
    some = np.flatnonzero(classes > 0)
    if len(some):
        at = starts[some]
        out[:, some] = np.add.reduceat(v, at, axis=1)
        inexact = np.zeros(out.shape, dtype=bool)
        inexact[:, some] = ((np.add.reduceat(v != np.floor(v), at, axis=1) > 0)
                            | (np.add.reduceat(np.abs(v), at, axis=1) >= 2.0 ** 53))
        for r in range(len(v)):
            for i in np.flatnonzero(inexact[r] & (classes > 64)):  # long sets: their own slices, without copying
                out[r, i] = v[r, starts[i]:starts[i] + classes[i]].sum()
            for k in np.unique(classes[inexact[r] & (classes <= 64)]):
                sets = np.flatnonzero(inexact[r] & (classes == k))
                out[r, sets] = v[r][starts[sets][:, None] + np.arange(k)].sum(axis=1)
    return out if np.ndim(values) == 2 else out[0]


def uniform_summary(num_tasks: pd.Series, num_sms: pd.Series, per_task: dict[str, pd.Series],
                    dram_bytes: pd.Series, store_bytes: pd.Series, ctas_per_sm: pd.Series,
                    persistent: pd.Series) -> pd.DataFrame:
    """Vectorised :meth:`TaskSet.summary` for launches of one task class each.

    With identical tasks both schedulers put ``ceil(num_tasks / num_sms)`` tasks on the busiest SM.
    ``per_task`` maps ``tensor_ops``, ``fma_ops``, ``xu_ops``, ``load_bytes`` to per-task Series.
    """
    def f64(v) -> np.ndarray:
        return np.asarray(v.to_numpy(dtype="float64") if isinstance(v, pd.Series) else v, dtype="float64")

    n = f64(num_tasks)
    busiest = np.ceil(n / f64(num_sms))
    out = {"num_tasks": n, "ctas_per_sm": f64(ctas_per_sm), "persistent": f64(persistent),
           "dram_bytes": f64(dram_bytes), "store_bytes": f64(store_bytes), "sm_max_tasks": busiest}
    for name, key in (("tensor_ops", "tensor"), ("fma_ops", "fma"), ("xu_ops", "xu")):
        v = per_task.get(name, 0.0)
        v = f64(v) if isinstance(v, pd.Series) else np.full(len(n), float(v))
        out[f"{key}_all_ops"] = v * n
        out[f"sm_max_{key}_ops"] = v * busiest
    lb = f64(per_task["load_bytes"])
    out["load_all_bytes"] = lb * n
    out["sm_max_load_bytes"] = lb * busiest
    return pd.DataFrame({c: out[c] for c in SUMMARY_COLUMNS}, index=num_tasks.index)


def ceil_div(a, b):
    """Elementwise ceil(a / b) for Series/arrays/ints."""
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        return -(-a // b)
    return np.ceil(np.asarray(a, dtype="float64") / np.asarray(b, dtype="float64")) if not isinstance(a, pd.Series) \
        else np.ceil(a.astype("float64") / b)

