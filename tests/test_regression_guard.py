"""tools/check_regression.py (the regression guard) and tools/check_data_dir.sh (.ci/run's data check), on small
synthetic results and expected folders."""

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import check_regression as guard  # noqa: E402

TOLERANCE = """\
deterministic:
  methods: [roofline, nearest_gpu_scaled, nearest_gpu_roofline, linear]
  abs_pp: 0.1
trained:
  abs_pp: 2.0
  rel: 0.10
"""
EXPERIMENTS = {"gemm": "gemm", "rmsnorm": "rmsnorm"}
GPUS = {"a100": ("train", "test_seen"), "h100": ("train", "test_seen"), "a40": ("unseen",)}


def _mape_csv() -> pd.DataFrame:
    """results/tables/mape.csv: primary (v2_launch, all), a compare feature set and an ablation group."""
    rows = []
    for fs, group in (("v2_launch", "all"), ("v1", "all"), ("v2_launch", "math")):
        for i, (exp, kernel) in enumerate(EXPERIMENTS.items()):
            for g, splits in GPUS.items():
                for s in splits:
                    rows.append({"experiment": exp, "kernel": kernel, "feature_set": fs, "feature_group": group,
                                 "gpu": g, "split": s, "n_rows": 100 + i, "mape_pct": 10.0 + 10 * i,
                                 "median_ape_pct": 5.0, "p90_ape_pct": 20.0})
            for s in ("train", "test_seen", "unseen"):
                rows.append({"experiment": exp, "kernel": kernel, "feature_set": fs, "feature_group": group,
                             "gpu": "ALL", "split": s, "n_rows": 200 + i, "mape_pct": 12.0 + 10 * i,
                             "median_ape_pct": 5.0, "p90_ape_pct": 20.0})
    return pd.DataFrame(rows)


def _protocol_csv(exp: str) -> pd.DataFrame:
    """results/protocols/<exp>.csv: two folds, per-GPU and ALL rows, both scopes."""
    rows = []
    for fold in ("f0", "f1"):
        for method, mape, cov in (("synperf_mlp", 20.0, 1.0), ("roofline", 60.0, 1.0), ("gbt", 30.0, 1.0),
                                  ("nearest_gpu_roofline", 9.0, 0.5)):
            for split in ("test_seen", "unseen"):
                m = np.nan if method == "nearest_gpu_roofline" and split == "test_seen" else mape
                c = 0.0 if np.isnan(m) else cov
                for gpu in ("a100", "ALL"):
                    for scope in ("all", "nearest_covered"):
                        rows.append({"protocol": "logo", "fold": fold, "method": method, "gpu": gpu, "split": split,
                                     "n_rows": int(50 * c), "n_total": 50, "coverage": c, "mape_pct": m,
                                     "median_ape_pct": m, "p90_ape_pct": m, "fit_seconds": 1.0, "scope": scope,
                                     "experiment": exp, "kernel": EXPERIMENTS[exp]})
    return pd.DataFrame(rows)


def _write_results(root: Path, mape: pd.DataFrame, protocols: dict[str, pd.DataFrame]) -> Path:
    (root / "tables").mkdir(parents=True, exist_ok=True)
    (root / "protocols").mkdir(parents=True, exist_ok=True)
    mape.to_csv(root / "tables" / "mape.csv", index=False)
    for exp, t in protocols.items():
        t.to_csv(root / "protocols" / f"{exp}.csv", index=False)
        # CDF tables sit beside the protocol tables and are not guarded
        pd.DataFrame({"protocol": ["logo"], "method": ["roofline"], "split": ["unseen"], "quantile": [0.5],
                      "ape_pct": [1.0], "n_rows": [1]}).to_csv(root / "protocols" / f"{exp}_cdf.csv", index=False)
    return root


def _guard_env(tmp_path):
    """A config, a results folder and an empty expected folder with the tolerances: (results, expected, args)."""
    config = tmp_path / "config.yaml"
    config.write_text("feature_set: v2_launch\n")
    results = _write_results(tmp_path / "results", _mape_csv(), {e: _protocol_csv(e) for e in EXPERIMENTS})
    expected = tmp_path / "expected"
    expected.mkdir()
    (expected / "tolerance.yaml").write_text(TOLERANCE)
    return results, expected, ["--results", str(results), "--expected", str(expected), "--config", str(config)]


@pytest.fixture
def setup(tmp_path):
    """A config, a results folder, and an expected folder written from it with --update."""
    results, expected, args = _guard_env(tmp_path)
    assert guard.main(args + ["--update", "--reason", "initial values"]) == 0

    def run(mape=None, protocols=None) -> int:
        """Rewrite the results with modified tables, run the guard; its exit status."""
        if mape is not None or protocols is not None:
            _write_results(results, mape if mape is not None else _mape_csv(),
                           protocols if protocols is not None else {e: _protocol_csv(e) for e in EXPERIMENTS})
        return guard.main(args)

    return run, expected


