"""Compose end-to-end latency: predicted kernel latencies + collectives + framework overhead, per iteration.

Per scheduler iteration ``i`` of a :class:`~.workload.Workload` on GPU ``g`` (seconds)::

    latency_i = sum_ops count * predicted_kernel_us / 1e6          (one bulk predict call per kernel family)
              + sum_collectives count * CollectiveModel.latency_us / 1e6
              + overhead.a_s + overhead.b_s * batch_i              (framework overhead: scheduler, sampling, launch)

Prefill latency = sum over prefill iterations, decode step = median over decode iterations, total = sum over all
iterations (the real runs' ``prefill_latency``, ``median_decode_latency`` and ``total_latency``).

Kernel launches in the canonical form of :func:`synperf.api.launch_table` (validated with it before prediction):
GEMM ``m, n, k`` (batch 1); prefill attention of a ragged batch as ``batch_size`` = B sequences of the uniform
length ``round(sqrt(mean(q^2)))`` (same causal work, :func:`~.workload.equivalent_prefill_len`); decode attention
as B sequences with ``seq_len`` 1 and ``kv_len`` = mean KV length (same KV bytes); RMSNorm ``num_tokens`` x
``hidden_size`` (Qwen3's q/k norms: tokens x heads rows of ``head_dim``); SiLU&Mul ``hidden_size`` = output width
(= the authors' ``dim`` / 2); fused MoE as generated. The attention kernel path (FA2/FA3) is the one the models
take for the GPU (FA3 on compute capability 9.x, else FA2) with the API's default implementation label.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ._deps import InputError, Registry, close_match, default_registry, launch_table, predict
from .collectives import CollectiveModel
from .intervals import HIGH, INTERVAL_METRICS, LOW, family_deltas, phase_intervals, widen
from .model_config import ModelConfig
from .workload import (
    GROUP_ITERATIONS,
    Request,
    Workload,
    equivalent_decode_kv,
    equivalent_prefill_len,
    generate_groups,
    iteration_count,
)

KERNEL_FAMILIES = ("gemm", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul", "fused_moe")
COLLECTIVES = ("all_reduce", "send_recv")


@dataclass(frozen=True)
class Overhead:
    """What the end-to-end evaluation fits on the real runs: the per-iteration framework overhead
    ``a_s + b_s * batch`` in **seconds** (batch = sequences in the iteration), and the composition error
    ``composition``, one log half-width per metric of :data:`~.intervals.INTERVAL_METRICS` (prefill, decode step,
    total) added in quadrature to the kernel bounds (:func:`~.intervals.widen`; 0: kernel bounds alone)."""

    a_s: float = 0.0
    b_s: float = 0.0
    composition: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __call__(self, batch) -> np.ndarray:
        return self.a_s + self.b_s * np.asarray(batch, dtype="float64")

    def composition_of(self, metric: str) -> float:
        """The composition half-width (log) of ``metric`` (one of :data:`~.intervals.INTERVAL_METRICS`)."""
        return float(self.composition[INTERVAL_METRICS.index(metric)])

    def to_json(self) -> dict:
        return {"form": "a_s + b_s * batch (per iteration, seconds)", "a_s": self.a_s, "b_s": self.b_s,
                "composition_log_half_width": dict(zip(INTERVAL_METRICS, map(float, self.composition)))}

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "Overhead":
        """Read ``{"a_s": ..., "b_s": ..., "composition_log_half_width": {"prefill": ..., "decode_step": ...,
        "total": ...}}`` (as written by :func:`synperf.e2e.evaluate.run_e2e_evaluation`); without
        ``composition_log_half_width`` the composition error is 0 (:attr:`has_composition` False).

        Raises:
            InputError: unreadable file, not a JSON object, an unknown or a missing key, a composition entry that
                is not an object with the three metrics, or a value that is not a JSON number in range (an overhead
                never speeds an iteration up, a half-width is not negative: :data:`MAX_OVERHEAD_S`,
                :data:`MAX_LOG_HALF_WIDTH`).
        """
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise InputError(f"{path}: cannot read overhead ({e})") from None
        if not isinstance(d, dict):
            raise InputError(f"{path}: expected a JSON object with a_s and b_s (seconds)")
        check_keys(d, OVERHEAD_KEYS, path)
        for key in ("a_s", "b_s"):
            if key not in d:
                raise InputError(f"{path}: missing key {key!r} (expected a_s and b_s, seconds)")
        a, b = (non_negative_number(d[k], f"{path}: {k}", f"a number of seconds in [0, {MAX_OVERHEAD_S:g}]",
                                    MAX_OVERHEAD_S) for k in ("a_s", "b_s"))
        comp = d.get(COMPOSITION_KEY)
        if comp is None:
            return cls(a, b)
        if not isinstance(comp, dict) or set(comp) != set(INTERVAL_METRICS):
            raise InputError(f"{path}: {COMPOSITION_KEY} = {comp!r}: expected an object with keys "
                             f"{', '.join(INTERVAL_METRICS)} (log half-widths >= 0)")
        return cls(a, b, tuple(non_negative_number(comp[m], f"{path}: {COMPOSITION_KEY}.{m}",
                                             f"a log half-width in [0, {MAX_LOG_HALF_WIDTH:g}]", MAX_LOG_HALF_WIDTH)
                               for m in INTERVAL_METRICS))

    @property
    def has_composition(self) -> bool:
        """Whether any metric carries a composition error."""
        return any(c > 0 for c in self.composition)


#: the key of the composition error in ``overhead.json``
COMPOSITION_KEY = "composition_log_half_width"
#: the keys ``overhead.json`` may have (``form`` and ``fitted_on`` describe the fit; they are not read)
OVERHEAD_KEYS = ("form", "a_s", "b_s", COMPOSITION_KEY, "fitted_on")


#: the largest log half-width a file may carry (a factor of e^20, about 5e8, either way: beyond any error a width
#: could stand for; larger ones overflow the bounds)
MAX_LOG_HALF_WIDTH = 20.0
#: the largest per-iteration overhead term a file may carry, seconds (an hour: beyond any CPU time of one step)
MAX_OVERHEAD_S = 3600.0


def non_negative_number(value, where: str, expected: str, maximum: float = math.inf) -> float:
    """``float(value)`` of a JSON number, or :class:`InputError` ``"<where> = <value>: expected <expected>"`` unless
    an int or float (not a bool or a string), finite, >= 0 and <= ``maximum``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    try:
        v = float(value) if ok else math.nan
    except OverflowError:   # an integer beyond any float
        v = math.nan
    if not (math.isfinite(v) and 0 <= v <= maximum):
        raise InputError(f"{where} = {value!r}: expected {expected}")
    return v


