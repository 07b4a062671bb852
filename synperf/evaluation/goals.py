"""The accuracy and speed goals beside what the pipeline measured and what the best baseline reaches.

One row per goal (:func:`goals_table`). *Measured* is the method ``synperf`` of the protocol tables (the
fingerprint predictor, docs/fingerprint.md: what :func:`synperf.api.predict` returns) where the protocol scores it,
else ``synperf_mlp`` (the paper's efficiency MLP; the detail column names which); *best baseline* is the lowest
value of the same statistic over the baselines of :mod:`synperf.evaluation.baselines` that cover every row the
statistic is computed on (coverage 1 on each of its families, so the same rows as the measured value);
*paper_mlp* is the same statistic of ``synperf_mlp``, the paper's method, scored beside on the same folds and rows
(NaN where a goal is not a protocol MAPE or a family lacks it). Values are MAPE in percent unless the goal says
otherwise.

Per family (experiment) and protocol, a MAPE is the mean over the protocol's folds of each fold's pooled
``gpu == "ALL"`` value, as the report's methods comparison computes it (one fold on the configured split).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the seven core families the goals are stated over
CORE_FAMILIES = ["gemm", "gemm_fp8", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul", "fused_moe"]
#: the measured method, in order of preference: the fingerprint predictor where a protocol scores it, else the MLP
OURS = ("synperf", "synperf_mlp")
#: our own methods, never counted as a baseline
NOT_BASELINES = {"synperf", "synperf_mlp"}
NEAREST = "nearest_gpu_roofline"
#: the workstation GPU with its own goal on the configured split (the GDDR GPU the core families test)
WORKSTATION_GPU = "l40s"
#: the method reported beside the measured one: the paper's efficiency MLP
PAPER = "synperf_mlp"
GOAL_COLUMNS = ["goal", "target", "measured", "best_baseline", "best_baseline_method", "met", "detail", "paper_mlp"]


def family_mape(protocols: pd.DataFrame, protocol: str, split: str, scope: str = "all", gpu: str = "ALL"
                ) -> pd.DataFrame:
    """MAPE (percent) and coverage per (experiment, method): the mean over the protocol's folds of the pooled value
    (``gpu`` ``"ALL"``), or of one GPU's (``gpu`` its id; the experiments without its rows have none).

    Args:
        protocols: rows of ``results/protocols/<experiment>.csv`` (any number of experiments).

    Returns:
        Columns ``experiment``, ``method``, ``mape_pct``, ``coverage``, ``n_folds``.
    """
    t = protocols[(protocols["protocol"] == protocol) & (protocols["split"] == split) & (protocols["gpu"] == gpu)
                  & (protocols["scope"] == scope)]
    return (t.groupby(["experiment", "method"]).agg(mape_pct=("mape_pct", "mean"), coverage=("coverage", "min"),
                                                    n_folds=("fold", "nunique")).reset_index())


def ours(per: pd.DataFrame, families: list[str]) -> tuple[pd.Series, str]:
    """Per family the measured method's MAPE (the first of :data:`OURS` with a value for every family present in
    ``per``), and that method's name."""
    present = [e for e in families if e in set(per["experiment"])]
    for method in OURS:
        v = per[per["method"] == method].set_index("experiment")["mape_pct"].reindex(present)
        if len(v) and v.notna().all():
            return v, method
    return pd.Series(dtype="float64"), OURS[0]


def _best_baseline(per: pd.DataFrame, families: list[str], stat) -> tuple[float, str]:
    """The lowest ``stat`` over baselines covering every row of every family in ``families``."""
    best, name = np.nan, ""
    if not families:
        return best, name
    for method, g in per[~per["method"].isin(NOT_BASELINES)].groupby("method"):
        g = g.set_index("experiment").reindex(families)
        if g["mape_pct"].isna().any() or (g["coverage"] < 1.0).any():
            continue
        v = float(stat(g["mape_pct"]))
        if np.isnan(best) or v < best:
            best, name = v, str(method)
    return best, name


def _row(goal, target, measured, limit, baseline=np.nan, baseline_method="", detail="", higher_is_better=False,
         paper_mlp=np.nan):
    if measured is None or pd.isna(measured):
        met = "not measured"
    else:
        met = "yes" if (measured >= limit if higher_is_better else measured <= limit) else "no"
    return {"goal": goal, "target": target, "measured": measured, "best_baseline": baseline,
            "best_baseline_method": baseline_method, "met": met, "detail": detail, "paper_mlp": paper_mlp}


