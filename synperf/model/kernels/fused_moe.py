"""Fused MoE (Triton): routed tokens grouped per expert, w13 GEMM, SiLU&Mul, w2 GEMM.

Per GPU: ``E_local = num_experts / moe_ep_size`` experts of intermediate size
``I_local = inter_size / moe_tp_size``. A token picks ``topk`` experts; on one GPU
the expected routed (token, expert) pairs are ``num_tokens·topk / moe_ep_size``.
The w13 weight of an expert is [2·I_local, hidden], w2 is [hidden, I_local].
``moe_stage`` selects the whole layer (``full``) or one grouped GEMM (``w13``, ``w2``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: BLOCK_SIZE_M of the v1 proxy when the row has no config (vLLM's default for large batches is 64)
V1_BLOCK_M = 64


def routing_alpha(distribution: pd.Series) -> pd.Series:
    """Power-law exponent of the routing (``power_law_<alpha>``), 0 for balanced/random; parsed once per distinct
    label."""
    codes, labels = pd.factorize(distribution.astype("string").fillna(""))
    alpha = pd.to_numeric(pd.Series(labels, dtype="string").str.extract(r"power_law_([0-9.]+)")[0], errors="coerce")
    return pd.Series(alpha.fillna(0.0).astype("float64").to_numpy()[codes], index=distribution.index)


#: the largest alignment :func:`shard_alignment` reports (elements): a multiple of every tile size of vLLM's
#: default configs (BLOCK_SIZE_N 32-128, BLOCK_SIZE_K 32-128)
SHARD_ALIGN_CAP = 128


def shard_alignment(df: pd.DataFrame) -> pd.Series:
    """The largest power of two (elements, at most :data:`SHARD_ALIGN_CAP`) dividing the per-GPU intermediate size
    ``I_local = inter_size / moe_tp_size``: the N extent of the w13 launch (``2 * I_local``) and the K extent of the
    w2 launch; 1 where ``moe_tp_size`` does not divide ``inter_size``. An ``I_local`` that is not a multiple of the
    tile leaves its last N or K tile masked, and the w8a8 fp8 kernel pays more for it than the tile count says
    (aiconfigurator's H100 sweep, inter size 1856 at MoE TP 16 and 32, I_local 116 and 58, against aligned shapes
    at the same TP). Shape ``(len(df),)``, float64; 0 where ``inter_size`` is missing (a row of another family in
    a mixed frame)."""
    inter = pd.to_numeric(df["inter_size"], errors="coerce").fillna(0).to_numpy(dtype="int64")
    tp = pd.to_numeric(df["moe_tp_size"], errors="coerce").fillna(1).clip(lower=1).to_numpy(dtype="int64")
    local = np.where(inter % tp == 0, inter // tp, 1)
    return pd.Series(np.minimum(local & -local, SHARD_ALIGN_CAP).astype("float64"), index=df.index)


def expected_active_experts(pairs: pd.Series, num_experts: pd.Series, experts_local: pd.Series) -> pd.Series:
    """Expected local experts hit by ``pairs`` uniform routing draws: E_l·(1 - (1 - 1/E)^(pairs·E/E_l))."""
    E = num_experts.astype("float64")
    draws = pairs * E / experts_local
    return experts_local * (1.0 - np.power(1.0 - 1.0 / E, draws))


def work(df: pd.DataFrame) -> pd.DataFrame:
    """FLOPs = 2·pairs·H·(2·I_l) [w13] + 2·pairs·I_l·H [w2]; DRAM bytes = weights of the
    experts hit (weight dtype) + routed activations in and out (2 B); XU = 2·pairs·I_l (SiLU)."""
    from synperf.model.kernels.dtypes import dtype_bytes

    T = df["num_tokens"].astype("float64")
    H = df["hidden_size"].astype("float64")
    I_l = df["inter_size"].astype("float64") / df["moe_tp_size"].astype("float64")
    E_l = df["num_experts"].astype("float64") / df["moe_ep_size"].astype("float64")
    pairs = T * df["topk"].astype("float64") / df["moe_ep_size"].astype("float64")
    active = expected_active_experts(pairs, df["num_experts"], E_l)
    wb = dtype_bytes(df["dtype"])
    stage = df["moe_stage"].astype(str)
    w13 = stage.isin(["full", "w13"]).astype(float)
    w2 = stage.isin(["full", "w2"]).astype(float)
    act = stage.eq("full").astype(float)
    flops = w13 * 2.0 * pairs * H * 2.0 * I_l + w2 * 2.0 * pairs * I_l * H
    weight_bytes = active * (w13 * 2.0 * I_l * H + w2 * I_l * H) * wb
    act_bytes = (w13 * (T * H * 2.0 + pairs * 2.0 * I_l * 2.0) + w2 * (pairs * I_l * 2.0 + pairs * H * 2.0))
    block_m = df["block_size_m"].astype("float64").fillna(V1_BLOCK_M)
    padded_blocks = np.ceil(pairs / active.clip(lower=1.0) / block_m) * active
    return pd.DataFrame({
        "flops": flops,
        "dram_bytes": weight_bytes + act_bytes,
        "xu_ops": act * 2.0 * pairs * I_l,
        "parallel_units": padded_blocks * np.ceil(2.0 * I_l / 128.0),
    }, index=df.index)


# --------------------------------------------------------------------------------------------------
# Decomposition (analytical core): vLLM's Triton fused MoE (vllm/model_executor/layers/fused_moe/
# fused_moe.py). Routed (token, expert) pairs are sorted by expert and each expert's list padded to
# BLOCK_SIZE_M (moe_align_block_size); the w13 launch has one CTA per (M block, N block of 2*I_local)
# with K = hidden, the w2 launch one per (M block, N block of hidden) with K = I_local; SiLU&Mul runs
# between them (one row per routed pair). Config: the row's own (pipeweave sweeps) or vLLM's
# ``get_default_config`` heuristic: fp8_block -> BM 64, BN 128, BK 128, GROUP 32; otherwise BM 64, BN 64,
# BK 32, GROUP 8, and BM 16, BN 32, BK 64, GROUP 1 when num_tokens <= the experts this GPU holds
# (E / moe_ep_size: vLLM passes ``w1.size(0)``, the local expert count, as ``E``); num_warps 4,
# num_stages 3. (vLLM also ships per-GPU tuned JSON configs for some shapes; which one a run loaded is
# not recorded in the public data, so the default is assumed.)
# Tokens per expert: ``balanced`` and ``random`` -> T*topk/E each (remainder spread); ``power_law_a`` ->
# loads proportional to rank^-a (aiconfigurator's power-law routing), capped at T per expert; with
# expert parallelism the GPU holds every ep-th expert of the ranking.
# --------------------------------------------------------------------------------------------------
from functools import lru_cache  # noqa: E402

from synperf.model.kernels.tasks import TaskSet  # noqa: E402


def default_config(num_tokens: int, num_local_experts: int, dtype: str) -> dict:
    """vLLM ``get_default_config`` (see the module comment).

    Args:
        num_tokens: tokens entering the layer on this GPU (``M``).
        num_local_experts: experts this GPU holds, ``num_experts / moe_ep_size`` (vLLM's ``E`` is
            ``w1.size(0)`` in ``fused_experts_impl``; our profiler's
            :func:`synperf.gpu.profiling.triton_kernels.fused_moe.default_config` takes the same count).
        dtype: weight dtype (``fp8_block`` has its own block-scaled config).
    """
    if dtype == "fp8_block":
        return {"block_size_m": 64, "block_size_n": 128, "block_size_k": 128, "group_size_m": 32, "num_warps": 4,
                "num_stages": 3}
    if num_tokens <= num_local_experts:
        return {"block_size_m": 16, "block_size_n": 32, "block_size_k": 64, "group_size_m": 1, "num_warps": 4,
                "num_stages": 3}
    return {"block_size_m": 64, "block_size_n": 64, "block_size_k": 32, "group_size_m": 8, "num_warps": 4,
            "num_stages": 3}


@lru_cache(maxsize=200_000)
def expert_loads(num_tokens: int, topk: int, num_experts: int, ep: int, distribution: str) -> tuple[int, ...]:
    """Routed tokens per local expert (integers summing to this GPU's share of num_tokens*topk)."""
    total = num_tokens * topk
    alpha = 0.0
    if distribution and distribution.startswith("power_law_"):
        alpha = float(distribution[len("power_law_"):])
    w = np.power(np.arange(1, num_experts + 1, dtype="float64"), -alpha)
    load = total * w / w.sum()
    for _ in range(20):  # cap at one assignment per token and expert, give the excess to the others
        over = load > num_tokens
        if not over.any():
            break
        excess = (load[over] - num_tokens).sum()
        load[over] = num_tokens
        free = ~over & (load < num_tokens)
        if not free.any():
            break
        load[free] += excess * load[free] / load[free].sum()
    counts = np.floor(load).astype("int64")
    rem = int(total - counts.sum())
    if rem > 0:
        order = np.argsort(-(load - counts), kind="stable")[:rem]
        counts[order] += 1
    return tuple(counts[::max(1, ep)][: max(1, num_experts // max(1, ep))].tolist())


def tasks(row: dict, spec) -> TaskSet:
    """Task set of one fused-MoE row (both GEMMs and the SiLU&Mul between them for ``moe_stage`` full)."""
    from synperf.model.kernels.dtypes import DTYPE_BYTES
    from synperf.model.schedule import ctas_per_sm

    T, H = int(row["num_tokens"]), int(row["hidden_size"])
    I_l = int(row["inter_size"]) // int(row["moe_tp_size"])
    E, ep, topk = int(row["num_experts"]), int(row["moe_ep_size"]), int(row["topk"])
    dtype = str(row["dtype"])
    cfg = default_config(T, max(1, E // max(1, ep)), dtype)
    for key in cfg:
        v = row.get(key)
        if v is not None and v == v and not (isinstance(v, float) and np.isnan(v)):
            try:
                cfg[key] = int(v)
            except (TypeError, ValueError):
                pass
    BM, BN, BK = cfg["block_size_m"], cfg["block_size_n"], cfg["block_size_k"]
    dist = str(row.get("distribution") or "balanced")
    loads = np.asarray(expert_loads(T, topk, E, ep, dist))
    blocks = int(np.ceil(loads / BM).sum())
    active = int((loads > 0).sum())
    pairs = int(loads.sum())
    wb = DTYPE_BYTES[dtype]
    ab = 1.0 if dtype in ("fp8", "fp8_block") else 2.0
    stage = str(row.get("moe_stage") or "full")
    counts, tensor, fma, xu, load, dims = [], [], [], [], [], []
    dram, store = 0.0, 0.0
    if stage in ("full", "w13"):
        n13 = blocks * int(np.ceil(2 * I_l / BN))
        counts.append(n13)
        tensor.append(2.0 * BM * BN * H)
        fma.append(0.0)
        xu.append(0.0)
        load.append(BM * H * ab + BN * H * wb)
        dram += active * 2 * I_l * H * wb + T * H * ab
        store += pairs * 2 * I_l * 2.0
        dims.append({"gemm": "w13", **cfg, "n": 2 * I_l, "k": H})
    if stage == "full":
        counts.append(pairs)
        tensor.append(0.0)
        fma.append(3.0 * I_l)
        xu.append(2.0 * I_l)
        load.append(2 * I_l * 2.0)
        store += pairs * I_l * 2.0
        dims.append({"kernel": "silu_and_mul", "width": I_l})
    if stage in ("full", "w2"):
        n2 = blocks * int(np.ceil(H / BN))
        counts.append(n2)
        tensor.append(2.0 * BM * BN * I_l)
        fma.append(0.0)
        xu.append(0.0)
        load.append(BM * I_l * 2.0 + BN * I_l * wb)
        dram += active * H * I_l * wb + (pairs * I_l * 2.0 if stage == "w2" else 0.0)
        store += pairs * H * 2.0
        dims.append({"gemm": "w2", **cfg, "n": H, "k": I_l})
    smem = cfg["num_stages"] * (BM * BK + BN * BK) * wb
    try:
        slots = ctas_per_sm(spec, cfg["num_warps"] * 32, smem)
    except ValueError:
        slots = 1
    return TaskSet(counts=np.array(counts), tensor_ops=np.array(tensor), fma_ops=np.array(fma),
                   xu_ops=np.array(xu), load_bytes=np.array(load), dram_bytes=dram, store_bytes=store,
                   ctas_per_sm=slots, order="grouped", dims=dims)


def summary(row: dict, spec) -> dict:
    """Demands of one fused-MoE row (w13, SiLU&Mul and w2 are sequential launches)."""
    ts = tasks(row, spec)
    s = ts.summary(spec, sequential_launches=True)
    g = ts.dims[0]
    s["block_m"], s["block_n"] = float(g.get("block_size_m", 0)), float(g.get("block_size_n", 0))
    return s


#: launch columns :func:`decompose` reads
DECOMPOSE_COLUMNS = ["gpu", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                     "moe_ep_size", "distribution", "moe_stage", "dtype", "block_size_m", "block_size_n",
                     "block_size_k", "group_size_m", "num_warps", "num_stages"]
#: columns :func:`decompose` returns, in the order of :func:`summary`'s keys
DECOMPOSE_OUTPUT = ["num_tasks", "ctas_per_sm", "persistent", "dram_bytes", "store_bytes", "sm_max_tasks",
                    "tensor_all_ops", "sm_max_tensor_ops", "fma_all_ops", "sm_max_fma_ops", "xu_all_ops",
                    "sm_max_xu_ops", "load_all_bytes", "sm_max_load_bytes", "block_m", "block_n"]


def _present(v) -> bool:
    """Whether a row value counts as given (:func:`tasks` ignores None, <NA> and NaN)."""
    return not (v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) or v != v)


def _config_value(v, default: int) -> int:
    """A launch's config entry as :func:`tasks` reads it: ``int(v)`` where given and convertible, else
    ``default``."""
    if _present(v):
        try:
            return int(v)
        except (TypeError, ValueError):
            pass
    return default


def _config_values(given: pd.Series, default: np.ndarray) -> np.ndarray:
    """:func:`_config_value` of each value of ``given`` with the row's ``default`` (int64); column-wise for a
    numeric column whose values are integers below 2**53 in magnitude or missing."""
    if pd.api.types.is_numeric_dtype(given.dtype) and not pd.api.types.is_bool_dtype(given.dtype):
        x = given.to_numpy(dtype="float64", na_value=np.nan)
        v = x[~np.isnan(x)]
        if (v == np.floor(v)).all() and (np.abs(v) < 2.0 ** 53).all():
            return np.where(np.isnan(x), default, x).astype("int64")
    return np.array([_config_value(v, int(d)) for v, d in zip(given.tolist(), default)], dtype="int64")


@lru_cache(maxsize=200_000)
def _load_stats(num_tokens: int, topk: int, num_experts: int, ep: int, distribution: str, block_m: int
                ) -> tuple[int, int, int]:
    """``(M blocks, active local experts, routed pairs)`` of :func:`expert_loads`, as :func:`tasks` counts them."""
    loads = np.asarray(expert_loads(num_tokens, topk, num_experts, ep, distribution))
    return int(np.ceil(loads / block_m).sum()), int((loads > 0).sum()), int(loads.sum())


def summary_table(rows: pd.DataFrame, registry) -> pd.DataFrame:
    """:func:`summary` of every row of ``rows``, computed column-wise (numpy over rows; Python only per distinct
    routing and per distinct launch configuration).

    Args:
        rows: launches with the :data:`DECOMPOSE_COLUMNS` (config columns may be missing values).
        registry: the GPU registry (``gpu`` ids).

    Returns:
        One row per ``rows`` row (same index), the float64 :data:`DECOMPOSE_OUTPUT` columns, equal to
        :func:`summary` of each row.

    Raises:
        KeyError: an unknown GPU or dtype.
        ValueError: a ``moe_stage`` other than ``full``, ``w13`` or ``w2``.
    """
    from synperf.model.kernels.dtypes import DTYPE_BYTES
    from synperf.model.schedule import ctas_per_sm

    def ints(col):
        return np.array([int(v) for v in rows[col].tolist()], dtype="int64")

    def texts(col, default):
        return np.array([str(v) if _present(v) and v else default for v in rows[col].tolist()], dtype=object)

    n = len(rows)
    T, H = ints("num_tokens"), ints("hidden_size")
    I_l = ints("inter_size") // ints("moe_tp_size")
    E, ep, topk = ints("num_experts"), ints("moe_ep_size"), ints("topk")
    dtype = np.array([str(v) for v in rows["dtype"].tolist()], dtype=object)
    stage = texts("moe_stage", "full")
    dist = texts("distribution", "balanced")
    bad = sorted(set(stage) - {"full", "w13", "w2"})
    if bad:
        raise ValueError(f"fused_moe: unknown moe_stage {bad[0]!r}; expected full, w13 or w2")
    local = np.maximum(1, E // np.maximum(1, ep))
    block = dtype == "fp8_block"
    small = ~block & (T <= local)
    cfg = {"block_size_m": np.where(block, 64, np.where(small, 16, 64)),
           "block_size_n": np.where(block, 128, np.where(small, 32, 64)),
           "block_size_k": np.where(block, 128, np.where(small, 64, 32)),
           "group_size_m": np.where(block, 32, np.where(small, 1, 8)),
           "num_warps": np.full(n, 4), "num_stages": np.full(n, 3)}
    for k, default in cfg.items():
        if k in rows.columns:
            cfg[k] = _config_values(rows[k], default)
    BM, BN, BK = cfg["block_size_m"], cfg["block_size_n"], cfg["block_size_k"]
    stats = np.array([_load_stats(*k) for k in zip(T.tolist(), topk.tolist(), E.tolist(), ep.tolist(), dist.tolist(),
                                                   BM.tolist())], dtype="int64").reshape(n, 3)
    blocks, active, pairs = stats[:, 0], stats[:, 1], stats[:, 2]
    wb = np.array([DTYPE_BYTES[d] for d in dtype], dtype="float64")
    ab = np.where((dtype == "fp8") | (dtype == "fp8_block"), 1.0, 2.0)
    has13, full, has2 = (stage == "full") | (stage == "w13"), stage == "full", (stage == "full") | (stage == "w2")
    zero = np.zeros(n)
    # the three task classes in launch order (w13 GEMM, SiLU&Mul, w2 GEMM), count 0 where the stage lacks one
    counts = np.column_stack([np.where(has13, blocks * np.ceil(2 * I_l / BN).astype("int64"), 0),
                              np.where(full, pairs, 0),
                              np.where(has2, blocks * np.ceil(H / BN).astype("int64"), 0)])
    tensor = np.column_stack([2.0 * BM * BN * H, zero, 2.0 * BM * BN * I_l])
    fma = np.column_stack([zero, 3.0 * I_l, zero])
    xu = np.column_stack([zero, 2.0 * I_l, zero])
    load = np.column_stack([BM * H * ab + BN * H * wb, 2 * I_l * 2.0, BM * I_l * 2.0 + BN * I_l * wb])
    dram = np.where(has13, 0.0 + (active * 2 * I_l * H * wb + T * H * ab), 0.0)
    dram = np.where(has2, dram + (active * H * I_l * wb + np.where(stage == "w2", pairs * I_l * 2.0, 0.0)), dram)
    store = np.where(has13, 0.0 + pairs * 2 * I_l * 2.0, 0.0)
    store = np.where(full, store + pairs * I_l * 2.0, store)
    store = np.where(has2, store + pairs * H * 2.0, store)
    smem = cfg["num_stages"] * (BM * BK + BN * BK) * wb
    gpus = rows["gpu"].astype(str).tolist()
    slots, seen = np.empty(n, dtype="float64"), {}
    for i, k in enumerate(zip(gpus, cfg["num_warps"].tolist(), smem.tolist())):
        if k not in seen:
            try:
                seen[k] = ctas_per_sm(registry[k[0]], k[1] * 32, k[2])
            except ValueError:
                seen[k] = 1
        slots[i] = seen[k]
    sms = {g: registry[g].sm_count for g in set(gpus)}
    sm_count = np.array([sms[g] for g in gpus], dtype="int64")
    per_sm = np.ceil(counts / sm_count[:, None])
    out = {"num_tasks": counts.sum(axis=1).astype("float64"), "ctas_per_sm": slots, "persistent": zero.copy(),
           "dram_bytes": dram, "store_bytes": store, "sm_max_tasks": per_sm.sum(axis=1)}
    for name, v in (("tensor", tensor), ("fma", fma), ("xu", xu)):
        out[f"{name}_all_ops"] = (v * counts).sum(axis=1)
        out[f"sm_max_{name}_ops"] = (v * per_sm).sum(axis=1)
    out["load_all_bytes"] = (load * counts).sum(axis=1)
    out["sm_max_load_bytes"] = (load * per_sm).sum(axis=1)
    out["block_m"], out["block_n"] = BM.astype("float64"), BN.astype("float64")
    return pd.DataFrame(out, index=rows.index)[DECOMPOSE_OUTPUT]


def decompose(df: pd.DataFrame, registry) -> pd.DataFrame:
    """Decomposition + scheduling summary for many fused-MoE rows (:func:`summary_table` of each distinct launch).

    Returns:
        One row per ``df`` row (same index), the float64 :data:`DECOMPOSE_OUTPUT` columns.
    """
    cols = DECOMPOSE_COLUMNS
    key = df[cols].astype("string").fillna("")
    code = key.groupby(cols, sort=False).ngroup().to_numpy()  # distinct launches, in order of first appearance
    table = summary_table(df[cols].iloc[np.unique(code, return_index=True)[1]], registry)
    return table.iloc[code].set_axis(df.index).astype("float64")
