"""Error metrics on latency (shared by training diagnostics, evaluation and the report)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def ape(pred, true) -> np.ndarray:
    """Absolute percentage error per row, in percent: 100·|pred - true| / true."""
    pred = np.asarray(pred, dtype="float64")
    true = np.asarray(true, dtype="float64")
    return 100.0 * np.abs(pred - true) / true


def summarize(errors: pd.Series) -> dict:
    """MAPE, median and p90 of absolute percentage errors (percent), and the row count."""
    e = np.asarray(errors, dtype="float64")
    if len(e) == 0:
        return {"n_rows": 0, "mape_pct": np.nan, "median_ape_pct": np.nan, "p90_ape_pct": np.nan}
    return {"n_rows": int(len(e)), "mape_pct": float(e.mean()), "median_ape_pct": float(np.median(e)),
            "p90_ape_pct": float(np.percentile(e, 90))}
