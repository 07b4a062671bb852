#!/usr/bin/env python3
"""Device smoke test: a reduced sweep of every kernel family on one GPU, in under 8 minutes.

    python3 tools/device_smoke.py --out OUT [--kernels gemm rmsnorm ...] [--budget-s 420]

Needs torch with CUDA; FlashInfer, Triton and nvidia-ml-py are used when installed (without Triton the
RMSNorm/SiLU&Mul points fall back to FlashInfer or are skipped, fused MoE is skipped; without FlashInfer
attention runs on torch SDPA). Steps:

1. the hardware characterization hook, if this checkout has one (``synperf.gpu.characterize.characterize(out_dir)``,
   writing under ``OUT/hardware/``); skipped when absent;
2. the GPU's registry id (torch device 0 -> UUID -> NVML name -> ``config/gpus.yaml``); a GPU missing from
   the registry still runs, under a slug id, with a warning;
3. for every kernel: the ``smoke:`` grid of ``config/sweeps/<kernel>.yaml`` with short timing (5 ms warm-up,
   20 ms budget, at least 5 repetitions), run and merged by the same code as the Snakemake rules into
   ``OUT/<gpu>/<kernel>.parquet`` (canonical schema) and ``OUT/<gpu>/<kernel>.provenance.json``. Kernels that
   need FlashInfer JIT compilation run last; no new point starts after ``--budget-s`` seconds;
4. a summary table: rows, skipped points and reasons, implementations, latency range, clocks.

Copy ``OUT/<gpu>/*.parquet`` (and the ``.provenance.json`` sidecars) to ``data/measurements/<gpu>/`` to use
them. Exit status 0 when every kernel the GPU supports produced rows.

``--device cpu`` runs the same code on the CPU (host-clock timing, Triton interpreted): a check that the
script works, not a measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from synperf.gpu.profiling import PROFILED_KERNELS, ProfilingError, supports_kernel  # noqa: E402
from synperf.gpu.profiling.grids import load_grid, sweep_path  # noqa: E402
from synperf.gpu.profiling.timing import TimingSettings  # noqa: E402

#: order of the smoke run: FlashInfer-JIT-heavy kernels last, so a slow first compile cannot starve the rest
SMOKE_ORDER = ("gemm", "gemm_fp8", "fused_moe", "rmsnorm", "silu_mul", "attention_decode", "attention_prefill")
SMOKE_TIMING = {"warmup_ms": 5.0, "budget_ms": 20.0, "min_reps": 5, "max_reps": 200}


def run_characterization(out: Path, registry_path: str) -> str:
    """Run ``synperf.gpu.characterize.characterize(out / "hardware", registry_path=...)`` if that module exists."""
    try:
        import synperf.gpu.characterize as ch  # noqa: F401
    except ModuleNotFoundError:
        return "skipped (synperf.gpu.characterize is not in this checkout)"
    fn = getattr(ch, "characterize", None)
    if fn is None:
        return "skipped (synperf.gpu.characterize has no characterize(out_dir))"
    t0 = time.monotonic()
    try:
        fn(out / "hardware", registry_path=registry_path)
    except Exception as exc:  # the smoke sweep goes on without it
        traceback.print_exc()
        return f"failed after {time.monotonic() - t0:.0f} s: {type(exc).__name__}: {exc}"
    return f"done in {time.monotonic() - t0:.0f} s -> {out / 'hardware'}"


def run_smoke(out: Path, kernels: list[str], *, device: str = "cuda", budget_s: float = 420.0,
              registry_path: str = "config/gpus.yaml", use_flashinfer: bool = True,
              points: dict[str, list[dict]] | None = None, timing: dict | None = None) -> tuple[dict, list[dict]]:
    """Run the reduced sweeps; return (GPU facts, one summary dict per kernel).

    Args:
        out: output folder; files go to ``out/<gpu>/``.
        kernels: kernels to run (in :data:`SMOKE_ORDER`).
        device: ``cuda`` or ``cpu``.
        budget_s: no point starts after this many seconds from the start.
        points: per-kernel point lists replacing the smoke grids (tests).
        timing: timing keys replacing :data:`SMOKE_TIMING`.
    """
    import torch

    from synperf.data.hardware import load_registry
    from synperf.gpu.profiling.lock import gpu_lock
    from synperf.gpu.profiling.nvml import local_gpu
    from synperf.gpu.profiling.provenance import environment
    from synperf.gpu.profiling.runner import make_context, sweep_kernel, timer_for

    start = time.monotonic()
    deadline = start + budget_s
    registry = load_registry(registry_path)
    identity = None
    if device == "cuda":
        identity = local_gpu(registry, allow_unknown=True)
        gpu = identity.gpu_id
        torch.cuda.set_device(0)
    else:
        gpu = "cpu"
    ctx = make_context(device if device == "cpu" else "cuda:0", use_flashinfer=use_flashinfer)
    fi_version = getattr(ctx.flashinfer, "__version__", "unknown") if ctx.flashinfer is not None else None
    env = environment(identity, ctx, fi_version)
    facts = {"gpu": gpu, "name": identity.name if identity else "cpu", "uuid": identity.uuid if identity else None,
             "driver": env.get("driver_version"), "torch": env["torch"], "cuda": env["cuda_runtime"],
             "triton": env["triton"], "flashinfer": fi_version or ctx.flashinfer_error,
             "nvml": "yes" if identity is not None and identity.nvml is not None else "no",
             "state": identity.snapshot() if identity else {}}
    summary = []
    ordered = [k for k in SMOKE_ORDER if k in kernels]
    lock = gpu_lock(identity.uuid, timeout_s=120) if identity is not None else contextlib.nullcontext()
    with lock:
        for kernel in ordered:
            t0 = time.monotonic()
            row = {"kernel": kernel, "rows": 0, "skipped": 0, "not_run": 0, "implementations": "", "timing": "",
                   "latency_us": "", "throttled": 0, "seconds": 0.0, "note": ""}
            summary.append(row)
            ok, why = supports_kernel(kernel, ctx.capability) if ctx.is_cuda else (True, "")
            if not ok:
                row["note"] = f"unsupported here: {why}"
                continue
            try:
                grid = load_grid(sweep_path(kernel), smoke=True)
                pts = (points or {}).get(kernel, grid.points)
                settings = TimingSettings.from_dict(grid.timing, SMOKE_TIMING, timing)
                stats, df = sweep_kernel(kernel, pts, out / gpu / f"{kernel}.parquet", gpu=gpu, ctx=ctx,
                                         timer=timer_for(ctx, settings), timing=settings, identity=identity,
                                         meta={**env, "smoke": True},
                                         gpu_ids=registry.ids if gpu in registry.ids else None, deadline=deadline)
                row.update(rows=len(df), skipped=stats.skipped, not_run=stats.not_run,
                           implementations=",".join(sorted(df["implementation"].unique())),
                           latency_us=f"{df['latency_us'].min():.1f}..{df['latency_us'].max():.1f}")
                row.update(_provenance_summary(out / gpu / f"{kernel}.provenance.json"))
            except Exception as exc:  # report and go on with the next kernel
                row["note"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                logging.getLogger("synperf.gpu.profiling").error("%s failed: %s", kernel, exc)
            row["seconds"] = round(time.monotonic() - t0, 1)
            ctx.cache.clear()
            if ctx.is_cuda:
                torch.cuda.empty_cache()
    facts["state_after"] = identity.snapshot() if identity else {}
    facts["seconds"] = round(time.monotonic() - start, 1)
    return facts, summary


def _provenance_summary(path: Path) -> dict:
    import json

    prov = json.loads(path.read_text())
    methods = Counter(p.get("timing_method") for p in prov.get("points", []))
    reasons = Counter(s.get("category") for s in prov.get("skipped", []))
    first = next((s.get("reason") for s in prov.get("skipped", [])), "")
    return {"timing": ",".join(f"{m}:{n}" for m, n in methods.items()),
            "throttled": sum(1 for p in prov.get("points", []) if p.get("throttled")),
            "note": (f"skips {dict(reasons)}; first: {first[:160]}" if reasons else "")}


def format_summary(facts: dict, summary: list[dict]) -> str:
    """The table printed at the end (plain text, one line per kernel)."""
    st, sa = facts.get("state") or {}, facts.get("state_after") or {}
    lines = [
        f"GPU {facts['gpu']} ({facts['name']}, {facts['uuid']}); driver {facts['driver']}; torch {facts['torch']}, "
        f"CUDA {facts['cuda']}, triton {facts['triton']}, flashinfer {facts['flashinfer']}; NVML {facts['nvml']}",
        f"SM clock {st.get('sm_clock_mhz')} -> {sa.get('sm_clock_mhz')} MHz, temperature {st.get('temperature_c')} -> "
        f"{sa.get('temperature_c')} C, power {st.get('power_w')} -> {sa.get('power_w')} W; total {facts['seconds']} s",
        "",
    ]
    cols = ["kernel", "rows", "skipped", "not_run", "implementations", "timing", "latency_us", "throttled", "seconds"]
    table = [cols] + [[str(r[c]) for c in cols] for r in summary]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    for i, row in enumerate(table):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = [f"  {r['kernel']}: {r['note']}" for r in summary if r["note"]]
    if notes:
        lines += ["", "notes:"] + notes
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="output folder (files go to OUT/<gpu>/)")
    ap.add_argument("--kernels", nargs="+", default=list(PROFILED_KERNELS), choices=PROFILED_KERNELS)
    ap.add_argument("--budget-s", type=float, default=420.0, help="no point starts after this (default 420 s)")
    ap.add_argument("--registry", default="config/gpus.yaml", help="GPU registry (default: %(default)s)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--no-flashinfer", action="store_true", help="do not use FlashInfer even if installed")
    ap.add_argument("--skip-characterization", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.device == "cuda":
        from synperf.gpu.profiling.nvml import require_cuda

        try:
            require_cuda()
        except ProfilingError as exc:
            print(exc, file=sys.stderr)
            return 2
    if not args.skip_characterization and args.device == "cuda":
        print(f"characterization: {run_characterization(args.out, args.registry)}", flush=True)
    facts, summary = run_smoke(args.out, args.kernels, device=args.device, budget_s=args.budget_s,
                               registry_path=args.registry, use_flashinfer=not args.no_flashinfer)
    text = format_summary(facts, summary)
    print("\n" + text, flush=True)
    (args.out / "smoke_summary.txt").write_text(text + "\n")
    failed = [r["kernel"] for r in summary if r["rows"] == 0 and not r["note"].startswith("unsupported here")]
    if failed:
        print(f"\nno rows for: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
