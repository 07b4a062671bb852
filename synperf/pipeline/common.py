"""Row selection and feature-frame helpers shared by the pipeline stages."""

from __future__ import annotations

import numpy as np
import pandas as pd

from synperf.data.schema import LAUNCH_COLUMNS
from synperf.model.features import FeatureFrame


def select_rows(df: pd.DataFrame, exp: dict) -> pd.DataFrame:
    """Rows of one experiment: its kernel, optionally restricted to sources and dtypes."""
    sel = df["kernel"] == exp["kernel"]
    if exp.get("sources"):
        sel &= df["source"].isin(exp["sources"]) | (df["source"] == "synperf_profiler")
    if exp.get("dtypes"):
        sel &= df["dtype"].isin(exp["dtypes"])
    return df[sel]


def as_predict_sees(df: pd.DataFrame, rows) -> pd.DataFrame:
    """``df`` with the measured launch columns (:data:`synperf.data.schema.LAUNCH_COLUMNS`: kernel name, grid) blanked
    on ``rows`` (boolean mask): rows of a GPU treated as unseen carry only what a caller of
    :func:`synperf.api.predict` has, the launch parameters, never what only a profile of that GPU records."""
    rows = np.asarray(rows, dtype=bool)
    cols = [c for c in LAUNCH_COLUMNS if c in df.columns]
    if not rows.any() or not cols:
        return df
    out = df.copy()
    for c in cols:
        out.loc[rows, c] = pd.NA
    return out


def _feature_frame(table: pd.DataFrame, meta: dict) -> FeatureFrame:
    return FeatureFrame(frame=table, numeric=meta["numeric"], linear=meta["linear"],
                        categorical=meta["categorical"])
