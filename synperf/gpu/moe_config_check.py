"""Measure suggested against default fused-MoE configs with our Triton kernel on the local GPU.

For a few shapes (one grouped GEMM each, ``moe_stage`` w13 or w2, bfloat16 on a GPU), runs the kernel of
:mod:`synperf.gpu.profiling.triton_kernels.fused_moe` with vLLM's default config and with the suggested one,
checks that both give the same output, and times each (CUDA events, median of ``reps`` calls after
``warmup`` calls, microseconds). Without a GPU (``TRITON_INTERPRET=1``) only the output check runs.

Usage on a GPU machine::

    python -m synperf.gpu.moe_config_check --gpu h200_sxm --shapes results/ceiling/moe_default_gaps.csv \
        --n 6 --out moe_config_check.csv

``--shapes`` is a table with the shape columns (``moe_stage``, ``num_tokens``, ``num_experts``, ``topk``,
``hidden_size``, ``inter_size``) and ``gap``: the ``n`` distinct shapes with the most negative gap are run;
the suggestion comes from :func:`synperf.model.moe_configs.suggest` (the vLLM grid ranked by the trained model
for ``--gpu``).
"""

from __future__ import annotations

import argparse
import statistics

import pandas as pd
import torch

from synperf.gpu.profiling.triton_kernels import fused_moe as fm
from synperf.model.moe_configs import CONFIG_KEYS, default_config

SHAPE = ["moe_stage", "num_tokens", "num_experts", "topk", "hidden_size", "inter_size"]


def _time_us(fn, reps: int, warmup: int) -> float | None:
    if not torch.cuda.is_available():
        return None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def run_pair(shape: dict, suggested: dict, *, dtype=None, device=None, reps: int = 50, warmup: int = 10,
             seed: int = 0) -> dict:
    """Run one shape's grouped GEMM with the default and the suggested config.

    Returns the shape, both configs, ``max_abs_diff`` between their outputs, and ``default_us``,
    ``suggested_us``, ``speedup`` (None without a GPU).

    Raises:
        ValueError: an illegal config (:func:`synperf.gpu.profiling.triton_kernels.fused_moe.check_config`) or
            an unknown ``moe_stage``.
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = dtype or (torch.bfloat16 if device == "cuda" else torch.float16)
    stage = str(shape["moe_stage"])
    if stage not in ("w13", "w2", "full"):
        raise ValueError(f"moe_stage={stage!r}: expected w13, w2 or full")
    t, e, k = int(shape["num_tokens"]), int(shape["num_experts"]), int(shape["topk"])
    h, inter = int(shape["hidden_size"]), int(shape["inter_size"])
    g = torch.Generator().manual_seed(seed)
    ids, w = fm.route(t, e, k, "random", g)
    x = torch.randn(t, h, generator=g).to(dtype).to(device)
    w13 = (torch.randn(e, 2 * inter, h, generator=g) / h ** 0.5).to(dtype).to(device)
    w2 = (torch.randn(e, h, inter, generator=g) / inter ** 0.5).to(dtype).to(device)
    act = torch.randn(t * k, inter, generator=g).to(dtype).to(device)
    ids, w = ids.to(device), w.to(device)
    outs, times = [], []
    for cfg in (default_config(t, e), suggested):
        ws = fm.MoEWorkspace(x, w13, w2, ids, w, cfg)
        if stage == "w2":
            ws.cache2.copy_(act)
        outs.append(fm.fused_moe(x, w13, w2, ws, stage).float().clone())
        times.append(_time_us(lambda ws=ws: fm.fused_moe(x, w13, w2, ws, stage), reps, warmup))
    res = {**{c: shape[c] for c in SHAPE}, "default": str(default_config(t, e)),
           "suggested": str({c: int(suggested[c]) for c in CONFIG_KEYS}),
           "max_abs_diff": float((outs[0] - outs[1]).abs().max()), "default_us": times[0], "suggested_us": times[1]}
    res["speedup"] = times[0] / times[1] if times[0] and times[1] else None
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", required=True, help="registry id of this GPU (config/gpus.yaml)")
    ap.add_argument("--shapes", required=True, help="CSV with the shape columns and gap")
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", default="moe_config_check.csv")
    args = ap.parse_args(argv)
    from synperf.model.moe_configs import grid_configs, suggest

    shapes = pd.read_csv(args.shapes)
    missing = [c for c in SHAPE + ["gap"] if c not in shapes.columns]
    if missing:
        raise SystemExit(f"{args.shapes}: missing columns {missing}")
    pick = shapes.sort_values("gap").drop_duplicates(SHAPE).head(args.n).reset_index(drop=True)
    rows = []
    for r in pick.to_dict("records"):
        cands = pd.concat([grid_configs(), pd.DataFrame([default_config(r["num_tokens"], r["num_experts"])])])
        best = suggest(pd.DataFrame([{c: r[c] for c in SHAPE[1:]}]), cands, args.gpu, stages=(r["moe_stage"],),
                       models_dir=args.models_dir)
        res = run_pair(r, best.iloc[0].to_dict(), reps=args.reps)
        res["predicted_us"] = float(best.iloc[0]["predicted_latency_us"])
        rows.append(res)
        print(res, flush=True)
    pd.DataFrame(rows).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