def _edit(t: pd.DataFrame, mask, col: str, fn) -> pd.DataFrame:
    t = t.copy()
    t.loc[mask, col] = fn(t.loc[mask, col])
    return t


def _primary(t: pd.DataFrame):
    return (t["feature_set"] == "v2_launch") & (t["feature_group"] == "all")


def test_unchanged_results_pass(setup, capsys):
    run, _ = setup
    assert run() == 0
    out = capsys.readouterr().out
    assert " 0 failures, 0 notices (mape.csv)" in out and " 0 failures, 0 notices (protocols.csv)" in out


def test_expected_files_are_tidy(setup):
    _, expected = setup
    m = pd.read_csv(expected / "mape.csv")
    p = pd.read_csv(expected / "protocols.csv")
    assert list(m.columns) == guard.MAPE_KEYS + guard.MAPE_VALUES
    assert list(p.columns) == guard.PROTOCOL_KEYS + guard.PROTOCOL_VALUES
    assert set(m["feature_set"]) == {"v2_launch"} and "ALL" in set(m["gpu"])
    assert len(m) == 2 * (5 + 3)                               # per experiment: 5 GPU/split rows + 3 ALL rows
    # ALL / scope all only, over folds: MAPE and coverage means, counts totals
    r = p.set_index(guard.PROTOCOL_KEYS).loc[("gemm", "gemm", "logo", "nearest_gpu_roofline", "unseen")]
    assert (r["n_rows"], r["n_total"], r["coverage"], r["mape_pct"]) == (50, 100, 0.5, 9.0)
    assert len(p) == 2 * 4 * 2


def test_a_trained_value_better_than_expected_is_a_notice_and_a_worse_one_fails(setup, capsys):
    run, _ = setup
    t = _mape_csv()
    # the primary model's unseen a40 value, expected 10: allowed max(2, 10% x 10) = 2 pp
    mask = _primary(t) & (t["experiment"] == "gemm") & (t["gpu"] == "a40") & (t["split"] == "unseen")
    assert run(mape=_edit(t, mask, "mape_pct", lambda v: v * 0.5)) == 0
    out = capsys.readouterr().out
    assert "notice, trained values better than expected" in out and "gemm/gemm/v2_launch/a40/unseen" in out
    assert "0 failures, 1 notices (mape.csv)" in out and "--update --reason" in out
    assert run(mape=_edit(t, mask, "mape_pct", lambda v: v + 2.5)) == 1
    out = capsys.readouterr().out
    assert "gemm/gemm/v2_launch/a40/unseen" in out and "worse than expected" in out
    assert "1 failures, 0 notices (mape.csv)" in out and "0 failures, 0 notices (protocols.csv)" in out


def test_a_deterministic_baseline_better_than_expected_fails(setup, capsys):
    run, _ = setup
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    m = (prot["gemm"]["method"] == "nearest_gpu_roofline") & (prot["gemm"]["split"] == "unseen")
    prot["gemm"] = _edit(prot["gemm"], m, "mape_pct", lambda v: v - 0.5)
    assert run(protocols=prot) == 1
    out = capsys.readouterr().out
    assert "gemm/gemm/logo/nearest_gpu_roofline/unseen" in out and "better than expected" in out
    assert "1 failures, 0 notices (protocols.csv)" in out


def test_a_trained_end_to_end_value_better_than_expected_passes(tmp_path, capsys):
    results, expected, args = _guard_env(tmp_path)
    (results / "e2e").mkdir()
    summary = pd.DataFrame({"metric": ["prefill", "decode", "total"], "synperf_mape_pct": [12.0, 9.0, 8.0],
                            "configurations": 18})
    summary.to_csv(results / "e2e" / "e2e_summary.csv", index=False)
    assert guard.main(args + ["--update", "--reason", "with e2e"]) == 0
    summary.assign(synperf_mape_pct=[3.0, 2.0, 1.0]).to_csv(results / "e2e" / "e2e_summary.csv", index=False)
    assert guard.main(args) == 0
    assert "0 failures, 3 notices (e2e.csv)" in capsys.readouterr().out


def test_fails_when_one_family_doubles_while_others_hold(setup, capsys):
    run, _ = setup
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    prot["rmsnorm"] = _edit(prot["rmsnorm"], prot["rmsnorm"]["method"] == "synperf_mlp", "mape_pct", lambda v: v * 2)
    assert run(protocols=prot) == 1
    out = capsys.readouterr().out
    assert "rmsnorm/rmsnorm/logo/synperf_mlp/unseen" in out and "worse than expected" in out
    assert "gemm/gemm/logo/synperf_mlp" not in out


