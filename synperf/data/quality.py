"""Data-quality checks of the merged measurement table: duplicate spread, physical ceilings, siblings.

Three checks run in the merge step (:func:`synperf.pipeline.ingest.merge_measurements`), whatever the
GPU or the source:

* **Duplicate spread** (:func:`duplicate_spread`): rows with the same launch key (:data:`KEY_COLUMNS`) but
  measured more than once, by one source or by several sources / versions. Duplicates are not merged
  across sources or versions (:data:`synperf.data.schema.MERGE_KEY_COLUMNS`); a max/min latency ratio
  above ``duplicate_spread_ratio`` is reported per GPU and kernel.
* **Physical ceilings** (:func:`ceiling_violations`): a row whose achieved FLOP/s exceeds the GPU's dense
  peak for its dtype, or whose DRAM traffic rate exceeds the GPU's DRAM bandwidth, times a stated margin,
  is impossible and dropped (reason ``impossible_throughput:<kernel>:<gpu>`` or
  ``impossible_bandwidth:<kernel>:<gpu>``).
* **Siblings** (:func:`sibling_slowdowns`): where GPU A is at least as capable as GPU B on every spec that
  bounds the kernel, A's latencies for the same kernel label and shape must not be systematically slower
  than B's. A (GPU, kernel, dtype, source version) group whose median slowdown over enough shared shapes
  exceeds ``sibling_slowdown`` is reported and its rows dropped (reason ``sibling_slower:<kernel>:<gpu>``).

Work per row (FLOPs, DRAM bytes) comes from the analytical model, :func:`synperf.model.kernels.work`.
Hardware numbers are the datasheet values of ``config/gpus.yaml`` (measured files ignored: a ceiling is a
peak, not an achievable rate).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd

from synperf.data.io import InputError
from synperf.data.schema import KEY_COLUMNS

#: kernels whose arithmetic runs on the FP32 CUDA cores, not the Tensor Cores (as in feature set v1)
CUDA_CORE_KERNELS = frozenset({"rmsnorm", "silu_mul"})
#: kernels whose modelled ``dram_bytes`` is a lower bound on the DRAM traffic. Fused MoE is left out: its
#: weight bytes use the *expected* number of experts hit under uniform routing, which overestimates the
#: experts a skewed (power-law) routing touches.
BYTES_LOWER_BOUND_KERNELS = frozenset({"gemm", "gemm_fp8", "attention_prefill", "attention_decode", "rmsnorm",
                                       "silu_mul"})
SHAPE_COLUMNS = [c for c in KEY_COLUMNS if c != "gpu"]


@dataclass(frozen=True)
class QualitySettings:
    """Thresholds of the checks; config key ``ingest.quality`` (defaults documented in config/config.yaml).

    Attributes:
        duplicate_spread_ratio: max/min latency of one key above which its duplicates are reported (> 1).
        flops_margin: a row is impossible when achieved FLOP/s > ``flops_margin`` x peak (>= 1).
        dram_bw_margin: a row is impossible when (working set - L2 size) / latency > ``dram_bw_margin`` x DRAM
            bandwidth (>= 1).
        sibling_slowdown: median latency ratio (more capable GPU / less capable GPU) over shared shapes above
            which the more capable GPU's group is excluded (> 1).
        sibling_min_shapes: shared shapes needed before a sibling comparison counts (>= 1).
    """

    duplicate_spread_ratio: float = 2.0
    flops_margin: float = 1.10
    dram_bw_margin: float = 1.10
    sibling_slowdown: float = 1.5
    sibling_min_shapes: int = 100

    def __post_init__(self) -> None:
        for name, lo, strict in (("duplicate_spread_ratio", 1.0, True), ("flops_margin", 1.0, False),
                                 ("dram_bw_margin", 1.0, False), ("sibling_slowdown", 1.0, True),
                                 ("sibling_min_shapes", 1, False)):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < lo or (strict and v == lo):
                raise InputError(f"config key ingest.quality.{name}: {v!r}; expected a number "
                                 f"{'>' if strict else '>='} {lo}")

    @classmethod
    def from_dict(cls, cfg: dict | None) -> "QualitySettings":
        """Settings from the ``ingest.quality`` dict; unknown keys raise :class:`InputError`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg or {}) - known)
        if unknown:
            raise InputError(f"config key ingest.quality.{unknown[0]}: unknown; expected one of {sorted(known)}")
        return cls(**(cfg or {}))

    def as_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------------
# duplicate spread
# ------------------------------------------------------------------------------------------------