def check_keys(d: dict, allowed: tuple, path) -> None:
    """Refuse a key of the JSON object ``d`` (read from ``path``) that is not in ``allowed`` (a misspelled key would
    otherwise be passed over), naming the closest allowed one.

    Raises:
        InputError: ``"<path>: unknown key 'x' (did you mean 'y'?); expected ..."``.
    """
    for k in d:
        if k not in allowed:
            raise InputError(f"{path}: unknown key {k!r}{close_match(k, allowed)}; expected {', '.join(allowed)}")


def fit_overhead(batch, residual_s) -> Overhead:
    """Non-negative least squares fit of ``residual_s ≈ a + b * batch`` (seconds; both >= 0, so the overhead is
    never negative). Residual = measured minus predicted (kernels + collectives) latency of an iteration.

    Raises:
        InputError: no points or lengths differ.
    """
    from scipy.optimize import nnls

    x, y = np.asarray(batch, dtype="float64"), np.asarray(residual_s, dtype="float64")
    if len(x) == 0 or len(x) != len(y):
        raise InputError(f"fit_overhead needs equal, non-empty batch and residual arrays ({len(x)}, {len(y)})")
    (a, b), _ = nnls(np.column_stack([np.ones_like(x), x]), y)
    return Overhead(float(a), float(b))


