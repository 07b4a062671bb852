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
