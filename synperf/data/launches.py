"""Launch parameters a kernel can actually run with: checked before anything is modelled.

A size is an integer >= 1 (``window_size`` >= 0, 0 = full attention); attention query heads are a multiple of
KV heads; a prefill attends to at least its own query tokens (``kv_len >= seq_len``); the dtype is one the
families model and the GPU has a peak for (:data:`synperf.data.hardware` ``_PEAK_COLUMN``: FP8 needs FP8
Tensor Cores, compute capability 8.9+); the ``implementation`` label, where given, is one
:data:`synperf.data.implementations.IMPLEMENTATIONS` lists for the family. Anything else is an
:class:`synperf.data.io.InputError` naming the column, the first offending row and what was expected. Attention launches
are also checked against the kernels that run them (:func:`synperf.model.kernels.attention.check_supported`: head_dim,
architecture, shared memory).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .io import InputError, close_match
from .schema import KERNEL_PARAMS, PARAM_COLUMNS

#: the compute dtypes the families model
MODELLED_DTYPES = ("bfloat16", "float16", "float32", "fp8", "fp8_block")
#: parameters a family models beside ``dtype``, ``implementation`` and its :data:`KERNEL_PARAMS`
OPTIONAL_PARAMS = {"fused_moe": ("distribution", "block_size_m", "block_size_n", "block_size_k", "group_size_m",
                                 "num_warps", "num_stages")}
#: the KV-cache dtypes the attention models price (bytes per element of each in
#: :data:`synperf.model.kernels.dtypes.DTYPE_BYTES`)
KV_CACHE_DTYPES = ("bfloat16", "float16", "float32", "fp8")
#: the fused-MoE stages: the whole layer or one of its grouped GEMMs
MOE_STAGES = ("full", "w13", "w2")
#: fused-MoE token-to-expert routings: uniform, or Zipf-like with exponent ``alpha`` >= 0 (``power_law_1.2``)
ROUTINGS = ("balanced", "random", "power_law_<alpha>")
_POWER_LAW = re.compile(r"power_law_(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
#: parameters that may be 0
_MAY_BE_ZERO = {"window_size"}
#: families whose dtype selects a Tensor Core peak of the GPU (RMSNorm and SiLU&Mul run on CUDA cores)
TENSOR_FAMILIES = {"gemm", "gemm_fp8", "attention_prefill", "attention_decode", "fused_moe"}


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def allowed_params(kernel: str) -> tuple[str, ...]:
    """The parameter names :func:`synperf.api.predict` takes for family ``kernel``."""
    return ("dtype", "implementation", *KERNEL_PARAMS[kernel], *OPTIONAL_PARAMS.get(kernel, ()))


def check_param_keys(kernel: str, params, where: str = "params") -> None:
    """Refuse a parameter ``kernel`` does not model: a key of the dict ``params``, or a column of the DataFrame
    ``params`` with a value (an all-null column of another family's parameter is left out: tables that hold
    several families carry them).

    Raises:
        InputError: ``"<where>: unknown parameter 'ep_size' for fused_moe; did you mean 'moe_ep_size'? expected
            one of [...]"``.
    """
    allowed = allowed_params(kernel)
    for key in params:
        if key in allowed:
            continue
        if isinstance(params, pd.DataFrame) and key in PARAM_COLUMNS and params[key].isna().all():
            continue
        hint = close_match(key, allowed)
        raise InputError(f"{where}: unknown parameter {key!r} for {kernel}{hint}; expected one of {list(allowed)}")


#: the largest integer launch parameter accepted: 2**53, the largest float64 that still holds every integer below it
MAX_PARAM = 2.0 ** 53


def check_moe_routing(topk, num_experts, ep_size=None, where: str = "params",
                      names: tuple[str, str, str] = ("topk", "num_experts", "moe_ep_size")) -> None:
    """Refuse fused-MoE routings no layer has: more experts per token than experts, or an expert-parallel degree
    above the expert count or not dividing it (every rank holds ``num_experts / moe_ep_size`` experts).
    ``topk``, ``num_experts`` and ``ep_size`` are integers or equal-length arrays of them (``ep_size`` None: not
    checked); ``names`` spell the three in the message.

    Raises:
        InputError: ``"<where> row <i>: topk = 4 exceeds num_experts = 2; ..."`` (no row for scalars).
    """
    t, e = np.atleast_1d(np.asarray(topk, dtype="int64")), np.atleast_1d(np.asarray(num_experts, dtype="int64"))
    ep = None if ep_size is None else np.atleast_1d(np.asarray(ep_size, dtype="int64"))
    rows = np.ndim(topk) > 0 or np.ndim(num_experts) > 0
    checks = [(t > e, lambda i: f"{names[0]} = {t[i]} exceeds {names[1]} = {e[i]}; a token picks {names[0]} "
                                "distinct experts")]
    if ep is not None:
        checks += [(ep > e, lambda i: f"{names[2]} = {ep[i]} exceeds {names[1]} = {e[i]}; every expert-parallel "
                                      "rank holds at least one expert"),
                   (e % np.maximum(ep, 1) != 0, lambda i: f"{names[2]} = {ep[i]} does not divide {names[1]} = "
                                                          f"{e[i]}; every rank holds {names[1]} / {names[2]} experts")]
    for bad, msg in checks:
        bad = np.broadcast_to(bad, np.broadcast(t, e).shape)
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"{where} row {i}: {msg(i)}" if rows else f"{where}: {msg(i)}")


def _refuse_rows(bad: np.ndarray, where: str, message) -> None:
    """Refuse the first row where ``bad`` holds: ``"<where> row <i>: " + message(i)``.

    Raises:
        InputError: that message, when any row is bad.
    """
    if bad.any():
        i = _first_bad(bad)
        raise InputError(f"{where} row {i}: {message(i)}")


def _check_labels(df: pd.DataFrame, col: str, ok, allowed, where: str) -> None:
    """Refuse the first non-null value of ``df[col]`` for which ``ok(value)`` is false."""
    values = df[col]
    if isinstance(values, pd.DataFrame):  # a repeated column name: every cell
        bad = values.notna().to_numpy() & ~values.astype(str).map(ok).to_numpy(dtype=bool)
    else:
        codes, labels = pd.factorize(values.astype(str))  # ok called once per distinct label
        fine = np.array([bool(ok(v)) for v in labels] + [True], dtype=bool)  # code -1 (missing) last
        bad = values.notna().to_numpy() & ~fine[codes]
    if bad.any():
        i = _first_bad(bad)
        v = str(values.iloc[i])
        raise InputError(f"{where} row {i}: {col} = {v!r}{close_match(v, allowed)}; expected one of {list(allowed)}")


def check_launches(df: pd.DataFrame, kernel: str, registry, where: str = "params") -> None:
    """Refuse launches no kernel runs; ``df`` holds one launch per row (``gpu``, ``dtype`` and the family's
    :data:`synperf.data.schema.KERNEL_PARAMS`), positions are reported from 0.

    Raises:
        InputError: ``"<where> row <i>: <column> = <value>; expected ..."`` for the first offending value
            (for ``implementation``, the allowed labels of the family).
    """
    if "implementation" in df.columns:
        from synperf.data.implementations import check_implementations

        check_implementations(df, kernel, where)
    for col in KERNEL_PARAMS[kernel]:
        if PARAM_COLUMNS.get(col) != "Int64" or col not in df.columns:
            continue
        raw = df[col]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype="float64")
        lo = 0 if col in _MAY_BE_ZERO else 1
        bad = ~np.isfinite(values) | (values != np.round(values)) | (values < lo) | (values > MAX_PARAM)
        if bad.any():
            i = _first_bad(bad)
            val = raw.iloc[i]
            shown = repr(val) if isinstance(val, str) else str(val)
            raise InputError(f"{where} row {i}: {col} = {shown}; expected an integer >= {lo} and <= 2**53")
    if kernel.startswith("attention"):
        h, kv = (df[c].to_numpy(dtype="int64") for c in ("num_heads", "num_kv_heads"))
        _refuse_rows(h % kv != 0, where, lambda i: f"num_heads = {h[i]} with num_kv_heads = {kv[i]}; expected "
                                                   "num_heads to be a multiple of num_kv_heads (grouped-query "
                                                   "attention)")
        from synperf.model.kernels.attention import check_supported

        check_supported(df, kernel, registry, where)
        if kernel == "attention_prefill":
            q, k = (df[c].to_numpy(dtype="int64") for c in ("seq_len", "kv_len"))
            _refuse_rows(k < q, where, lambda i: f"kv_len = {k[i]} < seq_len = {q[i]}; expected kv_len >= seq_len "
                                                 "(a prefill attends to its own tokens and any cached prefix)")
    if kernel == "fused_moe":
        ints = {c: df[c].to_numpy(dtype="int64") for c in ("topk", "num_experts", "moe_ep_size")}
        check_moe_routing(ints["topk"], ints["num_experts"], ints["moe_ep_size"], where)
        inter, tp = (df[c].to_numpy(dtype="int64") for c in ("inter_size", "moe_tp_size"))
        _refuse_rows(inter % tp != 0, where, lambda i: f"moe_tp_size = {tp[i]} does not divide inter_size = "
                                                       f"{inter[i]}; every tensor-parallel rank holds inter_size / "
                                                       "moe_tp_size of each expert")
        _check_labels(df, "moe_stage", lambda v: v in MOE_STAGES, MOE_STAGES, where)
        if "distribution" in df.columns:
            _check_labels(df, "distribution", lambda v: v in ROUTINGS[:2] or bool(_POWER_LAW.fullmatch(v)),
                          ROUTINGS, where)
    if kernel.startswith("attention"):
        _check_labels(df, "kv_cache_dtype", lambda v: v in KV_CACHE_DTYPES, KV_CACHE_DTYPES, where)
    dtype = df["dtype"].astype(str).to_numpy()
    bad = ~np.isin(dtype, MODELLED_DTYPES)
    if bad.any():
        i = _first_bad(bad)
        raise InputError(f"{where} row {i}: dtype = {dtype[i]!r}{close_match(dtype[i], MODELLED_DTYPES)}; expected "
                         f"one of {list(MODELLED_DTYPES)}")
    if kernel in TENSOR_FAMILIES:
        from .hardware import _PEAK_COLUMN

        gpu = df["gpu"].astype(str).to_numpy()
        for g, d in sorted(set(zip(gpu, dtype))):
            field = _PEAK_COLUMN[d]
            if getattr(registry[g], field, None) is None:
                i = _first_bad((gpu == g) & (dtype == d))
                raise InputError(f"{where} row {i}: dtype = {d!r} on GPU {g!r}; the GPU has no {field} "
                                 f"(compute capability {registry[g].compute_capability}), so it cannot run it")
