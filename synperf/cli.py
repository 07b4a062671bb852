"""``synperf`` command line: ``synperf e2e`` (predicted end-to-end latency of serving a trace),
``synperf suggest-moe-config`` (a vLLM fused-MoE config file from predicted latencies) and ``synperf gpus``
(the GPU registry and which GPUs have measurements), ``synperf plan`` (one workload priced on many GPUs and
TP/PP splits, sorted by predicted total latency) and ``synperf predict`` (kernel launch latencies as CSV).

Example::

    synperf e2e --model config/Qwen3-32B.json --trace arxiv_12.csv --gpu h200_sxm --tp 2

prints the prefill latency, the median decode step and the total (seconds), and each kernel family's share of
the time. Every subcommand exits with status 2 and a one-line message on bad input (unknown GPU, unmodelled
architecture, no trained model, ...).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from pathlib import Path

import pandas as pd

from synperf.api import (
    DEFAULT_PREDICTOR,
    DEPLOY_DIR,
    MODEL_SETS,
    PREDICTORS,
    configured_experiments,
    default_paths,
    predict,
    progress_reporter,
)
from synperf.data.hardware import load_registry
from synperf.data.io import InputError, read_user_csv, write_text
from synperf.e2e._deps import default_registry
from synperf.e2e.collectives import CollectiveModel
from synperf.e2e.compose import COLLECTIVES, Overhead, attention_path, compose_trace
from synperf.e2e.workload import GROUP_ITERATIONS, POLICIES, Request, check_context, read_trace, run_requests

_REPO = Path(__file__).resolve().parents[1]
#: the shipped example model configs ``synperf plan --model NAME`` reads (public Hugging Face ``config.json`` fields)
EXAMPLE_MODELS = _REPO / "examples" / "models"
#: ``--model`` of ``e2e`` and ``plan``
MODEL_HELP = ("Hugging Face config.json, or an example name (examples/models/: "
              + ", ".join(sorted(f.stem for f in EXAMPLE_MODELS.glob("*.json"))) + ")")
#: the note printed when no --overhead file is given
NO_OVERHEAD = ("(no framework overhead and no composition error: --overhead FILE, e.g. results/e2e/overhead.json, "
               "adds a_s + b_s * batch per iteration and widens the intervals by the error measured on real runs)")

#: the largest --concurrency, --batch, --max-num-batched-tokens and --max-num-seqs taken: far above any server's
#: (vLLM's default max_num_seqs is 1024), and small enough that the simulated trace fits in memory
MAX_COUNT = 1_000_000

DEFAULT_COLLECTIVES = ("resources/public-data/pipeweave/dataset/collective",
                       "../shared/public-data/pipeweave/dataset/collective")


def composition_note(overhead: Overhead, kernel: bool = True) -> str:
    """How the intervals were made: kernel errors (``kernel``: the predictor gave launch intervals), the overhead
    file's composition error, or both."""
    parts = ["kernel errors fully correlated within a family, independent across families"] if kernel else []
    if overhead.has_composition:
        c = ", ".join(f"{m} {overhead.composition_of(m):.3f}" for m in ("prefill", "decode_step", "total"))
        parts.append(f"the composition error measured on real runs (log half-width {c}; docs/e2e.md)")
    return ", plus ".join(parts) or "none"


def read_config(config_path: str | Path, holding: str) -> dict:
    """The pipeline config at ``config_path`` as a mapping ({} when the file is empty).

    Raises:
        InputError: the file is missing, not YAML, not a mapping, or its ``experiments`` not a mapping (the message
            names ``--config``, the file and ``holding``, what the command reads from it).
    """
    import yaml

    p = Path(config_path)
    if not p.is_file():
        raise InputError(f"--config {p}: not a file; pass the pipeline config holding {holding}")
    try:
        cfg = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"--config {p}: not YAML ({str(exc).splitlines()[0]})") from None
    exps = cfg.get("experiments") or {} if isinstance(cfg, dict) else {}
    if not isinstance(cfg, dict) or not isinstance(exps, dict) or not all(isinstance(e, dict) for e in exps.values()):
        what = "the file" if not isinstance(cfg, dict) else "its experiments (and each entry)"
        raise InputError(f"--config {p}: {what} must be a YAML mapping (the pipeline config holding {holding})")
    return cfg