def test_fails_when_deterministic_baseline_moves_half_a_point(setup, capsys):
    run, _ = setup
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    m = (prot["gemm"]["method"] == "roofline") & (prot["gemm"]["split"] == "unseen")
    prot["gemm"] = _edit(prot["gemm"], m, "mape_pct", lambda v: v + 0.5)
    assert run(protocols=prot) == 1
    out = capsys.readouterr().out
    assert "gemm/gemm/logo/roofline/unseen" in out and "deterministic" in out


def test_trained_method_moving_half_a_point_passes(setup):
    run, _ = setup
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    prot["gemm"] = _edit(prot["gemm"], prot["gemm"]["method"] == "gbt", "mape_pct", lambda v: v + 0.5)
    assert run(protocols=prot) == 0


def test_fails_on_row_count_change(setup, capsys):
    run, _ = setup
    t = _mape_csv()
    mask = _primary(t) & (t["experiment"] == "rmsnorm") & (t["gpu"] == "ALL") & (t["split"] == "unseen")
    assert run(mape=_edit(t, mask, "n_rows", lambda v: v - 1)) == 1
    out = capsys.readouterr().out
    assert "rmsnorm/rmsnorm/v2_launch/ALL/unseen" in out and "n_rows" in out


def test_fails_on_n_total_or_coverage_change(setup):
    run, _ = setup
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    prot["gemm"] = _edit(prot["gemm"], prot["gemm"]["method"] == "gbt", "n_total", lambda v: v + 1)
    assert run(protocols=prot) == 1
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    prot["gemm"] = _edit(prot["gemm"], prot["gemm"]["method"] == "gbt", "coverage", lambda v: v - 1e-6)
    assert run(protocols=prot) == 1


def test_fails_on_missing_current_row(setup, capsys):
    run, _ = setup
    t = _mape_csv()
    drop = _primary(t) & (t["experiment"] == "gemm") & (t["gpu"] == "a100") & (t["split"] == "test_seen")
    assert run(mape=t[~drop]) == 1
    out = capsys.readouterr().out
    assert "gemm/gemm/v2_launch/a100/test_seen" in out and "missing from results" in out


def test_fails_on_row_absent_from_expected(setup, capsys):
    run, _ = setup
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    prot["gemm"] = pd.concat([prot["gemm"], prot["gemm"][prot["gemm"]["method"] == "gbt"].assign(method="newnet")])
    assert run(protocols=prot) == 1
    out = capsys.readouterr().out
    assert "gemm/gemm/logo/newnet/unseen" in out and "not in the expected file" in out


def test_trained_value_within_tolerance_passes(setup):
    run, _ = setup
    t = _mape_csv()
    # expected 22 -> allowed max(2, 10% x 22) = 2.2 pp worse; better by any amount is a notice
    mask = _primary(t) & (t["experiment"] == "rmsnorm") & (t["gpu"] == "ALL") & (t["split"] == "unseen")
    assert run(mape=_edit(t, mask, "mape_pct", lambda v: v + 2.1)) == 0
    assert run(mape=_edit(t, mask, "mape_pct", lambda v: v - 2.1)) == 0
    assert run(mape=_edit(t, mask, "mape_pct", lambda v: v + 2.3)) == 1
    assert run(mape=_edit(t, mask, "mape_pct", lambda v: v - 2.3)) == 0


def test_nan_equals_nan_but_not_a_number(setup, capsys):
    run, expected = setup
    exp = pd.read_csv(expected / "protocols.csv")
    assert exp["mape_pct"].isna().sum() == 2                   # nearest_gpu_roofline, test_seen, both families
    assert run() == 0
    prot = {e: _protocol_csv(e) for e in EXPERIMENTS}
    m = (prot["gemm"]["method"] == "nearest_gpu_roofline") & (prot["gemm"]["split"] == "test_seen")
    prot["gemm"] = _edit(prot["gemm"], m, "mape_pct", lambda v: v.fillna(9.0))
    assert run(protocols=prot) == 1
    assert "NaN against a number" in capsys.readouterr().out


def test_other_feature_sets_and_groups_are_not_guarded(setup):
    run, _ = setup
    t = _mape_csv()
    assert run(mape=_edit(t, ~_primary(t), "mape_pct", lambda v: v * 3)) == 0


