"""Regression guard: compare this run's MAPE and protocol tables with the committed expected values.

    python3 tools/check_regression.py                       # check results/ against tests/expected/
    python3 tools/check_regression.py --update --reason "one line: why the numbers move"
    python3 tools/check_regression.py --results DIR --expected DIR [--config FILE]

Three tables, each a tidy CSV of keys + values:

* ``mape.csv``, from ``<results>/tables/mape.csv``: the primary models (``feature_set`` equal to the experiment's
  primary feature set in ``config/config.yaml``: its entry's ``feature_set``, else the top-level one;
  ``feature_group == "all"``), one row per experiment, split (``train``,
  ``test_seen``, ``unseen``) and GPU, including ``gpu == "ALL"``. Columns :data:`MAPE_KEYS` + ``n_rows``,
  ``mape_pct``.
* ``e2e.csv`` (when ``<results>/e2e/e2e_summary.csv`` exists; once expected, it must exist): the end-to-end
  MAPE per metric (prefill, decode step, total) and the number of configurations scored (``n_rows``); trained
  tolerance.
* ``protocols.csv``, from every ``<results>/protocols/*.csv`` except ``*_cdf.csv``: rows with ``gpu == "ALL"``
  and ``scope == "all"``, one row per experiment, protocol, method and split over the protocol's folds:
  ``mape_pct`` and ``coverage`` are means over the folds, ``n_rows`` and ``n_total`` totals over the folds.
  Columns :data:`PROTOCOL_KEYS` + ``n_rows``, ``n_total``, ``coverage``, ``mape_pct``.

Checks, for every key of either side (a key present on one side only fails, named):

* ``mape_pct`` by kind of number (``<expected>/tolerance.yaml``):

  - deterministic (the methods under ``deterministic.methods``: no training, the same data and code give the
    same number up to float rounding): two-sided, ``|current - expected| <= deterministic.abs_pp``;
  - trained (every other method: the primary models of ``mape.csv``, ``synperf``, ``synperf_mlp``, the fitted
    baselines, ``e2e``, unknown names): one-sided, ``current - expected <= max(trained.abs_pp, trained.rel *
    expected)``. A value better than expected beyond that prints a notice and never fails: trained models differ
    between CPUs (different BLAS kernels round differently), so a two-sided check would pass or fail by which
    machine runs it. A number too good to be true is the leak check's to catch (``tests/test_outputs.py``,
    ``synperf/evaluation/leak_check.py``), which is deterministic and a hard failure.

  NaN expected with NaN current passes (nearest-GPU methods cover no row of some splits); NaN against a number
  fails.
* ``n_rows``, ``n_total``: equal; ``coverage``: within :data:`COVERAGE_TOL`.

Prints the failing values as one table, the trained values better than expected as a notice table, and one
summary line per table; exits 1 on any failure (a missing
results or expected file counts as one), 2 on a usage error.

``--update --reason TEXT`` writes both expected files from the current results (the tolerance file is left
alone) and appends ``YYYY-MM-DD TEXT`` to ``<expected>/CHANGES.md``; it refuses an empty or multi-line reason.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent

MAPE_KEYS = ["experiment", "kernel", "feature_set", "gpu", "split"]
MAPE_VALUES = ["n_rows", "mape_pct"]
MAPE_SPLITS = ("train", "test_seen", "unseen")
#: method name of the primary models' rows (``mape.csv`` has no method column): trained tolerance
PRIMARY_METHOD = "primary_model"
PROTOCOL_KEYS = ["experiment", "kernel", "protocol", "method", "split"]
PROTOCOL_VALUES = ["n_rows", "n_total", "coverage", "mape_pct"]
E2E_KEYS = ["metric"]
E2E_VALUES = ["n_rows", "mape_pct"]
#: method name of the end-to-end rows (trained models + a fitted overhead): trained tolerance
E2E_METHOD = "e2e"
COUNT_COLUMNS = ("n_rows", "n_total")
COVERAGE_TOL = 1e-9


# ---------------------------------------------------------------------------------------------- tolerances
@dataclass(frozen=True)
class Tolerance:
    """``mape_pct`` tolerances: absolute for deterministic methods, ``max(abs, rel * expected)`` for trained."""

    deterministic_methods: frozenset[str]
    deterministic_abs_pp: float
    trained_abs_pp: float
    trained_rel: float

    @classmethod
    def load(cls, path: Path) -> "Tolerance":
        """Read ``tolerance.yaml``; ``ValueError`` when a field is missing or negative."""
        doc = yaml.safe_load(path.read_text()) or {}
        try:
            det, tr = doc["deterministic"], doc["trained"]
            tol = cls(frozenset(det["methods"]), float(det["abs_pp"]), float(tr["abs_pp"]), float(tr["rel"]))
        except (KeyError, TypeError) as err:
            raise ValueError(f"{path}: needs deterministic.methods, deterministic.abs_pp, trained.abs_pp and "
                             f"trained.rel ({err!r})") from None
        if min(tol.deterministic_abs_pp, tol.trained_abs_pp, tol.trained_rel) < 0:
            raise ValueError(f"{path}: tolerances must be >= 0")
        return tol

    def kind(self, method: str) -> str:
        return "deterministic" if method in self.deterministic_methods else "trained"

    def allowed(self, method: str, expected: float) -> float:
        """Largest allowed ``|current - expected|`` of ``mape_pct``, in percentage points."""
        if self.kind(method) == "deterministic":
            return self.deterministic_abs_pp
        return max(self.trained_abs_pp, self.trained_rel * abs(expected))


# ---------------------------------------------------------------------------------------------- extraction
def primary_feature_set(config: Path) -> str | dict[str, str]:
    """The primary models' feature set of the pipeline config: the top-level ``feature_set``, or, when an
    experiment's entry names its own (``feature_set``), ``{experiment: its primary set}`` for every experiment."""
    cfg = yaml.safe_load(config.read_text()) or {}
    fs = cfg.get("feature_set")
    if not fs:
        raise ValueError(f"{config}: no feature_set")
    exps = cfg.get("experiments") or {}
    if not any((e or {}).get("feature_set") for e in exps.values()):
        return str(fs)
    return {str(n): str((e or {}).get("feature_set") or fs) for n, e in exps.items()}


