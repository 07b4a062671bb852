"""The SynPerf authors' FP8 GEMM feature columns, recomputed with our decomposer and scheduler.

The pipeweave data (``dataset/gemm_fp8_*.csv``) carries per row the paper's own features and
target. :func:`pipeweave_features` recomputes them from our FP8 task set so the two can be
compared (``tests/test_oracle_fp8.py``). Conventions of those files, which we follow here only:

* bandwidths (``mem_bandwidth``, ``l2_cache_bandwidth``) are divided as GiB/s (x 2^30), and
  ``*_in_flight`` are KiB;
* cycles are at the file's ``sm_freq`` (1830 MHz for every Hopper part), and the FP8 Tensor rate is
  twice the file's ``tc_bf16`` FLOP/clk/SM;
* only loads count as memory traffic; GPU-level traffic is the unique (tile-padded) A and B bytes.

Deliberate differences in feature set v2 (:mod:`synperf.model.features.v2`): bandwidths in GB/s (1e9, as
datasheets quote them), cycles at the registry's boost clock with the architectural FLOP/clk/SM,
L2 cycles over the bytes all tasks load (not the unique bytes), and stores as a separate feature.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from synperf.model.kernels import gemm

PIPEWEAVE_COLUMNS = ("tensor_all_ops", "tensor_all_cycle", "tensor_sm_max_ops", "tensor_sm_max_cycle",
                     "global_in_flight", "global_cycle", "local_cycle", "sm_max_in_flight",
                     "sm_max_global_cycle", "sm_max_shared_cycle", "sm_max_local_cycle", "overall_perf")


def hardware_from_row(row) -> SimpleNamespace:
    """A spec object with the fields our FP8 decomposer and scheduler read, from a pipeweave row."""
    return SimpleNamespace(
        id=str(row["hardware"]), sm_count=int(row["num_sms"]), compute_capability="9.0",
        clock_hz=float(row["sm_freq"]) * 1e6, max_ctas_per_sm=32, max_warps_per_sm=64, smem_per_sm_kb=228,
        regs_per_sm=65536, dram_bw_gbps=float(row["mem_bandwidth"]) * 2**30 / 1e9,
        fma_ops_per_clk_per_sm=float(row["fma_fp32"]), xu_ops_per_clk_per_sm=float(row["xu_fp32"]),
        tensor_ops_per_clk_per_sm=lambda dtype, tc=float(row["tc_bf16"]): 2 * tc if "fp8" in dtype else tc,
    )


def pipeweave_features(row) -> dict:
    """The paper's FP8 GEMM columns for one pipeweave row (keys :data:`PIPEWEAVE_COLUMNS`)."""
    hw = hardware_from_row(row)
    ts = gemm.tasks({"m": row["M"], "n": row["N"], "k": row["K"], "batch": 1, "dtype": "fp8"}, hw)
    s = ts.summary(hw, "fp8")
    rate = hw.tensor_ops_per_clk_per_sm("fp8")
    f = float(row["sm_freq"]) * 1e6
    bw = float(row["mem_bandwidth"]) * 2**30
    l2 = float(row["l2_cache_bandwidth"]) * 2**30
    smem = float(row["shared_memory_bandwidth"])
    sms = hw.sm_count
    out = {
        "tensor_all_ops": s["tensor_all_ops"],
        "tensor_all_cycle": s["tensor_all_ops"] / (rate * sms),
        "tensor_sm_max_ops": s["sm_max_tensor_ops"],
        "tensor_sm_max_cycle": s["sm_max_tensor_ops"] / rate,
        "global_in_flight": s["dram_bytes"] / 1024,
        "global_cycle": s["dram_bytes"] / bw * f,
        "local_cycle": s["dram_bytes"] / l2 * f,
        "sm_max_in_flight": s["sm_max_load_bytes"] / 1024,
        "sm_max_global_cycle": s["sm_max_load_bytes"] * sms / bw * f,
        "sm_max_shared_cycle": s["sm_max_load_bytes"] / smem,
        "sm_max_local_cycle": s["sm_max_load_bytes"] * sms / l2 * f,
    }
    out["overall_perf"] = out["tensor_all_cycle"] / (float(row["avg_duration"]) * float(row["sm_freq"]))
    return out


def compare(df: pd.DataFrame, rel_tol: float = 0.01) -> pd.DataFrame:
    """Per column: rows compared and the share within ``rel_tol`` of the authors' values."""
    ours = pd.DataFrame([pipeweave_features(r) for _, r in df.iterrows()], index=df.index)
    rows = []
    for c in PIPEWEAVE_COLUMNS:
        rel = (ours[c] - df[c]).abs() / df[c].abs().clip(lower=1e-12)
        rows.append({"column": c, "rows": len(df), "share_within_tol": float((rel <= rel_tol).mean()),
                     "median_rel_err": float(rel.median())})
    return pd.DataFrame(rows)
