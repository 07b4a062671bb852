"""The report's few-shot and goals sections (tables of :mod:`synperf.pipeline.fewshot` and
:mod:`synperf.evaluation.goals`) and the figure of MAPE against the number of calibration rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import ScalarFormatter

from .tables import md_table, plt, save_figure


def fewshot_figure(table: pd.DataFrame, path: str, experiments: list[str] | None = None) -> None:
    """MAPE against k, one curve per experiment (mean over its unseen GPUs), log-scale MAPE; written as PNG."""
    t = table if experiments is None else table[table["experiment"].isin(experiments)]
    per = t.groupby(["experiment", "k"])["mape_pct"].mean().unstack("experiment").sort_index()
    fig, ax = plt.subplots(figsize=(8, 5))
    x = np.arange(len(per.index))
    for exp in per.columns:
        ax.plot(x, per[exp].to_numpy(), marker="o", label=exp)
    ax.set_xticks(x, [str(k) for k in per.index])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.axhline(5.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("measured rows of the unseen GPU (k)")
    ax.set_ylabel("MAPE on the remaining rows (%)")
    ax.set_title("Few-shot on unseen GPUs: fingerprint refitted on k rows (mean over GPUs and draws)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def class_curves(table: pd.DataFrame, classes: dict[str, str]) -> pd.DataFrame:
    """MAPE per k (columns ``k = <k> MAPE %``, mean over GPUs) per experiment and GPU class: ``classes`` maps each
    GPU of ``table`` to its class text (``"sm_8x GDDR"``); a GPU it lacks is refused.

    Raises:
        KeyError: a GPU of ``table`` without a class.
    """
    missing = sorted(set(table["gpu"].astype(str)) - set(classes))
    if missing:
        raise KeyError(f"few-shot table: no GPU class for {missing}")
    t = table.assign(gpu_class=table["gpu"].astype(str).map(classes))
    per = t.pivot_table(index=["experiment", "gpu_class"], columns="k", values="mape_pct", aggfunc="mean")
    per.columns = [f"k = {k} MAPE %" for k in per.columns]
    gpus = t.groupby(["experiment", "gpu_class"])["gpu"].agg(lambda g: ", ".join(sorted(set(g.astype(str)))))
    return per.join(gpus.rename("gpus")).reset_index()


def fewshot_section(table: pd.DataFrame, choice: pd.DataFrame, figure_rel: str,
                    experiments: list[str] | None = None, classes: dict[str, str] | None = None) -> list[str]:
    """Markdown lines: how rows are drawn, what is refitted and the corrections the draws chose per k, the
    per-experiment MAPE per k and the figure; with ``classes`` (GPU -> class text) also per experiment and GPU class
    (:func:`class_curves`). ``choice``: the choice table (``results/tables/fewshot_choice.csv``), whose chosen rows
    say per k how many experiments' refits borrow own-GPU corrections."""
    drawn = table[table["k"] > 0].assign(c=lambda t: t["calibration"].astype(str).str.split(";")).explode("c")
    pick = "; ".join(f"k = {k}: " + ", ".join(f"`{c}` ({n})" for c, n in g["c"].value_counts().items())
                     for k, g in drawn.groupby("k"))
    chosen = choice[choice["chosen"].astype(bool) & choice["calibration"].astype(str).str.startswith("refit: borrowed")]
    borrow = "; ".join(f"k = {k}: {n}" for k, n in chosen.groupby("k").size().items())
    per = table.pivot_table(index="experiment", columns="k", values="mape_pct", aggfunc="mean")
    per.columns = [f"k = {k} MAPE %" for k in per.columns]  # mean over the experiment's unseen GPUs
    per = per.reset_index()
    lines = ["## Few-shot on unseen GPUs", "",
             "A user who can measure a few launches on a new GPU refits its fingerprint. Simulated here per unseen "
             "GPU with the fingerprint predictor `predict` serves: k of its measured rows are drawn by the "
             "short-sweep rule (rows ordered by theoretical time, cut into k strata of equal size, one row drawn "
             "per stratum; seeds 0, 1, 2 and their mean); its predicted constants are refitted on them (each "
             "constant pulled to its predicted value by a pseudo-row; the correction learned on the training GPUs "
             "stays), then a correction of the predictions fitted on the same k rows is applied, chosen on those "
             "k rows alone by 4-fold cross-validation (`none` included; the simplest candidate within 5% of the "
             "lowest); MAPE is scored on the remaining rows (k = 0: every row, the predicted constants). An "
             "experiment's MAPE is the mean over its unseen GPUs. The prior's weight and whether the refit borrows "
             "own-GPU corrections are chosen on the experiment's training GPUs only "
             "(`results/tables/fewshot_choice.csv`). "
             f"Corrections chosen (unseen GPUs whose draws chose each): {pick or '-'}. Refits that borrow "
             f"other training GPUs' own-GPU corrections (experiments): {borrow or '-'}.", "",
             md_table(per), "", f"![Few-shot]({figure_rel})", ""]
    core = per[per["experiment"].isin(experiments)] if experiments else per
    if len(core) and "k = 32 MAPE %" in core.columns:
        lines += [f"Mean over the {len(core)} core families at k = 32: {core['k = 32 MAPE %'].mean():.1f}% "
                  f"(k = 0: {core['k = 0 MAPE %'].mean():.1f}%).", ""]
    if classes:
        lines += ["Per GPU class (compute capability and memory type; mean over the class's unseen GPUs):", "",
                  md_table(class_curves(table, classes)), ""]
    return lines


def goals_section(goals: pd.DataFrame) -> list[str]:
    """Markdown lines: the goals table (:func:`synperf.evaluation.goals.goals_table`)."""
    t = goals.copy()
    t["measured"] = t["measured"].map(lambda v: "–" if pd.isna(v) else f"{v:,.1f}")
    t["best baseline"] = [("–" if pd.isna(v) else f"{v:.1f}") + (f" ({m})" if isinstance(m, str) and m else "")
                          for v, m in zip(t["best_baseline"], t["best_baseline_method"])]
    paper = t["paper_mlp"] if "paper_mlp" in t.columns else pd.Series(np.nan, index=t.index)
    t["paper's MLP"] = paper.map(lambda v: "–" if pd.isna(v) else f"{v:,.1f}")
    t = t[["goal", "target", "measured", "best baseline", "paper's MLP", "met", "detail"]]
    return ["## Goals", "",
            "Each goal beside the measured value and the best baseline's value of the same statistic on the same rows "
            "(baselines that cover every row of every family; MAPE in %). Measured is `synperf` (the fingerprint "
            "predictor, docs/fingerprint.md, what `predict` serves); `paper's MLP` is the same statistic of "
            "`synperf_mlp`, the SynPerf paper's efficiency MLP, scored beside on the same folds and rows. The "
            "few-shot goal refits the fingerprint of each unseen GPU on a short sweep. Machine-readable: "
            "`tables/goals.csv`.", "", md_table(t), ""]