def _beside(per: pd.DataFrame, families: list[str], measured_method: str) -> tuple[pd.Series, str]:
    """Per family of ``families`` the MAPE in ``per`` (:func:`family_mape`) of the paper's MLP (:data:`PAPER`),
    reported beside the measured method, and its name; NaN where it was not scored or is the measured method."""
    if measured_method == PAPER:
        return pd.Series(np.nan, index=pd.Index(families, name="experiment")), PAPER
    return per[per["method"] == PAPER].set_index("experiment")["mape_pct"].reindex(families), PAPER


def _mape_goal(per: pd.DataFrame, families: list[str], goal: str, target: str, limit: float, stat, label: str):
    mine, method = ours(per, families)
    fams = list(mine.index)
    measured = float(stat(mine)) if len(mine) else np.nan
    base, name = _best_baseline(per, fams, stat)
    detail = f"{method} {label} over {len(fams)} families: " + ", ".join(f"{e} {v:.1f}" for e, v in mine.items())
    other, other_name = _beside(per, fams, method)
    if len(fams) and other.notna().all():
        detail += f"; {other_name}: " + ", ".join(f"{e} {v:.1f}" for e, v in other.items())
    value = float(stat(other)) if len(fams) and other.notna().all() else np.nan
    return _row(goal, target, measured, limit, base, name, detail, paper_mlp=value)


#: the per-GPU band the 80% interval's coverage is to fall in (share of a GPU's scored rows, inclusive)
INTERVAL_BAND = (0.7, 0.9)


def interval_goal(protocols: pd.DataFrame, families: list[str], protocol: str = "logo", split: str = "unseen"
                  ) -> dict:
    """Goal row: the ``synperf`` method's 80% interval covers a share of each GPU's rows within
    :data:`INTERVAL_BAND`, per (family, GPU), on the ``split`` rows of ``protocol`` (default: unseen GPUs under leave
    one GPU out; ``"configured"``, ``"test_seen"``: held-out problems of seen GPUs); *measured* counts the (family,
    GPU) cells in the band, out of the cells with an interval (none for an unseen GPU in a fold with one training
    GPU, or for a seen GPU without held-out residuals of its own-GPU correction). The detail gives every cell's
    coverage in percent."""
    t = protocols[(protocols["protocol"] == protocol) & (protocols["split"] == split) & (protocols["gpu"] != "ALL")
                  & (protocols["scope"] == "all") & (protocols["method"] == OURS[0])
                  & protocols["experiment"].isin(families)]
    if "interval_coverage" in t.columns:
        t = t.dropna(subset=["interval_coverage"])
    else:
        t = t.iloc[0:0].assign(interval_coverage=np.nan)
    cells = t.groupby(["experiment", "gpu"], sort=False)["interval_coverage"].mean()
    lo, hi = INTERVAL_BAND
    inside = int(((cells >= lo) & (cells <= hi)).sum())
    where = {("logo", "unseen"): "leave-one-GPU-out, unseen GPUs",
             ("configured", "test_seen"): "held-out problems on seen GPUs"}.get((protocol, split),
                                                                              f"{protocol}, {split}")
    goal = (f"{where}: the 80% interval covers {100 * lo:.0f}-{100 * hi:.0f}% of each GPU's rows ((family, GPU) cells "
            "in the band)")
    if not len(cells):
        return _row(goal, "every cell", np.nan, 0.0, higher_is_better=True)
    detail = (f"{inside} of {len(cells)} cells in the band, {int((cells < lo).sum())} below, {int((cells > hi).sum())} "
              "above; coverage % " + ", ".join(f"{e} {g} {100 * v:.0f}" for (e, g), v in cells.items()))
    return _row(goal, f"all {len(cells)} cells", float(inside), float(len(cells)), detail=detail,
                higher_is_better=True)


#: serving goals: (scope of ``serving_mape.csv``, metric, target text, limit)
SERVING_GOALS = [("dense fp8 rows, GPU seen by every family", "ttft", "<= 15%", 15.0),
                 ("dense fp8 rows, GPU seen by every family", "tpot", "<= 10%", 10.0),
                 ("dense fp8 rows, GPU unseen by every family", "ttft", "<= 20%", 20.0),
                 ("dense fp8 rows, GPU unseen by every family", "tpot", "<= 15%", 15.0)]


