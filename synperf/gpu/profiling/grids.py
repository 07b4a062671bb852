"""Sweep grids: load ``config/sweeps/<kernel>.yaml``, validate it, expand it into points.

A sweep file names models of ``config/sweeps/models.yaml`` (real shapes from each model's
``config.json``) and the axes of its ``grid``; :func:`expand` turns models x axes into *points*, one
dict per measurement, holding the canonical parameter columns of the kernel (:mod:`synperf.data.schema`)
plus launcher requests that are not columns (``backend``, ``page_size``, ``moe_config``). Expansion
rules per kernel (a model contributes only where it has the fields, and a tensor-parallel degree
``tp`` only where it divides the sharded dimension, as vLLM requires):

* ``gemm``, ``gemm_fp8`` (``y[m, n] = x[m, k] @ W[n, k]^T``), per model and ``tp`` the linear layers
  ``qkv``: n = (H/tp + 2 max(1, Hkv/tp)) D, k = hidden; ``o``: n = hidden, k = H D / tp;
  ``gate_up``: n = 2 I / tp, k = hidden; ``down``: n = hidden, k = I / tp (H query heads, Hkv KV heads,
  D head dim, I dense intermediate size), times ``m`` (tokens). ``gemm_fp8`` rows have dtype ``fp8``.
* ``attention_prefill``: per model and ``tp`` the per-GPU heads (H/tp, max(1, Hkv/tp), D), times batch
  size and prompt length (``kv_len = seq_len``, causal), keeping ``batch_size * seq_len <= max_tokens``.
* ``attention_decode``: the same heads, one query token per sequence over ``kv_len`` cached tokens,
  keeping ``batch_size * kv_len <= max_kv_tokens``.
* ``rmsnorm``: every model's hidden size x ``num_tokens``.
* ``silu_mul``: every dense model's ``I / tp`` (the output width, column ``hidden_size``) x ``num_tokens``.
* ``fused_moe``: every MoE model under each ``parallel`` entry (``tp`` splits the expert intermediate
  size, ``ep`` the experts) x routing ``distribution`` x ``stage`` x tile ``configs`` x ``num_tokens``.

Points are unique and ordered so that points sharing large inputs (MoE weights) are adjacent.
:func:`point_key` is the identity used by the shards and resume logic.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from synperf.data.io import InputError
from synperf.gpu.profiling import PROFILED_KERNELS

REPO = Path(__file__).resolve().parents[3]  # the checkout (synperf/gpu/profiling/grids.py)
SCHEMA_PATH = REPO / "workflow" / "schemas" / "sweep.schema.yaml"
SWEEPS_DIR = REPO / "config" / "sweeps"
MODELS_FILE = "models.yaml"

#: non-column fields a point may carry for its launcher
REQUEST_FIELDS = ("backend", "page_size", "moe_config")


@dataclass
class Grid:
    """An expanded sweep.

    Attributes:
        kernel: the kernel family (a :data:`synperf.data.schema.KERNELS` value).
        path: the sweep file.
        points: the measurements to make, in order.
        timing: this file's ``timing`` overrides.
        sha256: of the sweep file and the models file (provenance).
        smoke: whether the ``smoke`` reduction was applied.
    """

    kernel: str
    path: Path
    points: list[dict[str, Any]]
    timing: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""
    smoke: bool = False


def _schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _check(doc: Any, schema: dict, path: Path, prefix: str = "") -> None:
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        key = "/".join(str(p) for p in error.absolute_path)
        key = f"{prefix}{key}" if key else (prefix.rstrip("/") or "(top level)")
        raise InputError(f"{path}: at key {key!r}: {error.message}")


def _read_yaml(path: Path) -> Any:
    if not path.exists():
        raise InputError(f"{path}: sweep file not found")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({exc})") from exc


def load_models(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read and validate ``config/sweeps/models.yaml``; return ``{name: shape dict}``.

    Raises:
        InputError: naming the file and the offending key.
    """
    path = Path(path)
    doc = _read_yaml(path)
    root = _schema()
    _check(doc, {"$ref": "#/$defs/models_file", "$defs": root["$defs"]}, path)
    return doc["models"]


