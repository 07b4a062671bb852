"""Performance ceiling: P80 efficiency models, the gap of each measured launch to them, and fused-MoE configs.

* **Ceiling models**: per experiment, the primary model's recipe (same feature table, ``train`` rows, problem
  split and leak checks: :func:`synperf.pipeline.train.train_experiment`) with the pinball loss at
  ``quantile`` (0.8) and a small budget. Calibration: the share of held-out rows of seen GPUs (``test_seen``)
  and of unseen GPUs whose measured efficiency lies at or below the P80 prediction (ideal: 80%).
* **Gap**: ``measured efficiency - P80 efficiency`` per launch (efficiency = theoretical time / latency);
  a launch underperforms when the gap is below ``underperform_gap`` (-0.1).
* **Fused MoE, default configs** (pipeweave ``moe_dse`` sweeps): the sweeps keep only each shape's fastest
  configs; the default config's latency is recovered from the authors' ``improvement_sglang_detail.csv``
  (``improvement % = (1 - best / default) * 100``, checked on the shapes whose sweep holds the default
  config: :func:`default_latencies`). SGLang's default rule for an unquantized layer is vLLM's
  (:func:`synperf.model.kernels.fused_moe.default_config`).
* **Config suggestion, leave-one-GPU-out**: for each sweep GPU, an efficiency model trained on the other
  GPUs' sweep rows ranks, per shape, the configs the other GPUs measured for that shape plus the default
  (:func:`suggest_logo`); nothing measured on the target GPU chooses (enforced by :func:`check_fold`).

Sources: SynPerf/PipeWeave (arXiv 2601.14910) section "beyond simulation"; its public files
``pipetuning_test/moe_dse/`` and ``pipetuning_test/demo/topk_underperforming_<GPU>.csv``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from synperf.data.io import InputError, read_artefact, read_table, write_csv
from synperf.model.moe_configs import CONFIG_COLUMNS, CONFIG_KEYS, default_config

SHAPE = ["moe_stage", "num_tokens", "num_experts", "topk", "hidden_size", "inter_size"]
SWEEP_SHAPE = ["weight_type", "M", "E", "topk", "H", "N"]
#: published figures (paper, "beyond simulation"): share of fused-MoE shapes below the P80 ceiling by > 0.1
PUBLISHED_UNDERPERFORMING = {"a40": "921 of 3,024 (30.4%)", "h20": "none"}
#: parameters shown beside each launch in the worst-launch tables, by kernel family
PARAMS = {
    "gemm": ["m", "n", "k", "batch", "dtype"], "gemm_fp8": ["m", "n", "k", "dtype"],
    "attention_prefill": ["batch_size", "seq_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "dtype"],
    "attention_decode": ["batch_size", "kv_len", "num_heads", "num_kv_heads", "head_dim", "dtype"],
    "rmsnorm": ["num_tokens", "hidden_size", "dtype"], "silu_mul": ["num_tokens", "inter_size", "dtype"],
    "fused_moe": SHAPE + ["distribution"] + list(CONFIG_COLUMNS),
}


def ceiling_training(training: dict, ceiling: dict) -> dict:
    """The primary ``training`` with the ceiling's budget and the pinball loss at ``ceiling['quantile']``."""
    q = float(ceiling["quantile"])
    if not 0 < q < 1:
        raise InputError(f"ceiling.quantile={q}: must be in (0, 1)")
    return {**training, **(ceiling.get("training") or {}), "loss": f"pinball:{q}"}


def train_ceiling(features_dir, feature_set: str, experiments: dict, training: dict, ceiling: dict, seed: int,
                  threads: int, models_dir) -> dict[str, float]:
    """Train one P80 model per experiment into ``<models_dir>/<experiment>/<feature_set>-all``.

    Returns seconds per experiment."""
    from synperf.pipeline.train import train_experiment

    cfg = ceiling_training(training, ceiling)
    secs = {}
    for name, exp in sorted(experiments.items()):
        t0 = time.time()
        train_experiment(f"{features_dir}/{feature_set}/{name}.parquet", f"{features_dir}/{feature_set}/{name}.json",
                         name, exp, cfg, seed, threads, str(Path(models_dir) / name / f"{feature_set}-all"))
        secs[name] = round(time.time() - t0, 1)
    return secs