def serving_goals(serving: pd.DataFrame | None, serving_logo: pd.DataFrame | None = None) -> list[dict]:
    """Goal rows for the serving simulator from ``results/serving/serving_mape.csv``
    (:func:`synperf.serving.score.mape_table`): TTFT/TPOT MAPE of vLLM dense fp8 rows with the row's GPU in every
    launched family's kernel training (seen) and in none (unseen: leave one GPU out), beside aiconfigurator's
    estimate on the rows it estimated (``aic_*``; its kernel tables hold measurements of these GPUs). With
    ``serving_logo`` (``results/serving/serving_logo_mape.csv``, :mod:`synperf.serving.logo`: every row priced by
    models that never saw its GPU) the unseen goals read that table, so they cover every GPU, not only the GPUs
    the configured split leaves out."""
    rows = []
    for scope, metric, target, limit in SERVING_GOALS:
        goal = f"serving, vLLM {scope}: {metric.upper()} MAPE"
        logo = serving_logo is not None and "unseen" in scope
        src = serving_logo if logo else serving
        if logo:
            goal += " (leave-one-GPU-out folds)"
        t = src[src["scope"] == scope] if src is not None and "scope" in src.columns else None
        if t is None or t.empty:
            rows.append(_row(goal, target, np.nan, limit))
            continue
        r = t.iloc[0]
        mine, aic = r[f"synperf_{metric}_mape_on_aic_rows_pct"], r[f"aic_{metric}_mape_pct"]
        detail = (f"{int(r['rows'])} rows; on the {int(r['aic_rows'])} rows aiconfigurator estimated: synperf "
                  f"{mine:.1f}, aiconfigurator {aic:.1f}")
        rows.append(_row(goal, target, float(r[f"{metric}_mape_pct"]), limit, float(r[f"aic_{metric}_mape_pct"]),
                         "aiconfigurator", detail))
    return rows


#: few-shot goals: (short-sweep size k, target text, limit of the mean MAPE % over the core families)
FEWSHOT_GOALS = [(32, "<= 5%", 5.0), (8, "<= 8%", 8.0)]


def fewshot_goals(fewshot: pd.DataFrame | None, families: list[str]) -> list[dict]:
    """Goal rows of ``results/tables/fewshot.csv`` (:func:`synperf.pipeline.fewshot.fewshot_stage`): per
    :data:`FEWSHOT_GOALS` the mean over the core families of each family's MAPE (mean over its unseen GPUs) after
    refitting on ``k`` measured rows; then the families no worse at any measured ``k > 0`` than at ``k = 0``, each
    family's means taken over the GPUs it has at every ``k`` (the detail gives each family's curve)."""
    f = (fewshot[fewshot["experiment"].isin(families)] if fewshot is not None and len(fewshot)
         else pd.DataFrame(columns=["experiment", "gpu", "k", "mape_pct", "uncalibrated_mape_pct"]))
    rows = []
    for k, target, limit in FEWSHOT_GOALS:
        goal = f"few-shot, k = {k} measured rows per unseen GPU: mean over core families"
        per = f[f["k"] == k].groupby("experiment")[["mape_pct", "uncalibrated_mape_pct"]].mean()
        if per.empty:
            rows.append(_row(goal, target, np.nan, limit))
            continue
        detail = (f"MAPE % over {len(per)} families (mean over their unseen GPUs; predicted constants on the same "
                  f"rows {per['uncalibrated_mape_pct'].mean():.1f}): "
                  + ", ".join(f"{e} {v:.1f}" for e, v in per["mape_pct"].items()))
        rows.append(_row(goal, target, float(per["mape_pct"].mean()), limit, detail=detail))
    goal = "few-shot: core families no worse at any k than at k = 0 (mean over their unseen GPUs)"
    ks = sorted(int(k) for k in f["k"].unique())
    curves = {}
    for e, g in f.groupby("experiment", sort=True):
        every = set.intersection(*(set(g.loc[g["k"] == k, "gpu"].astype(str)) for k in ks))
        g = g[g["gpu"].astype(str).isin(every)]
        curves[e] = g.groupby("k")["mape_pct"].mean().reindex(ks)
    curves = {e: c for e, c in curves.items() if 0 in ks and c.notna().all() and len(c) > 1}
    if not curves:
        rows.append(_row(goal, f"all {len(families)} families", np.nan, float(len(families)),
                         higher_is_better=True))
        return rows
    kept = sum(int((c.drop(0) <= c[0]).all()) for c in curves.values())
    detail = (f"MAPE % at k = {', '.join(str(k) for k in ks)}: "
              + "; ".join(f"{e} " + "/".join(f"{v:.1f}" for v in c) for e, c in curves.items()))
    rows.append(_row(goal, f"all {len(curves)} families", float(kept), float(len(curves)), detail=detail,
                     higher_is_better=True))
    return rows