def collective_gpu_map(config_path: str | Path) -> dict | None:
    """``e2e.collective_gpu_map`` of the pipeline config at ``config_path`` (None when the key is missing).

    Raises:
        InputError: the file is missing or not YAML.
    """
    return (read_config(config_path, "e2e.collective_gpu_map").get("e2e") or {}).get("collective_gpu_map")


def _collectives(arg: str | None, registry, config_path: str | Path | None) -> CollectiveModel | None:
    """The collective model of ``arg`` (or the default public-data folders), its GPU folders mapped by the config at
    ``config_path`` (None: :func:`synperf.api.default_paths`'s); None when no folder is found and ``arg`` is None."""
    cands = [Path(arg)] if arg else [Path(p) if Path(p).is_absolute() else _REPO / p for p in DEFAULT_COLLECTIVES]
    for c in cands:
        if c.is_dir():
            return CollectiveModel.from_dir(c, registry, collective_gpu_map(config_path or default_paths()["config"]))
    if arg:
        raise InputError(f"--collectives {arg}: not a folder")
    return None


def _model(arg: str):
    """``--model`` (:func:`synperf.e2e.plan.resolve_model`), its dtypes checked against the configured experiments;
    a note on stderr where it is priced in another dtype than its config names (:func:`synperf.e2e.plan.dtype_note`)."""
    from synperf.e2e import plan as planmod

    model = planmod.resolve_model(arg, EXAMPLE_MODELS, configured_experiments())
    note = planmod.dtype_note(model)
    if note:
        print(note, file=sys.stderr)
    return model


def e2e(args: argparse.Namespace) -> int:
    registry = load_registry(args.registry) if args.registry else default_registry()
    spec = registry[args.gpu]
    model = _model(args.model)
    reqs = read_trace(args.trace)
    check_context(model, reqs, args.trace, args.policy)
    for flag, v in (("--batch", args.batch), ("--group-iterations", args.group_iterations)):
        if v is not None and v < 1:
            raise InputError(f"{flag} {v}: expected an integer >= 1")
    from synperf.e2e.plan import check_fits

    check_fits(model, run_requests(reqs, args.policy), args.gpu, args.tp, args.pp,
               args.batch if args.policy != "merged" else None, registry)
    coll = _collectives(args.collectives, registry, args.config) if (args.tp > 1 or args.pp > 1) else None
    if (args.tp > 1 or args.pp > 1) and coll is None:
        raise InputError("TP/PP > 1 needs the collective tables: pass --collectives "
                         "PUBLIC_DATA/pipeweave/dataset/collective")
    overhead = Overhead.from_json(args.overhead) if args.overhead else Overhead()
    kw = _predict_kwargs(args)
    extra = {"predict_fn": functools.partial(predict, **kw)} if kw else {}
    res = compose_trace(model, reqs, args.gpu, tp=args.tp, pp=args.pp, max_batch=args.batch, policy=args.policy,
                        prefill_impl=attention_path(args.gpu, registry), group_iterations=args.group_iterations,
                        models_dir=args.models_dir, registry=registry, collectives=coll, overhead=overhead,
                        progress=progress_reporter("pricing iterations (two passes)", "iterations", min_total=400),
                        **extra)
    iv = res.intervals()
    batch = args.batch or len(reqs)
    print(f"{model.name} on {args.tp * args.pp} x {spec.name} ({args.gpu}), tp={args.tp} pp={args.pp}, "
          f"{len(reqs)} requests, batch {batch}, {len(res.iterations)} iterations")
    def bounds(lo, hi, scale, fmt):
        return "" if pd.isna(lo) else f"   80% interval [{lo * scale:{fmt}}, {hi * scale:{fmt}}]"

    print(f"prefill latency      {res.prefill_s:10.4f} s" + bounds(iv["prefill_low_s"], iv["prefill_high_s"], 1,
                                                                     ".4f"))
    print(f"median decode step   {res.decode_step_s * 1e3:10.3f} ms"
          + bounds(iv["decode_step_low_s"], iv["decode_step_high_s"], 1e3, ".3f") if not pd.isna(res.decode_step_s)
          else "median decode step            - (no decode step: every request has one output token)")
    print(f"total latency        {res.total_s:10.4f} s" + bounds(iv["total_low_s"], iv["total_high_s"], 1, ".4f"))
    if not pd.isna(iv["total_low_s"]):
        print(f"(intervals: {composition_note(overhead, res.deltas is not None)}; docs/e2e.md)")
    if not args.overhead:
        print(NO_OVERHEAD)
    else:
        print(f"(framework overhead from {args.overhead}: a = {overhead.a_s * 1e3:.3f} ms, "
              f"b = {overhead.b_s * 1e3:.3f} ms per sequence, per iteration)")
    print("share of time per family:")
    for fam, share in res.family_shares().items():
        print(f"  {fam:20s} {share * 100:6.1f} %")
    print("models used (model set, trained on this GPU or unseen):")
    for r in res.models.itertuples(index=False):
        flag = "" if r.family in COLLECTIVES else {True: "trained", False: "unseen"}.get(r.training_gpu, "unknown")
        print(f"  {r.family:20s} {model_set_of(r.model):10s} {flag:8s} {r.model}" + (f"  [{r.path}]" if r.path else ""))
    return 0