def launch_gaps(features_dir, feature_set: str, experiments: dict, models_dir) -> pd.DataFrame:
    """Every measured launch of every experiment with ``measured_efficiency``, ``p80_efficiency`` and ``gap``."""
    from synperf.model.estimator import TrainedModel
    from synperf.pipeline.common import _feature_frame

    frames = []
    for name, exp in sorted(experiments.items()):
        meta = read_artefact(f"{features_dir}/{feature_set}/{name}.json", "features")
        table = read_table(f"{features_dir}/{feature_set}/{name}.parquet").reset_index(drop=True)
        model = TrainedModel.load(Path(models_dir) / name / f"{feature_set}-all")
        p80 = model.predict_efficiency(_feature_frame(table, meta))
        keep = ["gpu", "split", "implementation", "latency_us", "theoretical_time_us"] + [
            c for c in PARAMS.get(exp["kernel"], []) if c in table.columns]
        out = table[list(dict.fromkeys(keep))].copy()
        out.insert(0, "experiment", name)
        out.insert(1, "kernel", exp["kernel"])
        out["measured_efficiency"] = out["theoretical_time_us"] / out["latency_us"]
        out["p80_efficiency"] = p80
        out["gap"] = out["measured_efficiency"] - out["p80_efficiency"]
        frames.append(out)
    return pd.concat(frames, ignore_index=True)


def calibration(gaps: pd.DataFrame) -> pd.DataFrame:
    """Share of held-out rows (``test_seen``: held-out problems of seen GPUs; ``unseen``) at or below the
    P80 prediction, per experiment and split (ideal 0.8)."""
    held = gaps[gaps["split"].isin(["test_seen", "unseen"])]
    return (held.assign(below=held["gap"] <= 0).groupby(["experiment", "split"])
            .agg(rows=("below", "size"), share_below_p80=("below", "mean")).reset_index())


