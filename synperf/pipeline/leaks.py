"""Pipeline stage: check one experiment's feature table against the split contract."""

from __future__ import annotations

from synperf.data.hardware import load_registry
from synperf.data.io import read_table, write_json


def check_leaks(features: str, exp_name: str, exp: dict, registry_path: str, training: dict, seed: int,
                out_report: str, *, measured_dir: str | None = None) -> None:
    """Check one experiment's feature table against the split contract (:func:`synperf.evaluation.leak_check.check_split`)
    and write its report (leak counts, all zero, and the twin share per unseen GPU) as JSON.

    Raises:
        LeakError: a check fails (nothing is written).
    """
    from synperf.evaluation.leak_check import check_split

    registry = load_registry(registry_path, measured_dir)
    report = check_split(read_table(features), exp_name, exp, registry, training, seed)
    write_json(report, out_report)