#: columns of :attr:`E2EResult.models`
MODEL_COLUMNS = ["family", "model", "path", "prediction_path", "training_gpu"]


@dataclass
class E2EResult:
    """One configuration's prediction.

    Attributes:
        gpu: registry id.
        iterations: one row per iteration: ``iteration``, ``phase``, ``batch_size``, ``num_tokens``,
            ``kernel_s``, ``comm_s``, ``overhead_s``, ``latency_s`` (seconds).
        launches: one row per (iteration, operator): ``op``, ``family``, ``count``, canonical params,
            ``latency_us`` (one launch, microseconds) and ``time_s`` (= count * latency, seconds); from
            :func:`compose_trace`, one row per ``phase``, ``op`` and ``family`` with the summed ``count`` and
            ``time_s``.
        models: per family (:data:`MODEL_COLUMNS`): ``model`` (the model folder predict used, or the collective
            model's description), ``path`` (attention: fa2/fa3 path; collectives: proxy GPU),
            ``prediction_path`` (the predictor's ``prediction_path`` labels with their launch counts, e.g.
            ``residual 120``; ``measured table`` for collectives) and ``training_gpu`` (whether ``gpu`` is one of the
            training GPUs of the family's experiment, ``attrs["training_gpus"]`` of :func:`synperf.api.predict`: its
            launches are then priced by the seen path).
        overhead: the overhead applied.
        deltas: per iteration, each kernel family's latency change at its launches' interval bounds
            (:func:`synperf.e2e.intervals.family_deltas`); None when the predictor gave no interval.
    """

    gpu: str
    iterations: pd.DataFrame
    launches: pd.DataFrame
    models: pd.DataFrame
    overhead: Overhead = field(default_factory=Overhead)
    deltas: pd.DataFrame | None = None

    def intervals(self) -> dict:
        """80% bounds of prefill, decode step and total in seconds
        (:data:`synperf.e2e.intervals.INTERVAL_KEYS`, the rule of :mod:`synperf.e2e.intervals`): the kernel bounds
        widened by the overhead's composition error (:func:`~.intervals.widen`); NaN without launch intervals and
        without a composition error."""
        iv = phase_intervals(self.iterations, self.deltas)
        point = {"prefill": self.prefill_s, "decode_step": self.decode_step_s, "total": self.total_s}
        for m in INTERVAL_METRICS:
            c = self.overhead.composition_of(m)
            if c > 0:
                iv[f"{m}_low_s"], iv[f"{m}_high_s"] = widen(point[m], iv[f"{m}_low_s"], iv[f"{m}_high_s"], c)
        return iv

    def with_overhead(self, overhead: Overhead) -> "E2EResult":
        """The same prediction with another framework overhead."""
        it = self.iterations.copy()
        it["overhead_s"] = overhead(it["batch_size"])
        it["latency_s"] = it["kernel_s"] + it["comm_s"] + it["overhead_s"]
        return replace(self, iterations=it, overhead=overhead)

    @property
    def prefill_s(self) -> float:
        """Sum of the prefill iterations' latencies, seconds."""
        return float(self.iterations.loc[self.iterations["phase"] == "prefill", "latency_s"].sum())

    @property
    def decode_step_s(self) -> float:
        """Median decode iteration latency, seconds (NaN without decode steps)."""
        d = self.iterations.loc[self.iterations["phase"] == "decode", "latency_s"]
        return float(d.median()) if len(d) else float("nan")

    @property
    def total_s(self) -> float:
        """Sum over all iterations, seconds."""
        return float(self.iterations["latency_s"].sum())

    def breakdown(self) -> pd.DataFrame:
        """Per operator and phase: ``time_s`` summed over iterations (seconds) and ``share`` of the total; the
        framework overhead is the row ``op = overhead``."""
        b = self.launches.groupby(["phase", "op", "family"], as_index=False)["time_s"].sum()
        ov = (self.iterations.groupby("phase", as_index=False)["overhead_s"].sum()
              .rename(columns={"overhead_s": "time_s"}))
        ov["op"], ov["family"] = "overhead", "overhead"
        b = pd.concat([b, ov[b.columns]], ignore_index=True)
        b["share"] = b["time_s"] / b["time_s"].sum() if b["time_s"].sum() > 0 else 0.0
        return b

    def family_shares(self) -> pd.Series:
        """Share of the total time per kernel family (plus collectives and ``overhead``), summing to 1."""
        s = self.breakdown().groupby("family")["time_s"].sum()
        return (s / s.sum()).sort_values(ascending=False) if s.sum() > 0 else s

    def summary(self) -> dict:
        return {"gpu": self.gpu, "prefill_s": self.prefill_s, "decode_step_s": self.decode_step_s,
                "total_s": self.total_s, "iterations": len(self.iterations)}