def underperforming(gaps: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per experiment and GPU: launches, underperforming count (gap < ``threshold``) and share, median gap."""
    g = gaps.assign(under=gaps["gap"] < threshold)
    return (g.groupby(["experiment", "kernel", "gpu"])
            .agg(launches=("under", "size"), underperforming=("under", "sum"), share=("under", "mean"),
                 median_gap=("gap", "median")).reset_index())


def worst_launches(gaps: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` launches with the most negative gap per experiment and GPU."""
    return (gaps.sort_values("gap", kind="stable").groupby(["experiment", "gpu"], sort=True).head(n)
            .sort_values(["experiment", "gpu", "gap"]).reset_index(drop=True))


def gap_cdf_figure(gaps: pd.DataFrame, threshold: float, path) -> None:
    """One panel per experiment: empirical CDF of the gap per GPU, the threshold as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exps = sorted(gaps["experiment"].unique())
    cols = 4
    rows = int(np.ceil(len(exps) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, e in zip(axes.flat, exps):
        for gpu, d in gaps[gaps["experiment"] == e].groupby("gpu"):
            x = np.sort(d["gap"].to_numpy())
            ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=gpu, lw=1)
        ax.axvline(threshold, color="k", ls="--", lw=0.8)
        ax.set_title(e, fontsize=9)
        ax.set_xlim(-0.6, 0.4)
        ax.legend(fontsize=6)
        ax.set_xlabel("measured - P80 efficiency")
    for ax in list(axes.flat)[len(exps):]:
        ax.axis("off")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------------------
# fused MoE on the pipeweave sweeps
# ------------------------------------------------------------------------------------------------------------
def read_improvements(public_data, gpu_map: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The authors' ``improvement_detail.csv`` (best vs median / mean config, %) and
    ``improvement_sglang_detail.csv`` (best vs SGLang's default, %) with registry GPU ids and canonical shapes.

    Raises:
        InputError: a file is missing or has an unexpected column count.
    """
    base = Path(public_data) / "pipeweave/pipetuning_test/moe_dse/improve"
    out = []
    for fname, cols in (("improvement_detail.csv", ["vs_median_pct", "vs_mean_pct"]),
                        ("improvement_sglang_detail.csv", ["vs_default_pct"])):
        p = base / fname
        if not p.exists():
            raise InputError(f"{p}: missing (pipeweave moe_dse/improve)")
        d = pd.read_csv(p, encoding="utf-8-sig")
        if d.shape[1] != 7 + len(cols):
            raise InputError(f"{p}: expected {7 + len(cols)} columns, got {d.shape[1]}")
        d.columns = ["hw"] + SWEEP_SHAPE + cols
        d["gpu"] = d["hw"].map(gpu_map)
        out.append(_canon_shape(d.dropna(subset=["gpu"])))
    return out[0], out[1]


def _canon_shape(d: pd.DataFrame) -> pd.DataFrame:
    return d.rename(columns={"weight_type": "moe_stage", "M": "num_tokens", "E": "num_experts", "H": "hidden_size",
                             "N": "inter_size"})


def sweep_rows(features_dir, feature_set: str, experiment: str = "fused_moe_pipeweave") -> pd.DataFrame:
    """The pipeweave fused-MoE sweep rows (one grouped GEMM and config per row) of the experiment's table."""
    t = read_table(f"{features_dir}/{feature_set}/{experiment}.parquet")
    t = t[t["source"] == "pipeweave"]
    cols = ["gpu", "split"] + SHAPE + list(CONFIG_COLUMNS) + ["latency_us", "theoretical_time_us"]
    out = t[cols].copy()
    for c in SHAPE[1:] + list(CONFIG_COLUMNS):
        out[c] = out[c].astype("int64")
    return out.reset_index(drop=True)


def default_latencies(sweep: pd.DataFrame, vs_default: pd.DataFrame) -> pd.DataFrame:
    """Per (GPU, shape): the best measured latency, the default config and its latency
    ``best / (1 - vs_default_pct / 100)`` (microseconds), and ``check_rel_err``: where the sweep holds the
    default config itself, the relative difference between its measured and recovered latency."""
    best = sweep.groupby(["gpu"] + SHAPE, as_index=False)["latency_us"].min().rename(columns={"latency_us": "best_us"})
    d = best.merge(vs_default[["gpu"] + SHAPE + ["vs_default_pct"]], on=["gpu"] + SHAPE, how="inner")
    d["default_us"] = d["best_us"] / (1.0 - d["vs_default_pct"] / 100.0)
    dc = pd.DataFrame([default_config(m, e) for m, e in zip(d["num_tokens"], d["num_experts"])])
    dc.columns = list(CONFIG_COLUMNS)
    d = pd.concat([d.reset_index(drop=True), dc], axis=1)
    measured = d.merge(sweep[["gpu"] + SHAPE + list(CONFIG_COLUMNS) + ["latency_us"]],
                       on=["gpu"] + SHAPE + list(CONFIG_COLUMNS), how="left")
    d["check_rel_err"] = (measured["default_us"] / measured["latency_us"] - 1.0).to_numpy()
    return d


def moe_default_gaps(defaults: pd.DataFrame, models_dir, feature_set: str, registry,
                     experiment: str = "fused_moe_pipeweave") -> pd.DataFrame:
    """Gap of each shape's default config: measured (recovered) efficiency minus the P80 model's, the
    P80 efficiency predicted through :func:`synperf.api.predict` for the default config's launch."""
    from synperf.api import predict

    params = defaults[SHAPE + list(CONFIG_COLUMNS)].assign(moe_tp_size=1, moe_ep_size=1, distribution="random",
                                                             dtype="bfloat16")
    pred = predict("fused_moe", params, defaults["gpu"].tolist(), experiment=experiment, models_dir=models_dir,
                   registry=registry, feature_set=feature_set, models="evaluation")
    out = defaults.copy()
    out["theoretical_time_us"] = pred["theoretical_time_us"].to_numpy()
    out["p80_efficiency"] = pred["predicted_efficiency"].to_numpy()
    out["measured_efficiency"] = out["theoretical_time_us"] / out["default_us"]
    out["gap"] = out["measured_efficiency"] - out["p80_efficiency"]
    return out


def read_demo(public_data, gpu_map: dict[str, str], registry=None) -> pd.DataFrame:
    """The authors' ``demo/topk_underperforming_<GPU>.csv`` lists, canonical shape columns and ``gpu`` (the
    file's GPU token through ``gpu_map``, else its lower-case form when that is a registry id; other files are
    left out); ``avg_duration`` is the default config's latency (us)."""
    frames = []
    ids = registry.ids if registry is not None else set()
    for p in sorted((Path(public_data) / "pipeweave/pipetuning_test/demo").glob("topk_underperforming_*.csv")):
        token = p.stem[len("topk_underperforming_"):]
        gpu = gpu_map.get(token) or (token.lower() if token.lower() in ids else None)
        if gpu is None:
            continue
        frames.append(_canon_shape(pd.read_csv(p)).assign(gpu=gpu))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["gpu"] + SHAPE)


