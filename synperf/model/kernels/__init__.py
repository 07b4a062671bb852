"""One module per kernel family: the work a launch must do.

Each family module exposes ``work(df) -> DataFrame`` over canonical rows of that
family, with float64 columns:

* ``flops``: arithmetic the kernel must perform (multiply-add = 2 FLOP);
* ``dram_bytes``: the bytes that must cross DRAM at least once (inputs, weights,
  KV cache and outputs, each read or written once);
* ``xu_ops``: transcendental (MUFU/XU pipe) operations (exp, rsqrt, rcp);
* ``parallel_units``: independent work units at a conventional tile size, a proxy
  for how well the launch fills the SMs (decomposition v1; the analytical core
  replaces it with real tasks).

Bytes per element of each dtype: :mod:`synperf.model.kernels.dtypes`. Which kernel model an
``implementation`` label gets: :mod:`synperf.data.implementations` (the one label table).

These are the inputs of feature set v1 (:mod:`synperf.model.features.v1`).
"""

from __future__ import annotations

import pandas as pd

from synperf.model.kernels import attention, fused_moe, gemm, norm_act

WORK = {
    "gemm": gemm.work,
    "gemm_fp8": gemm.work,
    "attention_prefill": attention.work_prefill,
    "attention_decode": attention.work_decode,
    "rmsnorm": norm_act.work_rmsnorm,
    "silu_mul": norm_act.work_silu_mul,
    "fused_moe": fused_moe.work,
}

def work(df: pd.DataFrame) -> pd.DataFrame:
    """Work columns for a canonical table mixing any families (row order kept)."""
    parts = []
    for kernel, idx in df.groupby("kernel", sort=False).groups.items():
        if kernel not in WORK:
            raise KeyError(f"no work model for kernel {kernel!r}")
        parts.append(WORK[kernel](df.loc[idx]))
    return pd.concat(parts).loc[df.index] if parts else pd.DataFrame(index=df.index)
