"""NCCL collective latency: all-reduce and send/recv time from measured tables, for any registry GPU.

Source: the SynPerf/PipeWeave authors' collective tables in Vidur's format,
``pipeweave/dataset/collective/<GPU>/{all_reduce,send_recv}.csv`` (github.com/zksainx/pipeweave @ 55e0317):
``time_stats.<op>.median`` in **milliseconds**, ``size`` in bytes, ``num_workers`` GPUs.

Model (:meth:`CollectiveModel.latency_us`, result in **microseconds**):

1. Per (GPU, op, workers): the median over duplicate rows of each size, then the monotone envelope
   ``t(s) = min over s' >= s of t(s')`` (a message never takes longer than a bigger one; removes the
   launch-noise bumps at small sizes).
2. Inside the measured range: linear interpolation of ``log t`` in ``log size`` (exact at measured sizes).
   Below the smallest size (2 KiB): the smallest size's time (latency floor). Above the largest: bandwidth-bound,
   ``t_max * size / size_max``.
3. Workers not in the table (all-reduce only; send/recv is always 2 GPUs): the nearest measured count in log
   scale, times the ring all-reduce traffic ratio ``(2 (n-1)/n) / (2 (m-1)/m)``. One worker: 0. More workers than
   any table of the op measured (:meth:`CollectiveModel.max_workers`, one node's GPUs) are refused: a collective
   across nodes runs over the network, not the NVLink or PCIe of the tables, and is not modelled. Nor is a
   pipeline whose TP x PP GPUs outnumber one node's (:meth:`CollectiveModel.pipeline_spans_nodes`): its send/recv
   between the stages on different nodes crosses the network, which the 2-GPU send/recv tables do not measure.
4. A GPU without a table for the op: a proxy GPU that has one, chosen by (same link kind: NVLink or PCIe, from
   the registry's ``interconnect`` field; then same GPU class, :meth:`synperf.data.hardware.GPUSpec.same_class`;
   then closest link bandwidth; then has the worker count; then id), and its bandwidth part scaled by link bandwidth:
   ``t = t_floor + (t_proxy(s) - t_floor) * bw_proxy / bw_gpu`` with ``t_floor`` the proxy's 2 KiB time.
   Link bandwidth is the first "N GB/s" of the interconnect's primary link (before " + "), or for a bare
   "PCIe GenX x16" 32/64/128/256 GB/s for Gen3/4/5/6 (the registry's bidirectional convention). When a
   bandwidth cannot be parsed the proxy's time is used unscaled ("scaled by nothing"), and
   :meth:`CollectiveModel.describe` says so.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from ._deps import InputError, Registry, close_match, gpu_name_map

OPS = ("all_reduce", "send_recv")
#: config key of the map from folder names under ``dataset/collective`` to registry ids
GPU_MAP_KEY = "e2e.collective_gpu_map"
PCIE_GEN_GBPS = {3: 32.0, 4: 64.0, 5: 128.0, 6: 256.0}


@dataclass(frozen=True)
class Curve:
    """One measured curve: sorted sizes (bytes) and envelope times (us)."""

    sizes: np.ndarray
    times_us: np.ndarray

    def __call__(self, size: np.ndarray) -> np.ndarray:
        s = np.asarray(size, dtype="float64")
        ls, lt = np.log(self.sizes), np.log(self.times_us)
        out = np.exp(np.interp(np.log(np.clip(s, self.sizes[0], self.sizes[-1])), ls, lt))
        big = s > self.sizes[-1]
        out[big] = self.times_us[-1] * s[big] / self.sizes[-1]
        return out


def link(interconnect: str | None) -> tuple[str | None, float | None]:
    """``(kind, GB/s)`` of a registry ``interconnect`` string's primary link (before " + "): kind ``nvlink`` or
    ``pcie`` (None when unknown), bandwidth None when not stated."""
    if not interconnect:
        return None, None
    primary = str(interconnect).split(" + ")[0]
    kind = "nvlink" if primary.lower().startswith("nvlink") else "pcie" if primary.lower().startswith("pcie") else None
    m = re.search(r"(\d+(?:\.\d+)?)\s*GB/s", primary)
    if m:
        return kind, float(m.group(1))
    g = re.search(r"Gen\s*(\d)", primary)
    return kind, PCIE_GEN_GBPS.get(int(g.group(1))) if g and kind == "pcie" else None


def _ring_factor(n: int) -> float:
    return 2.0 * (n - 1) / n


class CollectiveModel:
    """Collective latency for any GPU of a registry (see the module docstring for the model).

    Build with :meth:`from_dir`; ``curves[(gpu_id, op)][workers]`` holds the measured curves.
    """

    def __init__(self, curves: dict[tuple[str, str], dict[int, Curve]], registry: Registry):
        self.curves = curves
        self.registry = registry

    @classmethod
    def from_dir(cls, collective_dir: str | os.PathLike, registry: Registry,
                 gpu_map: Mapping[str, str] | None) -> "CollectiveModel":
        """Read ``<collective_dir>/<GPU>/{all_reduce,send_recv}.csv``.

        Args:
            collective_dir: ``pipeweave/dataset/collective`` of the public data.
            registry: the GPU registry.
            gpu_map: table folder name (``A100``, ``RTX PRO 6000 S``, ...) -> registry id: the config's
                ``e2e.collective_gpu_map``; folders it does not name are not read.

        Raises:
            InputError: ``gpu_map`` missing or empty (naming ``e2e.collective_gpu_map``), an id the registry
                lacks, a folder name with no folder, the folder has no table, or a table lacks
                ``size``/``num_workers``/the median column.
        """
        root = Path(collective_dir)
        gpu_map = gpu_name_map(gpu_map, GPU_MAP_KEY, "collective table folder")
        for folder, gid in gpu_map.items():
            if gid not in registry.ids:
                raise InputError(f"config key {GPU_MAP_KEY}.{folder}: unknown GPU id {gid!r}; expected an id of "
                                 f"{registry.path}")
            if not (root / folder).is_dir():
                folders = sorted(d.name for d in root.iterdir() if d.is_dir()) if root.is_dir() else []
                raise InputError(f"config key {GPU_MAP_KEY}.{folder}: no folder {root / folder}"
                                 f"{close_match(folder, folders)}; folders: {folders}")
        curves: dict[tuple[str, str], dict[int, Curve]] = {}
        for folder, gid in gpu_map.items():
            for op in OPS:
                p = root / folder / f"{op}.csv"
                if not p.exists():
                    continue
                df = pd.read_csv(p)
                col = f"time_stats.{op}.median"
                missing = [c for c in ("size", "num_workers", col) if c not in df.columns]
                if missing:
                    raise InputError(f"{p}: missing columns {missing}")
                curves[(gid, op)] = {}
                for w, g in df.groupby("num_workers"):
                    med = g.groupby("size")[col].median().sort_index()
                    t = np.minimum.accumulate(med.to_numpy()[::-1])[::-1] * 1e3  # ms -> us, monotone envelope
                    curves[(gid, op)][int(w)] = Curve(med.index.to_numpy(dtype="float64"), t)
        if not curves:
            raise InputError(f"{root}: no collective tables (expected <GPU>/all_reduce.csv)")
        return cls(curves, registry)

    def _proxy(self, gpu: str, op: str, workers: int) -> tuple[str, float, str]:
        """(table GPU, bandwidth scale bw_proxy/bw_gpu, description)."""
        if (gpu, op) in self.curves:
            return gpu, 1.0, "measured table"
        spec = self.registry[gpu]
        kind, bw = link(spec.raw.get("interconnect"))
        cands = [g for (g, o) in self.curves if o == op]
        if not cands:
            raise InputError(f"no collective table for {op!r} on any GPU")

        def key(g):
            s = self.registry[g]
            k2, bw2 = link(s.raw.get("interconnect"))
            dist = abs(math.log(bw2 / bw)) if bw and bw2 else math.inf
            return (k2 != kind, not s.same_class(spec), dist, workers not in self.curves[(g, op)], g)

        ref = min(cands, key=key)
        _, bw_ref = link(self.registry[ref].raw.get("interconnect"))
        if bw and bw_ref:
            return ref, bw_ref / bw, f"proxy {ref}, bandwidth part scaled by {bw_ref:g}/{bw:g} GB/s"
        return ref, 1.0, f"proxy {ref}, scaled by nothing (no parsable link bandwidth)"

    def describe(self, op: str, workers: int, gpu: str) -> str:
        """How :meth:`latency_us` gets its value for this (op, workers, GPU): table, proxy, worker scaling."""
        ref, _, how = self._proxy(gpu, op, workers)
        w_ref = self._workers(ref, op, workers)
        return how + ("" if w_ref == workers else f"; {w_ref} workers scaled to {workers} by the ring factor")

    def _workers(self, ref: str, op: str, workers: int) -> int:
        avail = sorted(self.curves[(ref, op)])
        return workers if workers in avail else min(avail, key=lambda w: (abs(math.log(w / workers)), w))

    def max_workers(self, op: str) -> int:
        """The most GPUs any table of ``op`` measured (0 when none has it)."""
        return max((max(c) for (_, o), c in self.curves.items() if o == op), default=0)

    def spans_nodes(self, op: str, workers: int) -> bool:
        """True when ``workers`` GPUs are more than :meth:`max_workers` (module docstring, rule 3)."""
        return workers > max(self.max_workers(op), 1)

    def pipeline_spans_nodes(self, tp: int, pp: int) -> bool:
        """True when ``pp`` > 1 stages of ``tp`` GPUs need more GPUs than one node holds (:meth:`spans_nodes` of
        the all-reduce tables for ``tp * pp`` GPUs): a stage boundary then lies between nodes (module docstring,
        rule 3)."""
        return int(pp) > 1 and self.spans_nodes("all_reduce", int(tp) * int(pp))

    def check_workers(self, op: str, workers: int) -> None:
        """Refuse ``workers`` that :meth:`spans_nodes`.

        Raises:
            InputError: naming the op, the GPU count and the largest measured one.
        """
        if self.spans_nodes(op, workers):
            raise InputError(f"{op} over {workers} GPUs: the NCCL tables measure at most {self.max_workers(op)} "
                             "GPUs (one node); collectives across nodes are not modelled")

    def latency_us(self, op: str, size_bytes, workers: int, gpu: str) -> np.ndarray:
        """Latency in microseconds of ``op`` (``all_reduce`` or ``send_recv``) moving ``size_bytes`` (scalar or
        array; bytes per GPU buffer) among ``workers`` GPUs of registry id ``gpu``.

        Raises:
            InputError: unknown op or GPU, workers < 1, or more workers than the tables measure
                (:meth:`check_workers`).
        """
        if op not in OPS:
            raise InputError(f"unknown collective {op!r}; expected one of {OPS}")
        workers = int(workers)
        if workers < 1:
            raise InputError(f"workers must be >= 1, got {workers}")
        if workers > 1:
            self.check_workers(op, workers)
        size = np.atleast_1d(np.asarray(size_bytes, dtype="float64"))
        if workers == 1:
            return np.zeros_like(size)
        ref, bw_scale, _ = self._proxy(gpu, op, workers)
        w_ref = self._workers(ref, op, workers)
        curve = self.curves[(ref, op)][w_ref]
        t = curve(size)
        if op == "all_reduce" and w_ref != workers:
            t = t * _ring_factor(workers) / _ring_factor(w_ref)
        if bw_scale != 1.0:
            floor = curve.times_us[0]
            t = floor + (t - floor) * bw_scale
        return np.where(size > 0, t, 0.0)
