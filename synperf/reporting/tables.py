"""Markdown and figure helpers shared by the report sections (:mod:`synperf.reporting.report`,
:mod:`synperf.reporting.methods_report`): number formatting, Markdown tables, atomic PNG writes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from synperf.data.io import atomic_path  # noqa: E402


def fmt(x) -> str:
    """A float as the report prints it: one decimal, an en dash for a missing value."""
    return "–" if pd.isna(x) else f"{x:.1f}"


def md_table(df: pd.DataFrame) -> str:
    """``df`` as a Markdown table (floats through :func:`fmt`, everything else as ``str``)."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def save_figure(fig, path: str, dpi: int) -> None:
    """Write ``fig`` as PNG atomically (temporary file, then rename) and close it."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    plt.close(fig)
