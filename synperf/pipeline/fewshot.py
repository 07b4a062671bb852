"""Pipeline stage: few-shot on the unseen GPUs of each experiment with the fingerprint predictor (table, choice
table, figure).

Per experiment, the fingerprint predictor the train rule fitted on the seen GPUs' training rows
(``models/<exp>/fingerprint.joblib``) predicts each unseen GPU of the configured split; ``k`` of its rows, drawn by
the short-sweep rule, refit its constants and then choose and fit its correction
(:func:`synperf.evaluation.fewshot.choose_calibration`, cross-validated on those ``k`` rows alone); MAPE is scored on
its other rows (:func:`synperf.evaluation.fewshot.fingerprint_fewshot`). Nothing of an unseen GPU beyond its ``k``
rows informs a choice.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from synperf.data.io import write_csv

#: columns of the few-shot table, one row per (experiment, unseen GPU, k); means over the short-sweep seeds
TABLE_COLUMNS = ["experiment", "kernel", "gpu", "k", "calibration", "prior_weight", "borrowed",
                 "n_calibration_rows", "n_eval_rows", "mape_pct", "mape_pct_min", "mape_pct_max",
                 "uncalibrated_mape_pct", "interval_coverage", "n_seeds"]
#: columns of the choice table, one row per (experiment, k, candidate correction)
CHOICE_COLUMNS = ["for_experiment", "k", "calibration", "mape_pct", "n_folds", "chosen"]


def fewshot_table(draws: pd.DataFrame, kernels: dict[str, str]) -> pd.DataFrame:
    """:data:`TABLE_COLUMNS` from :func:`synperf.evaluation.fewshot.fingerprint_fewshot` rows (one per draw):
    MAPE's mean, min and max over seeds, ``calibration`` the corrections the seeds' rows chose and ``borrowed`` the
    own-GPU corrections the seeds' fits took (each ``;`` between seeds that differ; ``borrowed`` empty: the
    class-mates'); ``kernels``: experiment -> kernel family."""
    keys = ["experiment", "gpu", "k", "prior_weight"]
    out = (draws.groupby(keys, observed=True, sort=True)
           .agg(calibration=("calibration", lambda v: ";".join(dict.fromkeys(v))),
                borrowed=("borrowed", lambda v: ";".join(dict.fromkeys(v))),
                n_calibration_rows=("n_calibration_rows", "first"), n_eval_rows=("n_eval_rows", "first"),
                mape_pct=("mape_pct", "mean"), mape_pct_min=("mape_pct", "min"), mape_pct_max=("mape_pct", "max"),
                uncalibrated_mape_pct=("uncalibrated_mape_pct", "mean"),
                interval_coverage=("interval_coverage", "mean"), n_seeds=("seed", "nunique"))
           .reset_index())
    out["kernel"] = out["experiment"].map(kernels)
    return out[TABLE_COLUMNS]


#: the choice table's names of the two ways a few-shot refit takes own-GPU corrections (``choice["fewshot_borrow"]``)
BORROW_ROWS = {False: "refit: class-mates' own-GPU corrections", True: "refit: borrowed own-GPU corrections"}


def borrow_choice_rows(choice: dict) -> pd.DataFrame:
    """The choice table's rows (:data:`CHOICE_COLUMNS` but ``for_experiment``) of a model's per-``k`` choice to
    borrow own-GPU corrections (``choice["fewshot_borrow"]`` and its scores): two per ``k`` (:data:`BORROW_ROWS`),
    ``n_folds`` left empty (the draws behind each score are those of the correction's rows of the same ``k``)."""
    scores = choice.get("fewshot_borrow_scores_mape_pct") or {}
    chosen = {int(k): bool(v) for k, v in (choice.get("fewshot_borrow") or {}).items()}
    return pd.DataFrame([{"k": int(k), "calibration": BORROW_ROWS[b], "mape_pct": d[key], "n_folds": np.nan,
                          "chosen": chosen.get(int(k)) == b}
                         for k, d in scores.items() for b, key in ((False, "keep"), (True, "borrow"))],
                        columns=CHOICE_COLUMNS[1:])


def fewshot_stage(experiments: list[str], model_files: list[str], feature_tables: list[str], kernels: dict[str, str],
                  registry_path: str, measured_dir: str | None, out_table: str, out_choice: str, out_figure: str,
                  figure_experiments: list[str] | None = None) -> None:
    """Few-shot on every unseen GPU (``split == "unseen"`` rows of each experiment's feature table) with the
    experiment's fingerprint predictor; writes the table (:data:`TABLE_COLUMNS`), the choice table
    (:data:`CHOICE_COLUMNS`: each predictor's per-``k`` choice to borrow own-GPU corrections,
    :func:`borrow_choice_rows`) and the figure (MAPE against ``k``, ``figure_experiments``, default all).

    Raises:
        InputError: a feature table without a ``split`` column; as :meth:`FingerprintModel.load`.
    """
    from synperf.data.hardware import load_registry
    from synperf.data.io import InputError, read_table
    from synperf.evaluation.fewshot import fingerprint_fewshot
    from synperf.model.fingerprint import FingerprintModel
    from synperf.reporting.fewshot_report import fewshot_figure

    registry = load_registry(registry_path, measured_dir)
    draws, choices = [], []
    for exp, model_file, table_file in zip(experiments, model_files, feature_tables, strict=True):
        model = FingerprintModel.load(model_file)
        table = read_table(table_file)
        if "split" not in table.columns:
            raise InputError(f"{table_file}: no 'split' column (expected the feature stage's split labels)")
        unseen = table[table["split"].astype(str) == "unseen"]
        draws.append(fingerprint_fewshot(model, unseen, registry, experiment=exp))
        choices.append(borrow_choice_rows(model.choice).assign(for_experiment=exp)[CHOICE_COLUMNS])
        logging.getLogger(__name__).info("%s: few-shot borrow per k %s, prior weight %s", exp,
                                         model.choice.get("fewshot_borrow"), model.prior_weight)
    table = fewshot_table(pd.concat(draws, ignore_index=True), kernels)
    write_csv(pd.concat(choices, ignore_index=True), out_choice)
    write_csv(table, out_table)
    fewshot_figure(table, out_figure, figure_experiments)
    logging.getLogger(__name__).info("mean unseen MAPE per k: %s",
                                     table.groupby("k")["mape_pct"].mean().round(2).to_dict())