def extract_mape(mape: pd.DataFrame, feature_set: str | dict[str, str]) -> pd.DataFrame:
    """The guarded rows of ``results/tables/mape.csv``: primary models (``feature_set``: one for all experiments, or
    per experiment), every GPU and ``ALL``, MAPE_SPLITS."""
    want = (mape["experiment"].map(feature_set) if isinstance(feature_set, dict)
            else pd.Series(feature_set, index=mape.index))
    t = mape[(mape["feature_set"] == want) & (mape["feature_group"] == "all")
             & mape["split"].isin(MAPE_SPLITS)]
    out = t[MAPE_KEYS + MAPE_VALUES].copy()
    out["n_rows"] = out["n_rows"].astype("int64")
    return out.sort_values(MAPE_KEYS, ignore_index=True)


def extract_protocols(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The guarded rows of the per-experiment protocol tables: ``gpu == "ALL"``, ``scope == "all"``, over folds."""
    t = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(
        columns=PROTOCOL_KEYS + ["fold", "gpu", "scope"] + PROTOCOL_VALUES)
    t = t[(t["gpu"] == "ALL") & (t["scope"] == "all")]
    out = (t.groupby(PROTOCOL_KEYS, sort=True)
           .agg(n_rows=("n_rows", "sum"), n_total=("n_total", "sum"), coverage=("coverage", "mean"),
                mape_pct=("mape_pct", "mean"))
           .reset_index())
    for c in COUNT_COLUMNS:
        out[c] = out[c].astype("int64")
    return out[PROTOCOL_KEYS + PROTOCOL_VALUES]


def extract_e2e(summary: pd.DataFrame) -> pd.DataFrame:
    """The guarded rows of ``results/e2e/e2e_summary.csv``: per metric (prefill, decode, total) the MAPE and the
    number of configurations scored (``n_rows``)."""
    out = pd.DataFrame({"metric": summary["metric"].astype(str), "n_rows": summary["configurations"].astype("int64"),
                        "mape_pct": summary["synperf_mape_pct"].astype("float64")})
    return out.sort_values(E2E_KEYS, ignore_index=True)


def protocol_table_paths(results: Path) -> list[Path]:
    return sorted(p for p in (results / "protocols").glob("*.csv") if not p.name.endswith("_cdf.csv"))


def current_tables(results: Path, config: Path) -> dict[str, pd.DataFrame]:
    """Both guarded tables from a results folder; ``FileNotFoundError`` naming what is missing."""
    mape_path = results / "tables" / "mape.csv"
    if not mape_path.is_file():
        raise FileNotFoundError(f"{mape_path} does not exist")
    paths = protocol_table_paths(results)
    if not paths:
        raise FileNotFoundError(f"no protocol table (*.csv other than *_cdf.csv) in {results / 'protocols'}")
    tables = {"mape": extract_mape(pd.read_csv(mape_path), primary_feature_set(config)),
              "protocols": extract_protocols([pd.read_csv(p) for p in paths])}
    e2e = results / "e2e" / "e2e_summary.csv"
    if e2e.is_file():
        tables["e2e"] = extract_e2e(pd.read_csv(e2e))
    return tables


# ---------------------------------------------------------------------------------------------- comparison
TABLES = {"mape": (MAPE_KEYS, MAPE_VALUES), "protocols": (PROTOCOL_KEYS, PROTOCOL_VALUES),
          "e2e": (E2E_KEYS, E2E_VALUES)}
FAILURE_COLUMNS = ["key", "value", "kind", "expected", "current", "allowed", "problem"]
WORSE = "worse than expected beyond tolerance"
BETTER = "better than expected beyond tolerance"
#: the one problem that is a notice, not a failure, for a trained method
NOTICE_KIND = "trained"
NOTICE_HINT = ("Trained values better than expected are notices, not failures (they differ between CPUs). To lock in "
               "an intended improvement:\n    python3 tools/check_regression.py --update --reason \"one line: why\"")


def _nan(x) -> bool:
    return x is None or (not isinstance(x, str) and bool(pd.isna(x)))


def _check_value(col: str, exp, cur, method: str, tol: Tolerance) -> tuple[str, float, str] | None:
    """``(kind, allowed, problem)`` when ``cur`` fails against ``exp``; None when it passes."""
    exp = float(exp) if not _nan(exp) else float("nan")
    cur = float(cur) if not _nan(cur) else float("nan")
    kind = "exact" if col in COUNT_COLUMNS else ("coverage" if col == "coverage" else tol.kind(method))
    allowed = 0.0 if col in COUNT_COLUMNS else COVERAGE_TOL if col == "coverage" else tol.allowed(method, exp)
    if math.isnan(exp) and math.isnan(cur):
        return None
    if math.isnan(exp) or math.isnan(cur):
        return kind, allowed, "NaN against a number"
    diff = cur - exp
    if abs(diff) <= allowed:
        return None
    if col != "mape_pct":
        return kind, allowed, "changed"
    return kind, allowed, WORSE if diff > 0 else BETTER


def is_notice(kind: str, problem: str) -> bool:
    """Whether an out-of-tolerance value is a notice (a trained value better than expected), not a failure."""
    return kind == NOTICE_KIND and problem == BETTER


def compare(name: str, current: pd.DataFrame, expected: pd.DataFrame,
            tol: Tolerance) -> tuple[int, pd.DataFrame, pd.DataFrame]:
    """Compare one guarded table with its expected version.

    Returns:
        ``(checked, failures, notices)``: the number of values checked (a key present on one side only counts as
        one), one row per failing value and one row per trained value better than expected beyond its tolerance
        (which does not fail), both with columns :data:`FAILURE_COLUMNS`.
    """
    keys, values = TABLES[name]
    cur = current.assign(**{k: current[k].astype(str) for k in keys}).set_index(keys)
    exp = expected.assign(**{k: expected[k].astype(str) for k in keys}).set_index(keys)
    for label, t in (("current", cur), ("expected", exp)):
        if not t.index.is_unique:
            dup = t.index[t.index.duplicated()][0]
            raise ValueError(f"{name}: duplicate key in {label}: {dict(zip(keys, dup))}")
    failures, notices, checked = [], [], 0
    for key in exp.index.difference(cur.index, sort=False):
        checked += 1
        failures.append(["/".join(key), "(row)", "", "present", "missing", "", "expected row missing from results"])
    for key in cur.index.difference(exp.index, sort=False):
        checked += 1
        failures.append(["/".join(key), "(row)", "", "missing", "present", "",
                         "row not in the expected file (update it with --update --reason)"])
    both = exp.index.intersection(cur.index, sort=False)
    for key in sorted(both):
        method = dict(zip(keys, key)).get("method", E2E_METHOD if name == "e2e" else PRIMARY_METHOD)
        for col in values:
            checked += 1
            e, c = exp.at[key, col], cur.at[key, col]
            bad = _check_value(col, e, c, method, tol)
            if bad:
                (notices if is_notice(bad[0], bad[2]) else failures).append(
                    ["/".join(key), col, bad[0], e, c, bad[1], bad[2]])
    return checked, pd.DataFrame(failures, columns=FAILURE_COLUMNS), pd.DataFrame(notices, columns=FAILURE_COLUMNS)


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    if _nan(x):
        return "NaN"
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.6g}"


def report(name: str, path: Path, checked: int, failures: pd.DataFrame, notices: pd.DataFrame) -> None:
    fmt = {c: _fmt for c in ("expected", "current", "allowed")}
    keys = "/".join(TABLES[name][0])
    if len(failures):
        print(f"== {name}: failing values against {path} (key = {keys}) ==")
        print(failures.to_string(index=False, formatters=fmt))
    if len(notices):
        print(f"== {name}: notice, trained values better than expected beyond tolerance (key = {keys}) ==")
        print(notices.to_string(index=False, formatters=fmt))
        print(NOTICE_HINT)
    print(f"regression guard: {checked} values checked, {len(failures)} failures, {len(notices)} notices "
          f"({name}.csv)")


# ---------------------------------------------------------------------------------------------- CLI
def _reason_error(reason: str | None) -> str | None:
    if reason is None or not reason.strip():
        return "--update needs --reason \"one line: why the expected numbers change\""
    if "\n" in reason.strip() or "\r" in reason:
        return "--reason must be one line"
    return None


def update(results: Path, expected: Path, config: Path, reason: str) -> int:
    """Write both expected files from ``results`` and append the dated reason to ``CHANGES.md``."""
    try:
        tables = current_tables(results, config)
    except (FileNotFoundError, KeyError, ValueError) as err:
        print(f"regression guard: cannot update: {err!r}", file=sys.stderr)
        return 1
    expected.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(expected / f"{name}.csv", index=False)
        print(f"wrote {expected / f'{name}.csv'}: {len(table)} rows")
    changes = expected / "CHANGES.md"
    head = "" if changes.is_file() else ("# Changes of the expected values\n\n"
                                         "One line per `tools/check_regression.py --update`: date and reason.\n\n")
    with changes.open("a") as f:
        f.write(f"{head}{dt.date.today().isoformat()} {reason.strip()}\n")
    print(f"appended to {changes}")
    return 0


def check(results: Path, expected: Path, config: Path) -> int:
    """Compare both tables; number of failures (a missing file or tolerance error counts as one)."""
    try:
        tol = Tolerance.load(expected / "tolerance.yaml")
        tables = current_tables(results, config)
    except (FileNotFoundError, KeyError, ValueError) as err:
        print(f"REGRESSION GUARD: {err!r}", file=sys.stderr)
        return 1
    failures = 0
    for name in sorted(set(TABLES) - set(tables)):
        if (expected / f"{name}.csv").is_file():
            print(f"REGRESSION GUARD: {expected / f'{name}.csv'} exists but the results have no {name} table",
                  file=sys.stderr)
            failures += 1
    for name, current in tables.items():
        path = expected / f"{name}.csv"
        if not path.is_file():
            print(f"REGRESSION GUARD: {path} does not exist (write it with --update --reason)", file=sys.stderr)
            print(f"regression guard: 0 values checked, 1 failures, 0 notices ({name}.csv)")
            failures += 1
            continue
        keys = TABLES[name][0]
        exp = pd.read_csv(path, dtype={k: str for k in keys}, keep_default_na=False, na_values={
            c: ["", "NaN", "nan"] for c in TABLES[name][1]})
        try:
            checked, bad, notices = compare(name, current, exp, tol)
        except (KeyError, ValueError) as err:
            print(f"REGRESSION GUARD: {name}: {err!r}", file=sys.stderr)
            failures += 1
            continue
        report(name, path, checked, bad, notices)
        failures += len(bad)
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=REPO / "results", help="results folder (default: results/)")
    ap.add_argument("--expected", type=Path, default=REPO / "tests" / "expected",
                    help="expected values folder (default: tests/expected/)")
    ap.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml",
                    help="pipeline config whose feature_set names the primary models")
    ap.add_argument("--update", action="store_true", help="write the expected files from the current results")
    ap.add_argument("--reason", help="with --update: one line appended, dated, to CHANGES.md")
    args = ap.parse_args(argv)
    if args.update:
        err = _reason_error(args.reason)
        if err:
            print(f"regression guard: {err}", file=sys.stderr)
            return 2
        return update(args.results, args.expected, args.config, args.reason)
    if args.reason is not None:
        print("regression guard: --reason only goes with --update", file=sys.stderr)
        return 2
    return 1 if check(args.results, args.expected, args.config) else 0


if __name__ == "__main__":
    sys.exit(main())