def goals_table(protocols: pd.DataFrame, fewshot: pd.DataFrame | None = None,
                throughput: dict | None = None, families: list[str] | None = None,
                serving: pd.DataFrame | None = None, serving_logo: pd.DataFrame | None = None) -> pd.DataFrame:
    """The goals table (:data:`GOAL_COLUMNS`), one row per goal.

    Args:
        protocols: the protocol tables of (at least) the core families, concatenated.
        fewshot: ``results/tables/fewshot.csv`` (:func:`synperf.pipeline.fewshot.fewshot_stage`), or None.
        throughput: batch predict throughput on one core (:func:`synperf.pipeline.throughput.predict_throughput`'s
            result: ``launches_per_s`` over all launches, ``per_experiment`` rates), or None.
        families: the families the goals are stated over (default :data:`CORE_FAMILIES`).
        serving, serving_logo: ``results/serving/serving_mape.csv`` and ``serving_logo_mape.csv`` for the serving
            goals (:func:`serving_goals`), or None (the goals read "not measured").

    Returns:
        ``measured`` and ``best_baseline`` are numbers (NaN when not measured or no baseline applies); ``met`` is
        ``yes``, ``no`` or ``not measured``.
    """
    families = list(families or CORE_FAMILIES)
    rows = []
    conf_unseen = family_mape(protocols, "configured", "unseen")
    rows.append(_mape_goal(conf_unseen, families, "configured split, unseen GPUs: mean over core families",
                           "<= 10%", 10.0, np.mean, "MAPE %"))
    rows.append(_mape_goal(conf_unseen, families, "configured split, unseen GPUs: worst core family",
                           "<= 12% every family", 12.0, np.max, "MAPE %"))
    rows.append(_mape_goal(family_mape(protocols, "configured", "unseen", gpu=WORKSTATION_GPU), families,
                           f"configured split, {WORKSTATION_GPU} (GDDR, no class-mate in most families): worst core "
                           "family", "<= 20% every family", 20.0, np.max, "MAPE %"))
    paired = family_mape(protocols, "logo", "unseen", scope="nearest_covered")
    mine, method = ours(paired, families)
    near = paired[paired["method"] == NEAREST].set_index("experiment")["mape_pct"].reindex(mine.index)
    other, other_name = _beside(paired, list(mine.index), method)
    both = pd.DataFrame({"ours": mine, "nearest": near, "other": other})
    both = both.dropna(subset=["ours", "nearest"])
    lower = int((both["ours"] < both["nearest"]).sum())
    detail = ", ".join(f"{e} {r.ours:.1f} vs {r.nearest:.1f}" for e, r in both.iterrows())
    other_lower = (float((both["other"] < both["nearest"]).sum()) if len(both) and both["other"].notna().all()
                   else np.nan)
    if not np.isnan(other_lower):
        detail += f"; {other_name}: " + ", ".join(f"{e} {r.other:.1f}" for e, r in both.iterrows())
    rows.append(_row("leave-one-GPU-out, unseen GPUs: core families with a lower MAPE than nearest_gpu_roofline "
                     "(paired on its covered rows)", f"all {len(both)} families", float(lower) if len(both) else np.nan,
                     float(len(both)), baseline_method=NEAREST, detail=f"MAPE % {method} vs {NEAREST}: {detail}",
                     higher_is_better=True, paper_mlp=other_lower))
    rows.append(_mape_goal(family_mape(protocols, "logo", "unseen"), families,
                           "leave-one-GPU-out, unseen GPUs: mean over core families", "<= 13%", 13.0, np.mean,
                           "MAPE %"))
    rows.append(interval_goal(protocols, families))
    rows.append(_mape_goal(family_mape(protocols, "loao", "unseen"), families,
                           "leave-one-architecture-out, unseen GPUs: mean over core families", "<= 20%", 20.0,
                           np.mean, "MAPE %"))
    rows.append(_mape_goal(family_mape(protocols, "configured", "test_seen"), families,
                           "held-out problems on seen GPUs: worst core family", "<= 5% every family", 5.0, np.max,
                           "MAPE %"))
    rows.append(interval_goal(protocols, families, "configured", "test_seen"))
    rows += fewshot_goals(fewshot, families)
    tp = throughput or {}
    rate = tp.get("launches_per_s")
    per_exp = tp.get("per_experiment") or {}
    detail = ", ".join(f"{e} {v['launches_per_s']:,.0f}" for e, v in per_exp.items())
    if detail:
        detail = f"launches/s per family (a batch after the first call): {detail}"
        if tp.get("cold_launches_per_s") is not None:
            detail += (f"; first call of {tp.get('cold_launches', 0) // len(per_exp):,} launches per family, "
                       f"loading the models: {tp['cold_launches_per_s']:,.0f}")
    rows.append(_row("batch predict throughput on one CPU core (launches/s)", ">= 100000", rate, 100_000.0,
                     detail=detail, higher_is_better=True))
    rows += serving_goals(serving, serving_logo)
    return pd.DataFrame(rows, columns=GOAL_COLUMNS)
