"""Pipeline stage: check one experiment's feature table against the split contract."""

from __future__ import annotations

from synperf.data.hardware import load_registry
from synperf.data.io import read_table, write_json


def check_leaks(outputs: dict[str, str], exp_name: str, exp: dict, registry_path: str, training: dict, seed: int,
                *, measured_dir: str | None = None) -> None:
    """Check one experiment's feature tables against the split contract
    (:func:`synperf.evaluation.leak_check.check_split`) and write each one's report (leak counts, all zero, and the twin
    share per unseen GPU) as JSON.

    Args:
        outputs: ``{feature table path: report path}``, one entry per feature set of the experiment.

    Raises:
        LeakError: a check fails (no report of that table or a later one is written).
    """
    from synperf.evaluation.leak_check import check_split

    registry = load_registry(registry_path, measured_dir)
    for features, out_report in outputs.items():
        write_json(check_split(read_table(features), exp_name, exp, registry, training, seed), out_report)