def model_set_of(model_dir: str) -> str:
    """``deploy`` for a model folder under a ``deploy/`` folder (:data:`synperf.api.DEPLOY_DIR`), ``evaluation``
    for another model folder, empty for a collective model's description."""
    p = Path(model_dir)
    if not p.is_absolute() and not p.exists():
        return ""
    return "deploy" if DEPLOY_DIR in p.parts else "evaluation"


def check_output_path(path: str, flag: str) -> None:
    """Refuse an output file path whose folder does not exist or that is a folder.

    Raises:
        InputError: naming ``flag`` and the path.
    """
    p = Path(path)
    if p.is_dir() or not p.resolve().parent.is_dir():
        raise InputError(f"{flag} {path}: " + ("a folder, not a file" if p.is_dir() else f"no such folder {p.parent}"))


def check_figure_path(path: str, flag: str) -> None:
    """Refuse a figure path as :func:`check_output_path` does, or whose suffix matplotlib cannot write.

    Raises:
        InputError: naming ``flag`` and the path.
    """
    from matplotlib.figure import Figure

    check_output_path(path, flag)
    p = Path(path)
    formats = Figure().canvas.get_supported_filetypes()
    if p.suffix.lstrip(".").lower() not in formats:
        raise InputError(f"{flag} {path}: expected a figure file ending in one of "
                         f"{', '.join('.' + f for f in sorted(formats))}")


def _int_list(arg: str, flag: str) -> list[int]:
    """``"1,2,4"`` as ``[1, 2, 4]``.

    Raises:
        InputError: an item that is not an integer, or no item (the message names ``flag``).
    """
    try:
        vals = list(dict.fromkeys(int(x) for x in arg.split(",") if x.strip()))   # each once, in the given order
    except ValueError:
        raise InputError(f"{flag} {arg}: expected a comma list of integers, e.g. 1,2,4") from None
    if not vals:
        raise InputError(f"{flag} {arg!r}: expected a comma list of integers, e.g. 1,2,4")
    return vals


