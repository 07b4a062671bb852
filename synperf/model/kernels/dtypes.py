"""Bytes per element of the compute and storage dtypes the kernel families model."""

from __future__ import annotations

import pandas as pd

DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "fp8_block": 1.0}


def dtype_bytes(dtype: pd.Series) -> pd.Series:
    """Bytes per element for a compute/storage dtype column.

    Raises:
        KeyError: a dtype not in :data:`DTYPE_BYTES`.
    """
    out = dtype.astype(str).map(DTYPE_BYTES)
    if out.isna().any():
        bad = dtype[out.isna()].iloc[0]
        raise KeyError(f"unknown dtype {bad!r}; expected one of {sorted(DTYPE_BYTES)}")
    return out.astype(float)
