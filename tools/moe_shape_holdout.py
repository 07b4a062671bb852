#!/usr/bin/env python3
"""Check a correction column of the fused-MoE predictor on new MoE shapes, on the seen GPUs' training rows only
(the evidence behind ``shard_align`` in ``GEOMETRY``, ``synperf/model/correction.py``).

    python3 tools/moe_shape_holdout.py [--results results] [--models models] [--experiment fused_moe]
                                       [--column shard_align] [--folds 11]

Needs the main job's feature table (``<results>/features/v2/<experiment>.parquet`` and ``.json``) and fitted
predictor (``<models>/<experiment>/fingerprint.joblib``, for the options it chose). Only the configured training
rows are read (``split == "train"``: no held-out problem, no unseen GPU). They are split by MoE shape (hidden size,
intermediate size, experts, top-k) into ``--folds`` folds (scikit-learn's ``GroupKFold``): each fold's shapes are
predicted by the predictor refitted on the other shapes' rows (own-GPU corrections included), once with the
correction reading ``--column`` and once without. Prints the MAPE % per training GPU and over all rows for both:
how the column carries to a model shape no training row has, which is what a new MoE model asks of it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synperf.model.correction as correction  # noqa: E402
from synperf.data.hardware import load_registry  # noqa: E402
from synperf.data.io import read_artefact, read_table  # noqa: E402
from synperf.model.fingerprint import FingerprintModel  # noqa: E402
from synperf.model.fingerprint_choice import GRID  # noqa: E402
from synperf.model.roofline import add_baseline_columns  # noqa: E402

#: the columns that make a fused-MoE shape (one model's MoE layer)
SHAPE = ["hidden_size", "inter_size", "topk", "num_experts"]


def main() -> int:
    from sklearn.model_selection import GroupKFold

    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=str(root / "results"))
    ap.add_argument("--models", default=str(root / "models"))
    ap.add_argument("--experiment", default="fused_moe")
    ap.add_argument("--column", default="shard_align")
    ap.add_argument("--folds", type=int, default=11)
    a = ap.parse_args()
    registry = load_registry(root / "config" / "gpus.yaml", root / "data" / "hardware")
    table = Path(a.results) / "features" / "v2" / f"{a.experiment}.parquet"
    rows = read_table(table)
    rows = add_baseline_columns(rows[rows["split"].astype(str) == "train"].reset_index(drop=True), registry,
                                tiles=False)
    meta = read_artefact(table.with_suffix(".json"), "features")
    chosen = FingerprintModel.load(Path(a.models) / a.experiment / "fingerprint.joblib").choice["option"]
    opts, rule = next((o, r) for name, o, r in GRID if name == chosen)
    groups = rows[SHAPE].astype(str).agg("|".join, axis=1).factorize()[0]
    gpus = rows["gpu"].astype(str).to_numpy()
    y = rows["latency_us"].to_numpy(dtype="float64")
    base = tuple(c for c in correction.GEOMETRY if c != a.column)
    print(f"{a.experiment}: {len(rows)} training rows, {groups.max() + 1} shapes, {a.folds} folds; option {chosen}")
    for name, geometry in (("without", base), ("with", base + (a.column,))):
        correction.GEOMETRY = geometry
        ape = np.empty(len(rows))
        for train, test in GroupKFold(a.folds).split(rows, y, groups):
            model = FingerprintModel.fit(rows.iloc[train].reset_index(drop=True), meta, registry,
                                         max_train_rows=20000, seed=0, oof=False, local=True, rule=rule, **opts)
            part = rows.iloc[test].reset_index(drop=True)
            ape[test] = np.abs(model.predict(part, registry, rule=rule) / y[test] - 1.0) * 100.0
        per_gpu = ", ".join(f"{g} {ape[gpus == g].mean():.2f}" for g in sorted(set(gpus)))
        print(f"{name} {a.column}: MAPE % {per_gpu}; all rows {ape.mean():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
