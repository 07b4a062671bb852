"""Triton fused-MoE tile configs: candidates, legality, ranking by predicted latency, vLLM's JSON format.

A config is the six launch parameters of vLLM's ``fused_moe`` Triton kernel (``BLOCK_SIZE_M/N/K``,
``GROUP_SIZE_M``, ``num_warps``, ``num_stages``). :func:`rank_configs` predicts the latency of every candidate
for one shape on one GPU through :func:`synperf.api.predict` (the one prediction path) and sorts them; a
vLLM tuned-config file (one config per token count, used for both grouped GEMMs of the layer) is written by
:func:`write_vllm_config`.

Sources:
    * vLLM ``benchmarks/kernels/benchmark_moe.py``: the token counts it tunes (:data:`VLLM_BATCH_SIZES`,
      the same 18 values as the pipeweave ``moe_dse`` sweeps) and its search grid (:data:`VLLM_GRID`).
    * vLLM ``vllm/model_executor/layers/fused_moe/fused_moe.py``: ``get_config_file_name``
      (``E=<E>,N=<N>,device_name=<name>[,dtype=<dtype>].json``, ``N`` the intermediate size per shard, the
      device name as the driver reports it with spaces replaced by underscores) and ``get_moe_configs``, which
      reads the file as ``{int(key): value for key, value in json.load(f).items()}``.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pandas as pd

from synperf.data.io import InputError, write_text

#: the six config keys, in vLLM's spelling and order, with the canonical column of each
CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
CONFIG_COLUMNS = ("block_size_m", "block_size_n", "block_size_k", "group_size_m", "num_warps", "num_stages")
#: token counts vLLM's ``benchmark_moe.py --tune`` writes a config for
VLLM_BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
#: vLLM's tuning grid (``get_configs_compute_bound``), 1,920 configs
VLLM_GRID = {"BLOCK_SIZE_M": (16, 32, 64, 128, 256), "BLOCK_SIZE_N": (32, 64, 128, 256),
             "BLOCK_SIZE_K": (64, 128, 256), "GROUP_SIZE_M": (1, 16, 32, 64), "num_warps": (4, 8),
             "num_stages": (2, 3, 4, 5)}
#: legal ranges of a config (Triton: tile sides powers of two >= 16, warps a power of two <= 32)
LEGAL = {"BLOCK_SIZE_M": (16, 256), "BLOCK_SIZE_N": (16, 256), "BLOCK_SIZE_K": (16, 256), "GROUP_SIZE_M": (1, 64),
         "num_warps": (1, 32), "num_stages": (1, 8)}
#: canonical dtype -> vLLM's ``dtype`` file-name selector (None: no selector, the bf16/fp16 file)
VLLM_DTYPE = {"bfloat16": None, "float16": None, "fp8": "fp8_w8a8"}


def default_config(num_tokens: int, num_experts: int) -> dict[str, int]:
    """vLLM's default config for an unquantized layer (no tuned file): the rule of
    :func:`synperf.model.kernels.fused_moe.default_config`, in vLLM's key spelling."""
    from synperf.model.kernels.fused_moe import default_config as rule

    cfg = rule(int(num_tokens), int(num_experts), "bfloat16")
    return {k: int(cfg[c]) for k, c in zip(CONFIG_KEYS, CONFIG_COLUMNS)}


def is_pow2(v: int) -> bool:
    return v >= 1 and not v & (v - 1)


def check_config(cfg: dict, where: str = "config") -> dict[str, int]:
    """``cfg`` with the six keys as ints.

    Raises:
        InputError: a missing key, a value outside :data:`LEGAL`, or a block size / warp count that is not a
            power of two; the message names ``where`` and the key.
    """
    out = {}
    for key in CONFIG_KEYS:
        if key not in cfg:
            raise InputError(f"{where}: missing {key}")
        v = int(cfg[key])
        lo, hi = LEGAL[key]
        if not lo <= v <= hi:
            raise InputError(f"{where}: {key}={v} outside [{lo}, {hi}]")
        if key.startswith("BLOCK_SIZE") or key == "num_warps":
            if not is_pow2(v):
                raise InputError(f"{where}: {key}={v} is not a power of two")
        out[key] = v
    return out


def smem_bytes(cfg: dict, elem_bytes: float = 2.0) -> float:
    """Shared memory of one CTA: ``num_stages * (BM*BK + BN*BK) * elem_bytes`` (bytes)."""
    return cfg["num_stages"] * (cfg["BLOCK_SIZE_M"] + cfg["BLOCK_SIZE_N"]) * cfg["BLOCK_SIZE_K"] * elem_bytes


