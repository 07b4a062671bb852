"""Regression guard: compare this run's MAPE tables with the committed expected values.

    python3 tools/check_regression.py            # both tables below
    python3 tools/check_regression.py CURRENT EXPECTED        # one MAPE summary table
    python3 tools/check_regression.py --protocols CURRENT EXPECTED

Tables:

* ``results/tables/mape_summary.csv`` against ``tests/expected/mape_summary.csv``: each experiment's
  held-out-shape (seen) and unseen-GPU MAPE of the primary model;
* ``results/tables/protocols_summary.csv`` against ``tests/expected/protocols_summary.csv``: the mean
  unseen-GPU MAPE of the guarded methods (:data:`GUARDED_METHODS`) under each protocol (configured split, leave
  one GPU out, leave one architecture out).

Fails (exit 1) when a value is worse than the expected one by more than the tolerance: max(TOL_ABS_PP percentage
points, TOL_REL x expected), or is missing. Improvements pass (update the expected file in the same commit to lock
them in). Training is seeded, but multi-threaded CPU reductions make runs differ slightly, hence the tolerance.
Prints the comparison table either way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

TOL_ABS_PP = 2.0
TOL_REL = 0.25
COLUMNS = ("seen_heldout_mape_pct", "unseen_mape_pct")
#: methods whose protocol means are guarded: ours, and the deterministic anchor it must beat
GUARDED_METHODS = ("synperf_mlp", "nearest_gpu_roofline", "roofline")
DEFAULT_PAIRS = (("mape", "results/tables/mape_summary.csv", "tests/expected/mape_summary.csv"),
                 ("protocols", "results/tables/protocols_summary.csv", "tests/expected/protocols_summary.csv"))


def _allowed(expected: float) -> float:
    return expected + max(TOL_ABS_PP, TOL_REL * expected)


def compare(current: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """MAPE summary tables: one row per (experiment, column): expected, current, allowed maximum, pass/fail."""
    cur = current.set_index("experiment")
    rows = []
    for exp, e in expected.set_index("experiment").iterrows():
        for col in COLUMNS:
            now = cur[col].get(exp, float("nan")) if col in cur else float("nan")
            rows.append({"experiment": exp, "metric": col.replace("_mape_pct", ""), "expected": e[col],
                         "current": now, "allowed_max": _allowed(e[col]), "ok": bool(now <= _allowed(e[col]))})
    return pd.DataFrame(rows)


def compare_protocols(current: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """Protocol summaries: one row per guarded (protocol, method), unseen split: expected, current, allowed, ok."""
    key = ["protocol", "split", "method"]
    cur = current.set_index(key)["mape_pct"]
    exp = expected[(expected["split"] == "unseen") & expected["method"].isin(GUARDED_METHODS)]
    rows = []
    for r in exp.itertuples(index=False):
        now = cur.get((r.protocol, r.split, r.method), float("nan"))
        rows.append({"protocol": r.protocol, "method": r.method, "expected": r.mape_pct, "current": now,
                     "allowed_max": _allowed(r.mape_pct), "ok": bool(now <= _allowed(r.mape_pct))})
    return pd.DataFrame(rows)


def check(kind: str, current: Path, expected: Path) -> int:
    """Compare one pair of tables, print the comparison; number of failures (a missing file counts as one)."""
    for p in (current, expected):
        if not p.is_file():
            print(f"REGRESSION GUARD: {p} does not exist", file=sys.stderr)
            return 1
    fn = compare_protocols if kind == "protocols" else compare
    table = fn(pd.read_csv(current), pd.read_csv(expected))
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    bad = table[~table["ok"]]
    if len(bad):
        print(f"\nREGRESSION: {len(bad)} MAPE value(s) above the allowed maximum (see {expected})", file=sys.stderr)
    else:
        print(f"\nregression guard: {len(table)} values within tolerance of {expected}")
    return len(bad)


def main(argv: list[str]) -> int:
    if not argv:
        pairs = DEFAULT_PAIRS
    elif argv[0] == "--protocols":
        pairs = (("protocols", *argv[1:3]),)
    else:
        pairs = (("mape", argv[0], argv[1] if len(argv) > 1 else DEFAULT_PAIRS[0][2]),)
    failures = 0
    for kind, cur, exp in pairs:
        print(f"== {kind}: {cur} against {exp} ==")
        failures += check(kind, Path(cur), Path(exp))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