def plan_cmd(args: argparse.Namespace) -> int:
    """``synperf plan``: :func:`synperf.e2e.plan.plan` of ``--model`` and the workload (``--trace``, or ``--batch``
    requests of ``--isl`` prompt and ``--osl`` output tokens) on ``--gpus`` x ``--tp`` x ``--pp``."""
    from synperf.e2e import plan as planmod

    registry = load_registry(args.registry) if args.registry else default_registry()
    model = _model(args.model)
    server = (("--max-num-batched-tokens", args.max_num_batched_tokens), ("--max-num-seqs", args.max_num_seqs))
    for flag, v in (("--concurrency", args.concurrency), ("--batch", args.batch), ("--isl", args.isl),
                    ("--osl", args.osl), *server):
        if v is not None and not 1 <= v <= MAX_COUNT:
            raise InputError(f"{flag} {v}: expected an integer from 1 to {MAX_COUNT:,}")
    for flag, v in (("--serving-error", args.serving_error), ("--kv-cache-dtype", args.kv_cache_dtype), *server):
        if v is not None and not args.concurrency:
            raise InputError(f"{flag} sets the vLLM server that --concurrency simulates: pass --concurrency")
    if args.trace:
        if args.isl or args.osl:
            raise InputError("--trace and --isl/--osl: pass one workload")
        if args.concurrency:
            raise InputError("--concurrency needs --isl and --osl (not --trace)")
        reqs, max_batch = read_trace(args.trace), args.batch
    else:
        if args.batch is None and args.concurrency:   # the static batch of a server's concurrency
            args.batch = args.concurrency
        if not (args.isl and args.osl and args.batch):
            raise InputError("pass --trace FILE.csv, or --isl, --osl and --batch (--batch defaults to "
                             "--concurrency)")
        reqs, max_batch = [Request(args.isl, args.osl)] * args.batch, args.batch
    check_context(model, reqs, args.trace or "--isl + --osl", args.policy)
    gpus = (list(registry.gpus) if args.gpus == "all"
            else list(dict.fromkeys(g.strip() for g in args.gpus.split(",") if g.strip())))
    if not gpus:
        raise InputError(f"--gpus {args.gpus!r}: expected a comma list of registry ids, or 'all'")
    if args.plot:
        check_figure_path(args.plot, "--plot")
    tps, pps = _int_list(args.tp, "--tp"), _int_list(args.pp, "--pp")
    for g in gpus:
        registry[g]
    prices = planmod.parse_prices(args.price, registry)
    if set(prices) - set(gpus):
        raise InputError(f"--price {', '.join(sorted(set(prices) - set(gpus)))}: not among --gpus")
    if args.sort == "cost" and not prices:
        raise InputError("--sort cost: pass --price GPU=USD_PER_HOUR")
    if args.sort in ("ttft", "tpot") and not args.concurrency:
        raise InputError(f"--sort {args.sort}: pass --concurrency (TTFT/TPOT of a server)")
    needs_comm = max(tps) > 1 or max(pps) > 1
    coll = _collectives(args.collectives, registry, args.config) if needs_comm else None
    overhead = Overhead.from_json(args.overhead) if args.overhead else Overhead()
    if args.serving_error:
        from synperf.serving.error import read_serving_error

        serving_error = read_serving_error(args.serving_error)
    else:
        serving_error = None
    kw = _predict_kwargs(args)
    fn = functools.partial(lambda *a, **k: planmod.predict(*a, **k), **kw) if kw else None
    df = planmod.plan(model, reqs, gpus, tps, pps, registry=registry, max_batch=max_batch, policy=args.policy,
                      collectives=coll, overhead=overhead, models_dir=args.models_dir, prices=prices,
                      predict_fn=fn, gpu_memory_utilization=args.gpu_memory_utilization,
                      progress=progress_reporter("pricing configurations", "configurations", min_total=6))
    if args.concurrency:   # TTFT/TPOT of a vLLM server at this concurrency (synperf.serving, docs/serving.md)
        from synperf.serving.simulate import plan_serving

        # the plan's own predictor, so the static batch and the server are priced alike
        df = plan_serving(df, model, args.isl, args.osl, args.concurrency, registry=registry, collectives=coll,
                          models_dir=args.models_dir, overhead=overhead,
                          predict_fn=fn or (lambda *a, **k: planmod.predict(*a, **k)), serving_error=serving_error,
                          kv_cache_dtype=args.kv_cache_dtype, max_num_batched_tokens=args.max_num_batched_tokens,
                          max_num_seqs=args.max_num_seqs)
    df = planmod.sort_plan(df, args.sort)
    if args.format == "csv":
        sys.stdout.write(df.to_csv(index=False))
    elif args.format == "json":
        print(df.to_json(orient="records", indent=1))
    else:
        print(f"{model.name}: {len(reqs)} requests, batch {max_batch or len(reqs)}, "
              f"{sum(r.prompt_tokens for r in reqs)} prompt and {sum(r.output_tokens for r in reqs)} output tokens"
              + ("" if args.overhead else f" {NO_OVERHEAD}"))
        print(planmod.format_table(df))
        sets = sorted({s for v in df["model_set"].dropna() for s in str(v).split("+")})
        print(f"model set: {', '.join(sets) or '-'} (deploy: trained on every measured GPU; evaluation: "
              f"trained on the seen GPUs only); intervals: 80%, {composition_note(overhead)}; "
              f"memory: need / {args.gpu_memory_utilization:g} x GPU memory")
        if args.concurrency:
            from synperf.serving.simulate import serving_lines

            print("\n".join(serving_lines(df, args.concurrency, args.serving_error)))
    if args.plot and (df["status"] == "ok").any():
        planmod.plot(df, args.plot, title=model.name)
    elif args.plot:   # an empty chart would look like a result
        print(f"synperf plan: no configuration fits, so no chart is written to {args.plot}", file=sys.stderr)
    return 0


