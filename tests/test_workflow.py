"""The Snakemake workflow: config validation messages, the DAG, and a small real run of every step."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from synperf.api import predict
from synperf.data.io import InputError
from synperf.pipeline.evaluate import evaluate_experiment
from synperf.pipeline.features import experiment_features
from synperf.pipeline.ingest import ingest_source
from synperf.pipeline.protocols import evaluate_protocols
from synperf.pipeline.train import train_experiment, train_models
from synperf.reporting.report import build_report

REPO = Path(__file__).resolve().parent.parent


def snakemake(*args, cwd=REPO):
    """Run snakemake; Snakemake prints its errors on stdout, so stderr is merged into ``.out``."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    proc.out = proc.stdout
    return proc



def _config() -> dict:
    """config/config.yaml, read afresh for each caller."""
    return yaml.safe_load((REPO / "config/config.yaml").read_text())


def test_wrong_config_type_is_named():
    proc = snakemake("-n", "--config", "seed=abc")
    assert proc.returncode != 0
    assert "seed" in proc.out and "integer" in proc.out


def test_unknown_gpu_in_an_experiment_is_named(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"experiments": {"gemm": {"kernel": "gemm", "seen": ["h100_sxm"],
                                                            "unseen": ["h999"]}}}))
    proc = snakemake("-n", "--configfile", str(cfg))
    assert proc.returncode != 0
    assert "experiments.gemm.unseen" in proc.out and "h999" in proc.out


@pytest.mark.xdist_group("default_dry_run")
def test_default_dag_reaches_the_report(default_dry_run):
    assert default_dry_run.returncode == 0, default_dry_run.stdout[-2000:]
    out = default_dry_run.stdout
    for rule in ("ingest_source", "merge_measurements", "features", "train", "evaluate", "report"):
        assert rule in out



def _dag_rules(out: str) -> set[str]:
    """The rule names of a dry run's "Job stats" table."""
    lines = out[out.index("Job stats:"):].splitlines()[3:]
    return {ln.split()[0] for ln in lines[:lines.index(next(ln for ln in lines if ln.startswith("total")))]}


@pytest.mark.xdist_group("default_dry_run")
def test_small_config_runs_every_rule_of_the_default_target(public_data, default_dry_run):
    """config/test/config.yaml (CI's small run) keeps every rule of the default DAG, with fewer jobs."""
    full = default_dry_run
    small = snakemake("-n", "--forceall", "--replace-workflow-config", "--configfile", "config/test/config.yaml",
                      "--config", f"public_data_dir={public_data}")
    assert full.returncode == 0, full.stdout[-2000:]
    assert small.returncode == 0, small.out[-2000:]
    full_rules, small_rules = _dag_rules(full.stdout), _dag_rules(small.out)
    assert {"ingest_source", "features", "check_leaks", "train", "train_ablation", "evaluate_protocols", "e2e",
            "ceiling", "report"} <= full_rules
    assert small_rules == full_rules

@pytest.mark.xdist_group("default_dry_run")
def test_the_e2e_rule_reads_the_manifest_e2e_inputs_and_the_kernel_ingest_does_not(public_data, default_dry_run):
    import re

    out = default_dry_run.stdout
    inputs = {}
    for rule, line in re.findall(r"\nrule (\w+):\n    input: ([^\n]*)", out):
        inputs.setdefault(rule, []).append(line)
    e2e = " ".join(inputs["e2e"])
    for rel in ("pipeweave/e2e/real/e2e_A100.jsonl", "pipeweave/config/Qwen2.5-14B.json",
                "pipeweave/workload/arxiv_8.csv", "pipeweave/dataset/collective/RTX 6000 Ada/all_reduce.csv"):
        assert f"{public_data}/{rel}" in e2e, rel
    ingest = " ".join(inputs["ingest_source"])
    assert "pipeweave/pipetuning_test/moe_dse/" in ingest
    assert not any(p in ingest for p in ("pipeweave/e2e/", "pipeweave/config/", "pipeweave/workload/",
                                         "pipeweave/dataset/collective/"))