def load_grid(path: str | Path, smoke: bool = False, models_path: str | Path | None = None) -> Grid:
    """Load, validate and expand one sweep file.

    Args:
        path: ``config/sweeps/<kernel>.yaml``.
        smoke: apply the file's ``smoke`` block (fewer models and axis values).
        models_path: the models file (default: ``models.yaml`` beside ``path``).

    Raises:
        InputError: the file is missing, not YAML, fails ``workflow/schemas/sweep.schema.yaml``, names an
            unknown model or a model lacking a field the kernel needs; the message names the file and key.
    """
    path = Path(path)
    doc = _read_yaml(path)
    schema = _schema()
    _check(doc, schema, path)
    models_path = Path(models_path) if models_path is not None else path.parent / MODELS_FILE
    models = load_models(models_path)
    kernel = doc["kernel"]
    grid = dict(doc["grid"])
    names = list(doc["models"])
    if smoke and doc.get("smoke"):
        grid.update(doc["smoke"].get("grid", {}))
        names = list(doc["smoke"].get("models", names))
        key = "smoke/models"
    else:
        key = "models"
    for i, name in enumerate(names):
        if name not in models:
            raise InputError(f"{path}: at key '{key}/{i}': unknown model {name!r}; known models in "
                             f"{models_path}: {sorted(models)}")
    points = expand(kernel, grid, {n: models[n] for n in names}, where=str(path))
    if not points:
        raise InputError(f"{path}: the grid expands to no points (check `models`, `tp` and the size caps)")
    digest = hashlib.sha256(path.read_bytes() + models_path.read_bytes()).hexdigest()
    return Grid(kernel=kernel, path=path, points=points, timing=dict(doc.get("timing") or {}), sha256=digest,
                smoke=bool(smoke and doc.get("smoke")))


def sweep_path(kernel: str, sweeps_dir: str | Path = SWEEPS_DIR) -> Path:
    """``<sweeps_dir>/<kernel>.yaml``.

    Raises:
        InputError: ``kernel`` is not profiled.
    """
    if kernel not in PROFILED_KERNELS:
        raise InputError(f"kernel {kernel!r} is not profiled; expected one of {list(PROFILED_KERNELS)}")
    return Path(sweeps_dir) / f"{kernel}.yaml"


# ------------------------------------------------------------------------------------------------
# expansion
# ------------------------------------------------------------------------------------------------

def _heads(model: dict, tp: int) -> tuple[int, int, int] | None:
    """Per-GPU (query heads, KV heads, head dim) under tensor parallelism, or None if ``tp`` does not
    divide the heads (KV heads are replicated when there are fewer than ``tp``, as in vLLM)."""
    h, hkv = model.get("num_heads"), model.get("num_kv_heads")
    if h is None or h % tp:
        return None
    if hkv % tp and tp % hkv:
        return None
    return h // tp, max(1, hkv // tp), model["head_dim"]


