import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from check_regression import compare  # noqa: E402


def test_guard_flags_only_regressions_beyond_tolerance():
    expected = pd.DataFrame({"experiment": ["a", "b"], "seen_heldout_mape_pct": [5.0, 20.0],
                             "unseen_mape_pct": [10.0, 40.0]})
    current = pd.DataFrame({"experiment": ["a", "b"], "seen_heldout_mape_pct": [6.9, 26.0],
                            "unseen_mape_pct": [3.0, 49.9]})
    t = compare(current, expected).set_index(["experiment", "metric"])
    assert t.loc[("a", "seen_heldout"), "ok"]          # +1.9 pp < 2 pp
    assert not t.loc[("b", "seen_heldout"), "ok"]      # +6 pp > max(2, 5)
    assert t.loc[("a", "unseen"), "ok"]                # improvements pass
    assert t.loc[("b", "unseen"), "ok"]                # +9.9 < 10 (25% of 40)


def test_missing_experiment_fails():
    expected = pd.DataFrame({"experiment": ["a"], "seen_heldout_mape_pct": [5.0], "unseen_mape_pct": [10.0]})
    current = pd.DataFrame({"experiment": ["z"], "seen_heldout_mape_pct": [5.0], "unseen_mape_pct": [10.0]})
    assert not compare(current, expected)["ok"].any()


def test_protocol_guard_checks_unseen_means_of_guarded_methods(tmp_path):
    from check_regression import main

    expected = pd.DataFrame({"protocol": ["logo", "logo", "loao", "logo"],
                             "split": ["unseen", "unseen", "unseen", "test_seen"],
                             "method": ["synperf_mlp", "gbt", "synperf_mlp", "synperf_mlp"],
                             "mape_pct": [20.0, 30.0, 40.0, 5.0]})
    current = expected.assign(mape_pct=[24.9, 90.0, 51.0, 50.0])
    from check_regression import compare_protocols
    t = compare_protocols(current, expected).set_index(["protocol", "method"])
    assert list(t.index) == [("logo", "synperf_mlp"), ("loao", "synperf_mlp")]   # gbt and seen rows not guarded
    assert t.loc[("logo", "synperf_mlp"), "ok"]        # +4.9 < 5 (25% of 20)
    assert not t.loc[("loao", "synperf_mlp"), "ok"]    # +11 > 10
    cur, exp = tmp_path / "cur.csv", tmp_path / "exp.csv"
    current.to_csv(cur, index=False)
    expected.to_csv(exp, index=False)
    assert main(["--protocols", str(cur), str(exp)]) == 1
    assert main(["--protocols", str(tmp_path / "missing.csv"), str(exp)]) == 1