def _param_value(v: str):
    """A ``--param`` value as int, else float, else the string."""
    for t in (int, float):
        try:
            return t(v)
        except ValueError:
            pass
    return v


def predict_cmd(args: argparse.Namespace) -> int:
    """``synperf predict``: :func:`synperf.api.predict` of ``--param key=value`` (one launch) or ``--launches``
    (a CSV, one launch per row) on ``--gpu``, written as CSV to ``--out`` (else stdout); ``--measured`` (a CSV of
    measured launches, ``gpu`` defaulting to ``--gpu``) refits the GPU's fingerprint first."""
    from synperf.api import predict

    if bool(args.param) == bool(args.launches):
        raise InputError("pass either --param key=value (repeatable) or --launches FILE.csv")
    if args.out:
        check_output_path(args.out, "--out")
    if args.launches:
        params = read_user_csv(args.launches, f"--launches {args.launches}")
        if params.empty:
            raise InputError(f"--launches {args.launches}: no rows")
    else:
        params = {}
        for it in args.param:
            key, sep, val = it.partition("=")
            if not sep or not key.strip():
                raise InputError(f"--param {it}: expected key=value, e.g. m=4096")
            if key.strip() in params:
                raise InputError(f"--param {it}: {key.strip()} given twice")
            params[key.strip()] = _param_value(val.strip())
    registry = load_registry(args.registry) if args.registry else None
    measured = None
    if args.measured:
        measured = read_user_csv(args.measured, f"--measured {args.measured}")
        if "gpu" not in measured.columns:
            measured = measured.assign(gpu=args.gpu)
    try:
        out = predict(args.kernel, params, args.gpu, models_dir=args.models_dir, registry=registry,
                      measured=measured, **_predict_kwargs(args))
    except InputError as e:   # name the file and the line a row came from (row 0 is the CSV's line 2)
        msg = str(e)
        for flag, path, where in (("--launches", args.launches, "params"), ("--measured", args.measured, "measured")):
            if path and msg.startswith(where):
                msg = re.sub(rf"^{where}:? row (\d+)", lambda m: f"line {int(m.group(1)) + 2}", msg)
                msg = msg.removeprefix(f"{where}: ")
                msg = f"{flag} {path}: {msg}"
                break
        raise InputError(msg) from None
    empty = [c for c in out.columns if out[c].isna().all() or (out[c].astype(str) == "").all()]
    if empty:   # e.g. no interval recorded, no unknown category, no transfer source: said once on stderr
        print(f"synperf predict: left out columns empty on every row: {', '.join(empty)}", file=sys.stderr)
    text = out.drop(columns=empty).to_csv(index=False)
    if args.out:
        if Path(args.out).exists() and not Path(args.out).is_file():   # a device or a pipe (/dev/stdout): in place
            Path(args.out).write_text(text)
        else:
            write_text(text, args.out)   # atomic: a failed write leaves no half file
    else:
        sys.stdout.write(text)
    return 0