@pytest.mark.xdist_group("default_dry_run")
def test_the_serving_rules_read_every_model_the_silicon_rows_price(public_data, default_dry_run):
    """Run on its own (``snakemake results/serving/serving_scores.csv``), the serving rule still finds the model
    config and the kernel model of every priced row, MoE rows included (fused_moe, the MoE examples)."""
    import re

    from synperf.serving.silicon import MODELS

    inputs = {}
    for rule, line in re.findall(r"\nrule (\w+):\n    input: ([^\n]*)", default_dry_run.stdout):
        inputs.setdefault(rule, []).append(line)
    for rule in ("serving", "serving_logo"):
        got = " ".join(inputs[rule])
        for name in MODELS.values():
            assert f"examples/models/{name}.json" in got, (rule, name)
        assert "models/fused_moe/fingerprint.joblib" in got, rule
    assert all(f"examples/models/{n}.json" in " ".join(inputs["serving_launches"]) for n in MODELS.values())


@pytest.mark.xdist_group("vidur_measurements")
def test_every_step_on_real_vidur_rows(vidur_measurements, tmp_path):
    reg, allp, alls = vidur_measurements
    cfg = _config()
    exp = cfg["experiments"]["rmsnorm"]
    merged = json.loads(alls.read_text())
    assert merged["duplicate_rows_merged"] > 0   # Vidur repeats token counts 2048 and 4096 (README)
    feat, fmeta = tmp_path / "f.parquet", tmp_path / "f.json"
    feat1, fmeta1 = tmp_path / "f1.parquet", tmp_path / "f1.json"
    experiment_features(str(allp), "rmsnorm", exp, reg,
                        {"v2": (str(feat), str(fmeta)), "v1": (str(feat1), str(fmeta1))}, 0)
    # the feature sets of one experiment share rows, split and problem keys, and differ in their features
    f2, f1 = pd.read_parquet(feat), pd.read_parquet(feat1)
    assert f2[["gpu", "split", "problem_key", "latency_us"]].equals(f1[["gpu", "split", "problem_key", "latency_us"]])
    assert "fma_all_cycle" in f2.columns and "fma_all_cycle" not in f1.columns
    training = {**cfg["training"], "max_epochs": 15, "early_stopping_patience": 5}
    mdir = tmp_path / "models" / "rmsnorm" / "v2-all"
    train_experiment(str(feat), str(fmeta), "rmsnorm", exp, training, 0, 1, str(mdir))
    preds, mape = tmp_path / "p.parquet", tmp_path / "mape.csv"
    evaluate_experiment(str(feat), str(fmeta), str(mdir), "rmsnorm", str(preds), str(mape))
    table = pd.read_csv(mape)
    unseen = table[(table.gpu == "a40") & (table.split == "unseen")]
    assert len(unseen) == 1 and unseen["n_rows"].iloc[0] > 100
    seen = table[(table.gpu == "ALL") & (table.split == "test_seen")]
    assert 0 < seen["mape_pct"].iloc[0] < 100

    # the bulk API gives the same numbers as the evaluation for the same rows
    p = pd.read_parquet(preds)
    f = pd.read_parquet(feat)
    rows = f[f.gpu == "a40"].head(50)
    api = predict("rmsnorm", rows[["num_tokens", "hidden_size", "dtype"]].reset_index(drop=True), "a40",
                  models_dir=tmp_path / "models", feature_set="v2")
    assert api["predicted_latency_us"].to_numpy() == pytest.approx(
        p.loc[rows.index, "predicted_latency_us"].to_numpy(), rel=1e-5)

    # an ablation model on the memory features only, through the rule's stage (train, then score)
    adir = tmp_path / "models" / "rmsnorm" / "v2-memory"
    amape = tmp_path / "amape.csv"
    train_models("rmsnorm", exp, [{"feature_set": "v2", "group": "memory", "training": training, "table": str(feat),
                                   "meta": str(fmeta), "model_dir": str(adir),
                                   "predictions": str(tmp_path / "ap.parquet"), "mape": str(amape)}], 0, 1)
    ameta = json.loads((adir / "meta.json").read_text())
    assert "fma_all_cycle" not in ameta["encoder"]["numeric"] and "dram_cycle" in ameta["encoder"]["numeric"]

    out = tmp_path / "report"
    build_report([str(mape)], str(alls), [str(mdir / "meta.json")], [str(fmeta)], str(out / "report.md"),
                 str(out / "mape.csv"), str(out / "summary.csv"), str(out / "counts.csv"), str(out / "dropped.csv"),
                 str(out / "fig.png"), ablation_tables=[str(amape)], out_ablation=str(out / "ablation.csv"))
    md = (out / "report.md").read_text()
    assert "rmsnorm" in md and "unsupported_op:vidur:gelu" in md
    abl = pd.read_csv(out / "ablation.csv")
    assert list(abl.columns) == ["experiment", "all seen", "all unseen", "memory seen", "memory unseen"]
    assert (out / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_missing_data_folder_is_named():
    proc = snakemake("-n", "--config", "public_data_dir=/nonexistent/data")
    assert proc.returncode != 0
    assert "public_data_dir" in proc.out and "/nonexistent/data" in proc.out and "is not a folder" in proc.out


@pytest.mark.xdist_group("default_dry_run")
def test_protocols_are_in_the_default_target(default_dry_run):
    assert default_dry_run.returncode == 0, default_dry_run.stdout[-2000:]
    assert "evaluate_protocols" in default_dry_run.stdout   # the report reads the protocol tables


@pytest.mark.xdist_group("vidur_measurements")
def test_protocols_run_on_real_rows(vidur_measurements, tmp_path):
    reg, allp, alls = vidur_measurements
    cfg = _config()
    feat, fmeta = tmp_path / "f.parquet", tmp_path / "f.json"
    experiment_features(str(allp), "rmsnorm", cfg["experiments"]["rmsnorm"], reg,
                        {"v2_paper": (str(feat), str(fmeta))}, 0)
    out, cdf = tmp_path / "proto.csv", tmp_path / "cdf.csv"
    evaluate_protocols(str(feat), str(fmeta), "rmsnorm", cfg["experiments"]["rmsnorm"], reg, 0,
                       {**cfg["training"], "max_epochs": 5}, ["logo", "loao"], ["roofline", "nearest_gpu_roofline"],
                       1, str(out), out_cdf=str(cdf))
    t = pd.read_csv(out)
    folds = set(t["fold"])
    assert folds == {"logo:a100_sxm4_80gb", "logo:a40", "logo:h100_sxm", "loao:Ampere", "loao:Hopper"}
    # A100 + A40 unseen together, then H100: the Hopper fold has the rows of the h100 one-GPU fold (reused)
    by = t[(t.scope == "all") & (t.gpu == "ALL")].set_index(["fold", "method", "split"])["mape_pct"]
    assert by.loc[("loao:Hopper", "roofline", "unseen")] == by.loc[("logo:h100_sxm", "roofline", "unseen")]
    assert by.loc[("loao:Ampere", "roofline", "unseen")] != by.loc[("logo:a40", "roofline", "unseen")]
    assert set(t["scope"]) == {"all", "nearest_covered"}
    unseen = t[(t.gpu == "ALL") & (t.split == "unseen") & (t.scope == "all")].set_index(["fold", "method"])
    assert unseen["mape_pct"].notna().all() and (unseen.loc[("loao:Hopper", "roofline"), "coverage"] == 1.0)
    c = pd.read_csv(cdf)
    assert set(c["method"]) == {"roofline", "nearest_gpu_roofline"} and set(c["protocol"]) == {"logo", "loao"}
    # GPUs of one architecture: leave-one-architecture-out has no fold, the other protocols still run
    one_arch = {**cfg["experiments"]["rmsnorm"], "seen": ["a100_sxm4_80gb"], "unseen": ["a40"]}
    feat1, fmeta1 = tmp_path / "f1.parquet", tmp_path / "f1.json"
    experiment_features(str(allp), "rmsnorm", one_arch, reg, {"v2_paper": (str(feat1), str(fmeta1))}, 0)
    evaluate_protocols(str(feat1), str(fmeta1), "rmsnorm", one_arch, reg, 0, {**cfg["training"], "max_epochs": 5},
                       ["logo", "loao"], ["roofline"], 1, str(tmp_path / "p1.csv"))
    assert set(pd.read_csv(tmp_path / "p1.csv")["protocol"]) == {"logo"}


@pytest.mark.xdist_group("vidur_measurements")
def test_each_leave_one_out_fold_reads_the_feature_set_chosen_without_its_tested_gpus(vidur_measurements, tmp_path,
                                                                                       caplog):
    import logging

    reg, allp, alls = vidur_measurements
    cfg = _config()
    exp = cfg["experiments"]["rmsnorm"]
    tables = {fs: (str(tmp_path / f"{fs}.parquet"), str(tmp_path / f"{fs}.json")) for fs in ("v2_paper", "v1")}
    experiment_features(str(allp), "rmsnorm", exp, reg, tables, 0)
    # the other experiments' selection scores: one trained on A100 favours v1 strongly, one trained on H100 mildly
    # favours v2_paper; rmsnorm's own scores (which saw every fold's GPUs) favour v2_paper and must not count
    experiments = {"rmsnorm": exp, "on_a100": {"kernel": "gemm", "seen": ["a100_sxm4_80gb", "l40s"]},
                   "on_h100": {"kernel": "silu_mul", "seen": ["h100_sxm", "b200"]}}
    score_rows = [{"experiment": n, "feature_set": fs, "fold": f"losgo:{g}", "validation_gpu": g, "mape_pct": v}
                  for n, per in (("on_a100", {"v1": 10.0, "v2_paper": 30.0}),
                                 ("on_h100", {"v1": 12.0, "v2_paper": 10.0}),
                                 ("rmsnorm", {"v1": 90.0, "v2_paper": 10.0}))
                  for fs, v in per.items() for g in experiments[n]["seen"]]
    scores = tmp_path / "scores.csv"
    pd.DataFrame(score_rows).to_csv(scores, index=False)
    training = {**cfg["training"], "max_epochs": 3}
    methods = ["synperf_mlp", "roofline"]

    def run(out, **kw):
        evaluate_protocols(*tables["v2_paper"], "rmsnorm", exp, reg, 0, training, ["logo", "loao"], methods, 1,
                           str(out), **kw)
        t = pd.read_csv(out)
        return t[(t.scope == "all") & (t.gpu == "ALL")].set_index(["fold", "method", "split"])["mape_pct"]

    with caplog.at_level(logging.INFO, logger="synperf.pipeline.protocols"):
        chosen = run(tmp_path / "chosen.csv", feature_tables=tables, feature_scores=[str(scores)],
                     experiments=experiments, configured_feature_set="v2_paper")
    picked = {m.split(":")[0] + ":" + m.split(":")[1]: m.split("feature set ")[1].split()[0]
              for m in caplog.messages if "feature set" in m}
    # A40 tested: both others count (v1 wins); A100 tested: only on_h100 (v2_paper); H100 tested: only on_a100 (v1);
    # Ampere held out: on_a100 is out; Hopper held out: on_h100 is out
    assert picked == {"logo:a100_sxm4_80gb": "v2_paper", "logo:a40": "v1", "logo:h100_sxm": "v1",
                      "loao:Ampere": "v2_paper", "loao:Hopper": "v1"}
    fixed = run(tmp_path / "fixed.csv")
    # the baselines read the configured table in every fold; the MLP of a v1 fold trained on other features
    roof = [k for k in fixed.index if k[1] == "roofline"]
    assert chosen.loc[roof].equals(fixed.loc[roof])
    assert chosen.loc[("logo:a40", "synperf_mlp", "unseen")] != fixed.loc[("logo:a40", "synperf_mlp", "unseen")]
    assert chosen.loc[("logo:a100_sxm4_80gb", "synperf_mlp", "unseen")] == \
        fixed.loc[("logo:a100_sxm4_80gb", "synperf_mlp", "unseen")]


def test_neusight_experiment_keeps_the_upstream_train_and_test_files(public_data, tmp_path):
    reg = str(REPO / "config/gpus.yaml")
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    exp = cfg["experiments"]["gemm_fp32_neusight"]
    src, summ = tmp_path / "n.parquet", tmp_path / "n.json"
    ingest_source("neusight", str(public_data), reg, cfg["ingest"].get("neusight"), str(src), str(summ))
    rows = pd.read_parquet(src)
    rows = rows[rows.kernel == "gemm"]
    from synperf.evaluation.split import experiment_split
    s = experiment_split(rows, exp)
    seen = rows.gpu.isin(exp["seen"])
    in_test = rows["source_file"].str.contains("dataset/test/")
    assert (s[seen & in_test] == "test_seen").all() and (s[seen & ~in_test] == "train").all()
    assert (s[rows.gpu.isin(exp["unseen"])] == "unseen").all()
    assert (seen & in_test).sum() > 1000 and (seen & ~in_test).sum() > 50_000


@pytest.mark.xdist_group("vidur_measurements")
def test_a_config_selection_that_yields_nothing_names_its_key(vidur_measurements, tmp_path):
    reg, allp, alls = vidur_measurements
    cfg = _config()
    base = cfg["experiments"]["rmsnorm"]
    out = {"v1": (str(tmp_path / "f.parquet"), str(tmp_path / "f.json"))}
    cases = [({**base, "unseen": ["a40", "l40s"]}, r"experiments\.rn\.unseen: l40s has no rmsnorm rows"),
             ({**base, "dtypes": ["bfloat16"]}, r"experiments\.rn\.dtypes: 'bfloat16' selects no rmsnorm row"),
             ({**base, "sources": ["aiconfigurator"]}, r"experiments\.rn\.sources: 'aiconfigurator' selects no"),
             ({**base, "source_gpus": {"vidur": ["l40s"]}},
              r"^experiments\.rn\.source_gpus\.vidur: l40s has no rmsnorm row of vidur; remove it or add its data$")]
    for exp, message in cases:
        with pytest.raises(InputError, match=message):
            experiment_features(str(allp), "rn", exp, reg, out, 0)
        assert not (tmp_path / "f.parquet").exists()
    experiment_features(str(allp), "rn", base, reg, out, 0)   # the configured experiment selects rows on every GPU
    assert set(pd.read_parquet(tmp_path / "f.parquet")["gpu"]) == {"a100_sxm4_80gb", "h100_sxm", "a40"}
    # source_gpus keeps the source's rows of the listed GPUs only: a seen GPU left out of it has no rows
    message = (r"^experiments\.rn\.seen: h100_sxm has no rmsnorm rows \(sources \['vidur'\], dtypes \['float16'\], "
               r"source_gpus \{'vidur': \['a100_sxm4_80gb', 'a40'\]\}\)")
    with pytest.raises(InputError, match=message):
        experiment_features(str(allp), "rn", {**base, "source_gpus": {"vidur": ["a100_sxm4_80gb", "a40"]}}, reg, out,
                            0)


def test_source_gpus_keeps_one_sources_rows_of_the_listed_gpus():
    from synperf.pipeline.common import select_rows

    df = pd.DataFrame({"kernel": ["gemm"] * 5 + ["rmsnorm"], "dtype": "float16",
                       "source": ["aiconfigurator", "aiconfigurator", "vidur", "vidur", "vidur", "vidur"],
                       "gpu": ["h100_sxm", "l40s", "h100_sxm", "a40", "a100_sxm4_80gb", "a40"]})
    exp = {"kernel": "gemm", "sources": ["aiconfigurator", "vidur"], "source_gpus": {"vidur": ["a40"]}}
    assert select_rows(df, exp).index.tolist() == [0, 1, 3]
    assert select_rows(df, {**exp, "source_gpus": None}).index.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.xdist_group("vidur_measurements")
def test_a_fold_reuses_another_folds_predictions_when_its_rows_agree(vidur_measurements, tmp_path, caplog):
    import logging

    reg, allp, alls = vidur_measurements
    cfg = _config()
    exp = cfg["experiments"]["rmsnorm"]
    feat, fmeta = tmp_path / "f.parquet", tmp_path / "f.json"
    experiment_features(str(allp), "rmsnorm", exp, reg, {"v2_paper": (str(feat), str(fmeta))}, 0)
    # leave-one-architecture-out's Hopper fold holds the same rows as leave-one-GPU-out's H100 fold: shared
    with caplog.at_level(logging.INFO, logger="synperf.pipeline.protocols"):
        evaluate_protocols(str(feat), str(fmeta), "rmsnorm", exp, reg, 0, {**cfg["training"], "max_epochs": 2},
                           ["logo", "loao"], ["roofline"], 1, str(tmp_path / "p0.csv"))
    assert any(m.startswith("loao:Hopper: same rows and choices as logo:h100_sxm") for m in caplog.messages)