def test_an_experiments_own_primary_feature_set_is_the_guarded_one(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("feature_set: v2\nexperiments:\n  gemm: {kernel: gemm}\n  rmsnorm: {kernel: rmsnorm, "
                   "feature_set: v1}\n")
    assert guard.primary_feature_set(cfg) == {"gemm": "v2", "rmsnorm": "v1"}
    rows = [{"experiment": e, "kernel": e, "feature_set": fs, "feature_group": "all", "gpu": "ALL",
             "split": "unseen", "n_rows": 3, "mape_pct": 1.0} for e in ("gemm", "rmsnorm") for fs in ("v1", "v2")]
    got = guard.extract_mape(pd.DataFrame(rows), guard.primary_feature_set(cfg))
    assert list(zip(got["experiment"], got["feature_set"])) == [("gemm", "v2"), ("rmsnorm", "v1")]


def test_missing_inputs_fail(setup, tmp_path):
    run, expected = setup
    (expected / "protocols.csv").unlink()
    assert run() == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert guard.main(["--results", str(empty), "--expected", str(expected),
                       "--config", str(tmp_path / "config.yaml")]) == 1


def test_update_needs_a_one_line_reason(setup, tmp_path):
    _, expected = setup
    args = ["--results", str(tmp_path / "results"), "--expected", str(expected),
            "--config", str(tmp_path / "config.yaml"), "--update"]
    before = (expected / "CHANGES.md").read_text()
    assert guard.main(args) == 2
    assert guard.main(args + ["--reason", "  "]) == 2
    assert guard.main(args + ["--reason", "two\nlines"]) == 2
    assert (expected / "CHANGES.md").read_text() == before
    (expected / "mape.csv").unlink()
    assert guard.main(args + ["--reason", "x"]) == 0
    assert (expected / "mape.csv").is_file() and (expected / "protocols.csv").is_file()
    lines = (expected / "CHANGES.md").read_text().splitlines()
    today = dt.date.today().isoformat()
    assert lines[-2:] == [f"{today} initial values", f"{today} x"]


def test_repository_tolerance_file_loads():
    tol = guard.Tolerance.load(REPO / "tests" / "expected" / "tolerance.yaml")
    assert tol.kind("roofline") == tol.kind("nearest_gpu_roofline") == "deterministic"
    # the closed-form ridge moves with the CPU kind (tests/expected/README.md): checked one-sided
    assert tol.kind("linear") == tol.kind("synperf_mlp") == tol.kind("some_new_method") == "trained"
    assert tol.kind(guard.PRIMARY_METHOD) == "trained"
    assert tol.allowed("roofline", 50.0) <= 0.1
    assert tol.allowed("neusight", 100.0) == max(tol.trained_abs_pp, tol.trained_rel * 100.0)


# ---------------------------------------------------------------------------------------------- .ci/run data check
def _check_data_dir(path: Path, ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(["bash", str(REPO / "tools" / "check_data_dir.sh"), str(path)], env=env,
                          capture_output=True, text=True)


def test_ci_fails_without_data_folder(tmp_path):
    missing = tmp_path / "no-public-data"
    r = _check_data_dir(missing, "true")
    assert r.returncode != 0
    assert str(missing) in r.stderr


def test_without_ci_missing_data_folder_skips(tmp_path):
    r = _check_data_dir(tmp_path / "no-public-data", None)
    assert r.returncode == 0 and "skipping" in r.stderr


def test_present_data_folder_passes(tmp_path):
    assert _check_data_dir(tmp_path, "true").returncode == 0


def test_ci_run_calls_the_data_check_before_the_main_job():
    text = (REPO / ".ci" / "run").read_text()
    assert text.index("tools/check_data_dir.sh") < text.index("snakemake --cores")
    # the guard is the last command, after the main job (only the stage's closing `end` follows it)
    main_job = text.index('snakemake --cores all --config public_data_dir="$DATA"')
    guard = text.rindex("python3 tools/check_regression.py")
    assert main_job < guard
    assert text[guard:].split("\n", 1)[1].split() == ["end"]


def test_end_to_end_mape_is_guarded_once_expected(tmp_path):
    results, expected, args = _guard_env(tmp_path)

    def e2e(total_mape: float, configurations: int = 18) -> None:
        (results / "e2e").mkdir(exist_ok=True)
        pd.DataFrame({"metric": ["prefill", "decode", "total"], "synperf_mape_pct": [12.0, 9.0, total_mape],
                      "paper_mape_pct": [5.7, 10.3, 7.2], "neusight_mape_pct": [78.4, 24.4, 43.7],
                      "configurations": configurations}).to_csv(results / "e2e" / "e2e_summary.csv", index=False)

    e2e(8.0)
    assert guard.main(args + ["--update", "--reason", "with e2e"]) == 0
    assert (expected / "e2e.csv").is_file()
    assert guard.main(args) == 0
    e2e(16.0)                                   # doubled: beyond max(abs, rel * 8)
    assert guard.main(args) == 1
    e2e(8.0, configurations=17)                 # one configuration fewer scored
    assert guard.main(args) == 1
    (results / "e2e" / "e2e_summary.csv").unlink()
    assert guard.main(args) == 1                # expected but missing from the results