def fits(cfg: dict, spec, elem_bytes: float = 2.0) -> bool:
    """True when one CTA of ``cfg`` fits the GPU's shared memory per SM and thread limit."""
    smem = (spec.smem_per_sm_kb or 0) * 1024
    return smem_bytes(cfg, elem_bytes) <= smem and cfg["num_warps"] * 32 <= 1024


def grid_configs() -> pd.DataFrame:
    """:data:`VLLM_GRID` as a table with the :data:`CONFIG_KEYS` columns."""
    return pd.DataFrame(list(itertools.product(*VLLM_GRID.values())), columns=list(CONFIG_KEYS))


def legal_candidates(candidates: pd.DataFrame, spec, elem_bytes: float = 2.0) -> pd.DataFrame:
    """The distinct rows of ``candidates`` (columns :data:`CONFIG_KEYS`) that are legal and fit ``spec``."""
    c = candidates[list(CONFIG_KEYS)].astype("int64").drop_duplicates().reset_index(drop=True)
    ok = [fits(r, spec, elem_bytes) for r in c.to_dict("records")]
    return c[ok].reset_index(drop=True)


def _launch_rows(shapes: pd.DataFrame, candidates: pd.DataFrame, stages: tuple[str, ...]) -> pd.DataFrame:
    """Cross product shapes x candidates x stages as canonical fused-MoE params."""
    s = shapes.reset_index(drop=True).assign(_shape=lambda d: range(len(d)))
    c = candidates.reset_index(drop=True).assign(_cand=lambda d: range(len(d)))
    st = pd.DataFrame({"moe_stage": list(stages)})
    rows = s.merge(c, how="cross").merge(st, how="cross")
    rows = rows.rename(columns=dict(zip(CONFIG_KEYS, CONFIG_COLUMNS)))
    for col, val in {"moe_tp_size": 1, "moe_ep_size": 1, "distribution": "random", "dtype": "bfloat16"}.items():
        if col not in rows.columns:
            rows[col] = val
    return rows


def rank_configs(shapes: pd.DataFrame, candidates: pd.DataFrame, gpu: str, *, stages: tuple[str, ...] = ("w13", "w2"),
                 experiment: str = "fused_moe_pipeweave", models_dir=None, registry=None,
                 feature_set: str | None = None, predictor: str | None = None) -> pd.DataFrame:
    """Predicted latency of every candidate config for every shape on ``gpu``.

    Args:
        shapes: columns ``num_tokens``, ``num_experts``, ``topk``, ``hidden_size``, ``inter_size`` (optional
            ``dtype``, default bfloat16); one row per shape.
        candidates: columns :data:`CONFIG_KEYS`; illegal ones or ones that do not fit ``gpu`` are dropped.
        stages: grouped GEMMs whose predicted latencies are summed (``("w13", "w2")``: the layer as vLLM runs
            it, one config for both; ``("w13",)``: one GEMM as in the pipeweave sweeps).
        experiment, models_dir, registry, feature_set, predictor: passed to :func:`synperf.api.predict`.

    Returns:
        One row per (shape index ``_shape``, candidate): the shape columns, :data:`CONFIG_KEYS` and
        ``predicted_latency_us`` (microseconds, summed over ``stages``), sorted by shape then latency.

    Raises:
        InputError: no candidate fits ``gpu``, or :func:`synperf.api.predict` rejects the launches.
    """
    from synperf.api import default_registry, predict

    if registry is None:
        registry = default_registry()
    cands = legal_candidates(candidates, registry[gpu])
    if cands.empty:
        raise InputError(f"gpu {gpu}: no candidate config fits its shared memory")
    rows = _launch_rows(shapes, cands, stages)
    keep = [c for c in rows.columns if not c.startswith("_")]
    pred = predict("fused_moe", rows[keep], gpu, experiment=experiment, models_dir=models_dir, registry=registry,
                   feature_set=feature_set, predictor=predictor)
    rows["predicted_latency_us"] = pred["predicted_latency_us"].to_numpy()
    out = rows.groupby(["_shape", "_cand"], as_index=False)["predicted_latency_us"].sum()
    out = out.merge(shapes.reset_index(drop=True).assign(_shape=lambda d: range(len(d))), on="_shape")
    out = out.merge(cands.assign(_cand=lambda d: range(len(d))), on="_cand").drop(columns="_cand")
    out.attrs["model_dir"] = pred.attrs.get("model_dir")
    return out.sort_values(["_shape", "predicted_latency_us"], kind="stable").reset_index(drop=True)