def launches(workload: Workload, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """The workload's operators as canonical launch rows (see the module docstring), one per (iteration, op).

    Columns: ``iteration``, ``phase``, ``batch_size_it`` (sequences in the iteration), ``op``, ``family``
    (a kernel family of :data:`KERNEL_FAMILIES` or a collective of :data:`COLLECTIVES`), ``count`` and the
    family's parameters (collectives: ``size_bytes``, ``workers``). ``progress(done, total)`` is called per
    iteration.
    """
    dtype = workload.model.model.dtype
    rows = []
    n = len(workload.iterations)
    for j, it in enumerate(workload.iterations):
        base = {"iteration": it.index, "phase": it.phase, "batch_size_it": it.batch_size}
        for op in it.ops:
            p, r = op.params, {**base, "op": op.name, "count": op.count}
            if op.kind == "gemm":
                r.update(family="gemm", m=p["M"], n=p["N"], k=p["K"], dtype=dtype)
            elif op.kind == "attention":
                att = {"batch_size": it.batch_size, "num_heads": p["nh"], "num_kv_heads": p["nkv"],
                       "head_dim": p["hd"], "dtype": dtype}
                if it.phase == "prefill":
                    s = equivalent_prefill_len(it.q_lengths)
                    r.update(family="attention_prefill", seq_len=s, kv_len=s, **att)
                else:
                    r.update(family="attention_decode", seq_len=1, kv_len=equivalent_decode_kv(it.kv_lengths), **att)
            elif op.kind in ("rmsnorm", "qk_norm"):
                r.update(family="rmsnorm", num_tokens=p["seq"], hidden_size=p["dim"], dtype=dtype)
            elif op.kind == "siluandmul":
                r.update(family="silu_mul", num_tokens=p["seq"], hidden_size=p["dim"] // 2, dtype=dtype)
            elif op.kind == "fused_moe":
                r.update(family="fused_moe", dtype=workload.model.model.moe_dtype or dtype, moe_ep_size=1,
                         moe_stage="full", **p)
            elif op.kind in COLLECTIVES:
                r.update(family=op.kind, size_bytes=p["volume_bytes"], workers=p["workers"])
            else:
                raise InputError(f"unknown operator kind {op.kind!r}")
            rows.append(r)
        if progress:
            progress(j + 1, n)
    return pd.DataFrame(rows)


def training_gpus_of(out: pd.DataFrame) -> frozenset[str] | None:
    """The training GPUs of the model that answered ``out``: ``attrs["training_gpus"]`` (the fingerprint
    predictor's, :func:`synperf.api.predict`), else ``train_gpus`` of ``meta.json`` in ``attrs["model_dir"]`` (an
    MLP folder); None where neither says (unknown: neither seen nor unseen)."""
    if "training_gpus" in out.attrs:
        return frozenset(str(g) for g in out.attrs["training_gpus"])
    meta = Path(str(out.attrs.get("model_dir") or "")) / "meta.json"
    try:
        gpus = json.loads(meta.read_text()).get("train_gpus")
    except (OSError, ValueError, AttributeError):
        return None
    return None if gpus is None else frozenset(str(g) for g in gpus)


def trained_on(out: pd.DataFrame, gpu: str) -> bool | None:
    """Whether ``gpu`` is one of the training GPUs of the model that answered ``out`` (:func:`training_gpus_of`);
    None where the training GPUs are unknown."""
    gpus = training_gpus_of(out)
    return None if gpus is None else str(gpu) in gpus


def model_dir_used(out: pd.DataFrame) -> str:
    """The model folder the predictor reports in ``out.attrs["model_dir"]`` (:func:`synperf.api.predict` sets
    it), else ``"(not reported)"``."""
    return str(out.attrs.get("model_dir") or "(not reported)")


class SharedPredictor:
    """A ``predict_fn`` for :func:`compose` that predicts the launches of many workloads in one call per (kernel
    family, GPU, parameter columns) instead of one per workload and family.

    Use: :func:`compose` every workload with :meth:`record` as its ``predict_fn`` (it keeps the launches and
    answers a placeholder 1 µs), then :meth:`predict` (one ``predict_fn`` call over each group's distinct
    launches), then :func:`compose` again with the instance itself, which answers each call with its rows of
    those predictions (every column, and the ``attrs``, of the ``predict_fn`` result). :func:`synperf.api.predict`
    predicts row by row, so the latencies are those of per-workload calls up to floating-point rounding (a
    matrix product over more rows rounds differently: on the public data's 18 serving configurations the
    predicted totals moved by less than 1e-8 of their value).

    Raises (from :meth:`__call__`):
        InputError: a call :meth:`record` did not see.
    """

    #: recorded calls of one group after which :meth:`record` keeps only their distinct launches
    RECORD_COMPACT = 64

    def __init__(self, predict_fn: Callable = predict):
        self.predict_fn = predict_fn
        self._requests: dict[tuple, list[pd.DataFrame]] = {}
        self._answers: dict[tuple, tuple[pd.DataFrame, pd.DataFrame]] = {}

    @staticmethod
    def _key(family: str, params: pd.DataFrame, gpu: str) -> tuple:
        return family, str(gpu), tuple(params.columns), tuple(str(t) for t in params.dtypes)

    def record(self, family: str, params: pd.DataFrame, gpu: str, **_) -> pd.DataFrame:
        """Keep ``params`` (one launch per row) for :meth:`predict`; a placeholder result of 1 µs per row. Every
        :data:`RECORD_COMPACT` calls of a group, its kept launches are reduced to the distinct ones (first
        appearance order, as :meth:`predict` takes them), so that many calls hold little more than their distinct
        launches."""
        frames = self._requests.setdefault(self._key(family, params, gpu), [])
        frames.append(params)
        if len(frames) >= self.RECORD_COMPACT:
            frames[:] = [pd.concat(frames, ignore_index=True).drop_duplicates()]
        return pd.DataFrame({"predicted_latency_us": np.ones(len(params))})

    def predict(self, **kwargs) -> None:
        """One ``predict_fn(family, launches, gpu, **kwargs)`` per recorded group, over its distinct launches."""
        for key, frames in self._requests.items():
            family, gpu = key[0], key[1]
            table = pd.concat(frames, ignore_index=True).drop_duplicates().reset_index(drop=True)
            out = self.predict_fn(family, table, gpu, **kwargs)
            if len(out) != len(table):
                raise InputError(f"predictor for {family!r}: expected {len(table)} rows, got {len(out)}")
            self._answers[key] = (table, out.reset_index(drop=True))
        self._requests.clear()

    def refuse_deploy(self, where: str) -> None:
        """For an evaluation stage: raise when a prediction of :meth:`predict` came from the deploy models
        (``attrs["model_set"] == "deploy"`` of :func:`synperf.api.predict`), which trained on every measured GPU.

        Raises:
            InputError: naming ``where``, the families and GPUs the deploy models answered.
        """
        bad = sorted(f"{key[0]} on {key[1]}" for key, (_, out) in self._answers.items()
                     if out.attrs.get("model_set") == "deploy")
        if bad:
            raise InputError(f"{where}: the deploy models (trained on every measured GPU) answered {bad}; an "
                             "evaluation uses the evaluation models (models='evaluation')")

    def __call__(self, family: str, params: pd.DataFrame, gpu: str, **_) -> pd.DataFrame:
        key = self._key(family, params, gpu)
        if key not in self._answers:
            raise InputError(f"shared predictor: no recorded launches of {family!r} on {gpu!r} with columns "
                             f"{list(params.columns)}; record() every workload and predict() first")
        table, out = self._answers[key]
        cols = list(params.columns)
        pos = params.merge(table.assign(_pos=np.arange(len(table))), on=cols, how="left")["_pos"]
        if pos.isna().any():
            raise InputError(f"shared predictor: {int(pos.isna().sum())} launch(es) of {family!r} on {gpu!r} "
                             "were not recorded")
        res = out.iloc[pos.to_numpy(dtype="int64")].reset_index(drop=True)
        res.attrs = dict(out.attrs)
        return res


def attention_path(gpu: str, registry: Registry) -> str:
    """``fa3`` on compute capability 9.x (Hopper), else ``fa2``: the path the attention models take for the API's
    default implementation label."""
    return "fa3" if registry[gpu].sm_generation == 9 else "fa2"


def compose(workload: Workload, gpu: str, *, predict_fn: Callable = predict,
            models_dir: str | os.PathLike | None = None, registry: Registry | None = None,
            collectives: CollectiveModel | None = None, overhead: Overhead = Overhead(),
            progress: Callable[[int, int], None] | None = None) -> E2EResult:
    """Predict every iteration's latency of ``workload`` on registry GPU ``gpu``.

    Args:
        predict_fn: ``predict_fn(family, params_df, gpu, models_dir=..., registry=...)`` returning a DataFrame
            with ``predicted_latency_us`` (microseconds), one row per input row, in order; default
            :func:`synperf.api.predict`. Called once per kernel family with the distinct launches of all
            iterations.
        collectives: needed when the workload has TP > 1 or PP > 1.
        overhead: per-iteration framework overhead (seconds).
        progress: ``progress(done, total)`` while the launches are built.

    Returns:
        :class:`E2EResult` (seconds per iteration; per-launch microseconds in ``launches``).

    Raises:
        InputError: unknown GPU, a launch the canonical schema rejects, no trained model (from predict), a
            collective without ``collectives``, a predictor that returns the wrong number of rows or a
            non-positive latency.
    """
    registry = registry or default_registry()
    registry[gpu]
    df = launches(workload, progress)
    df["latency_us"] = df["latency_low_us"] = df["latency_high_us"] = np.nan
    models = []
    for family in [f for f in KERNEL_FAMILIES if f in set(df["family"])]:
        sel = df["family"] == family
        cols = [c for c in df.columns if c not in ("iteration", "phase", "batch_size_it", "op", "family", "count",
                                                  "latency_us", "latency_low_us", "latency_high_us",
                                                  "size_bytes", "workers")
                and df.loc[sel, c].notna().any()]
        uniq = df.loc[sel, cols].drop_duplicates().reset_index(drop=True)
        uniq = uniq.astype({c: "int64" for c in cols if c not in ("dtype", "moe_stage")})
        launch_table(family, uniq, gpu, registry)  # schema check of what the predictor gets
        out = predict_fn(family, uniq, gpu, models_dir=models_dir, registry=registry)
        pred = np.asarray(out["predicted_latency_us"], dtype="float64")
        if len(pred) != len(uniq) or not np.all(pred > 0):
            raise InputError(f"predictor for {family!r}: expected {len(uniq)} positive latencies, got {len(pred)} "
                             f"(min {np.nanmin(pred) if len(pred) else 'n/a'})")
        merged = df.loc[sel, cols].astype(uniq.dtypes.to_dict()).merge(uniq.assign(_lat=pred), on=cols, how="left")
        df.loc[sel, "latency_us"] = merged["_lat"].to_numpy()
        for col, side in ((LOW, "low"), (HIGH, "high")):
            if col in out.columns:
                b = uniq.assign(_b=np.asarray(out[col], dtype="float64"))
                df.loc[sel, f"latency_{side}_us"] = df.loc[sel, cols].astype(uniq.dtypes.to_dict()).merge(
                    b, on=cols, how="left")["_b"].to_numpy()
        paths = out["prediction_path"].astype(str) if "prediction_path" in out.columns else pd.Series([], dtype=str)
        models.append({"family": family, "model": model_dir_used(out),
                       "path": attention_path(gpu, registry) if family.startswith("attention") else "",
                       "prediction_path": ", ".join(f"{p} {n}" for p, n in paths.value_counts().items()),
                       "training_gpu": trained_on(out, gpu)})
    for op in [c for c in COLLECTIVES if c in set(df["family"])]:
        if collectives is None:
            raise InputError(f"the workload has {op} (tp={workload.model.tp}, pp={workload.model.pp}) but no "
                             "collective model was given")
        tp, pp = workload.model.tp, workload.model.pp
        if op == "send_recv" and collectives.pipeline_spans_nodes(tp, pp):
            raise InputError(f"TP {tp} x PP {pp} = {tp * pp} GPUs span nodes: the pipeline's send/recv between "
                             f"nodes runs over the network, which the NCCL tables (one node, at most "
                             f"{collectives.max_workers('all_reduce')} GPUs) do not measure; not modelled")
        sel = df["family"] == op
        for w, g in df.loc[sel].groupby("workers"):
            df.loc[g.index, "latency_us"] = collectives.latency_us(op, g["size_bytes"].to_numpy(), int(w), gpu)
            models.append({"family": op, "model": "collectives (pipeweave NCCL tables)",
                           "path": collectives.describe(op, int(w), gpu), "prediction_path": "measured table",
                           "training_gpu": False})
    df["time_s"] = df["count"] * df["latency_us"] / 1e6
    kern = df[df["family"].isin(KERNEL_FAMILIES)].groupby("iteration")["time_s"].sum()
    comm = df[df["family"].isin(COLLECTIVES)].groupby("iteration")["time_s"].sum()
    its = pd.DataFrame([{"iteration": it.index, "phase": it.phase, "batch_size": it.batch_size,
                         "num_tokens": it.num_tokens} for it in workload.iterations])
    its["kernel_s"] = its["iteration"].map(kern).fillna(0.0)
    its["comm_s"] = its["iteration"].map(comm).fillna(0.0)
    its["overhead_s"] = 0.0
    its["latency_s"] = its["kernel_s"] + its["comm_s"]
    res = E2EResult(gpu, its, df, pd.DataFrame(models, columns=MODEL_COLUMNS),
                    deltas=family_deltas(df, KERNEL_FAMILIES))
    return res.with_overhead(overhead)


def compose_trace(model: ModelConfig, requests: list[Request], gpu: str, *, tp: int = 1, pp: int = 1,
                  max_batch: int | None = None, policy: str = "static", prefill_impl: str = "fa2",
                  group_iterations: int = GROUP_ITERATIONS, predict_fn: Callable = predict,
                  models_dir: str | os.PathLike | None = None, registry: Registry | None = None,
                  collectives: CollectiveModel | None = None, overhead: Overhead = Overhead(),
                  progress: Callable[[int, int], None] | None = None) -> E2EResult:
    """:func:`compose` of :func:`synperf.e2e.workload.generate`'s workload, in bounded memory for a long trace.

    The iterations are built ``group_iterations`` at a time (:func:`synperf.e2e.workload.generate_groups`) twice:
    the first pass keeps only each family's distinct launches (:meth:`SharedPredictor.record`), which one
    ``predict_fn`` call per family then predicts, the same call :func:`compose` makes on the whole workload (the
    same launches in the same order); the second pass composes each group with those predictions. Every iteration's
    latency, and so ``prefill_s``, ``decode_step_s`` and ``total_s``, are therefore those of :func:`compose`.

    Args:
        model, requests, tp, pp, max_batch, policy, prefill_impl: as :func:`synperf.e2e.workload.generate`.
        group_iterations: iterations built and composed at a time (each holds its launches, about ten per
            iteration).
        predict_fn, models_dir, registry, collectives, overhead: as :func:`compose`.
        progress: ``progress(done, total)`` over both passes (``total`` = twice the iteration count).

    Returns:
        :class:`E2EResult` whose ``iterations`` and ``models`` are :func:`compose`'s; ``launches`` has one row per
        ``phase``, ``op`` and ``family`` with the summed ``count`` and ``time_s`` (seconds) of its launches
        (:meth:`E2EResult.breakdown` then sums over groups, so its shares may differ from :func:`compose`'s in the
        last bits).

    Raises:
        InputError: as :func:`synperf.e2e.workload.generate_groups` and :func:`compose`.
    """
    registry = registry or default_registry()
    registry[gpu]
    n = iteration_count(requests, max_batch, policy)

    def groups():
        return generate_groups(model, requests, tp, pp, max_batch, policy, prefill_impl,
                               group_iterations=group_iterations)

    def step(offset: int):
        return None if progress is None else (lambda done, _: progress(offset + done, 2 * n))

    shared, done = SharedPredictor(predict_fn), 0
    for wl in groups():
        compose(wl, gpu, predict_fn=shared.record, registry=registry, collectives=collectives,
                progress=step(done))
        done += len(wl.iterations)
    shared.predict(models_dir=models_dir, registry=registry)
    its, parts, models, deltas, done = [], [], [], [], 0
    keys = ["phase", "op", "family"]
    for wl in groups():
        res = compose(wl, gpu, predict_fn=shared, registry=registry, collectives=collectives,
                      progress=step(n + done))
        done += len(wl.iterations)
        its.append(res.iterations)
        parts.append(res.launches.groupby(keys, as_index=False, sort=False)[["count", "time_s"]].sum())
        models.append(res.models)
        if res.deltas is not None:
            deltas.append(res.deltas)
    launches_ = pd.concat(parts, ignore_index=True).groupby(keys, as_index=False, sort=False)[["count", "time_s"]].sum()
    fam = []  # the kernel families' rows from the one prediction of each family, as compose gives them
    for key, (_, out) in shared._answers.items():
        paths = out["prediction_path"].astype(str) if "prediction_path" in out.columns else pd.Series([], dtype=str)
        fam.append({"family": key[0], "model": model_dir_used(out),
                    "path": attention_path(gpu, registry) if key[0].startswith("attention") else "",
                    "prediction_path": ", ".join(f"{p} {c}" for p, c in paths.value_counts().items()),
                    "training_gpu": trained_on(out, gpu)})
    fam.sort(key=lambda r: KERNEL_FAMILIES.index(r["family"]))
    coll = pd.concat(models, ignore_index=True)
    coll = coll[coll["family"].isin(COLLECTIVES)].drop_duplicates()
    table = pd.concat([pd.DataFrame(fam, columns=MODEL_COLUMNS), coll], ignore_index=True)
    res = E2EResult(gpu, pd.concat(its, ignore_index=True), launches_, table,
                    deltas=pd.concat(deltas, ignore_index=True).fillna(0.0) if deltas else None)
    return res.with_overhead(overhead)
