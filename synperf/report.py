"""The report: MAPE per kernel family and GPU (held-out shapes on seen GPUs, unseen GPUs),
row counts, dropped rows by reason, and a Figure-5-style bar chart."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .io import atomic_path, write_csv, write_text  # noqa: E402

PAPER = {"seen_mape_pct": 6.0, "unseen_mape_pct": 11.5, "neusight_seen": 42.6, "neusight_unseen": 45.1}


def _fmt(x) -> str:
    return "–" if pd.isna(x) else f"{x:.1f}"


def _md_table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v) if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def summary_table(mape: pd.DataFrame) -> pd.DataFrame:
    """One row per experiment: pooled MAPE on held-out shapes of seen GPUs and on unseen GPUs."""
    allrows = mape[mape["gpu"] == "ALL"]
    piv = allrows.pivot_table(index=["experiment", "kernel"], columns="split", values="mape_pct")
    n = allrows.pivot_table(index=["experiment", "kernel"], columns="split", values="n_rows")
    out = pd.DataFrame({
        "seen_heldout_mape_pct": piv.get("test_seen"),
        "unseen_mape_pct": piv.get("unseen"),
        "train_mape_pct": piv.get("train"),
        "seen_heldout_rows": n.get("test_seen"),
        "unseen_rows": n.get("unseen"),
    }).reset_index()
    for c in ("seen_heldout_rows", "unseen_rows"):
        out[c] = out[c].fillna(0).astype(int)
    return out


def figure(mape: pd.DataFrame, path: str) -> None:
    """Grouped bars: MAPE per experiment and GPU; unseen GPUs hatched (cf. SynPerf Figure 5)."""
    per = mape[(mape["gpu"] != "ALL") & mape["split"].isin(["test_seen", "unseen"])].copy()
    exps = list(dict.fromkeys(per["experiment"]))
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(exps)), 4.5))
    x0 = 0.0
    ticks, labels = [], []
    for e in exps:
        sub = per[per["experiment"] == e].sort_values(["split", "gpu"])
        xs = x0 + np.arange(len(sub))
        for xi, r in zip(xs, sub.itertuples()):
            unseen = r.split == "unseen"
            ax.bar(xi, r.mape_pct, color="#d62728" if unseen else "#1f77b4", hatch="//" if unseen else None,
                   edgecolor="black", linewidth=0.4)
            ax.text(xi, r.mape_pct, r.gpu, rotation=90, ha="center", va="bottom", fontsize=6)
        ticks.append(x0 + (len(sub) - 1) / 2)
        labels.append(e)
        x0 += len(sub) + 1.5
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("latency MAPE (%)")
    ax.set_title("MAPE per kernel family and GPU (blue: held-out shapes on seen GPUs; red hatched: unseen GPUs)",
                 fontsize=9)
    ax.axhline(PAPER["unseen_mape_pct"], color="grey", linestyle="--", linewidth=0.8)
    ax.text(ax.get_xlim()[1], PAPER["unseen_mape_pct"], " paper unseen 11.5%", va="center", fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    plt.close(fig)


def build_report(mape_tables: list[str], merge_summary: str, model_metas: list[str], feature_metas: list[str],
                 out_md: str, out_mape: str, out_summary: str, out_counts: str, out_dropped: str,
                 out_figure: str, wall_time_note: str = "") -> None:
    """Assemble the Markdown report and its CSV tables and figure (all written atomically)."""
    mape = pd.concat([pd.read_csv(p) for p in mape_tables], ignore_index=True)
    merge = json.loads(Path(merge_summary).read_text())
    metas = [json.loads(Path(p).read_text()) for p in model_metas]
    fmetas = {m["experiment"]: m for m in (json.loads(Path(p).read_text()) for p in feature_metas)}
    summ = summary_table(mape)
    counts = pd.DataFrame(merge["row_counts"])
    dropped = pd.DataFrame(sorted(merge["dropped"].items()), columns=["reason", "rows"])
    dropped = pd.concat([dropped, pd.DataFrame([{"reason": "duplicate_key_merged_to_median",
                                                 "rows": merge["duplicate_rows_merged"]}])], ignore_index=True)
    write_csv(mape, out_mape)
    write_csv(summ, out_summary)
    write_csv(counts, out_counts)
    write_csv(dropped, out_dropped)
    figure(mape, out_figure)

    per_gpu = mape[(mape["gpu"] != "ALL") & (mape["split"] != "train")][
        ["experiment", "gpu", "split", "n_rows", "mape_pct", "median_ape_pct", "p90_ape_pct"]]
    core = summ[summ["experiment"] == summ["kernel"]]
    md = ["# synperf report", ""]
    md += ["Latency MAPE of the per-family efficiency MLPs (feature set "
           f"`{metas[0].get('feature_set', '?') if metas else '?'}`). *Seen* = held-out shapes on the GPUs the "
           "model trained on; *unseen* = every row of GPUs it never saw. Generated by `snakemake`; "
           "machine-readable tables beside this file in `tables/`.", ""]
    md += ["## MAPE per experiment", "", _md_table(summ), ""]
    if len(core):
        md += [f"Mean over the {len(core)} core kernel families: seen {core['seen_heldout_mape_pct'].mean():.1f}% / "
               f"unseen {core['unseen_mape_pct'].mean():.1f}% (SynPerf paper: {PAPER['seen_mape_pct']}% / "
               f"{PAPER['unseen_mape_pct']}%; NeuSight as reported there: {PAPER['neusight_seen']}% / "
               f"{PAPER['neusight_unseen']}%; different GPUs and data, so a reference, not a like-for-like).", ""]
    md += ["![MAPE per family and GPU](figures/mape_by_gpu.png)", ""]
    md += ["## MAPE per GPU", "", _md_table(per_gpu), ""]
    md += ["## Training", "", _md_table(pd.DataFrame([{
        "experiment": m["experiment"], "train_gpus": ",".join(m["train_gpus"]), "train_rows": m["n_train_rows"],
        "val_rows": m["n_val_rows"], "epochs": m["epochs_run"], "best_val_mre": round(m["best_val_loss"], 4),
        "targets_clipped": m["n_target_clipped"], "train_s": m.get("train_seconds", float("nan")),
        "feature_s": fmetas.get(m["experiment"], {}).get("feature_seconds", float("nan")),
    } for m in metas])), ""]
    md += ["## Measurements", "",
           f"Rows read: {merge['rows_in']:,}; after reducing duplicate keys to their median: {merge['rows_out']:,} "
           f"({merge['duplicate_rows_merged']:,} rows merged into {merge['duplicate_keys']:,} keys).", "",
           "### Rows per source, kernel and GPU", "", _md_table(counts), "",
           "### Rows dropped, by reason", "", _md_table(dropped), ""]
    if wall_time_note:
        md += [wall_time_note, ""]
    write_text("\n".join(md), out_md)
