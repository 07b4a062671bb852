"""The report's "Performance ceiling" section (tables of :mod:`synperf.evaluation.ceiling`)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .tables import md_table


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _fmt(v) -> str:
    return f"{int(v)}" if isinstance(v, float) and v.is_integer() else str(v)


def _fixed(df: pd.DataFrame) -> pd.DataFrame:
    """Float columns as text with three decimals (the table helper keeps one)."""
    return df.assign(**{c: df[c].map(lambda x: "" if pd.isna(x) else f"{x:.3f}")
                        for c in df.columns if df[c].dtype.kind == "f"})


def ceiling_section(ceiling_dir: str, figure_rel: str) -> list[str]:
    """Markdown lines: calibration of the P80 models, the gap CDF figure, underperforming launches per
    experiment and GPU, the fused-MoE default configs beside the published A40/H20 figures and the authors'
    flagged lists, and the leave-one-GPU-out config suggestions beside the authors' improvements."""
    d = Path(ceiling_dir)
    s = json.loads((d / "summary.json").read_text())
    thr, q = s["underperform_gap"], s["quantile"]
    tr = s["training"]
    md = ["## Performance ceiling", "",
          f"A P{round(100 * q)} efficiency model per experiment: the primary recipe (same features, `train` rows and "
          f"leak checks) with the pinball loss at {q} and a small budget ({tr['max_epochs']} epochs, at most "
          f"{tr['max_train_rows']:,} rows; {s['cpu_seconds']['total']:.0f} CPU-s for the whole stage). Gap = measured "
          f"- P{round(100 * q)} efficiency (efficiency = theoretical time / latency); a launch underperforms when "
          f"the gap is below {thr}.", "",
          f"### Calibration: share of held-out measurements at or below the P{round(100 * q)} prediction "
          f"(ideal {q:.0%})", ""]
    cal = _read(d / "calibration.csv")
    if not cal.empty:
        piv = cal.pivot(index="experiment", columns="split", values="share_below_p80").mul(100).round(1)
        rows = cal.pivot(index="experiment", columns="split", values="rows")
        piv.columns = [f"{c} % below" for c in piv.columns]
        rows.columns = [f"{c} rows" for c in rows.columns]
        md += ["`test_seen`: held-out problems of seen GPUs; `unseen`: every row of the unseen GPUs.", "",
               md_table(pd.concat([piv, rows], axis=1).reset_index()), ""]
    md += [f"![Gap to the P{round(100 * q)} ceiling per experiment and GPU]({figure_rel})", "",
           "### Underperforming launches per experiment and GPU", "",
           "All measured launches (training rows included: the ceiling is read as a reference, not scored here); "
           "the 10 worst per experiment and GPU, with parameters and implementation, are in "
           "`results/ceiling/worst_launches.csv`.", ""]
    und = _read(d / "underperforming.csv")
    if not und.empty:
        und = und.assign(share=(100 * und["share"]).round(1), median_gap=und["median_gap"].map("{:+.3f}".format))
        md += [md_table(und.rename(columns={"share": "share %"})), ""]
    worst = _read(d / "worst_launches.csv")
    if not worst.empty:
        w = worst.sort_values("gap").groupby("experiment").head(1).sort_values("experiment")
        base = ["experiment", "gpu", "implementation", "latency_us", "measured_efficiency", "p80_efficiency", "gap"]
        other = [c for c in w.columns if c not in base + ["kernel", "split", "theoretical_time_us"]]
        params = w[other].apply(lambda r: ", ".join(f"{k}={_fmt(v)}" for k, v in r.items() if pd.notna(v)), axis=1)
        md += ["Worst launch per experiment:", "",
               md_table(_fixed(w[base].assign(parameters=params))), ""]
    moe = _read(d / "moe_underperforming.csv")
    md += ["### Fused MoE: vLLM's default config on the pipeweave sweeps", ""]
    if moe.empty:
        md += [f"Not computed: {s.get('moe_skipped', 'no fused-MoE sweep experiment')}.", ""]
        return md
    chk = s.get("default_recovery_check", {})
    md += ["The sweeps keep only each shape's fastest configs, so the default config's latency is recovered from "
           "the authors' `improvement_sglang_detail.csv` (`best / (1 - improvement)`; SGLang's default rule is "
           f"vLLM's). Check: on the {chk.get('shapes', 0)} shapes whose sweep holds the default config, the recovered "
           f"and measured latencies differ by at most {100 * (chk.get('max_abs_rel_err') or 0):.4f}%. "
           "Published (paper): A40 921 of 3,024 shapes (30.4%) underperform, H20 none; their shape set is larger "
           "than the 288 shapes per GPU of the public sweeps.", "",
           md_table(moe.assign(share=(100 * moe["share"]).round(1), mean_gap=moe["mean_gap"].map("{:+.3f}".format))
                    .rename(columns={"share": "share %"}).fillna("")), ""]
    demo = _read(d / "moe_demo_comparison.csv")
    if not demo.empty:
        md += ["The authors' flagged lists (`demo/topk_underperforming_<GPU>.csv`, default latency as listed): how "
               "many of their shapes our P80 model flags too, their mean gap and ours; few of their shapes are in the "
               "public sweeps (`in_sweep`).", "", md_table(_fixed(demo)), ""]
    sug = _read(d / "moe_suggestion_summary.csv")
    if not sug.empty:
        sug = _fixed(sug)
        md += ["### Fused MoE: suggested configs, leave one GPU out", "",
               "Per sweep GPU, a model trained on the other GPUs' sweep rows ranks, per shape, the configs the other "
               "GPUs measured for it plus the default, through `synperf.api.predict`; nothing measured on the "
               "target GPU chooses. A suggestion is *measured* when the target's (near-best) sweep holds it or it is "
               "the default; speedups are geometric means over those shapes (oracle: the target's measured best). "
               "*within 5%*: share of all shapes whose suggestion is measured within 5% of the oracle (a lower "
               "bound). Authors' columns: their mean improvement of the best config over SGLang's default, over "
               "the median config and over the mean config (%).", "", md_table(sug), ""]
    return md
