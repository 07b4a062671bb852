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

import numpy as np
import pandas as pd

from .io import InputError
from .schema import KERNEL_PARAMS, PARAM_COLUMNS

#: the compute dtypes the families model
MODELLED_DTYPES = ("bfloat16", "float16", "float32", "fp8", "fp8_block")
#: parameters that may be 0
_MAY_BE_ZERO = {"window_size"}
#: families whose dtype selects a Tensor Core peak of the GPU (RMSNorm and SiLU&Mul run on CUDA cores)
_TENSOR_FAMILIES = {"gemm", "gemm_fp8", "attention_prefill", "attention_decode", "fused_moe"}


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


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
        bad = ~np.isfinite(values) | (values != np.round(values)) | (values < lo)
        if bad.any():
            i = _first_bad(bad)
            val = raw.iloc[i]
            shown = repr(val) if isinstance(val, str) else str(val)
            raise InputError(f"{where} row {i}: {col} = {shown}; expected an integer >= {lo}")
    if kernel.startswith("attention"):
        h, kv = (df[c].to_numpy(dtype="int64") for c in ("num_heads", "num_kv_heads"))
        bad = h % kv != 0
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"{where} row {i}: num_heads = {h[i]} with num_kv_heads = {kv[i]}; expected num_heads "
                             "to be a multiple of num_kv_heads (grouped-query attention)")
        from synperf.model.kernels.attention import check_supported

        check_supported(df, kernel, registry, where)
        if kernel == "attention_prefill":
            q, k = (df[c].to_numpy(dtype="int64") for c in ("seq_len", "kv_len"))
            bad = k < q
            if bad.any():
                i = _first_bad(bad)
                raise InputError(f"{where} row {i}: kv_len = {k[i]} < seq_len = {q[i]}; expected kv_len >= seq_len "
                                 "(a prefill attends to its own tokens and any cached prefix)")
    dtype = df["dtype"].astype(str).to_numpy()
    bad = ~np.isin(dtype, MODELLED_DTYPES)
    if bad.any():
        i = _first_bad(bad)
        raise InputError(f"{where} row {i}: dtype = {dtype[i]!r}; expected one of {list(MODELLED_DTYPES)}")
    if kernel in _TENSOR_FAMILIES:
        from .hardware import _PEAK_COLUMN

        gpu = df["gpu"].astype(str).to_numpy()
        for g, d in sorted(set(zip(gpu, dtype))):
            field = _PEAK_COLUMN[d]
            if getattr(registry[g], field, None) is None:
                i = _first_bad((gpu == g) & (dtype == d))
                raise InputError(f"{where} row {i}: dtype = {d!r} on GPU {g!r}; the GPU has no {field} "
                                 f"(compute capability {registry[g].compute_capability}), so it cannot run it")