def demo_comparison(demo: pd.DataFrame, models_dir, feature_set: str, registry, threshold: float,
                    flagged_dse: pd.DataFrame, experiment: str = "fused_moe_pipeweave") -> pd.DataFrame:
    """Per GPU of the authors' lists: shapes listed, how many our P80 model also flags (gap of the listed
    default latency < ``threshold``), the authors' mean gap and ours, and how many listed shapes are in the
    ``moe_dse`` sweep and flagged there by us (``flagged_dse``: the output of :func:`moe_default_gaps`)."""
    if demo.empty:
        return pd.DataFrame()
    d = demo.copy()
    dc = pd.DataFrame([default_config(m, e) for m, e in zip(d["num_tokens"], d["num_experts"])])
    dc.columns = list(CONFIG_COLUMNS)
    d = pd.concat([d.reset_index(drop=True), dc], axis=1).rename(columns={"avg_duration": "default_us"})
    d = moe_default_gaps(d, models_dir, feature_set, registry, experiment)
    d["ours_flag"] = d["gap"] < threshold
    inside = d.merge(flagged_dse[["gpu"] + SHAPE + ["gap"]], on=["gpu"] + SHAPE, suffixes=("", "_dse"))
    inside["flag_dse"] = inside["gap_dse"] < threshold
    summ = d.groupby("gpu").agg(listed=("ours_flag", "size"), we_flag=("ours_flag", "sum"),
                                their_mean_gap=("perf_diff", "mean"), our_mean_gap=("gap", "mean"))
    summ["in_sweep"] = inside.groupby("gpu").size().reindex(summ.index).fillna(0).astype(int)
    summ["in_sweep_we_flag"] = inside.groupby("gpu")["flag_dse"].sum().reindex(summ.index).fillna(0).astype(int)
    return summ.reset_index()


