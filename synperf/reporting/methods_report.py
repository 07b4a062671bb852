"""Report sections comparing synperf's MLP with the baselines under the evaluation protocols.

Inputs are the tables :func:`synperf.pipeline.protocols.evaluate_protocols` writes per experiment
(``results/protocols/<experiment>.csv`` and ``<experiment>_cdf.csv``) and the primary models' predictions
(``results/predictions/<experiment>/<feature set>-all.parquet``). Everything here only reads, aggregates and
draws; numbers are percentages (MAPE, median and p90 of the absolute percentage error, APE).

Averages (:func:`method_means`) are plain means over the experiments that ran every protocol
(``protocols.experiments``) and over their folds, of each fold's pooled ``gpu == "ALL"`` value; the
configured-only experiments (other data sources) are tabulated per GPU but kept out of the means so the three
protocols average over the same experiments.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from synperf.reporting.tables import md_table, save_figure  # noqa: E402

#: display names of the methods, in display order
METHOD_LABELS = {
    "synperf": "synperf (fingerprint)",
    "synperf_mlp": "synperf MLP",
    "nearest_gpu_roofline": "nearest GPU (b)",
    "nearest_gpu_scaled": "nearest GPU (a)",
    "gbt": "GBT",
    "neusight": "NeuSight-style",
    "linear": "ridge",
    "roofline": "roofline",
}
PROTOCOL_LABELS = {"configured": "configured split", "logo": "leave one GPU out",
                   "loao": "leave one architecture out"}
#: published SynPerf numbers for FP8 scaled-mm on the paper's split (method.md, "Results to beat"), MAPE %
PAPER_FP8_UNSEEN = {"h100_sxm": 4.2, "h200_sxm": 5.2}
NEAREST = "nearest_gpu_roofline"
MLP = "synperf_mlp"


def _methods(t: pd.DataFrame) -> list[str]:
    present = set(t["method"])
    return [m for m in METHOD_LABELS if m in present] + sorted(present - set(METHOD_LABELS))


def load_tables(paths: list[str]) -> pd.DataFrame:
    """Concatenate protocol tables (CSV); empty frame for no paths."""
    return pd.concat([pd.read_csv(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()


def method_means(t: pd.DataFrame, experiments: list[str]) -> pd.DataFrame:
    """Mean MAPE, median APE, p90 APE and coverage per (protocol, split, method) over ``experiments`` and folds.

    Uses the ``scope == "all"`` rows (each method on every row it covers) pooled per fold (``gpu == "ALL"``).

    Returns:
        Columns ``protocol``, ``split``, ``method``, ``mape_pct``, ``median_ape_pct``, ``p90_ape_pct``,
        ``coverage`` (mean share of test rows predicted), ``experiments``, ``folds``.
    """
    a = t[(t["gpu"] == "ALL") & (t["scope"] == "all") & t["experiment"].isin(experiments)]
    out = (a.groupby(["protocol", "split", "method"])
           .agg(mape_pct=("mape_pct", "mean"), median_ape_pct=("median_ape_pct", "mean"),
                p90_ape_pct=("p90_ape_pct", "mean"), coverage=("coverage", "mean"),
                experiments=("experiment", "nunique"), folds=("fold", "count"))
           .reset_index())
    return out


def means_matrix(means: pd.DataFrame) -> pd.DataFrame:
    """Method rows x (protocol, split) columns of mean MAPE, with coverage in brackets where below 100%."""
    methods = _methods(means)
    rows = []
    for m in methods:
        row = {"method": METHOD_LABELS.get(m, m)}
        for proto in [p for p in PROTOCOL_LABELS if p in set(means["protocol"])]:
            for split, lab in (("test_seen", "seen"), ("unseen", "unseen")):
                r = means[(means["method"] == m) & (means["protocol"] == proto) & (means["split"] == split)]
                if r.empty or pd.isna(r["mape_pct"].iloc[0]):
                    row[f"{proto} {lab}"] = "–"
                    continue
                cov = r["coverage"].iloc[0]
                cell = f"{r['mape_pct'].iloc[0]:.1f}"
                row[f"{proto} {lab}"] = cell + (f" ({100 * cov:.0f}% rows)" if cov < 0.995 else "")
        rows.append(row)
    return pd.DataFrame(rows)


def per_gpu(t: pd.DataFrame, protocol: str, experiments: list[str], splits=("unseen",)) -> pd.DataFrame:
    """Long table: one row per (experiment, gpu, split, method) of ``protocol``, errors averaged over folds.

    A GPU is unseen in exactly one fold of each protocol; held-out problems of a seen GPU appear in several
    leave-one-out folds, hence the mean. Columns ``experiment``, ``gpu``, ``split``, ``method``, ``n_rows``,
    ``coverage``, ``mape_pct``, ``median_ape_pct``, ``p90_ape_pct``.
    """
    a = t[(t["protocol"] == protocol) & (t["gpu"] != "ALL") & (t["scope"] == "all")
          & t["experiment"].isin(experiments) & t["split"].isin(splits)]
    return (a.groupby(["experiment", "gpu", "split", "method"], sort=True)
            .agg(n_rows=("n_rows", "mean"), coverage=("coverage", "mean"), mape_pct=("mape_pct", "mean"),
                 median_ape_pct=("median_ape_pct", "mean"), p90_ape_pct=("p90_ape_pct", "mean"))
            .reset_index())


def _cell(r) -> str:
    if pd.isna(r["mape_pct"]):
        return "–"
    cov = "" if r["coverage"] >= 0.995 else f" [{100 * r['coverage']:.0f}%]"
    return f"{r['mape_pct']:.1f} / {r['median_ape_pct']:.1f} / {r['p90_ape_pct']:.1f}{cov}"


def per_gpu_matrix(long: pd.DataFrame, seen_label: str = "seen, held-out problems") -> pd.DataFrame:
    """(experiment, gpu, split) rows x method columns, cells ``MAPE / median / p90`` (% ; [coverage] if < 100%).

    ``seen_label`` names the ``test_seen`` split in the ``split`` column.
    """
    if long.empty:
        return pd.DataFrame()
    methods = _methods(long)
    rows = []
    for (e, g, s), sub in long.groupby(["experiment", "gpu", "split"], sort=True):
        by = sub.set_index("method")
        row = {"experiment": e, "gpu": g, "split": seen_label if s == "test_seen" else s}
        for m in methods:
            row[METHOD_LABELS.get(m, m)] = _cell(by.loc[m]) if m in by.index else "–"
        rows.append(row)
    return pd.DataFrame(rows)


def nearest_vs_mlp(t: pd.DataFrame, experiments: list[str]) -> pd.DataFrame:
    """Paired comparison on the rows nearest-GPU transfer (b) covers: unseen MAPE of both, per protocol and experiment.

    Columns ``protocol``, ``experiment``, ``synperf_mlp_pct``, ``nearest_gpu_b_pct``, ``coverage`` (share of
    unseen rows nearest-GPU covers), ``winner``. Empty when the tables hold no ``nearest_covered`` scope.
    """
    p = t[(t["gpu"] == "ALL") & (t["split"] == "unseen") & t["experiment"].isin(experiments)]
    paired = p[p["scope"] == "nearest_covered"]
    cov = p[(p["scope"] == "all") & (p["method"] == NEAREST)].groupby(["protocol", "experiment"])["coverage"].mean()
    piv = paired[paired["method"].isin([MLP, NEAREST])].pivot_table(
        index=["protocol", "experiment"], columns="method", values="mape_pct", aggfunc="mean")
    if piv.empty or MLP not in piv or NEAREST not in piv:
        return pd.DataFrame(columns=["protocol", "experiment", "synperf_mlp_pct", "nearest_gpu_b_pct", "coverage",
                                     "winner"])
    out = pd.DataFrame({"synperf_mlp_pct": piv[MLP], "nearest_gpu_b_pct": piv[NEAREST]})
    out["coverage"] = cov.reindex(out.index)
    out["winner"] = np.where(out["synperf_mlp_pct"] <= out["nearest_gpu_b_pct"], "synperf MLP", "nearest GPU (b)")
    out = out.reset_index()
    out["_order"] = out["protocol"].map({p: i for i, p in enumerate(PROTOCOL_LABELS)})
    return out.sort_values(["_order", "experiment"]).drop(columns="_order").reset_index(drop=True)


def fp8_paper_table(t: pd.DataFrame, experiment: str = "gemm_fp8") -> pd.DataFrame:
    """The FP8 GEMM experiment on the paper's split, per GPU: every method's MAPE beside the published number.

    Columns ``gpu``, ``split``, ``rows`` and one MAPE column per method, then ``SynPerf paper``
    (:data:`PAPER_FP8_UNSEEN`; the paper gives no per-GPU seen numbers).
    """
    long = per_gpu(t, "configured", [experiment], splits=("test_seen", "unseen"))
    if long.empty:
        return pd.DataFrame()
    piv = long.pivot_table(index=["gpu", "split"], columns="method", values="mape_pct")
    rows = long.groupby(["gpu", "split"])["n_rows"].max()
    out = pd.DataFrame(index=piv.index)
    out["rows"] = rows.astype(int)
    for m in _methods(long):
        out[METHOD_LABELS.get(m, m)] = piv.get(m)
    out = out.reset_index()
    out["SynPerf paper"] = [PAPER_FP8_UNSEEN.get(g) if s == "unseen" else np.nan for g, s in zip(out.gpu, out.split)]
    out["split"] = out["split"].map({"test_seen": "seen, held-out problems", "unseen": "unseen"})
    return out.sort_values(["split", "gpu"]).reset_index(drop=True)


# ------------------------------------------------------------------------------------------------
# figures

_COLORS = {"synperf_mlp": "#d62728", "synperf": "#ff7f0e", "nearest_gpu_roofline": "#1f77b4",
           "nearest_gpu_scaled": "#aec7e8", "gbt": "#2ca02c", "neusight": "#9467bd", "linear": "#8c564b",
           "roofline": "#7f7f7f"}


def _save(fig, path: str) -> None:
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def methods_figure(t: pd.DataFrame, experiments: list[str], path: str) -> None:
    """Figure-5-style bars, log scale: unseen-GPU MAPE per experiment and method, one panel per protocol.

    Bar height = mean over folds of the fold's pooled unseen MAPE (``scope == "all"``; nearest-GPU methods on
    the rows they cover).
    """
    a = t[(t["gpu"] == "ALL") & (t["scope"] == "all") & (t["split"] == "unseen") & t["experiment"].isin(experiments)]
    protos = [p for p in PROTOCOL_LABELS if p in set(a["protocol"])]
    methods = _methods(a) if len(a) else []
    fig, axes = plt.subplots(max(1, len(protos)), 1,
                             figsize=(max(10, 1.6 * len(experiments)), 3.4 * max(1, len(protos))), squeeze=False)
    width = 0.8 / max(1, len(methods))
    for ax, proto in zip(axes[:, 0], protos):
        piv = a[a["protocol"] == proto].pivot_table(index="experiment", columns="method", values="mape_pct",
                                                    aggfunc="mean").reindex(experiments)
        x = np.arange(len(experiments))
        for i, m in enumerate(methods):
            vals = piv[m].to_numpy(dtype="float64") if m in piv else np.full(len(x), np.nan)
            ax.bar(x + (i - (len(methods) - 1) / 2) * width, np.clip(vals, 0.1, None), width,
                   color=_COLORS.get(m, None), edgecolor="black", linewidth=0.3, label=METHOD_LABELS.get(m, m))
        ax.set_yscale("log")
        ax.set_ylim(0.5, max(200.0, np.nanmax(piv.to_numpy(dtype="float64")) * 2 if piv.size else 200.0))
        ax.axhline(11.5, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xticks(x)
        ax.set_xticklabels(experiments, fontsize=8)
        ax.set_ylabel("unseen MAPE (%)")
        ax.set_title(PROTOCOL_LABELS[proto], fontsize=10)
    if protos:
        axes[0, 0].legend(fontsize=7, ncol=min(len(methods), 7), loc="upper left")
    _save(fig, path)


def cdf_figure(cdf: pd.DataFrame, experiments: list[str], path: str, protocol: str = "logo") -> None:
    """Error CDF per kernel family (one panel per experiment), one line per method, unseen rows of ``protocol``.

    x: absolute percentage error (%, log scale); y: share of rows with at most that error.
    """
    c = cdf[(cdf["protocol"] == protocol) & (cdf["split"] == "unseen") & cdf["experiment"].isin(experiments)]
    n = max(1, len(experiments))
    cols = min(4, n)
    nrows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.0 * nrows), squeeze=False)
    methods = _methods(c) if len(c) else []
    for ax, e in zip(axes.flat, experiments):
        sub = c[c["experiment"] == e]
        for m in methods:
            s = sub[sub["method"] == m].sort_values("quantile")
            if len(s):
                ax.plot(np.clip(s["ape_pct"], 0.01, None), s["quantile"], color=_COLORS.get(m), linewidth=1.2,
                        label=METHOD_LABELS.get(m, m))
        ax.set_xscale("log")
        ax.set_xlim(0.1, 1000)
        ax.set_ylim(0, 1)
        ax.axvline(10, color="grey", linestyle=":", linewidth=0.7)
        ax.set_title(e, fontsize=9)
        ax.set_xlabel("APE (%)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(experiments):]:
        ax.axis("off")
    if methods:
        axes[0, 0].set_ylabel("share of unseen rows")
        axes[0, 0].legend(fontsize=6, loc="lower right")
    fig.suptitle(f"Error CDF on unseen GPUs, {PROTOCOL_LABELS.get(protocol, protocol)}", fontsize=10)
    _save(fig, path)


def scatter_figure(predictions: pd.DataFrame, path: str, max_points: int = 3000, seed: int = 0) -> None:
    """Predicted against measured latency (log-log), one panel per unseen GPU of the configured split.

    ``predictions`` needs ``experiment``, ``gpu``, ``split``, ``latency_us``, ``predicted_latency_us`` (the primary
    models' predictions). At most ``max_points`` seeded random rows per (experiment, GPU) are drawn; the lines are
    y = x and +-20%.
    """
    u = predictions[predictions["split"] == "unseen"]
    gpus = sorted(u["gpu"].unique())
    exps = sorted(u["experiment"].unique())
    cmap = plt.get_cmap("tab20")  # dark shades first, then the light ones, so neighbours differ
    colors = {e: cmap((2 * i) % 20 + (2 * i) // 20) for i, e in enumerate(exps)}
    cols = min(4, max(1, len(gpus)))
    nrows = int(np.ceil(max(1, len(gpus)) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.4 * nrows), squeeze=False)
    rng = np.random.default_rng(seed)
    for ax, g in zip(axes.flat, gpus):
        sub = u[u["gpu"] == g]
        lo, hi = np.inf, 0.0
        for e, s in sub.groupby("experiment", sort=True):
            if len(s) > max_points:
                s = s.iloc[np.sort(rng.choice(len(s), max_points, replace=False))]
            ax.scatter(s["latency_us"], s["predicted_latency_us"], s=2, alpha=0.35, color=colors[e], label=e,
                       rasterized=True)
            lo = min(lo, s["latency_us"].min(), s["predicted_latency_us"].min())
            hi = max(hi, s["latency_us"].max(), s["predicted_latency_us"].max())
        if np.isfinite(lo) and hi > 0:
            line = np.array([max(lo, 1e-3), hi])
            ax.plot(line, line, color="black", linewidth=0.8)
            ax.plot(line, 1.2 * line, color="grey", linewidth=0.5, linestyle="--")
            ax.plot(line, line / 1.2, color="grey", linewidth=0.5, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(g, fontsize=9)
        ax.set_xlabel("measured (us)", fontsize=8)
        ax.set_ylabel("predicted (us)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, markerscale=4, loc="upper left")
    for ax in list(axes.flat)[len(gpus):]:
        ax.axis("off")
    fig.suptitle("Primary models on unseen GPUs (configured split): predicted vs measured", fontsize=10)
    _save(fig, path)


# ------------------------------------------------------------------------------------------------
# the report section


#: the words that close the options a ``synperf`` fold chose, in its budget text
#: (:func:`synperf.evaluation.protocols.predict_protocol`)
CHOSEN = " (chosen by leave-one-training-GPU-out); "


def budget_cell(budgets: pd.DataFrame) -> str:
    """One cell of the budget table from the ``budget`` texts of one method and protocol (columns ``experiment``,
    ``fold``, ``budget``; one text per fold, repeated over its rows): each distinct text once; where every fold
    states the options it chose (:data:`CHOSEN`), each option and interval rule with the number of folds that
    chose it instead of every text in full."""
    per_fold = budgets.drop_duplicates(["experiment", "fold"])["budget"].astype(str)
    if not per_fold.str.contains(CHOSEN, regex=False).all():
        return "; ".join(sorted(set(per_fold)))
    chosen, rest = per_fold.str.split(CHOSEN, n=1, regex=False).str[0], per_fold.str.split(CHOSEN, n=1,
                                                                                            regex=False).str[1]
    option, interval = chosen.str.rsplit(", interval ", n=1).str[0], chosen.str.rsplit(", interval ", n=1).str[1]

    def counts(values: pd.Series) -> str:
        return ", ".join(f"{k} ({v})" for k, v in values.value_counts().items())
    return (f"chosen per fold by leave-one-training-GPU-out, folds in brackets: "
            f"{counts(option.str.replace('; rule ', ' with rule ', regex=False))}; interval "
            f"{counts(interval)}; " + "; ".join(sorted(set(rest))))


def methods_section(tables: pd.DataFrame, cdf: pd.DataFrame, predictions: pd.DataFrame, experiments: list[str],
                    out_summary: str, out_per_gpu: str, out_methods_fig: str, out_cdf_fig: str,
                    out_scatter_fig: str, figure_prefix: str = "figures/") -> list[str]:
    """Write the protocol CSVs and figures; return the report's Markdown lines for the methods comparison.

    ``experiments``: those that ran every protocol (averaged); other experiments in ``tables`` ran the configured
    split only and get per-GPU tables. ``out_summary``: :func:`method_means` (CSV); ``out_per_gpu``:
    :func:`per_gpu` for every protocol and both test splits (CSV).
    """
    from synperf.data.io import write_csv

    means = method_means(tables, experiments)
    write_csv(means, out_summary)
    long = pd.concat([per_gpu(tables, p, sorted(tables["experiment"].unique()), ("test_seen", "unseen"))
                      .assign(protocol=p) for p in PROTOCOL_LABELS if p in set(tables["protocol"])],
                     ignore_index=True)
    write_csv(long, out_per_gpu)
    methods_figure(tables, experiments, out_methods_fig)
    cdf_figure(cdf, experiments, out_cdf_fig)
    scatter_figure(predictions, out_scatter_fig)

    md = ["## Methods compared: baselines under three protocols", "",
          "Every method predicts the same test rows of the same folds. *configured*: the split of "
          "`config/config.yaml` (synperf MLP = the primary model above); *leave one GPU out*: each GPU of a family "
          "unseen in turn, the others seen; *leave one architecture out*: all GPUs of one architecture unseen "
          "(e.g. Blackwell while training on Ampere, Ada and Hopper), the honest test of a GPU nobody profiled. "
          "The leave-one-out MLPs train with `protocols.training` (a smaller budget: one model per fold). "
          "Baselines: *nearest GPU (a)* the same shape's latency on the most similar seen GPU (same class first: "
          "compute capability major version and HBM/GDDR memory; then closest peak and DRAM bandwidth) scaled by "
          "the bounding peak; *(b)* that latency with its roofline time replaced by the target's; both only where a "
          "seen GPU measured the shape (share of rows in brackets); *GBT* gradient-boosted trees on log shapes and "
          "GPU specs; *NeuSight-style* tiles and waves with an MLP utilisation; *ridge* on our features; *roofline* "
          "the spec-sheet bound (`synperf/evaluation/baselines.py`).", "",
          f"### Mean MAPE (%) over the folds of the {len(experiments)} core families", "",
          "Each (family, fold) pair weighs the same here, so a family with more GPUs (more leave-one-out folds) "
          "weighs more; the goals table instead averages each family's mean over its folds, each family weighing "
          "the same, and the two means differ.", "",
          md_table(means_matrix(means)), ""]
    if "budget" in tables.columns:
        b = (tables[tables["budget"].notna() & (tables["budget"] != "")]
             .groupby(["method", "protocol"])[["experiment", "fold", "budget"]].apply(budget_cell)
             .unstack("protocol"))
        if len(b):
            b = b[[p for p in PROTOCOL_LABELS if p in b.columns]].rename(columns=PROTOCOL_LABELS)
            b.index = [METHOD_LABELS.get(m, m) for m in b.index]
            md += ["Training budget of each method per protocol (every fitted method of a fold gets the same row "
                   "cap as that fold's MLP; on the configured split that is the primary model's):", "",
                   md_table(b.reset_index(names="method")), ""]
    un = means[means["split"] == "unseen"]
    if len(un):
        rows = []
        for m in _methods(un):
            row = {"method": METHOD_LABELS.get(m, m)}
            for p in [p for p in PROTOCOL_LABELS if p in set(un["protocol"])]:
                r = un[(un["method"] == m) & (un["protocol"] == p)]
                row[f"{p}: median / p90 APE"] = ("–" if r.empty or pd.isna(r["median_ape_pct"].iloc[0]) else
                                                 f"{r['median_ape_pct'].iloc[0]:.1f} / {r['p90_ape_pct'].iloc[0]:.1f}")
            rows.append(row)
        md += ["Unseen GPUs, median and p90 of the absolute percentage error (%, means over families and folds):", "",
               md_table(pd.DataFrame(rows)), ""]
    nv = nearest_vs_mlp(tables, experiments)
    if len(nv):
        md += ["### synperf MLP against nearest-GPU transfer (b), on the rows (b) covers", "",
               "Unseen-GPU MAPE (%) of both methods on exactly the rows nearest-GPU transfer can predict (a paired "
               "comparison; folds averaged). Nearest-GPU transfer needs the same shape measured on a seen GPU; the "
               "MLP also predicts the rest.", "",
               md_table(nv.assign(protocol=nv["protocol"].map(PROTOCOL_LABELS))), ""]
        for p in [p for p in PROTOCOL_LABELS if p in set(nv["protocol"])]:
            lost = nv[(nv["protocol"] == p) & (nv["winner"] != "synperf MLP")]["experiment"].tolist()
            md += [f"- {PROTOCOL_LABELS[p]}: nearest-GPU (b) beats the MLP on "
                   + (", ".join(lost) if lost else "no family") + "."]
        md += [""]
    no_loao = [e for e in experiments if "loao" in set(tables["protocol"])
               and not ((tables["experiment"] == e) & (tables["protocol"] == "loao")).any()]
    if no_loao:
        md += [f"No leave-one-architecture-out fold for {', '.join(no_loao)}: all its GPUs share one architecture "
               "(e.g. the four FP8 GPUs are all Hopper), so its loao averages leave it out.", ""]
    md += [f"![Unseen MAPE per method and protocol]({figure_prefix}{_name(out_methods_fig)})", "",
           f"![Error CDF per family]({figure_prefix}{_name(out_cdf_fig)})", ""]
    fp8 = fp8_paper_table(tables)
    if len(fp8):
        md += ["### FP8 GEMM on the paper's split (seen H20, H800; unseen H100, H200)", "",
               "Pipeweave's scaled-mm measurements, the SynPerf authors' own data; MAPE %. The paper reports 4.2% "
               "(H100) and 5.2% (H200) for its model.", "", md_table(fp8), ""]
    if "gemm_fp32_neusight" in set(tables["experiment"]):
        ns = per_gpu_matrix(per_gpu(tables, "configured", ["gemm_fp32_neusight"], ("test_seen", "unseen")),
                            seen_label="seen, NeuSight test files")
        md += ["### NeuSight's own FP32 GEMM data on its own split", "",
               "Trained on NeuSight's `dataset/train` files of its training GPUs "
               "(P4, P100, V100, T4, A100 PCIe 40 GB); "
               "seen = its `dataset/test` files on those GPUs (larger shapes than training), unseen = its test-only "
               "GPUs. Cells: MAPE / median / p90 APE (%).", "", md_table(ns), ""]
    for p in [p for p in PROTOCOL_LABELS if p in set(tables["protocol"])]:
        splits = ("test_seen", "unseen") if p == "configured" else ("unseen",)
        mat = per_gpu_matrix(per_gpu(tables, p, experiments, splits))
        md += [f"### Per family and GPU, {PROTOCOL_LABELS[p]}", "",
               "Cells: MAPE / median / p90 of the APE (%); [share of rows covered] where below 100%.", "",
               md_table(mat), ""]
    others = [e for e in sorted(tables["experiment"].unique()) if e not in experiments and e != "gemm_fp32_neusight"]
    if others:
        md += ["### Other data sources, configured split", "", "Cells as above.", "",
               md_table(per_gpu_matrix(per_gpu(tables, "configured", others, ("test_seen", "unseen")))), ""]
    md += [f"![Predicted vs measured on unseen GPUs]({figure_prefix}{_name(out_scatter_fig)})", ""]
    return md


def _name(path: str) -> str:
    from pathlib import Path

    return Path(path).name
