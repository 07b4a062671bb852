"""Row selection and feature-frame helpers shared by the pipeline stages."""

from __future__ import annotations

import pandas as pd

from synperf.data.schema import LAUNCH_COLUMNS
from synperf.model.features import FeatureFrame


def select_rows(df: pd.DataFrame, exp: dict) -> pd.DataFrame:
    """Rows of one experiment: its kernel, optionally restricted to sources and dtypes, and a source named in
    ``source_gpus`` to the GPUs listed for it (e.g. one source's rows of a GPU class no other source measured).

    The filters apply to every row alike: our own measurements (``source`` ``synperf_profiler``) join an
    experiment with ``sources`` only when it lists ``synperf_profiler``."""
    sel = df["kernel"] == exp["kernel"]
    if exp.get("sources"):
        sel &= df["source"].isin(exp["sources"])
    if exp.get("dtypes"):
        sel &= df["dtype"].isin(exp["dtypes"])
    for source, gpus in (exp.get("source_gpus") or {}).items():
        sel &= (df["source"] != source) | df["gpu"].astype(str).isin([str(g) for g in gpus])
    return df[sel]


def as_predict_sees(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the measured launch columns (:data:`synperf.data.schema.LAUNCH_COLUMNS`: kernel name, grid)
    blanked on every row: training and test rows carry only what a caller of :func:`synperf.api.predict` has,
    the launch parameters, never what only a profile of the GPU records (NeuSight's kernel names and grids)."""
    cols = [c for c in LAUNCH_COLUMNS if c in df.columns]
    if not cols:
        return df
    out = df.copy()
    for c in cols:
        out[c] = pd.Series(pd.NA, index=out.index, dtype=out[c].dtype)
    return out


def _feature_frame(table: pd.DataFrame, meta: dict) -> FeatureFrame:
    return FeatureFrame(frame=table, numeric=meta["numeric"], linear=meta["linear"],
                        categorical=meta["categorical"])

