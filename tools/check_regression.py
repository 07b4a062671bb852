"""Regression guard: compare this run's MAPE table with the committed expected values.

    python3 tools/check_regression.py [results/tables/mape_summary.csv] [tests/expected/mape_summary.csv]

Fails (exit 1) when an experiment's held-out-shape (seen) or unseen-GPU MAPE is worse than the expected value
by more than the tolerance: max(TOL_ABS_PP percentage points, TOL_REL x expected). Improvements pass (update the
expected file in the same commit to lock them in). Training is seeded, but multi-threaded CPU reductions make
runs differ slightly, hence the tolerance. Prints the comparison table either way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

TOL_ABS_PP = 2.0
TOL_REL = 0.25
COLUMNS = ("seen_heldout_mape_pct", "unseen_mape_pct")


def compare(current: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, column): expected, current, allowed maximum, pass/fail."""
    cur = current.set_index("experiment")
    rows = []
    for exp, e in expected.set_index("experiment").iterrows():
        for col in COLUMNS:
            allowed = e[col] + max(TOL_ABS_PP, TOL_REL * e[col])
            now = cur[col].get(exp, float("nan")) if col in cur else float("nan")
            rows.append({"experiment": exp, "metric": col.replace("_mape_pct", ""), "expected": e[col],
                         "current": now, "allowed_max": allowed, "ok": bool(now <= allowed)})
    return pd.DataFrame(rows)


def main(argv: list[str]) -> int:
    cur = Path(argv[0] if argv else "results/tables/mape_summary.csv")
    exp = Path(argv[1] if len(argv) > 1 else "tests/expected/mape_summary.csv")
    table = compare(pd.read_csv(cur), pd.read_csv(exp))
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    bad = table[~table["ok"]]
    if len(bad):
        print(f"\nREGRESSION: {len(bad)} MAPE value(s) above the allowed maximum (see {exp})", file=sys.stderr)
        return 1
    print(f"\nregression guard: {len(table)} values within tolerance of {exp}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