def moe_underperforming(gaps: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per GPU: shapes, shapes whose default config underperforms, share, beside the published figures."""
    s = (gaps.assign(under=gaps["gap"] < threshold).groupby("gpu")
         .agg(shapes=("under", "size"), underperforming=("under", "sum"), share=("under", "mean"),
              mean_gap=("gap", "mean")).reset_index())
    s["published"] = s["gpu"].map(PUBLISHED_UNDERPERFORMING).fillna("")
    return s


def check_fold(model_meta: dict, candidates: pd.DataFrame, target: str) -> None:
    """Leave-one-GPU-out guard: the ranking model and the candidate configs must owe nothing to ``target``.

    Raises:
        InputError: the model's ``train_gpus`` include ``target``, or a candidate row comes from it.
    """
    if target in (model_meta.get("train_gpus") or []):
        raise InputError(f"fold {target}: the ranking model was trained on {target}'s measurements")
    if "gpu" in candidates.columns and (candidates["gpu"] == target).any():
        raise InputError(f"fold {target}: a candidate config comes from {target}'s own sweep")


def train_fold(sweep_table, feature_meta: str, target: str, training: dict, seed: int, threads: int,
               out_dir) -> dict:
    """Train the ranking model of fold ``target`` (primary loss, ceiling budget) on every sweep row of the
    other GPUs; the target's rows are marked ``unseen`` and never reach :func:`train_experiment`."""
    import tempfile

    from synperf.data.io import write_parquet
    from synperf.pipeline.train import train_experiment

    t = read_table(sweep_table)
    t = t[t["source"] == "pipeweave"].copy()
    others = sorted(set(t["gpu"]) - {target})
    t["split"] = np.where(t["gpu"] == target, "unseen", "train")
    exp = {"kernel": "fused_moe", "sources": ["pipeweave"], "seen": others, "unseen": [target]}
    with tempfile.TemporaryDirectory() as tmp:
        write_parquet(t.reset_index(drop=True), Path(tmp) / "t.parquet")
        train_experiment(str(Path(tmp) / "t.parquet"), feature_meta, f"moe_logo_{target}", exp, training, seed,
                         threads, str(out_dir))
    return read_artefact(Path(out_dir) / "meta.json")


def suggest_logo(sweep: pd.DataFrame, defaults: pd.DataFrame, target: str, models_dir, fold: str,
                 feature_set: str, registry) -> pd.DataFrame:
    """Suggested config per shape of ``target`` and its measured outcome.

    Candidates per shape: the configs the other GPUs' sweeps measured for it, plus the default. The model
    ``<models_dir>/<fold>/<feature_set>-all`` ranks them by predicted latency (:func:`synperf.api.predict`).
    Columns: shape, ``suggested`` config, ``suggested_us`` (the target's measurement when its sweep holds the
    config, else NaN: the config is outside the target's near-best set), ``best_us``, ``default_us``.
    """
    from synperf.api import predict
    from synperf.model.estimator import TrainedModel

    cands = sweep.loc[sweep["gpu"] != target, ["gpu"] + SHAPE + list(CONFIG_COLUMNS)]
    meta = TrainedModel.load(Path(models_dir) / fold / f"{feature_set}-all").meta
    check_fold(meta, cands, target)
    tgt = defaults[defaults["gpu"] == target]
    pool = pd.concat([cands.drop(columns="gpu"), tgt[SHAPE + list(CONFIG_COLUMNS)]], ignore_index=True)
    pool = pool.merge(tgt[SHAPE], on=SHAPE).drop_duplicates().reset_index(drop=True)
    from synperf.model.moe_configs import fits

    spec = registry[target]
    ok = [fits(dict(zip(CONFIG_KEYS, r)), spec) for r in pool[list(CONFIG_COLUMNS)].itertuples(index=False)]
    pool = pool[ok].reset_index(drop=True)
    params = pool.assign(moe_tp_size=1, moe_ep_size=1, distribution="random", dtype="bfloat16")
    pred = predict("fused_moe", params, target, experiment=fold, models_dir=models_dir, registry=registry,
                   feature_set=feature_set, models="evaluation")
    pool["predicted_us"] = pred["predicted_latency_us"].to_numpy()
    best = pool.sort_values("predicted_us", kind="stable").groupby(SHAPE, sort=False).head(1)
    meas = sweep[sweep["gpu"] == target][SHAPE + list(CONFIG_COLUMNS) + ["latency_us"]]
    out = best.merge(meas, on=SHAPE + list(CONFIG_COLUMNS), how="left").rename(columns={"latency_us": "suggested_us"})
    out = out.merge(tgt[SHAPE + ["best_us", "default_us"]], on=SHAPE)
    isdef = out[list(CONFIG_COLUMNS)].to_numpy() == tgt.set_index(SHAPE).loc[
        list(map(tuple, out[SHAPE].to_numpy())), list(CONFIG_COLUMNS)].to_numpy()
    out["is_default"] = isdef.all(axis=1)
    out.loc[out["is_default"] & out["suggested_us"].isna(), "suggested_us"] = out["default_us"]
    out.insert(0, "gpu", target)
    return out


def suggestion_summary(sugg: pd.DataFrame, improve: pd.DataFrame, vs_default: pd.DataFrame,
                       within: float = 0.05) -> pd.DataFrame:
    """Per GPU: shapes; share whose suggestion the target measured; geometric-mean speedup of the suggestion
    over the default and of the oracle (measured best) over the default, on the measured shapes; share within
    ``within`` of the oracle (unmeasured suggestions count as not within: a lower bound); the authors'
    mean improvements (best vs median, vs mean, vs default; %)."""
    s = sugg.assign(measured=sugg["suggested_us"].notna())
    s["sp_default"] = s["default_us"] / s["suggested_us"]
    s["sp_oracle_default"] = s["default_us"] / s["best_us"]
    s["within"] = (s["suggested_us"] <= (1 + within) * s["best_us"]).fillna(False)
    gmean = lambda x: float(np.exp(np.log(x.dropna()).mean())) if x.notna().any() else np.nan  # noqa: E731
    rows = []
    for gpu, d in s.groupby("gpu"):
        m = d[d["measured"]]
        imp = improve[improve["gpu"] == gpu]
        vd = vs_default[vs_default["gpu"] == gpu]
        rows.append({"gpu": gpu, "shapes": len(d), "measured_share": d["measured"].mean(),
                     "speedup_vs_default": gmean(m["sp_default"]),
                     "oracle_speedup_vs_default": gmean(m["sp_oracle_default"]),
                     "suggested_over_oracle": gmean(m["suggested_us"] / m["best_us"]),
                     f"within_{int(within * 100)}pct_of_oracle": d["within"].mean(),
                     "suggested_default_share": d["is_default"].mean(),
                     "authors_oracle_vs_default_pct": vd["vs_default_pct"].mean(),
                     "authors_vs_median_pct": imp["vs_median_pct"].mean(),
                     "authors_vs_mean_pct": imp["vs_mean_pct"].mean()})
    return pd.DataFrame(rows)


def run(features_dir, feature_set: str, experiments: dict, training: dict, ceiling: dict, seed: int, threads: int,
        public_data, gpu_map: dict[str, str], registry, models_dir, out_dir) -> dict:
    """The ``ceiling`` rule: ceiling models, calibration, gaps, the fused-MoE default-config analysis and the
    leave-one-GPU-out config suggestion. Writes the tables and figure under ``out_dir`` and returns the
    summary (also ``out_dir/summary.json``) with the CPU seconds of each part."""
    out, t0 = Path(out_dir), time.process_time()
    out.mkdir(parents=True, exist_ok=True)
    thr = float(ceiling["underperform_gap"])
    secs = train_ceiling(features_dir, feature_set, experiments, training, ceiling, seed, threads,
                         Path(models_dir) / "p80")
    t_train = time.process_time() - t0
    gaps = launch_gaps(features_dir, feature_set, experiments, Path(models_dir) / "p80")
    write_csv(calibration(gaps), out / "calibration.csv")
    write_csv(underperforming(gaps, thr), out / "underperforming.csv")
    write_csv(worst_launches(gaps, int(ceiling.get("top_n", 10))), out / "worst_launches.csv")
    gap_cdf_figure(gaps, thr, out / "gap_cdf.png")
    summary = {"quantile": ceiling["quantile"], "underperform_gap": thr,
               "training": ceiling_training(training, ceiling), "train_wall_seconds": secs}
    moe_exp = ceiling.get("moe_experiment", "fused_moe_pipeweave")
    try:
        improve, vs_default = read_improvements(public_data, gpu_map)
    except InputError as e:
        improve = vs_default = None
        summary["moe_skipped"] = str(e)
    names = ["moe_default_gaps", "moe_underperforming", "moe_demo_comparison", "moe_suggestions",
             "moe_suggestion_summary"]
    for n in names:
        write_csv(pd.DataFrame(), out / f"{n}.csv")
    if moe_exp in experiments and improve is not None:
        sweep = sweep_rows(features_dir, feature_set, moe_exp)
        defaults = default_latencies(sweep, vs_default)
        dg = moe_default_gaps(defaults, Path(models_dir) / "p80", feature_set, registry, moe_exp)
        write_csv(dg, out / "moe_default_gaps.csv")
        write_csv(moe_underperforming(dg, thr), out / "moe_underperforming.csv")
        write_csv(demo_comparison(read_demo(public_data, gpu_map, registry), Path(models_dir) / "p80", feature_set,
                                  registry, thr, dg, moe_exp), out / "moe_demo_comparison.csv")
        chk = dg["check_rel_err"].dropna()
        summary["default_recovery_check"] = {"shapes": int(len(chk)), "max_abs_rel_err": float(chk.abs().max())
                                             if len(chk) else None}
        fold_training = {**training, **(ceiling.get("training") or {})}
        meta_path = f"{features_dir}/{feature_set}/{moe_exp}.json"
        table_path = f"{features_dir}/{feature_set}/{moe_exp}.parquet"
        suggs = []
        for gpu in sorted(sweep["gpu"].unique()):
            fold = f"logo_{gpu}"
            train_fold(table_path, meta_path, gpu, fold_training, seed, threads,
                       Path(models_dir) / fold / f"{feature_set}-all")
            suggs.append(suggest_logo(sweep, defaults, gpu, models_dir, fold, feature_set, registry))
        sugg = pd.concat(suggs, ignore_index=True)
        write_csv(sugg, out / "moe_suggestions.csv")
        write_csv(suggestion_summary(sugg, improve, vs_default, float(ceiling.get("within_oracle", 0.05))),
                  out / "moe_suggestion_summary.csv")
    summary["cpu_seconds"] = {"ceiling_models": round(t_train, 1), "total": round(time.process_time() - t0, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