def gpus(args: argparse.Namespace) -> int:
    """``synperf gpus``: print :func:`synperf.reporting.gpu_table.gpu_table` of the registry (``--registry``, else
    the config's ``gpu_registry``) with the config's measured hardware files (``hardware_measurements_dir``) as a
    table, CSV or JSON records. The config's relative paths start at the folder above the config's folder (the
    checkout)."""
    config_path = Path(args.config) if args.config else default_paths()["config"]
    config = read_config(config_path, "experiments and measurements_dir")
    root = config_path.resolve().parent.parent     # Path(root, p) is p itself for an absolute p
    registry = load_registry(Path(args.registry) if args.registry
                             else Path(root, config.get("gpu_registry") or default_paths()["registry"]),
                             Path(root, config.get("hardware_measurements_dir") or "data/hardware"))
    from synperf.reporting.gpu_table import gpu_table

    table = gpu_table(registry, config, root)
    if args.format == "csv":
        sys.stdout.write(table.to_csv(index=False))
    elif args.format == "json":
        print(table.to_json(orient="records", indent=1))
    else:
        text = table.astype(object).where(table.notna() & (table != ""), "-").astype(str)
        widths = {c: max(len(c), text[c].str.len().max()) for c in text.columns}
        for line in ([list(text.columns)] + text.values.tolist()):
            print("  ".join(f"{v:<{widths[c]}}" for c, v in zip(text.columns, line)).rstrip())
    return 0


def _paths_args(parser: argparse.ArgumentParser, composition: bool = False) -> None:
    """``--models-dir`` and ``--registry``; with ``composition`` also ``--collectives``, ``--config`` and
    ``--overhead`` (``e2e`` and ``plan``)."""
    parser.add_argument("--models-dir", default=None, help="trained models (default: models/ of this checkout)")
    parser.add_argument("--registry", default=None, help="GPU registry (default config/gpus.yaml)")
    if composition:
        parser.add_argument("--collectives", default=None, help="NCCL tables folder (pipeweave/dataset/collective)")
        parser.add_argument("--config", default=None, help="pipeline config whose e2e.collective_gpu_map names the "
                            "tables' GPUs (default: config/config.yaml of this checkout)")
        parser.add_argument("--overhead", default=None, help="overhead.json with a_s, b_s (from the e2e evaluation)")


def _models_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", choices=MODEL_SETS, default=None,
                        help="model set: deploy (trained on every measured GPU, `snakemake deploy`) or evaluation "
                             "(seen GPUs only); default deploy where an experiment has one, else evaluation")
    _predictor_arg(parser)


def _predictor_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--predictor", choices=PREDICTORS, default=None,
                        help="fingerprint (each GPU's constants times a correction learned across GPUs, "
                             "docs/fingerprint.md) or mlp (the SynPerf paper's efficiency MLP); "
                             f"default {DEFAULT_PREDICTOR}")


