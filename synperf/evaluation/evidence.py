"""Which experiments' seen-GPU scores may inform one experiment's choice.

Every data-driven choice of an experiment (its primary feature set, the default path of its path rule, a
leave-one-out fold's feature set) pools the leave-one-seen-GPU-out scores of several experiments. A pooled
experiment carries its training GPUs' measurements into the choice, so the GPUs the choosing experiment (or fold)
tests must not be among them, and an experiment that may hold the same measurements (same kernel, a common source)
may have trained on the choosing experiment's held-out problems.
"""

from __future__ import annotations

import pandas as pd


def trained_gpus(exp: dict, scores: pd.DataFrame | None = None) -> set[str]:
    """The GPUs whose measurements an experiment's scores were computed from: its config's ``seen`` and, when
    ``scores`` (a table with ``validation_gpu``) is given, every GPU those scores validate on."""
    out = {str(g) for g in exp.get("seen") or []}
    if scores is not None and len(scores) and "validation_gpu" in scores.columns:
        out |= set(scores["validation_gpu"].astype(str))
    return out


def shares_rows(a: dict, b: dict) -> bool:
    """Whether two experiment config entries may select the same measurements: the same ``kernel`` and a common
    source (an entry without ``sources`` reads every source)."""
    sa, sb = set(a.get("sources") or []), set(b.get("sources") or [])
    return a["kernel"] == b["kernel"] and (not sa or not sb or bool(sa & sb))


def informing_experiments(exp_name: str, experiments: dict[str, dict], test_gpus, *,
                          scores: dict[str, pd.DataFrame] | None = None, own: bool = True) -> list[str]:
    """The experiments (sorted names of ``experiments``) whose seen-GPU scores may inform ``exp_name``'s choice.

    Left out: every experiment trained on one of ``test_gpus`` (:func:`trained_gpus`, with its table in
    ``scores`` when given), every other experiment that :func:`shares_rows` with ``exp_name``, and ``exp_name``
    itself unless ``own`` (a leave-one-out fold tests GPUs and problems the experiment's configured training rows
    include, so its choice reads only the other experiments).

    Raises:
        KeyError: ``exp_name`` has no entry in ``experiments``.
    """
    exp = experiments[exp_name]
    tested = {str(g) for g in test_gpus}
    out = []
    for name, entry in sorted(experiments.items()):
        if name == exp_name:
            if own and not tested & trained_gpus(entry, (scores or {}).get(name)):
                out.append(name)
            continue
        if shares_rows(entry, exp) or tested & trained_gpus(entry, (scores or {}).get(name)):
            continue
        out.append(name)
    return out
