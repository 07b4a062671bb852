"""Pipeline stage: predictions and MAPE tables of one trained model."""

from __future__ import annotations

import pandas as pd

from synperf.data.io import read_artefact, read_table, write_parquet
from synperf.evaluation.metrics import ape, summarize
from synperf.model.estimator import TrainedModel
from synperf.pipeline.common import _feature_frame


def evaluate_experiment(features: str, features_meta: str, model_dir: str, exp_name: str, out_predictions: str,
                        out_table: str, table=None, model=None) -> None:
    """Predict every scored row of the experiment (``train``, ``test_seen``, ``unseen``; not ``unused``); write
    predictions and MAPE per GPU and split (tagged with the model's feature set and group).

    ``table`` and ``model`` are the feature table and the trained model when the caller has them (read from
    ``features`` and ``model_dir`` otherwise)."""
    meta = read_artefact(features_meta, "features")
    table = read_table(features) if table is None else table
    table = table[table["split"] != "unused"].reset_index(drop=True)
    model = TrainedModel.load(model_dir) if model is None else model
    pred = model.predict_latency_us(_feature_frame(table, meta))
    out = table[["gpu", "kernel", "split", "latency_us", "theoretical_time_us"]].copy()
    out["predicted_latency_us"] = pred
    out["ape_pct"] = ape(pred, out["latency_us"])
    out["experiment"] = exp_name
    write_parquet(out, out_predictions)
    tag = {"feature_set": model.meta.get("feature_set", meta["feature_set"]),
           "feature_group": model.meta.get("feature_group", "all")}
    rows = []
    for (gpu, split), g in out.groupby(["gpu", "split"]):
        rows.append({"experiment": exp_name, "kernel": out["kernel"].iloc[0], **tag, "gpu": gpu,
                     "split": split, **summarize(g["ape_pct"])})
    for split, g in out.groupby("split"):
        rows.append({"experiment": exp_name, "kernel": out["kernel"].iloc[0], **tag, "gpu": "ALL", "split": split,
                     **summarize(g["ape_pct"])})
    from synperf.data.io import write_csv
    write_csv(pd.DataFrame(rows), out_table)
