"""Pipeline stage: the few-shot calibration chosen on the seen GPUs and scored on the unseen GPUs, from the rows of
:func:`synperf.pipeline.fewshot.fewshot_rows` (table, choice table, figure)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from synperf.data.io import write_csv


def fewshot_stage(experiments: list[str], path_rows: list[str], protocol_rows: list[str], model_dirs: list[str],
                  out_table: str, out_choice: str, out_figure: str,
                  figure_experiments: list[str] | None = None, configs: dict[str, dict] | None = None) -> None:
    """:func:`fewshot_summary` of the rows :func:`synperf.pipeline.fewshot.fewshot_rows` assembles per experiment
    from its selection path rows (Parquet), protocol rows (Parquet) and model folder (``path.json``), in the order
    of ``experiments``; ``configs`` (the experiments' config entries) as :func:`fewshot_summary`'s ``experiments``.

    Raises:
        InputError: a model folder without ``path.json``.
    """
    from synperf.data.io import InputError
    from synperf.evaluation.path_selection import load_choice
    from synperf.pipeline.fewshot import fewshot_rows

    frames = []
    for exp, pr, rr, md in zip(experiments, path_rows, protocol_rows, model_dirs, strict=True):
        choice = load_choice(md)
        if choice is None:
            raise InputError(f"{md}: no path.json (run the train rule first)")
        frames.append(fewshot_rows(pd.read_parquet(pr), pd.read_parquet(rr), choice, exp))
    fewshot_summary(frames, out_table, out_choice, out_figure, figure_experiments=figure_experiments,
                    experiments=configs)


def fewshot_summary(row_files: list, out_table: str, out_choice: str, out_figure: str,
                    ks=None, seeds=None, figure_experiments: list[str] | None = None,
                    experiments: dict[str, dict] | None = None) -> None:
    """Choose the calibration per k on ``seen_losgo`` rows, score it on the ``unseen`` rows.

    With ``experiments`` (config entries, ``seen``/``unseen``, of every experiment in the rows) each experiment's
    calibration is chosen on the ``seen_losgo`` rows of the experiments that may inform it
    (:func:`synperf.evaluation.evidence.informing_experiments` of its unseen GPUs: no experiment trained on one of
    them); without it, one choice from every experiment's rows.

    Args:
        row_files: row frames of :func:`synperf.pipeline.fewshot.fewshot_rows`, or Parquet files of them.
        out_table: CSV, one row per (experiment, unseen GPU, k) (:func:`synperf.evaluation.fewshot.evaluate_unseen`
            plus ``kernel``).
        out_choice: CSV, the choice table (:func:`synperf.evaluation.fewshot.choose_calibrations`).
        out_figure: PNG, MAPE against k per experiment (``figure_experiments``, default all).
    """
    from synperf.evaluation.fewshot import KS, SEEDS, choose_calibrations, evaluate_unseen
    from synperf.reporting.fewshot_report import fewshot_figure

    ks = tuple(ks or KS)
    seeds = tuple(seeds or SEEDS)
    rows = pd.concat([p if isinstance(p, pd.DataFrame) else pd.read_parquet(p) for p in row_files],
                     ignore_index=True)
    role = rows["role"].astype(str).to_numpy()
    unseen = rows[role == "unseen"]
    if experiments is None:
        chosen, choice_table = choose_calibrations(rows[role == "seen_losgo"], ks, seeds)
        table = evaluate_unseen(unseen, chosen, ks, seeds)
    else:
        from synperf.evaluation.evidence import informing_experiments

        names = sorted(set(unseen["experiment"].astype(str)))
        missing = [n for n in sorted(set(rows["experiment"].astype(str))) if n not in experiments]
        if missing:
            raise KeyError(f"few-shot: no config entry for experiment(s) {missing}")
        informing = {n: informing_experiments(n, experiments, experiments[n].get("unseen") or []) for n in names}
        chosen, choice_table = choose_calibrations(rows[role == "seen_losgo"], ks, seeds, informing=informing)
        exp = unseen["experiment"].astype(str).to_numpy()
        table = pd.concat([evaluate_unseen(unseen[exp == n], chosen[n], ks, seeds) for n in names],
                          ignore_index=True)
    kernels = rows.drop_duplicates("experiment").set_index("experiment")["kernel"]
    table.insert(1, "kernel", table["experiment"].map(kernels))
    write_csv(choice_table, out_choice)
    write_csv(table, out_table)
    fewshot_figure(table, out_figure, figure_experiments)
    logging.getLogger(__name__).info("calibration per k: %s; mean unseen MAPE per k: %s", chosen,
                                     table.groupby("k")["mape_pct"].mean().round(2).to_dict())


def mean_unseen_mape(table: pd.DataFrame, k: int, experiments: list[str]) -> float:
    """Mean over ``experiments`` of each one's mean MAPE (percent) over its unseen GPUs at ``k``; NaN when none."""
    t = table[(table["k"] == k) & table["experiment"].isin(experiments)]
    return float(t.groupby("experiment")["mape_pct"].mean().mean()) if len(t) else float(np.nan)
