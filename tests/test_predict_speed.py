"""The fast batch-predict path gives the same numbers as straightforward per-row references: the column-wise fused-MoE
decomposition against the explicit task set of each launch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synperf.model.kernels import fused_moe


def _moe_rows(n: int, seed: int = 0) -> pd.DataFrame:
    """Fused-MoE launches over every stage, dtype and routing, with and without their own config (some given
    as text or float, some missing)."""
    rng = np.random.default_rng(seed)
    pick = lambda xs: [xs[i] for i in rng.integers(0, len(xs), n)]  # noqa: E731
    cfg = pd.array(pick([None, 16, 32, 64, 128]), dtype="Int64")
    return pd.DataFrame({
        "gpu": pick(["h100_sxm", "a100_sxm4_80gb", "b200", "l40s"]),
        "num_tokens": rng.integers(1, 9000, n), "hidden_size": pick([2048, 4096, 7168]),
        "inter_size": pick([1408, 2048, 14336]), "topk": pick([1, 2, 8]), "num_experts": pick([8, 64, 256]),
        "moe_tp_size": pick([1, 2, 4]), "moe_ep_size": pick([1, 2, 8]),
        "distribution": pick(["balanced", "random", "power_law_1.2", "power_law_0.5", None, ""]),
        "moe_stage": pick(["full", "w13", "w2", None]), "dtype": pick(["bfloat16", "fp8", "fp8_block", "float16"]),
        "block_size_m": cfg, "block_size_n": pick([None, 64.0, float("nan"), 128.0]),
        "block_size_k": pick([None, "64", "x", 128]), "group_size_m": pick([None, 8]),
        "num_warps": pd.array(pick([None, 4, 8]), dtype="Int64"), "num_stages": pick([None, 2, 3, 4]),
    })


def test_columnwise_fused_moe_equals_the_explicit_task_set_of_every_launch(registry):
    rows = _moe_rows(600)
    got = fused_moe.summary_table(rows, registry)
    ref = []
    for r in rows.itertuples(index=False):
        d = dict(zip(fused_moe.DECOMPOSE_COLUMNS, r))
        d = {k: (None if (v is pd.NA or (isinstance(v, float) and np.isnan(v))) else v) for k, v in d.items()}
        ref.append(fused_moe.summary(d, registry[d["gpu"]]))
    ref = pd.DataFrame(ref, index=rows.index)
    assert list(got.columns) == list(ref.columns) == fused_moe.DECOMPOSE_OUTPUT
    np.testing.assert_array_equal(got.to_numpy(), ref.to_numpy())  # bit for bit
    # decompose: one summary per distinct launch, spread back over duplicates in the caller's row order
    order = np.r_[np.arange(len(rows)), np.arange(0, len(rows), 3)][::-1]
    dup = rows.iloc[order].reset_index(drop=True)
    np.testing.assert_array_equal(fused_moe.decompose(dup, registry).to_numpy(), ref.to_numpy()[order])
    with pytest.raises(ValueError, match="moe_stage"):
        fused_moe.summary_table(rows.head(3).assign(moe_stage="w3"), registry)
