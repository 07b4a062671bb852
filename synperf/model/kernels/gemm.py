"""GEMM (bf16/fp16/fp32 cuBLAS, FP8 scaled-mm): ``y[batch, m, n] = x[batch, m, k] @ W[batch, n, k]^T``."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: output tile used by the v1 parallelism proxy (a common cuBLAS/CUTLASS tile on SM80+)
V1_TILE_M = V1_TILE_N = 128


def work(df: pd.DataFrame) -> pd.DataFrame:
    """FLOPs = 2·batch·m·n·k; DRAM bytes = batch·(m·k + n·k)·in_bytes + batch·m·n·out_bytes.

    Output bytes: fp8 GEMMs write bf16 (2 B), the others write their input dtype.
    ``parallel_units`` = batch·ceil(m/128)·ceil(n/128) output tiles.
    """
    from synperf.model.kernels.dtypes import dtype_bytes

    m, n, k = (df[c].astype("float64") for c in ("m", "n", "k"))
    b = df["batch"].astype("float64").fillna(1.0)
    in_b = dtype_bytes(df["dtype"])
    out_b = in_b.where(in_b >= 2.0, 2.0)
    return pd.DataFrame({
        "flops": 2.0 * b * m * n * k,
        "dram_bytes": b * (m * k + n * k) * in_b + b * m * n * out_b,
        "xu_ops": 0.0,
        "parallel_units": b * np.ceil(m / V1_TILE_M) * np.ceil(n / V1_TILE_N),
    }, index=df.index)


# --------------------------------------------------------------------------------------------------
# Decomposition (analytical core). cuBLAS is closed source, so tile shapes are inferred:
#  * NeuSight FP32 rows name the launched kernel and its grid: the tile is read from the name with the
#    patterns of :data:`TILE_NAME_PATTERNS` (every naming scheme in the NeuSight data) and split-K from grid
#    CTAs / output tiles (NeuSight dataset, Kernel Name, Grid x/y/z). A name no pattern matches is refused
#    (ingest drops and counts it), never read as a default tile.
#  * bf16/fp16 on SM80/86/89: 128x128 output tiles (64x128 when m <= 64), the common cuBLAS/CUTLASS
#    ``*_128x128_*`` / ``*_64x128_*`` kernels; split-K when the output tiles fill fewer than all SMs and K is
#    long: split = min(SMs // tiles, K // 1024) (method.md: split-K for small M·N with large K).
#  * SM90/SM100: the same tile rule, 128x256 when m >= 4096 and n >= 4096 (wgmma 128x256 tiles), and
#    non-split-K launches are persistent (one CTA per SM pulls tiles; method.md, GEMM decomposition facts).
#  * FP8 scaled-mm: 128x128 tiles, one CTA per tile, no split-K, M and N padded to the tile (the SynPerf
#    authors' FP8 path, reproduced against their features in tests/test_oracle_fp8.py).
# --------------------------------------------------------------------------------------------------
from synperf.data.implementations import TILE_NAME_PATTERNS, parse_tile_name  # noqa: E402,F401
from synperf.data.io import InputError  # noqa: E402
from synperf.model.kernels.tasks import TaskSet, ceil_div, uniform_summary  # noqa: E402


def _unparsed_name_error(where: str, name) -> InputError:
    return InputError(f"{where}: kernel_name = {str(name)!r} matches no cuBLAS tile-name pattern "
                      f"({', '.join(p for p, _, _ in TILE_NAME_PATTERNS)}); its tile is unknown")
SPLITK_MIN_K_PER_SPLIT = 1024
MMA_TILE_K = 32  # k-depth of one pipeline stage (bf16), for shared-memory sizing
STAGES = 4


def _arch_major(spec) -> int:
    # a registry GPUSpec, or the pipeweave-compatible hardware row (no sm_generation property)
    return int(str(spec.compute_capability).split(".")[0])


def tile_config(m: int, n: int, k: int, dtype: str, spec, kernel_name: str | None = None,
                grid_ctas: int | None = None, batch: int = 1) -> dict:
    """Tile shape, split-K and scheduling of one GEMM launch (see the module comment for sources).

    Returns a dict with tile_m, tile_n, split_k, k_slice, tiles (output tiles incl. batch), persistent.

    Raises:
        InputError: ``kernel_name`` is given but matches none of :data:`TILE_NAME_PATTERNS`.
    """
    major = _arch_major(spec)
    if dtype in ("fp8", "fp8_block"):
        tm, tn, persistent, split = 128, 128, False, 1
    else:
        tm, tn = (64 if m <= 64 else 128), 128
        named = parse_tile_name(kernel_name) if kernel_name else None
        if kernel_name and named is None:
            raise _unparsed_name_error("gemm", kernel_name)
        if named:
            tm, tn = named
        elif major >= 9 and m >= 4096 and n >= 4096:
            tn = 256
        persistent = major >= 9 and dtype != "float32"
        split = 1
    tiles = batch * ceil_div(m, tm) * ceil_div(n, tn)
    if dtype not in ("fp8", "fp8_block"):
        if grid_ctas and grid_ctas > tiles and kernel_name:
            split = max(1, int(grid_ctas) // int(tiles))
        elif tiles < spec.sm_count and k >= 2 * SPLITK_MIN_K_PER_SPLIT:
            split = max(1, min(spec.sm_count // tiles, k // SPLITK_MIN_K_PER_SPLIT))
    if split > 1:
        persistent = False
    return {"tile_m": tm, "tile_n": tn, "split_k": split, "k_slice": ceil_div(k, split), "tiles": tiles,
            "persistent": persistent}


def tasks(row: dict, spec) -> TaskSet:
    """Explicit task set of one GEMM row (canonical parameter names) on ``spec``."""
    from synperf.model.kernels.dtypes import DTYPE_BYTES
    from synperf.model.schedule import ctas_per_sm

    m, n, k, b = int(row["m"]), int(row["n"]), int(row["k"]), int(row.get("batch") or 1)
    dtype = str(row["dtype"])
    cfg = tile_config(m, n, k, dtype, spec, row.get("kernel_name"), row.get("grid_ctas"), b)
    ib = DTYPE_BYTES[dtype]
    ob = 4.0 if cfg["split_k"] > 1 else max(ib, 2.0)
    tm, tn, ks = cfg["tile_m"], cfg["tile_n"], cfg["k_slice"]
    macs = tm * tn * ks
    fp32 = dtype == "float32"
    smem = STAGES * (tm + tn) * MMA_TILE_K * ib
    slots = ctas_per_sm(spec, 256, smem)
    return TaskSet(
        counts=np.array([cfg["tiles"] * cfg["split_k"]]),
        tensor_ops=np.array([0.0 if fp32 else 2.0 * macs]), fma_ops=np.array([float(macs) if fp32 else 0.0]),
        xu_ops=np.array([0.0]), load_bytes=np.array([(tm + tn) * ks * ib]),
        dram_bytes=b * (ceil_div(m, tm) * tm * k + ceil_div(n, tn) * tn * k) * ib,
        store_bytes=b * m * n * ob * cfg["split_k"], ctas_per_sm=slots,
        policy="persistent" if cfg["persistent"] else "hardware", dims=[cfg])


def decompose(df: pd.DataFrame, registry) -> pd.DataFrame:
    """Vectorised :func:`tasks` + scheduling summary for many GEMM rows (one task class per launch).

    Raises:
        InputError: a ``kernel_name`` matches none of :data:`TILE_NAME_PATTERNS` (the message names the row).
    """
    from synperf.model.kernels.dtypes import DTYPE_BYTES

    out = []
    for gpu, g in df.groupby("gpu", sort=False):
        spec = registry[gpu]
        major = _arch_major(spec)
        m, n, k = (g[c].astype("int64").to_numpy() for c in ("m", "n", "k"))
        b = g["batch"].fillna(1).astype("int64").to_numpy()
        dtype = g["dtype"].astype(str)
        fp8 = dtype.isin(["fp8", "fp8_block"]).to_numpy()
        fp32 = dtype.eq("float32").to_numpy()
        tm = np.where(fp8, 128, np.where(m <= 64, 64, 128))
        tn = np.where(~fp8 & (major >= 9) & (m >= 4096) & (n >= 4096), 256, 128)
        if "kernel_name" in g.columns and g["kernel_name"].notna().any():
            names = g["kernel_name"].astype("string")
            parsed = {nm: parse_tile_name(nm) for nm in names.dropna().unique()}
            bad = [nm for nm, t in parsed.items() if t is None]
            if bad:
                raise _unparsed_name_error(f"gemm row {names[names == bad[0]].index[0]} (GPU {gpu})", bad[0])
            has = names.notna().to_numpy() & ~fp8
            ptm = names.astype(object).map({nm: t[0] for nm, t in parsed.items()}).astype("float64").to_numpy()
            ptn = names.astype(object).map({nm: t[1] for nm, t in parsed.items()}).astype("float64").to_numpy()
            tm = np.where(has, ptm, tm).astype("int64")
            tn = np.where(has, ptn, tn).astype("int64")
        tiles = b * np.ceil(m / tm).astype("int64") * np.ceil(n / tn).astype("int64")
        auto = (~fp8) & (tiles < spec.sm_count) & (k >= 2 * SPLITK_MIN_K_PER_SPLIT)
        split = np.where(auto, np.maximum(1, np.minimum(spec.sm_count // np.maximum(tiles, 1),
                                                        k // SPLITK_MIN_K_PER_SPLIT)), 1)
        if "grid_ctas" in g.columns:
            grid = g["grid_ctas"].astype("float64").to_numpy()
            named_split = (~fp8) & ~np.isnan(grid) & (grid > tiles) & g["kernel_name"].notna().to_numpy()
            per_grid = grid // tiles
            split = np.where(named_split, np.maximum(1, np.where(np.isnan(per_grid), 1, per_grid)), split)
        split = split.astype("int64")
        ks = np.ceil(k / split)
        ib = dtype.map(DTYPE_BYTES).astype("float64").to_numpy()
        ob = np.where(split > 1, 4.0, np.maximum(ib, 2.0))
        macs = tm * tn * ks
        persistent = (~fp8) & (~fp32) & (major >= 9) & (split == 1)
        smem = STAGES * (tm + tn) * MMA_TILE_K * ib
        slots = np.minimum(spec.max_ctas_per_sm, np.maximum(1, (spec.smem_per_sm_kb * 1024 // smem)))
        slots = np.minimum(slots, spec.max_warps_per_sm // 8)

        def series(v):
            return pd.Series(v, index=g.index)

        per_task = {"tensor_ops": series(np.where(fp32, 0.0, 2.0 * macs)),
                    "fma_ops": series(np.where(fp32, macs, 0.0).astype("float64")), "xu_ops": 0.0,
                    "load_bytes": series((tm + tn) * ks * ib)}
        dram = b * (np.ceil(m / tm) * tm * k + np.ceil(n / tn) * tn * k) * ib
        s = uniform_summary(series(tiles * split), series(float(spec.sm_count)), per_task, series(dram),
                            series(b * m * n * ob * split), series(slots), series(persistent))
        s["tile_m"], s["tile_n"], s["split_k"] = tm.astype("float64"), tn.astype("float64"), split.astype("float64")
        out.append(s)
    return pd.concat(out).loc[df.index]