def duplicate_spread(df: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """Per GPU and kernel, the keys (:data:`KEY_COLUMNS`) measured more than once and how far apart they lie.

    Args:
        df: canonical rows before duplicates are reduced (``latency_us`` in µs).
        ratio: spread threshold, max/min latency of one key.

    Returns:
        One row per (gpu, kernel) that has a duplicate key: ``duplicate_keys`` (keys with > 1 row),
        ``cross_source_keys`` (keys measured by more than one (source, source_version)), ``spread_keys``
        (keys whose max/min latency > ``ratio``), ``cross_source_spread_keys`` (of those, measured by more
        than one source or version), ``max_ratio``, ``median_ratio`` (over duplicate keys), ``sources`` (the
        ``source@source_version`` labels behind the spread keys, ``;``-joined). Empty (same columns) when no
        key repeats.
    """
    cols = ["gpu", "kernel", "duplicate_keys", "cross_source_keys", "spread_keys", "cross_source_spread_keys",
            "max_ratio", "median_ratio", "sources"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    kid = df.groupby(list(KEY_COLUMNS), dropna=False, sort=False).ngroup()
    d = pd.DataFrame({"kid": kid.to_numpy(), "gpu": df["gpu"].to_numpy(), "kernel": df["kernel"].to_numpy(),
                      "lat": df["latency_us"].to_numpy(dtype="float64"),
                      "label": (df["source"].astype(str) + "@" + df["source_version"].astype(str)).to_numpy()})
    sizes = d.groupby("kid")["kid"].transform("size")
    d = d[sizes > 1]
    if d.empty:
        return pd.DataFrame(columns=cols)
    g = d.groupby("kid")
    per_key = pd.DataFrame({"gpu": g["gpu"].first(), "kernel": g["kernel"].first(),
                            "ratio": g["lat"].max() / g["lat"].min(), "labels": g["label"].nunique()})
    per_key["spread"] = per_key["ratio"] > ratio
    per_key["cross"] = per_key["labels"] > 1
    spread_labels = d[d["kid"].isin(per_key.index[per_key["spread"]])].groupby(["gpu", "kernel"])["label"].agg(
        lambda s: ";".join(sorted(set(s))))
    out = per_key.groupby(["gpu", "kernel"]).agg(
        duplicate_keys=("ratio", "size"), cross_source_keys=("cross", "sum"), spread_keys=("spread", "sum"),
        cross_source_spread_keys=("spread", lambda s: int((s & per_key.loc[s.index, "cross"]).sum())),
        max_ratio=("ratio", "max"), median_ratio=("ratio", "median"))
    out["sources"] = spread_labels.reindex(out.index).fillna("")
    return out.reset_index()[cols].astype({c: "int64" for c in cols[2:6]})


# ------------------------------------------------------------------------------------------------
# physical ceilings
# ------------------------------------------------------------------------------------------------

def peak_flops(spec, dtype: str, kernel: str) -> float:
    """Ceiling on the FLOP/s of one kernel family in one dtype on one GPU, FLOP/s.

    The larger of the datasheet dense peak (``config/gpus.yaml``, ``dense_<dtype>_tflops``; ``fp32_tflops``
    for the CUDA-core kernels RMSNorm and SiLU&Mul) and the architectural per-clock rate at the boost clock
    (:meth:`GPUSpec.tensor_ops_per_clk_per_sm` x SMs x boost clock, gpu_specs_SOURCES.md section 1;
    2 x FP32 lanes x SMs x boost clock for the CUDA cores): datasheets often quote tensor TFLOPS at a lower
    clock than the boost clock the part can run at.

    Raises:
        KeyError: the GPU has no peak for the dtype (e.g. fp8 on Ampere) or the dtype is unknown.
    """
    ds = spec.datasheet()
    if kernel in CUDA_CORE_KERNELS:
        return max(float(ds.fp32_tflops) * 1e12, 2.0 * ds.fp32_cores_per_sm * ds.sm_count * ds.clock_hz)
    return max(ds.peak_tflops(dtype) * 1e12, ds.tensor_ops_per_clk_per_sm(dtype) * ds.sm_count * ds.clock_hz)


def ceiling_violations(df: pd.DataFrame, registry, settings: QualitySettings) -> tuple[pd.Series, Counter, Counter]:
    """Rows whose latency is physically impossible on their GPU.

    A row fails when ``flops / latency > flops_margin x peak`` (:func:`peak_flops`), or, for the kernels of
    :data:`BYTES_LOWER_BOUND_KERNELS`, when ``(dram_bytes - L2 size) / latency > dram_bw_margin x DRAM
    bandwidth``: at most the L2 size of the working set can be served from L2, the rest must cross DRAM
    (datasheet ``dram_bw_gbps`` and ``l2_cache_mb``). ``flops`` and ``dram_bytes`` are the analytical
    model's (:func:`synperf.model.kernels.work`).

    Args:
        df: canonical rows (``latency_us`` in µs).
        registry: the GPU registry.
        settings: margins.

    Returns:
        ``(bad, dropped, unchecked)``: a boolean mask aligned with ``df``; counts of failing rows by reason
        (``impossible_throughput:<kernel>:<gpu>``, ``impossible_bandwidth:<kernel>:<gpu>``; a row failing both
        counts as throughput); counts of rows with no ceiling to check against, by
        ``no_peak:<kernel>:<gpu>:<dtype>`` (the registry has no peak for that dtype) or
        ``no_work_model:<kernel>:<dtype>`` (the work model does not know the dtype). Those rows are kept.
    """
    from synperf.model.kernels import WORK

    bad = pd.Series(False, index=df.index)
    dropped: Counter = Counter()
    unchecked: Counter = Counter()
    for (kernel, dtype), idx in df.groupby(["kernel", "dtype"], sort=True).groups.items():
        part = df.loc[idx]
        try:
            w = WORK[kernel](part)
        except KeyError:
            unchecked[f"no_work_model:{kernel}:{dtype}"] += len(part)
            continue
        lat_s = part["latency_us"].astype("float64") * 1e-6
        for gpu, gidx in part.groupby("gpu", sort=True).groups.items():
            spec = registry[gpu].datasheet()
            try:
                peak = peak_flops(spec, str(dtype), str(kernel))
            except KeyError:
                unchecked[f"no_peak:{kernel}:{gpu}:{dtype}"] += len(gidx)
                continue
            flops_bad = w.loc[gidx, "flops"] / lat_s.loc[gidx] > settings.flops_margin * peak
            bw_bad = pd.Series(False, index=gidx)
            if kernel in BYTES_LOWER_BOUND_KERNELS:
                beyond_l2 = (w.loc[gidx, "dram_bytes"] - spec.l2_cache_mb * 2**20).clip(lower=0.0)
                bw_bad = beyond_l2 / lat_s.loc[gidx] > settings.dram_bw_margin * spec.dram_bw_gbps * 1e9
            bw_bad &= ~flops_bad
            if flops_bad.any():
                dropped[f"impossible_throughput:{kernel}:{gpu}"] += int(flops_bad.sum())
            if bw_bad.any():
                dropped[f"impossible_bandwidth:{kernel}:{gpu}"] += int(bw_bad.sum())
            bad.loc[gidx] = (flops_bad | bw_bad).to_numpy()
    return bad, dropped, unchecked


# ------------------------------------------------------------------------------------------------
# siblings
# ------------------------------------------------------------------------------------------------

def dominates(a, b, dtype: str, kernel: str) -> bool:
    """True when GPU spec ``a`` is at least as capable as ``b`` on every spec that bounds the kernel:
    the compute peak for the dtype (:func:`peak_flops`), DRAM bandwidth, SM count and boost clock
    (datasheet values of ``config/gpus.yaml``). False when either GPU has no peak for the dtype."""
    a, b = a.datasheet(), b.datasheet()
    try:
        pa, pb = peak_flops(a, dtype, kernel), peak_flops(b, dtype, kernel)
    except KeyError:
        return False
    return (pa >= pb and a.dram_bw_gbps >= b.dram_bw_gbps and a.sm_count >= b.sm_count
            and a.boost_clock_mhz >= b.boost_clock_mhz)


SIBLING_COLUMNS = ["gpu", "kernel", "dtype", "source_version", "compared_gpu", "compared_source_version",
                   "shared_shapes", "median_ratio", "flagged"]


def sibling_slowdowns(df: pd.DataFrame, registry, settings: QualitySettings) -> pd.DataFrame:
    """Compare every GPU with each GPU it dominates (:func:`dominates`) over the shapes both measured.

    Shapes match on every key column but the GPU (:data:`KEY_COLUMNS`, so the implementation label and
    dtype match too); duplicates of one shape within a (GPU, source version) are compared through their
    median.

    Args:
        df: canonical rows (``latency_us`` in µs), duplicates already reduced.
        registry: the GPU registry.
        settings: ``sibling_slowdown`` and ``sibling_min_shapes``.

    Returns:
        One row per compared pair of (GPU, kernel, dtype, source version) groups with at least one shared
        shape (:data:`SIBLING_COLUMNS`): ``median_ratio`` = median over shared shapes of latency on ``gpu``
        / latency on ``compared_gpu`` (``gpu`` dominates ``compared_gpu``); ``flagged`` when
        ``shared_shapes >= sibling_min_shapes`` and ``median_ratio > sibling_slowdown``.
    """
    if df.empty:
        return pd.DataFrame(columns=SIBLING_COLUMNS)
    sid = df.groupby(SHAPE_COLUMNS, dropna=False, sort=False).ngroup()
    t = pd.DataFrame({"sid": sid.to_numpy(), "gpu": df["gpu"].to_numpy(), "kernel": df["kernel"].to_numpy(),
                      "dtype": df["dtype"].to_numpy(), "source_version": df["source_version"].to_numpy(),
                      "lat": df["latency_us"].to_numpy(dtype="float64")})
    t = t.groupby(["kernel", "dtype", "gpu", "source_version", "sid"], sort=False)["lat"].median().reset_index()
    out = []
    for (kernel, dtype), part in t.groupby(["kernel", "dtype"], sort=True):
        gpus = sorted(part["gpu"].unique())
        pairs = [(a, b) for a in gpus for b in gpus
                 if a != b and dominates(registry[a], registry[b], str(dtype), str(kernel))]
        for a, b in pairs:
            j = part[part["gpu"] == a].merge(part[part["gpu"] == b], on="sid", suffixes=("", "_b"))
            if j.empty:
                continue
            j["ratio"] = j["lat"] / j["lat_b"]
            agg = j.groupby(["source_version", "source_version_b"], sort=True)["ratio"].agg(["size", "median"])
            for (va, vb), r in agg.iterrows():
                out.append({"gpu": a, "kernel": kernel, "dtype": dtype, "source_version": va, "compared_gpu": b,
                            "compared_source_version": vb, "shared_shapes": int(r["size"]),
                            "median_ratio": float(r["median"])})
    res = pd.DataFrame(out, columns=SIBLING_COLUMNS[:-1])
    res["flagged"] = (res["shared_shapes"] >= settings.sibling_min_shapes) & (
        res["median_ratio"] > settings.sibling_slowdown)
    return res


def sibling_excluded(df: pd.DataFrame, comparisons: pd.DataFrame) -> tuple[pd.Series, Counter]:
    """Rows of the flagged (GPU, kernel, dtype, source version) groups of :func:`sibling_slowdowns`.

    Returns:
        ``(mask, dropped)``: a boolean mask aligned with ``df`` and counts by ``sibling_slower:<kernel>:<gpu>``.
    """
    groups = ["gpu", "kernel", "dtype", "source_version"]
    flagged = comparisons.loc[comparisons["flagged"].astype(bool), groups].drop_duplicates()
    if flagged.empty:
        return pd.Series(False, index=df.index), Counter()
    hit = df[groups].astype(str).merge(flagged.astype(str).assign(_hit=True), on=groups, how="left")["_hit"]
    mask = pd.Series(hit.fillna(False).to_numpy(dtype=bool), index=df.index)
    counts = df.loc[mask].groupby(["kernel", "gpu"]).size()
    return mask, Counter({f"sibling_slower:{k}:{g}": int(n) for (k, g), n in counts.items()})


def check_table(df: pd.DataFrame, registry, settings: QualitySettings) -> tuple[pd.DataFrame, dict]:
    """Run the ceiling and sibling checks on a reduced canonical table; return the kept rows and a summary.

    Returns:
        ``(kept, summary)`` with ``summary`` = ``{"dropped": {reason: rows}, "unchecked": {reason: rows},
        "sibling_comparisons": [records of sibling_slowdowns], "settings": {...}}``.
    """
    bad, dropped, unchecked = ceiling_violations(df, registry, settings)
    kept = df[~bad.to_numpy()]
    comps = sibling_slowdowns(kept, registry, settings)
    excl, sib = sibling_excluded(kept, comps)
    dropped.update(sib)
    kept = kept[~excl.to_numpy()].reset_index(drop=True)
    comps = comps.replace({np.nan: None})
    return kept, {"dropped": dict(sorted(dropped.items())), "unchecked": dict(sorted(unchecked.items())),
                  "sibling_comparisons": comps.to_dict(orient="records"), "settings": settings.as_dict()}
