"""The fast accuracy loop: score predictors under leave-one-GPU-out on the core families from cached feature tables.

    python -m synperf.lab                                  # the configured families, default methods and sample
    python -m synperf.lab --methods synperf_mlp,synperf --problems 800 --protocols logo,loao
    python -m synperf.lab --config config/test/config.yaml --features DIR --out lab.csv

For contributors iterating on the model: it reads the feature tables the main job cached
(``<features>/<feature set>/<experiment>.parquet`` and its ``.json`` meta, built by the ``features`` rule; build
only them with ``snakemake --cores all lab_features``), keeps a fixed seeded sample of problems of every
experiment (every GPU's rows of each sampled problem, so nearest-GPU transfer still finds its sources), runs the
evaluation protocols' own code (:func:`synperf.evaluation.protocols.predict_protocol`) on the sample, one
experiment per CPU core, and prints the goals table (:func:`synperf.evaluation.goals.goals_table`, the columns of
``results/tables/goals.csv``) with the per-family MAPE of every method.

What differs from the full job, so its numbers are for iterating, never the record:

* a sample of problems, not every row (``--problems``, default :data:`DEFAULT_PROBLEMS` per experiment);
* every method reads the configured top-level ``feature_set``'s table, as ``synperf`` and the baselines do in the
  full job (there the MLP reads the experiment's primary feature set, or in a leave-one-out fold the one the other
  experiments' selection scores pick);
* only the protocols asked for (default leave-one-GPU-out); the goals of other protocols read "not measured".

Families: the config's ``protocols.experiments`` (the seven core families of ``config/config.yaml``), or
``--families``. Training budget: the config's ``training`` updated by ``protocols.training``, as the full job's
leave-one-out folds. Errors: :class:`synperf.data.io.InputError` naming a missing feature table or an unknown
family or method (one line on stderr, exit status 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from synperf.api import default_paths
from synperf.data.io import InputError

#: problems sampled per experiment (every GPU's rows of each), sized so the default run answers within a few minutes
#: on 2 cores
DEFAULT_PROBLEMS = 3000
#: methods scored by default: what ``predict`` serves (``synperf``), the MLP alone, the nearest-GPU baseline the goals
#: compare with, and the roofline
DEFAULT_METHODS = ("synperf", "synperf_mlp", "nearest_gpu_roofline", "roofline")
DEFAULT_PROTOCOLS = ("logo",)


def sample_problems(table: pd.DataFrame, n_problems: int, seed: int) -> pd.DataFrame:
    """The rows of ``n_problems`` problems (``problem_key`` values) drawn without replacement by ``seed``; every
    GPU's rows of a drawn problem are kept, in table order. ``n_problems`` <= 0 or at least the number of problems
    keeps the table."""
    keys = np.unique(table["problem_key"].to_numpy())
    if n_problems <= 0 or n_problems >= len(keys):
        return table.reset_index(drop=True)
    chosen = np.random.default_rng(seed).choice(keys, size=n_problems, replace=False)
    return table[table["problem_key"].isin(chosen)].reset_index(drop=True)


def _feature_paths(features_dir: Path, feature_set: str, experiment: str) -> tuple[Path, Path]:
    table = features_dir / feature_set / f"{experiment}.parquet"
    meta = features_dir / feature_set / f"{experiment}.json"
    for p in (table, meta):
        if not p.is_file():
            raise InputError(f"{p}: no cached feature table; build the feature tables first: "
                             "snakemake --cores all lab_features (with the same --config/--configfile)")
    return table, meta


def score_experiment(job: dict) -> pd.DataFrame:
    """One experiment's protocol summary on its sample (one worker's task).

    ``job``: ``experiment``, ``exp`` (its config entry), ``table``/``meta`` (feature table paths), ``registry``,
    ``measured_dir``, ``training`` (the fold MLPs' budget), ``methods``, ``protocols``, ``problems``, ``seed``,
    ``path_scores`` (experiment -> cached ``paths.csv``, may be empty), ``experiments`` (every config entry).

    Returns:
        The rows of ``results/protocols/<experiment>.csv`` for the sample (scopes ``all`` and, where
        ``nearest_gpu_roofline`` runs, ``nearest_covered``) with ``seconds`` (the experiment's wall time).
    """
    import torch

    from synperf.data.hardware import load_registry
    from synperf.data.io import read_table
    from synperf.evaluation.protocols import make_folds, predict_protocol, summarize_predictions
    from synperf.model.estimator import TrainConfig

    torch.set_num_threads(1)
    t0 = time.time()
    registry = load_registry(job["registry"], job["measured_dir"])
    table = sample_problems(read_table(job["table"]), job["problems"], job["seed"])
    meta = json.loads(Path(job["meta"]).read_text())
    exp, name = job["exp"], job["experiment"]
    cfg = TrainConfig.from_dict({**job["training"], "seed": job["seed"], "threads": 1})
    gpus = list(exp["seen"]) + list(exp.get("unseen", []))
    summaries = []
    for protocol in job["protocols"]:
        folds = make_folds(protocol, table, registry, gpus=gpus, heldout_frac=exp.get("heldout_frac", 0.2),
                           seed=job["seed"], heldout_source_files=exp.get("heldout_source_files"))
        preds = predict_protocol(table, folds, list(job["methods"]), registry, cfg, meta,
                                 max_train_rows=cfg.max_train_rows, seed=job["seed"], log=lambda *_: None)
        if not len(preds):
            continue
        summaries.append(summarize_predictions(preds).assign(scope="all"))
        if preds["method"].eq("nearest_gpu_roofline").any():
            summaries.append(summarize_predictions(preds, on_rows_covered_by="nearest_gpu_roofline")
                             .assign(scope="nearest_covered"))
    if not summaries:
        return pd.DataFrame()
    return pd.concat(summaries, ignore_index=True).assign(experiment=name, kernel=exp["kernel"],
                                                          seconds=time.time() - t0)


def _jobs(cfg: dict, families: list[str], features_dir: Path, methods: list[str],
          protocols: list[str], problems: int, root: Path) -> list[dict]:
    experiments = cfg["experiments"]
    unknown = [f for f in families if f not in experiments]
    if unknown:
        raise InputError(f"--families: {unknown} not in the config's experiments {sorted(experiments)}")
    training = {**(cfg.get("training") or {}), **((cfg.get("protocols") or {}).get("training") or {})}
    measured = root / cfg.get("hardware_measurements_dir", "data/hardware")
    measured_dir = str(measured) if (cfg.get("characterize") or {}).get("use_measured", True) else None
    jobs = []
    for name in families:
        exp = experiments[name]
        table, meta = _feature_paths(features_dir, cfg["feature_set"], name)
        jobs.append({"experiment": name, "exp": exp, "table": str(table), "meta": str(meta),
                     "registry": str(root / cfg["gpu_registry"]), "measured_dir": measured_dir, "training": training,
                     "methods": methods, "protocols": protocols, "problems": problems, "seed": int(cfg.get("seed", 0))})
    return jobs


def run_lab(cfg: dict, families: list[str], features_dir: Path, methods: list[str],
            protocols: list[str], problems: int, workers: int, root: Path | None = None
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score ``methods`` under ``protocols`` on every family; ``(protocol summary, goals table)``. The config's
    relative paths (``gpu_registry``, ``hardware_measurements_dir``) start at ``root`` (default: the working
    folder; the command passes this checkout, where Snakemake runs).

    Raises:
        InputError: an unknown family, method or protocol, or a missing feature table.
    """
    from synperf.evaluation.goals import goals_table
    from synperf.evaluation.protocols import METHODS, PROTOCOLS

    for label, given, known in (("--methods", methods, METHODS), ("--protocols", protocols, PROTOCOLS)):
        bad = [m for m in given if m not in known]
        if bad:
            raise InputError(f"{label}: unknown {bad}; known: {list(known)}")
    jobs = _jobs(cfg, families, features_dir, methods, protocols, problems, Path(root or "."))
    # the longest first: the experiments with the most GPUs
    jobs.sort(key=lambda j: -len(list(j["exp"]["seen"]) + list(j["exp"].get("unseen", []))))
    if workers <= 1 or len(jobs) == 1:
        parts = [score_experiment(j) for j in jobs]
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            parts = list(pool.map(score_experiment, jobs))
    summary = pd.concat([p for p in parts if len(p)], ignore_index=True)
    return summary, goals_table(summary, families=families)


def family_table(summary: pd.DataFrame) -> pd.DataFrame:
    """MAPE % per (protocol, experiment) and method: the mean over folds of the pooled (``gpu == "ALL"``) unseen
    value, scope ``all``; one row per (protocol, experiment), methods as columns, plus the experiment's seconds."""
    t = summary[(summary["gpu"] == "ALL") & (summary["split"] == "unseen") & (summary["scope"] == "all")]
    out = t.pivot_table(index=["protocol", "experiment"], columns="method", values="mape_pct", aggfunc="mean")
    secs = summary.groupby("experiment")["seconds"].first()
    return out.assign(seconds=out.index.get_level_values("experiment").map(secs)).reset_index()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m synperf.lab", description=__doc__.split("\n\n")[0])
    config = default_paths()["config"]
    checkout = config.parent.parent
    ap.add_argument("--config", type=Path, default=config, help="pipeline config (default: this checkout's)")
    ap.add_argument("--features", type=Path, default=checkout / "results" / "features",
                    help="cached feature tables, <features>/<feature set>/<experiment>.parquet")
    ap.add_argument("--families", help="comma-separated experiments (default: the config's protocols.experiments)")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="comma-separated protocol methods")
    ap.add_argument("--protocols", default=",".join(DEFAULT_PROTOCOLS), help="comma-separated: configured,logo,loao")
    ap.add_argument("--problems", type=int, default=DEFAULT_PROBLEMS,
                    help="problems sampled per experiment (0: every row)")
    ap.add_argument("--workers", type=int, default=_cores(), help="experiments scored at once (default: cores)")
    ap.add_argument("--out", type=Path, help="also write the goals table here (CSV); the summary beside it")
    args = ap.parse_args(argv)
    t0 = time.time()
    try:
        if not args.config.is_file():
            raise InputError(f"{args.config}: no such config file")
        cfg = yaml.safe_load(args.config.read_text()) or {}
        families = (args.families.split(",") if args.families
                    else list((cfg.get("protocols") or {}).get("experiments") or []))
        if not families:
            raise InputError(f"{args.config}: no protocols.experiments; name the families with --families")
        summary, goals = run_lab(cfg, families, args.features, args.methods.split(","),
                                 args.protocols.split(","), args.problems, args.workers,
                                 root=checkout)
    except InputError as err:
        print(f"synperf.lab: {err}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 120):
        print(f"== unseen-GPU MAPE % per family and method ({args.problems or 'all'} problems per experiment) ==")
        print(family_table(summary).to_string(index=False, float_format=lambda x: f"{x:.1f}"))
        print("\n== goals (columns of results/tables/goals.csv; protocols not run read 'not measured') ==")
        print(goals.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    if args.out:
        from synperf.data.io import write_csv

        write_csv(goals, str(args.out))
        write_csv(summary, str(args.out.with_name(args.out.stem + "_summary.csv")))
    print(f"\nsynperf.lab: {time.time() - t0:.0f} s, {args.workers} worker(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