def suggest(shapes: pd.DataFrame, candidates: pd.DataFrame, gpu: str, **kw) -> pd.DataFrame:
    """The best-ranked candidate of :func:`rank_configs` per shape (one row per shape, in order)."""
    ranked = rank_configs(shapes, candidates, gpu, **kw)
    best = ranked.groupby("_shape", sort=True).head(1).reset_index(drop=True)
    best.attrs.update(ranked.attrs)
    return best


def device_file_name(num_experts: int, inter_size: int, device_name: str, dtype: str = "bfloat16") -> str:
    """vLLM's ``get_config_file_name``: ``E=<E>,N=<N>,device_name=<name>[,dtype=<sel>].json``.

    Raises:
        InputError: a dtype vLLM has no file selector for (see :data:`VLLM_DTYPE`).
    """
    if dtype not in VLLM_DTYPE:
        raise InputError(f"dtype {dtype!r}: expected one of {sorted(VLLM_DTYPE)}")
    sel = VLLM_DTYPE[dtype]
    name = str(device_name).replace(" ", "_")
    return f"E={int(num_experts)},N={int(inter_size)},device_name={name}" + (f",dtype={sel}" if sel else "") + ".json"


def nvml_name(spec) -> str:
    """The device name the driver reports for a registry GPU (its first ``device_names`` entry).

    Raises:
        InputError: the registry lists no device name for it.
    """
    if not spec.device_names:
        raise InputError(f"gpu {spec.id}: config/gpus.yaml lists no device_names (the name NVML reports)")
    return spec.device_names[0]


def write_vllm_config(configs: dict[int, dict], path: str | os.PathLike) -> Path:
    """Write ``{token count: config}`` as vLLM's tuned-config JSON (keys as strings, sorted by count)."""
    body = {str(int(m)): check_config(c, f"{path}: M={m}") for m, c in sorted(configs.items())}
    p = Path(path)
    write_text(json.dumps(body, indent=4) + "\n", p)   # atomic: vLLM never finds half a file
    return p


def read_vllm_config(path: str | os.PathLike) -> dict[int, dict]:
    """Read a tuned-config file as vLLM's ``get_moe_configs`` does."""
    with open(path) as f:
        return {int(key): val for key, val in json.load(f).items()}


def suggest_file(gpu: str, num_experts: int, inter_size: int, *, hidden_size: int = 4096, topk: int = 2,
                 dtype: str = "bfloat16", out_dir: str | os.PathLike = ".", candidates: pd.DataFrame | None = None,
                 batch_sizes=VLLM_BATCH_SIZES, **kw) -> tuple[Path, pd.DataFrame]:
    """Suggest one config per vLLM token count for a layer on ``gpu`` and write vLLM's file under ``out_dir``.

    ``candidates`` defaults to :data:`VLLM_GRID`. Returns the file path and the chosen rows (with the
    predicted layer latency in microseconds and the predicted speedup over vLLM's default config).

    Raises:
        InputError: unknown GPU or dtype, no trained model, no fitting candidate.
    """
    from synperf.api import default_registry

    registry = kw.pop("registry", None)
    if registry is None:
        registry = default_registry()
    spec = registry[gpu]
    name = device_file_name(num_experts, inter_size, nvml_name(spec), dtype)
    shapes = pd.DataFrame({"num_tokens": list(batch_sizes), "num_experts": num_experts, "topk": topk,
                           "hidden_size": hidden_size, "inter_size": inter_size, "dtype": dtype})
    cands = grid_configs() if candidates is None else candidates
    defaults = pd.DataFrame([default_config(m, num_experts) for m in batch_sizes])
    cands = pd.concat([cands[list(CONFIG_KEYS)], defaults], ignore_index=True)
    ranked = rank_configs(shapes, cands, gpu, registry=registry, **kw)
    best = ranked.groupby("_shape", sort=True).head(1).set_index("_shape")
    key = list(CONFIG_KEYS)
    dflt = pd.concat([shapes.reset_index(drop=True).assign(_shape=range(len(shapes))), defaults], axis=1)
    dlat = ranked.merge(dflt[["_shape"] + key], on=["_shape"] + key).set_index("_shape")["predicted_latency_us"]
    best["predicted_speedup_vs_default"] = dlat.reindex(best.index) / best["predicted_latency_us"]
    configs = {int(r.num_tokens): {k: int(getattr(r, k)) for k in key} for r in best.itertuples()}
    path = write_vllm_config(configs, Path(out_dir) / name)
    return path, best.reset_index()
