"""Attention prefill (causal, FlashAttention style) and decode over a paged KV cache.

Shapes per row: ``batch_size`` sequences, ``num_heads`` query heads sharing
``num_kv_heads`` KV heads (GQA), ``head_dim``; prefill computes ``seq_len`` new query
tokens that attend causally over a context of ``kv_len >= seq_len`` tokens (the last
``seq_len`` positions of the context; ``kv_len - seq_len`` tokens are a cached prefix,
0 for a fresh prompt), decode has one query per sequence over ``kv_len`` cached
tokens. ``window_size > 0`` limits each query to the last ``window_size`` keys.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: query tile of the v1 parallelism proxy (FlashAttention-2's 128-row Q tile)
V1_TILE_Q = 128


def causal_pairs(seq_len: pd.Series, window: pd.Series, kv_len: pd.Series | None = None) -> pd.Series:
    """(query, key) pairs per head and sequence under a causal mask with an optional window.

    The ``S = seq_len`` queries are the last S positions of a ``L = kv_len`` token context (``kv_len`` None:
    L = S), so query i (0-based) at position P + i, P = L - S, sees min(P + i + 1, w) keys (w = window, 0 = no
    window). Sum over i, with a = P + 1 and b = P + S: (a + b)·S/2 when w >= b; S·w when w <= a; else
    (a + w)(w - a + 1)/2 + (b - w)·w. Fresh prompt (P = 0): S(S+1)/2, or w(w+1)/2 + (S-w)·w for w < S.
    Exact integer counts (float64).
    """
    s = seq_len.astype("float64")
    L = s if kv_len is None else kv_len.astype("float64").where(kv_len.notna(), s)
    a = L - s + 1.0
    b = L
    w = window.astype("float64").fillna(0.0)
    w = w.where(w > 0, np.inf)
    full = (a + b) * s / 2.0
    capped = s * w
    mid = (a + w) * (w - a + 1.0) / 2.0 + (b - w) * w
    return full.where(w >= b, capped.where(w <= a, mid))


def _kv_bytes(df: pd.DataFrame) -> pd.Series:
    from synperf.model.kernels.dtypes import dtype_bytes

    return dtype_bytes(df["kv_cache_dtype"])


def _prefill_kv_len(df: pd.DataFrame) -> pd.Series:
    """Context length of each prefill row: ``kv_len`` where given, else ``seq_len`` (fresh prompt)."""
    S = df["seq_len"].astype("float64")
    if "kv_len" not in df.columns:
        return S
    return df["kv_len"].astype("float64").where(df["kv_len"].notna(), S)


def work_prefill(df: pd.DataFrame) -> pd.DataFrame:
    """FLOPs = 4·B·H·pairs·D (QKᵀ and PV, pairs from :func:`causal_pairs` over the ``kv_len`` context);
    XU ops = B·H·pairs (one exp per score); DRAM bytes = Q + O over ``seq_len`` tokens (2 B) + K + V over
    ``kv_len`` tokens (KV dtype), each read once."""
    from synperf.model.kernels.dtypes import dtype_bytes

    B, S, H, Hkv, D = (df[c].astype("float64") for c in ("batch_size", "seq_len", "num_heads", "num_kv_heads",
                                                          "head_dim"))
    L = _prefill_kv_len(df)
    pairs = causal_pairs(df["seq_len"], df["window_size"], L)
    act_b = dtype_bytes(df["dtype"])
    return pd.DataFrame({
        "flops": 4.0 * B * H * pairs * D,
        "dram_bytes": B * (S * 2.0 * H * D * act_b + L * 2.0 * Hkv * D * _kv_bytes(df)),
        "xu_ops": B * H * pairs,
        "parallel_units": B * H * np.ceil(S / V1_TILE_Q),
    }, index=df.index)


def work_decode(df: pd.DataFrame) -> pd.DataFrame:
    """One query per sequence: FLOPs = 4·B·H·L·D, XU = B·H·L, DRAM bytes dominated by
    the KV cache B·L·2·Hkv·D·kv_bytes, with L = min(kv_len, window) (window 0 = full)."""
    from synperf.model.kernels.dtypes import dtype_bytes

    B, H, Hkv, D = (df[c].astype("float64") for c in ("batch_size", "num_heads", "num_kv_heads", "head_dim"))
    L = df["kv_len"].astype("float64").clip(lower=1.0)
    w = df["window_size"].astype("float64").fillna(0.0)
    L = L.where(~((w > 0) & (w < L)), w)
    act_b = dtype_bytes(df["dtype"])
    return pd.DataFrame({
        "flops": 4.0 * B * H * L * D,
        "dram_bytes": B * L * 2.0 * Hkv * D * _kv_bytes(df) + 2.0 * B * H * D * act_b,
        "xu_ops": B * H * L,
        "parallel_units": B * Hkv,
    }, index=df.index)


# --------------------------------------------------------------------------------------------------
# Decomposition (analytical core)
#
# Paths, by the implementation's model (:mod:`synperf.data.implementations`) and compute capability
# (public-data README: vLLM's FlashAttention backend is FA2 on A100/L40S and FA3 on Hopper; `vllm_flashinfer`
# is FlashInfer):
#  * FA2 (flash-attention 2.x, csrc/flash_attn/src/flash_fwd_launch_template.h, ``run_mha_fwd_hdim*``, forward
#    without dropout): the tile depends on the head dim rounded up to 32/64/96/128/192/256
#    (static_switch.h ``HEADDIM_SWITCH``) and on the architecture, see :func:`fa2_tile`; one CTA per
#    (q-tile, batch, query head), grid x = q-tile (fastest), hardware scheduler; no GQA packing.
#  * FA3 (flash-attention 3, hopper/, tile_scheduler.hpp): persistent, one CTA per SM, 128 x 128 tiles,
#    work packets taken longest-first (causal) -> software min-heap scheduler.
#  * FlashInfer FA2-style (method.md): query heads of one KV head packed (GQA packing), CTA_TILE_Q =
#    128 if the packed query length > 64 (head_dim < 256), 64 if > 16, else 16; a task is
#    (request, q-tile, kv-chunk, kv-head); at most 2 CTAs per SM.
#  * head_dim: FA2 and FA3 refuse head_dim > 256 (flash_api.cpp: "FlashAttention forward only supports head
#    dimension at most 256") and FA2/FA3 need compute capability 8.0+ ("FlashAttention only supports Ampere
#    GPUs or newer"); FlashInfer's kernels are built for head_dim 64, 128 and 256. Such launches, and a tile
#    whose shared memory exceeds the GPU's per-CTA limit, are refused with an InputError naming head_dim and
#    GPU.
#  * Cached prefix (kv_len > seq_len): the seq_len queries are the last rows of a kv_len context; the mask is
#    aligned bottom-right, so q-tile i reads keys up to (kv_len - seq_len) + its last query row (FA2's
#    ``n_block_max = ceil(((m_block + 1) * kBlockM + seqlen_k - seqlen_q) / kBlockN)``).
#  * Decode (seq_len 1): split-KV planning. The KV sequence is split into chunks when the base grid
#    (sequences x heads) does not fill the GPU: the number of splits maximises wave efficiency as
#    FlashAttention's ``num_splits_heuristic`` does (the smallest split count within 85% of the best,
#    at most 64 and at most one split per 64 keys); the query heads of one KV head are packed in one
#    task (16-row MMA minimum): FA3 and FlashInfer by design, FA2 by swapping seqlen_q and the head
#    groups when seqlen_q = 1.
#  * Short prompts: a q-tile computes MMAs only for its valid rows rounded up to the 16-row MMA shape
#    (the kernels skip fully masked row blocks); without this, prompts of 1-15 tokens would count
#    8-128x the work they do.
# Per task: Tensor FLOP = 4 x tile_q x kv x head_dim over whole MMA tiles (QK^T and PV); XU = one exp
# per score plus one rescale exp per row and kv tile (online softmax); FMA = 2 per score (scale and
# subtract the running max, accumulate the row sum); loads = the Q tile + the K and V it reads.
# --------------------------------------------------------------------------------------------------
from synperf.data.implementations import implementation_model  # noqa: E402
from synperf.data.io import InputError  # noqa: E402
from synperf.model.kernels.tasks import TaskSet, uniform_summary  # noqa: E402

MAX_SPLITS = 64
MIN_KEYS_PER_SPLIT = 64
#: largest head_dim the FlashAttention-2/3 and FlashInfer kernels are built for (see the comment above)
MAX_HEAD_DIM = 256
#: FA2 head-dim template instances (static_switch.h ``HEADDIM_SWITCH``)
FA2_HEAD_DIMS = (32, 64, 96, 128, 192, 256)


def _cc(spec) -> tuple[int, int]:
    major, _, minor = str(spec.compute_capability).partition(".")
    return int(major), int(minor or 0)


def max_smem_per_cta(spec) -> int:
    """Largest shared memory one CTA may opt into, bytes: the SM's capacity minus the 1 KB the driver reserves
    per CTA on compute capability 8.0+ (CUDA C++ Programming Guide, "Technical Specifications per Compute
    Capability": 163 KB on 8.0, 99 KB on 8.6/8.9/12.0, 227 KB on 9.0/10.x), the full capacity before."""
    kb = float(spec.smem_per_sm_kb) - (1.0 if _cc(spec)[0] >= 8 else 0.0)
    return int(kb * 1024)


def attention_path(implementation: str, spec, kernel: str = "attention_prefill") -> str:
    """``fa2``, ``fa3`` or ``flashinfer`` for an implementation label on a GPU.

    The label maps to its model through :data:`synperf.data.implementations.IMPLEMENTATIONS`
    (``fa_vllm``: FA3 on compute capability 9.x, FA2 elsewhere; ``fa2``; ``flashinfer``).

    Raises:
        InputError: the label is not listed for ``kernel``.
    """
    model = implementation_model(kernel, implementation)
    if model == "flashinfer":
        return "flashinfer"
    if model == "fa2":
        return "fa2"
    return "fa3" if _cc(spec)[0] == 9 else "fa2"


def _check_head_dim(path: str, D: int, spec) -> None:
    # vLLM's FlashAttention backend runs head sizes that are multiples of 8 (``supports_head_size`` of
    # vllm/v1/attention/backends/flash_attn.py); FlashInfer's prebuilt kernels a subset of those
    if D % 8 or D < 8:
        raise InputError(f"attention head_dim = {D} on GPU {spec.id!r}: the modelled kernels run head dims that are "
                         "multiples of 8; no modelled kernel runs it")
    if D > MAX_HEAD_DIM:
        kernel = "FlashInfer" if path == "flashinfer" else f"FlashAttention ({path.upper()})"
        raise InputError(f"attention head_dim = {D} on GPU {spec.id!r}: {kernel} is built for head_dim <= "
                         f"{MAX_HEAD_DIM}; no modelled kernel runs it")
    if path in ("fa2", "fa3") and _cc(spec)[0] < 8:
        raise InputError(f"attention on GPU {spec.id!r} (compute capability {spec.compute_capability}): "
                         f"FlashAttention ({path.upper()}) needs compute capability 8.0 or newer")


def fa2_tile(D: int, spec, causal: bool = True) -> tuple[int, int, int, int]:
    """FlashAttention-2 forward tile for head_dim ``D`` on ``spec``: (kBlockM query rows, kBlockN keys, warps,
    template head dim).

    Source: flash-attention 2.x ``csrc/flash_attn/src/flash_fwd_launch_template.h`` (``run_mha_fwd_hdim*``,
    no dropout), with sm8x = compute capability 8.x other than 8.0 (A10, A40, L4, L40S, RTX 4090):

    * head dim 32, 64: 128 x 128, 4 warps;
    * 96: sm8x causal 64 x 64, otherwise 128 x 64, 4 warps;
    * 128: sm8x 64 x 64 (causal) or 128 x 32 (not causal), otherwise 128 x 64, 4 warps;
    * 192: 128 x 64, 8 warps;
    * 256: 128 x 64 with 8 warps when the per-CTA shared-memory limit is >= 2·256·(128 + 2·64) B and the SM has
      < 4·256·(64 + 2·64) B (A100), otherwise 64 x 64 with 4 warps (L40S, RTX PRO 6000, H100).

    Raises:
        InputError: ``D`` > 256 or the GPU is older than compute capability 8.0.
    """
    _check_head_dim("fa2", D, spec)
    hd = next(h for h in FA2_HEAD_DIMS if D <= h)
    major, minor = _cc(spec)
    sm8x = major == 8 and minor > 0
    if hd <= 64:
        return 128, 128, 4, hd
    if hd == 96:
        return (64, 64, 4, hd) if (sm8x and causal) else (128, 64, 4, hd)
    if hd == 128:
        if sm8x:
            return (64, 64, 4, hd) if causal else (128, 32, 4, hd)
        return 128, 64, 4, hd
    if hd == 192:
        return 128, 64, 8, hd
    if max_smem_per_cta(spec) >= 2 * hd * (128 + 2 * 64) and spec.smem_per_sm_kb * 1024 < 4 * hd * (64 + 2 * 64):
        return 128, 64, 8, hd
    return 64, 64, 4, hd


def check_supported(df: pd.DataFrame, kernel: str, registry, where: str = "params") -> None:
    """Refuse attention launches no modelled kernel runs: an unlisted implementation label, a head_dim that is not
    a multiple of 8 or above :data:`MAX_HEAD_DIM`, FlashAttention on a GPU older than compute capability 8.0, or a
    prefill tile whose shared memory exceeds the GPU's per-CTA limit. ``df`` holds ``gpu``, ``implementation``,
    ``head_dim`` (and for prefill ``seq_len``, ``num_heads``, ``num_kv_heads``); one check per distinct combination.

    Raises:
        InputError: ``"<where> row <i>: <reason>"`` for the first offending row.
    """
    cols = ["gpu", "implementation", "head_dim"] + (["seq_len", "num_heads", "num_kv_heads"]
                                                   if kernel == "attention_prefill" else [])
    sub = df[cols]
    first = np.flatnonzero(~sub.duplicated().to_numpy())
    values = {c: sub[c].iloc[first].tolist() for c in cols}
    checked: set = set()  # (gpu, path, head_dim) and (gpu, path, tile) already found runnable
    for j, i in enumerate(first):
        r = {c: values[c][j] for c in cols}
        gpu = str(r["gpu"])
        spec = registry[gpu]
        try:
            path = attention_path(str(r["implementation"]), spec, kernel)
            D = int(r["head_dim"])
            if (gpu, path, D) not in checked:
                _check_head_dim(path, D, spec)
                checked.add((gpu, path, D))
            if kernel == "attention_prefill":
                tq, tkv, _, _, _, warps, hd = _prefill_geometry(path, int(r["seq_len"]), int(r["num_heads"]),
                                                                int(r["num_kv_heads"]), D, spec)
                if (gpu, path, tq, tkv, hd, warps) not in checked:
                    _slots(path, spec, tq, tkv, hd, warps)
                    checked.add((gpu, path, tq, tkv, hd, warps))
        except InputError as exc:
            raise InputError(f"{where} row {i}: {exc}") from None


def _map_distinct(values: pd.Series, fn) -> pd.Series:
    """``fn`` of each value of ``values`` as a string, called once per distinct value (in order of first
    appearance, so the first failing row's value raises first); same index as ``values``."""
    text = values.astype(str)
    return text.map({v: fn(v) for v in text.unique()})


def _kv_elem_bytes(dtype: str) -> float:
    from synperf.model.kernels.dtypes import DTYPE_BYTES

    return DTYPE_BYTES.get(str(dtype), 2.0)


def _prefill_geometry(path: str, S: int, H: int, Hkv: int, D: int, spec
                      ) -> tuple[int, int, float, int, float, int, int]:
    """(tile_q, tile_kv, query positions per q-tile, rows to tile, units per q-tile, warps, smem head dim) of a
    prefill path on ``spec``.

    Raises:
        InputError: head_dim or GPU not run by the path (:func:`_check_head_dim`).
    """
    _check_head_dim(path, D, spec)
    group = max(1, H // max(1, Hkv))
    if path == "flashinfer":
        packed = S * group
        tq = 128 if packed > 64 and D < 256 else (64 if packed > 16 else 16)
        return tq, (64 if D >= 128 else 128), tq / group, packed, Hkv, 4, D
    if path == "fa2":
        tq, tkv, warps, hd = fa2_tile(D, spec, causal=True)
        return tq, tkv, float(tq), S, H, warps, hd
    return 128, 128, 128.0, S, H, 4, D


def _q_tile_classes(rows_total, tq, tkv, q_per_tile, S, w, prefix=0):
    """Per q-tile: kv tiles read (causal over a ``prefix + S`` context, optional sliding window) and valid
    query rows, and the q-tiles per launch. The arguments are one launch's values or arrays of one value per
    launch; the q-tiles of all launches come one launch after the other."""
    rows_total, tq, tkv, S, w, prefix = (np.atleast_1d(np.asarray(v, dtype="int64"))
                                         for v in (rows_total, tq, tkv, S, w, prefix))
    q_per_tile = np.atleast_1d(np.asarray(q_per_tile, dtype="float64"))
    n_q = np.ceil(rows_total / tq).astype("int64")
    launch = np.repeat(np.arange(len(n_q)), n_q)
    i = np.arange(len(launch)) - np.repeat(np.cumsum(n_q) - n_q, n_q)
    qpt, P, tkv_, w_ = q_per_tile[launch], prefix[launch], tkv[launch], w[launch]
    q_end = P + np.minimum((i + 1) * qpt, S[launch])
    q_start = P + i * qpt
    kv_lo = np.where(w_ > 0, np.floor(np.maximum(0.0, q_start - w_ + 1) / tkv_) * tkv_, 0.0)
    kv_tiles = np.ceil(np.maximum(np.ceil(q_end) - kv_lo, 1) / tkv_)
    valid = np.minimum(tq[launch], rows_total[launch] - i * tq[launch]).astype("float64")
    return kv_tiles, valid, n_q


def _slots(path: str, spec, tq: int, tkv: int, D: int, warps: int = 4) -> int:
    """Resident CTAs per SM of a prefill path; ``D`` is the head dim the kernel's shared memory is sized for.

    Raises:
        InputError: the tile's shared memory (Q tile + K and V tiles, 2 B each) exceeds the GPU's per-CTA limit.
    """
    from synperf.model.schedule import ctas_per_sm

    if path == "fa3":
        return 1
    smem = (tq + 2 * tkv) * D * 2
    if smem > max_smem_per_cta(spec):
        raise InputError(f"attention head_dim = {D} on GPU {spec.id!r}: the {path} tile {tq} x {tkv} needs "
                         f"{smem / 1024:.0f} KB of shared memory per CTA, the GPU allows "
                         f"{max_smem_per_cta(spec) / 1024:.0f} KB")
    n = ctas_per_sm(spec, 32 * warps, smem)
    return min(2, n) if path == "flashinfer" else n


def _prefix(row: dict, S: int) -> int:
    L = row.get("kv_len")
    L = S if L is None or L != L else int(L)
    return max(0, L - S)


def prefill_tasks(row: dict, spec) -> TaskSet:
    """Task set of one causal prefill launch (canonical parameter names); tasks are placed by their
    KV-tile count (work is proportional to it). ``kv_len`` > ``seq_len`` is a cached prefix the queries also
    attend to.

    Raises:
        InputError: unknown implementation label, or a head_dim/GPU no modelled kernel runs.
    """
    B, S, H, Hkv, D = (int(row[c]) for c in ("batch_size", "seq_len", "num_heads", "num_kv_heads", "head_dim"))
    w = int(row.get("window_size") or 0)
    P = _prefix(row, S)
    kvb = _kv_elem_bytes(row["kv_cache_dtype"])
    path = attention_path(str(row["implementation"]), spec)
    tq, tkv, qpt, rows_total, units_per_seq, warps, hd = _prefill_geometry(path, S, H, Hkv, D, spec)
    kvt, valid, _ = _q_tile_classes(rows_total, tq, tkv, qpt, S, w, P)
    kv = kvt * tkv
    return TaskSet(
        counts=np.full(len(kvt), B * units_per_seq),
        tensor_ops=4.0 * np.minimum(tq, np.ceil(valid / 16.0) * 16.0) * kv * D,
        fma_ops=2.0 * valid * kv,
        xu_ops=valid * kv + valid * kvt,
        load_bytes=tq * D * 2.0 + kv * D * 2.0 * kvb,
        dram_bytes=B * (S * H * D * 2.0 + (S + P) * 2.0 * Hkv * D * kvb),
        store_bytes=B * S * H * D * 2.0,
        ctas_per_sm=_slots(path, spec, tq, tkv, hd, warps),
        policy="persistent" if path == "fa3" else "hardware",
        order="descending" if path == "fa3" else "interleaved",
        dims=[{"path": path, "tile_q": tq, "tile_kv": tkv, "kv": float(k)} for k in kv],
        sched_cost=kvt)


#: q-tiles :func:`_prefill_sums` takes at a time: its per-q-tile arrays (16,384 float64, 128 KB each) stay in cache,
#: where arrays over all q-tiles of a batch (millions with long prompts) do not
Q_TILE_BLOCK = 16384


def _prefill_sums(units, rows_total, tq, tkv, qpt, S, w, prefix, sms: int, slots, persistent) -> np.ndarray:
    """Sums over each launch's q-tiles and over its busiest SM's tasks, shape ``(8, launches)``: n_q, sum kvt,
    sum valid*kvt, sum mma_rows*kvt, busiest tasks, busiest sum kvt, busiest sum valid*kvt, busiest sum
    mma_rows*kvt. Arguments: one value per launch (arrays) of its task units per q-tile, geometry
    (:func:`_prefill_geometry`), window, cached prefix, resident CTAs per SM and scheduler (FA3's persistent one or
    the hardware one), on ``sms`` SMs; the launches are taken in blocks of about :data:`Q_TILE_BLOCK` q-tiles."""
    from synperf.model.kernels.tasks import set_sums
    from synperf.model.schedule import SIMULATE_MAX_TASKS, busiest_sm_sets

    args = [np.asarray(v) for v in (units, rows_total, tq, tkv, qpt, S, w, prefix, slots, persistent)]
    out = np.empty((8, len(args[0])))
    n_q_all = np.ceil(args[1] / args[2])
    blocks = np.cumsum(n_q_all) // Q_TILE_BLOCK

    def schedule(part):
        units, rows_total, tq, tkv, qpt, S, w, prefix, slots, persistent = (v[part] for v in args)
        kvt, valid, n_q = _q_tile_classes(rows_total, tq, tkv, qpt, S, w, prefix)
        return (np.repeat(units, n_q), kvt, n_q, sms, slots, np.where(persistent, "persistent", "hardware"),
                np.where(persistent, "descending", "interleaved")), valid

    def spans(idx, size):  # consecutive launches of ``idx`` in blocks of about ``size`` q-tiles
        return np.split(idx, np.flatnonzero(np.diff(np.cumsum(n_q_all[idx]) // size)) + 1)

    # the launches whose schedules are simulated (several classes, few tasks) first, in large blocks: many sets
    # per scheduler call (busiest_sm_sets simulates a call's sets together); their busiest SMs are then read in
    # launch order, block by block, beside the closed forms of the other launches
    sim = (args[0] > 0) & (n_q_all > 1) & (args[0] * n_q_all <= SIMULATE_MAX_TASKS)
    simulated = [busiest_sm_sets(*schedule(part)[0]) for part in spans(np.flatnonzero(sim), 16 * Q_TILE_BLOCK)]
    simulated = np.concatenate(simulated) if simulated else np.zeros(0)
    at = 0
    for part in np.split(np.arange(len(args[0])), np.flatnonzero(np.diff(blocks)) + 1):
        sets, valid = schedule(part)
        kvt, n_q, tq = sets[1], sets[2], args[2][part]
        mma = np.minimum(np.repeat(tq, n_q), np.ceil(valid / 16.0) * 16.0)
        on = np.repeat(sim[part], n_q)  # classes of simulated launches
        per_sm = np.empty(len(kvt))
        per_sm[on] = simulated[at:at + int(on.sum())]
        at += int(on.sum())
        if not on.all():
            rest = ~sim[part]
            per_sm[~on] = busiest_sm_sets(sets[0][~on], kvt[~on], n_q[rest], sms, sets[4][rest], sets[5][rest],
                                          sets[6][rest])
        out[0, part] = n_q
        out[1:, part] = set_sums(np.stack([kvt, valid * kvt, mma * kvt, per_sm, per_sm * kvt, per_sm * valid * kvt,
                                           per_sm * mma * kvt]), n_q)
    return out


def _first_appearance(keys: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row's distinct key, numbered in order of first appearance; position of each key's first row)."""
    codes = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    return codes, np.unique(codes, return_index=True)[1]


def decompose_prefill(df: pd.DataFrame, registry) -> pd.DataFrame:
    """Vectorised :func:`prefill_tasks` + scheduling summary: the geometry is resolved once per distinct
    (implementation, sequence, heads, head_dim), and the per-launch sums, which only depend on a small signature
    (tiles, units, sequence, cached prefix, window, SMs, occupancy), once per distinct signature
    (:func:`_prefill_sums`).

    Raises:
        InputError: unknown implementation label, or a head_dim/GPU no modelled kernel runs.
    """
    out = []
    for gpu, g in df.groupby("gpu", sort=False):
        spec = registry[gpu]
        L = _prefill_kv_len(g).to_numpy()
        S_rows = g["seq_len"].astype("float64").to_numpy().astype("int64")
        keys = pd.DataFrame({
            **{c: g[c].astype("float64").to_numpy().astype("int64")
               for c in ("batch_size", "seq_len", "num_heads", "num_kv_heads", "head_dim")},
            "window_size": g["window_size"].astype("float64").fillna(0.0).to_numpy().astype("int64"),
            "implementation": g["implementation"].astype(str).to_numpy(),
            "prefix": np.maximum(0, L.astype("int64") - S_rows)})
        codes, first = _first_appearance(keys)  # row -> distinct launch
        launches = keys.iloc[first]
        # one geometry per distinct shape, in first-appearance order, so the first bad row raises first
        shape = ["implementation", "seq_len", "num_heads", "num_kv_heads", "head_dim"]
        shape_of, first = _first_appearance(launches[shape])
        geometry, path_of, slots_of = [], {}, {}
        for impl, S, H, Hkv, D in launches[shape].iloc[first].itertuples(index=False):
            path = path_of.get(impl) or path_of.setdefault(impl, attention_path(impl, spec))
            tq, tkv, qpt, rows_total, ups, warps, hd = _prefill_geometry(path, int(S), int(H), int(Hkv), int(D),
                                                                         spec)
            tile = (path, tq, tkv, hd, warps)
            if tile not in slots_of:
                slots_of[tile] = _slots(path, spec, tq, tkv, hd, warps)
            geometry.append((tq, tkv, qpt, rows_total, ups, slots_of[tile], path == "fa3"))
        tq, tkv, qpt, rows_total, ups, slots, fa3 = (np.array(v)[shape_of] for v in zip(*geometry))
        sig = pd.DataFrame({"units": launches["batch_size"].to_numpy() * ups, "rows_total": rows_total, "tq": tq,
                            "tkv": tkv, "qpt": qpt, "S": launches["seq_len"].to_numpy(),
                            "w": launches["window_size"].to_numpy(), "prefix": launches["prefix"].to_numpy(),
                            "slots": slots, "persistent": fa3})
        sig_of, first = _first_appearance(sig)  # distinct launch -> signature
        u = sig.iloc[first]
        sums = _prefill_sums(*(u[c].to_numpy() for c in ("units", "rows_total", "tq", "tkv", "qpt", "S", "w",
                                                           "prefix")),
                             spec.sm_count, u["slots"].to_numpy(), u["persistent"].to_numpy())
        n_q, kvt, vkvt, mkvt, b_n, b_kvt, b_vkvt, b_mkvt = sums[:, sig_of[codes]]
        units, tq, tkv, slots = (sig[c].to_numpy()[codes] for c in ("units", "tq", "tkv", "slots"))
        persistent = fa3[codes].astype("float64")
        D = g["head_dim"].astype("float64").to_numpy()
        kvb = _map_distinct(g["kv_cache_dtype"], _kv_elem_bytes).to_numpy()
        B, S, H, Hkv = (g[c].astype("float64").to_numpy() for c in ("batch_size", "seq_len", "num_heads",
                                                                     "num_kv_heads"))
        out.append(pd.DataFrame({
            "num_tasks": units * n_q,
            "ctas_per_sm": slots,
            "persistent": persistent,
            "tensor_all_ops": units * 4.0 * tkv * D * mkvt,
            "fma_all_ops": units * 2.0 * tkv * vkvt,
            "xu_all_ops": units * (tkv + 1.0) * vkvt,
            "load_all_bytes": units * (n_q * tq * D * 2.0 + tkv * D * 2.0 * kvb * kvt),
            "dram_bytes": B * (S * H * D * 2.0 + L * 2.0 * Hkv * D * kvb),
            "store_bytes": B * S * H * D * 2.0,
            "sm_max_tensor_ops": 4.0 * tkv * D * b_mkvt,
            "sm_max_fma_ops": 2.0 * tkv * b_vkvt,
            "sm_max_xu_ops": (tkv + 1.0) * b_vkvt,
            "sm_max_load_bytes": b_n * tq * D * 2.0 + tkv * D * 2.0 * kvb * b_kvt,
            "sm_max_tasks": b_n,
            "tile_q": tq,
            "kv_splits": 1.0}, index=g.index))
    return pd.concat(out).loc[df.index]


def num_splits(base_tasks, kv_tiles, num_sms: int):
    """Split-KV count per launch (vectorised): FlashAttention's ``num_splits_heuristic`` rule.

    Args:
        base_tasks: tasks without splitting (sequences x heads), array.
        kv_tiles: 64-key tiles of the KV sequence, array (bounds the splits).
        num_sms: SMs.
    """
    base = np.asarray(base_tasks, dtype="float64")
    kvt = np.asarray(kv_tiles, dtype="float64")
    full = base >= 0.8 * num_sms  # launches that fill the SMs unsplit take 1; the rule runs on the others
    if full.any() and base.ndim == 1:
        out = np.ones(len(base))
        out[~full] = num_splits(base[~full], kvt[~full], num_sms)
        return out
    whole = (base == np.floor(base)) & (kvt == np.floor(kvt)) & (base >= 0) & (kvt >= 0) & (base < 2**26) \
        & (kvt < 2**26)
    if base.ndim == 1 and len(base) > 1 and whole.all():
        # each distinct (tasks, KV tiles) pair once (one exact key per pair): the rule reads nothing else
        keys, first, inverse = np.unique(base * 2.0**26 + kvt, return_index=True, return_inverse=True)
        if len(keys) < len(base):
            return num_splits(base[first], kvt[first], num_sms)[inverse]
    cand = np.arange(1, MAX_SPLITS + 1, dtype="float64")[None, :]
    n = base[:, None] * cand
    eff = n / (np.ceil(n / num_sms) * num_sms)
    allowed = cand <= np.maximum(1.0, kvt[:, None])
    eff = np.where(allowed, eff, -1.0)
    best = eff.max(axis=1, keepdims=True)
    ok = eff >= 0.85 * best
    splits = np.argmax(ok, axis=1) + 1.0
    return np.where(base >= 0.8 * num_sms, 1.0, splits)


def decompose_decode(df: pd.DataFrame, registry) -> pd.DataFrame:
    """Vectorised decode decomposition + scheduling summary (one task class per launch).

    Raises:
        InputError: unknown implementation label, or a head_dim/GPU no modelled kernel runs.
    """
    out = []
    for gpu, g in df.groupby("gpu", sort=False):
        spec = registry[gpu]
        B, H, Hkv, D = (g[c].astype("float64").to_numpy()
                        for c in ("batch_size", "num_heads", "num_kv_heads", "head_dim"))
        L = np.maximum(g["kv_len"].astype("float64").to_numpy(), 1.0)
        w = g["window_size"].astype("float64").fillna(0.0).to_numpy()
        L = np.where((w > 0) & (w < L), w, L)
        kvb = _map_distinct(g["kv_cache_dtype"], _kv_elem_bytes).to_numpy(dtype="float64")
        paths = _map_distinct(g["implementation"], lambda x: attention_path(x, spec, "attention_decode")).to_numpy()
        pairs = pd.DataFrame({"path": paths, "D": g["head_dim"].astype("int64").to_numpy()})
        for path, D_row in sorted(set(pairs.drop_duplicates().itertuples(index=False, name=None))):
            _check_head_dim(path, int(D_row), spec)
        # every path packs the query heads of one KV head into one task for decode: FA3 and FlashInfer by
        # design, FA2 through its seqlen_q / n_groups swap for seqlen_q = 1 (flash_api.cpp)
        rows = np.maximum(H / Hkv, 1.0)
        tq = np.maximum(16.0, np.ceil(rows / 16.0) * 16.0)
        units = B * Hkv
        kv_tiles = np.ceil(L / MIN_KEYS_PER_SPLIT)
        splits = num_splits(units, kv_tiles, spec.sm_count)
        kv_split = np.ceil(np.ceil(L / splits) / 16.0) * 16.0

        def series(v):
            return pd.Series(v, index=g.index)

        per_task = {"tensor_ops": series(4.0 * tq * kv_split * D), "fma_ops": series(2.0 * rows * kv_split),
                    "xu_ops": series(rows * kv_split + rows * np.ceil(kv_split / MIN_KEYS_PER_SPLIT)),
                    "load_bytes": series(rows * D * 2.0 + kv_split * D * 2.0 * kvb)}
        dram = B * L * 2.0 * Hkv * D * kvb + B * H * D * 2.0
        store = B * H * D * 2.0 + (splits > 1) * B * H * splits * (D + 1) * 4.0
        persistent = paths == "fa3"
        s = uniform_summary(series(units * splits), series(float(spec.sm_count)), per_task, series(dram),
                            series(store), series(np.where(persistent, 1.0, 2.0)), series(persistent))
        s["tile_q"], s["kv_splits"] = tq, splits
        out.append(s)
    return pd.concat(out).loc[df.index]


def decode_tasks(row: dict, spec) -> TaskSet:
    """Explicit task set of one decode launch (the single-row form of :func:`decompose_decode`)."""
    df = pd.DataFrame([row])
    df["gpu"] = spec.id

    class _One:
        def __getitem__(self, _):
            return spec

    s = decompose_decode(df, _One()).iloc[0]
    n = int(s["num_tasks"])
    return TaskSet(counts=np.array([n]), tensor_ops=s["tensor_all_ops"] / n, fma_ops=s["fma_all_ops"] / n,
                   xu_ops=s["xu_all_ops"] / n, load_bytes=s["load_all_bytes"] / n, dram_bytes=s["dram_bytes"],
                   store_bytes=s["store_bytes"], ctas_per_sm=int(s["ctas_per_sm"]),
                   policy="persistent" if s["persistent"] else "hardware",
                   dims=[{"tile_q": s["tile_q"], "kv_splits": s["kv_splits"]}])