def suggest_moe_config_cmd(args: argparse.Namespace) -> int:
    """``synperf suggest-moe-config``: the fastest predicted fused-MoE config per token count, written as vLLM's
    tuned config file (:func:`synperf.model.moe_configs.suggest_file`)."""
    from synperf.data.launches import check_moe_routing
    from synperf.model.moe_configs import CONFIG_KEYS, suggest_file

    registry = load_registry(args.registry) if args.registry else None
    for name in ("experts", "intermediate", "hidden", "topk"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name}={getattr(args, name)}: must be >= 1")
    check_moe_routing(args.topk, args.experts, where="suggest-moe-config", names=("--topk", "--experts", "--ep"))
    path, best = suggest_file(args.gpu, args.experts, args.intermediate, hidden_size=args.hidden, topk=args.topk,
                              dtype=args.dtype, out_dir=args.out_dir, registry=registry,
                              experiment=args.experiment, models_dir=args.models_dir, predictor=args.predictor)
    print(best[["num_tokens", *CONFIG_KEYS, "predicted_latency_us", "predicted_speedup_vs_default"]]
          .round(3).to_string(index=False))
    print(f"wrote {path}")
    return 0


def _predict_kwargs(args: argparse.Namespace) -> dict:
    """The model set and predictor the command line names (``--models``, ``--predictor``), for :func:`predict`."""
    return {k: v for k, v in (("models", args.models), ("predictor", args.predictor)) if v is not None}


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (``synperf plan: error: ...``), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from synperf.e2e import plan as planmod

    ap = _Parser(prog="synperf", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("e2e", help="predict end-to-end serving latency of a request trace")
    e.add_argument("--model", required=True, help=MODEL_HELP)
    e.add_argument("--trace", required=True, help="CSV with num_prefill_tokens, output_tokens per request")
    e.add_argument("--gpu", required=True, help="registry id (config/gpus.yaml), e.g. h200_sxm")
    e.add_argument("--tp", type=int, default=1)
    e.add_argument("--pp", type=int, default=1)
    e.add_argument("--batch", type=int, default=None, help="max batch (default: every request of the trace)")
    e.add_argument("--policy", choices=POLICIES, default="static")
    e.add_argument("--group-iterations", type=int, default=GROUP_ITERATIONS,
                   help=f"iterations built and priced at a time, bounding memory on a long trace (default "
                        f"{GROUP_ITERATIONS})")
    _paths_args(e, composition=True)
    _models_arg(e)
    e.set_defaults(func=e2e)
    g = sub.add_parser("gpus", help="list the GPU registry: specs and which GPUs have measurements")
    g.add_argument("--format", choices=("table", "csv", "json"), default="table")
    g.add_argument("--registry", default=None, help="GPU registry (default: the config's gpu_registry)")
    g.add_argument("--config", default=None,
                   help="pipeline config: its experiments, measurements_dir and hardware_measurements_dir (default: "
                        "config/config.yaml of this checkout; its relative paths start at the folder above config/)")
    g.set_defaults(func=gpus)
    p = sub.add_parser("plan", help="rank GPUs and TP/PP splits for one model and workload by predicted latency")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--trace", default=None, help="CSV with num_prefill_tokens, output_tokens per request")
    p.add_argument("--isl", type=int, default=None, help="prompt tokens per request (without --trace)")
    p.add_argument("--osl", type=int, default=None, help="output tokens per request (without --trace)")
    p.add_argument("--batch", type=int, default=None,
                   help="requests (with --isl/--osl; default --concurrency when given), or the max batch of --trace "
                        "(default: the whole trace)")
    p.add_argument("--gpus", required=True, help="comma list of registry ids, or 'all'")
    p.add_argument("--tp", default="1", help="comma list of tensor-parallel sizes (default 1)")
    p.add_argument("--pp", default="1", help="comma list of pipeline-parallel sizes (default 1)")
    p.add_argument("--policy", choices=POLICIES, default="static")
    p.add_argument("--price", action="append", default=None, metavar="GPU=USD_PER_HOUR",
                   help="price of one GPU-hour, at most 1000 (repeatable): adds the cost per million output tokens")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--sort", choices=("total", "tokens-per-gpu", "cost", "ttft", "tpot"), default="total",
                   help="rank by total latency of the batch (default), output tokens/s per GPU, cost per million "
                        "output tokens (--price), or the server's TTFT/TPOT (--concurrency)")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="bar chart of total latency per configuration")
    _paths_args(p, composition=True)
    p.add_argument("--gpu-memory-utilization", type=float, default=planmod.GPU_MEMORY_UTILIZATION,
                   help="share of each GPU's memory the engine may use (vLLM's default "
                        f"{planmod.GPU_MEMORY_UTILIZATION}); a configuration needing more does not fit")
    _models_arg(p)
    p.add_argument("--concurrency", type=int, default=None, help="also TTFT/TPOT of a vLLM server at this many "
                   "concurrent requests of --isl/--osl tokens (closed loop; docs/serving.md)")
    p.add_argument("--serving-error", default=None, metavar="FILE.json",
                   help="with --concurrency: widen the TTFT/TPOT intervals by the simulator's error measured on "
                        "real serving runs (results/serving/serving_error.json)")
    p.add_argument("--kv-cache-dtype", choices=("bfloat16", "fp8"), default=None, help="with --concurrency: the "
                   "server's KV cache (vLLM's --kv-cache-dtype; default that of the linear layers' dtype, torch_dtype:"
                   " fp8 for fp8, else bfloat16, vLLM's auto); the static plan's memory check keeps torch_dtype")
    for flag, what, big, small in (("--max-num-batched-tokens", "tokens per iteration", 8192, 2048),
                                   ("--max-num-seqs", "running requests", 1024, 256)):
        p.add_argument(flag, type=int, default=None, help=f"with --concurrency: the server's {what} (vLLM's "
                       f"{flag}; default vLLM's for each GPU: {big} from 70 GiB of memory except A100, else {small})")
    p.set_defaults(func=plan_cmd)
    k = sub.add_parser("predict", help="predict kernel launch latencies (CSV out)")
    k.add_argument("--kernel", required=True, help="kernel family, e.g. gemm")
    k.add_argument("--gpu", required=True, help="registry id, e.g. h200_sxm")
    k.add_argument("--param", action="append", default=None, metavar="KEY=VALUE",
                   help="one launch's parameter (repeatable), e.g. --param m=4096 --param dtype=bfloat16")
    k.add_argument("--launches", default=None, metavar="FILE.csv", help="launches, one per row (parameter columns)")
    k.add_argument("--measured", default=None, metavar="FILE.csv",
                   help="few-shot: measured launches of the GPU (parameter columns and latency_us, e.g. a short "
                        "sweep); its fingerprint is refitted on them (docs/fingerprint.md)")
    k.add_argument("--out", default=None, help="write the CSV here (default: stdout)")
    _paths_args(k)
    _models_arg(k)
    k.set_defaults(func=predict_cmd)
    from synperf.model import moe_configs

    p = sub.add_parser("suggest-moe-config",
                       help="write a vLLM tuned fused-MoE config file for a GPU from predicted latencies")
    p.add_argument("--gpu", required=True, help="registry id (config/gpus.yaml), e.g. h200_sxm")
    p.add_argument("--experts", type=int, required=True, help="number of experts E")
    p.add_argument("--intermediate", type=int, required=True,
                   help="intermediate size per shard N (vLLM's file-name N)")
    p.add_argument("--hidden", type=int, default=4096, help="hidden size (default 4096)")
    p.add_argument("--topk", type=int, default=2, help="experts per token (default 2)")
    p.add_argument("--dtype", choices=sorted(moe_configs.VLLM_DTYPE), default="bfloat16")
    p.add_argument("--out-dir", default=".", help="folder of the JSON file (default: current folder)")
    p.add_argument("--experiment", default="fused_moe_pipeweave", help="model used to rank (default: %(default)s)")
    _paths_args(p)
    _predictor_arg(p)
    p.set_defaults(func=suggest_moe_config_cmd)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``synperf`` script. Returns the exit status (2 on bad input; 0 when the reader of
    stdout, e.g. ``head``, closes it early)."""
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()
        return status
    except InputError as e:
        print(f"synperf: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader left: send what is still buffered to /dev/null so that exiting does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:   # an output that cannot be written (read-only folder, full disk): one line, no traceback
        print(f"synperf: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