def _gemm_shapes(model: dict, tp: int, layers: list[str]) -> list[tuple[int, int]]:
    hidden = model["hidden_size"]
    out = []
    heads = _heads(model, tp)
    inter = model.get("intermediate_size")
    for layer in layers:
        if layer in ("qkv", "o") and heads is not None:
            h, hkv, d = heads
            out.append(((h + 2 * hkv) * d, hidden) if layer == "qkv" else (hidden, h * d))
        elif layer in ("gate_up", "down") and inter is not None and inter % tp == 0:
            out.append((2 * inter // tp, hidden) if layer == "gate_up" else (hidden, inter // tp))
    return out


def _unique(items):
    seen, out = set(), []
    for it in items:
        if it not in seen:
            seen.add(it)
            out.append(it)
    return out


def expand(kernel: str, grid: dict[str, Any], models: dict[str, dict[str, Any]], where: str = "grid") -> list[dict]:
    """Points of one kernel's grid over ``models`` (see the module docstring for the rules).

    Raises:
        InputError: a model lacks a field the kernel needs (e.g. ``moe`` for ``fused_moe``).
    """
    dtypes = grid.get("dtype", ["bfloat16"])
    tps = grid.get("tp", [1])
    backends = grid.get("implementation", ["auto"])
    points: list[dict[str, Any]] = []
    if kernel in ("gemm", "gemm_fp8"):
        shapes = _unique(s for m in models.values() for tp in tps for s in _gemm_shapes(m, tp, grid["layers"]))
        dts = ["fp8"] if kernel == "gemm_fp8" else dtypes
        for n, k in shapes:
            for dt in dts:
                for m in grid["m"]:
                    points.append({"kernel": kernel, "dtype": dt, "m": m, "n": n, "k": k, "batch": 1})
    elif kernel in ("attention_prefill", "attention_decode"):
        heads = _unique(hd for m in models.values() for tp in tps if (hd := _heads(m, tp)) is not None)
        prefill = kernel == "attention_prefill"
        lens = grid["seq_len"] if prefill else grid["kv_len"]
        cap = grid["max_tokens"] if prefill else grid["max_kv_tokens"]
        for h, hkv, d in heads:
            for kvdt in grid["kv_cache_dtype"]:
                for dt in dtypes:
                    for backend in backends:
                        for b in grid["batch_size"]:
                            for length in lens:
                                if b * length > cap:
                                    continue
                                points.append({
                                    "kernel": kernel, "dtype": dt, "batch_size": b,
                                    "seq_len": length if prefill else 1, "kv_len": length, "num_heads": h,
                                    "num_kv_heads": hkv, "head_dim": d, "kv_cache_dtype": kvdt, "window_size": 0,
                                    "page_size": grid["page_size"], "backend": backend})
    elif kernel in ("rmsnorm", "silu_mul"):
        if kernel == "rmsnorm":
            widths = _unique(m["hidden_size"] for m in models.values())
        else:
            widths = _unique(m["intermediate_size"] // tp for m in models.values() for tp in tps
                             if m.get("intermediate_size") and m["intermediate_size"] % tp == 0)
        for w in widths:
            for dt in dtypes:
                for backend in backends:
                    for t in grid["num_tokens"]:
                        points.append({"kernel": kernel, "dtype": dt, "num_tokens": t, "hidden_size": w,
                                       "backend": backend})
    elif kernel == "fused_moe":
        for name, m in models.items():
            if "moe" not in m:
                raise InputError(f"{where}: model {name!r} has no `moe` block; fused_moe needs num_experts, "
                                 "topk and moe_intermediate_size")
            moe = m["moe"]
            for par in grid["parallel"]:
                tp, ep = par["tp"], par["ep"]
                if moe["moe_intermediate_size"] % tp or moe["num_experts"] % ep:
                    continue
                for dt in dtypes:
                    for dist in grid["distribution"]:
                        for stage in grid["stage"]:
                            for cfg in grid["configs"]:
                                for t in grid["num_tokens"]:
                                    points.append({
                                        "kernel": kernel, "dtype": dt, "num_tokens": t,
                                        "hidden_size": m["hidden_size"], "inter_size": moe["moe_intermediate_size"],
                                        "topk": moe["topk"], "num_experts": moe["num_experts"], "moe_tp_size": tp,
                                        "moe_ep_size": ep, "distribution": dist, "moe_stage": stage,
                                        "moe_config": cfg})
    else:
        raise InputError(f"{where}: no expansion rule for kernel {kernel!r}")
    return _unique_points(points)


def _unique_points(points: list[dict]) -> list[dict]:
    seen, out = set(), []
    for p in points:
        k = point_key(p)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def point_key(point: dict[str, Any]) -> str:
    """Stable identity of a point: the first 16 hex digits of the SHA-256 of its canonical JSON."""
    blob = json.dumps(point, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------
# runtime estimate
# ------------------------------------------------------------------------------------------------

def estimate_seconds(points: list[dict], spec, settings, efficiency: float = 0.5, setup_s: float = 0.03) -> float:
    """Rough wall time of a sweep on a GPU, seconds: used to size the default grids (< 1 hour per GPU).

    Per point: ``setup_s`` plus input generation (3 x input bytes at DRAM bandwidth), the reference check
    (about 2 kernel times), the first call, ``estimate_calls`` + repetitions (each a kernel time plus an L2
    flush of ``flush_factor`` x L2 at DRAM bandwidth) and the warm-up. The kernel time is a roofline over
    the work of :mod:`synperf.model.kernels` (FLOPs at the registry's dense peak, DRAM bytes at its bandwidth)
    divided by ``efficiency``, plus 5 µs of launch overhead.

    Args:
        points: from :func:`expand`.
        spec: :class:`synperf.data.hardware.GPUSpec` of the GPU.
        settings: :class:`synperf.gpu.profiling.timing.TimingSettings`.
    """
    import pandas as pd

    from synperf.data.schema import conform
    from synperf.gpu.profiling.timing import flush_bytes, reps_for_budget
    from synperf.model.kernels import work

    if not points:
        return 0.0
    df = conform(pd.DataFrame([{k: v for k, v in p.items() if k not in REQUEST_FIELDS} for p in points]))
    w = work(df)
    bw = spec.dram_bw_gbps * 1e9
    flush_s = (
        (flush_bytes(int(spec.l2_cache_mb * 2**20), settings.flush_factor) / bw) if settings.l2 == "flush" else 0.0
    )
    total = 0.0
    for dtype, flops, nbytes in zip(df["dtype"], w["flops"], w["dram_bytes"]):
        try:
            peak = spec.peak_tflops(str(dtype)) * 1e12
        except KeyError:
            peak = spec.fp32_tflops * 1e12
        t = max(flops / peak, nbytes / bw) / efficiency + 5e-6
        rep = t + flush_s
        reps = reps_for_budget(rep, settings.budget_ms * 1e-3, settings.min_reps, settings.max_reps)
        warm = max(settings.warmup_ms * 1e-3, t)
        total += setup_s + 3 * nbytes / bw + 3 * t + (settings.estimate_calls + reps) * rep + warm
    return float(total)


def short_points(points: list[dict], k: int, spec, seed: int = 0) -> list[dict]:
    """The ``k`` points of a short sweep: the rule of :func:`synperf.evaluation.fewshot.short_sweep` (points ordered
    by theoretical time on ``spec``, ``k`` strata of equal size, one point drawn per stratum), the same rule the
    pipeline's few-shot simulation draws its calibration rows with. Their measurements refit this GPU's fingerprint
    (:func:`synperf.api.predict`'s ``measured``).

    The theoretical time here is the roofline of the launch's work (:func:`synperf.model.kernels.work`: FLOPs at
    the dtype's dense peak, DRAM bytes at the DRAM bandwidth of ``spec``), microseconds.

    Args:
        points: from :func:`expand`, in sweep order.
        k: points to keep (all when ``k >= len(points)``).
        spec: :class:`synperf.data.hardware.GPUSpec` of the GPU.

    Returns:
        The kept points, in sweep order.
    """
    import pandas as pd

    from synperf.data.schema import conform
    from synperf.evaluation.fewshot import short_sweep
    from synperf.model.kernels import work

    if k >= len(points):
        return list(points)
    df = conform(pd.DataFrame([{kk: v for kk, v in p.items() if kk not in REQUEST_FIELDS} for p in points]))
    w = work(df)
    times = []
    for dtype, flops, nbytes in zip(df["dtype"], w["flops"], w["dram_bytes"]):
        try:
            peak = spec.peak_tflops(str(dtype)) * 1e12
        except KeyError:
            peak = spec.fp32_tflops * 1e12
        times.append(1e6 * max(flops / peak, nbytes / (spec.dram_bw_gbps * 1e9)))
    keep = short_sweep(pd.DataFrame({"theoretical_time_us": times}), k, seed)
    return [points[i] for i in keep]


def minutes(seconds: float) -> str:
    """``12.3 min`` for a log line."""
    return f"{seconds / 60:.1f} min" if math.isfinite(seconds) else "?"
