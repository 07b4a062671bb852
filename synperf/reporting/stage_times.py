"""Where the job's time goes: the Snakemake ``benchmark:`` files of every stage, summed per rule."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

#: columns of :func:`stage_times`
STAGE_COLUMNS = ["rule", "jobs", "wall_s", "longest_job_s", "cpu_s", "max_rss_mb"]


def stage_times(paths: list[str]) -> pd.DataFrame:
    """Per rule (the folder under ``results/benchmarks/``, or the file stem for single-job rules): job count,
    summed and longest wall time and summed CPU time in seconds, and the largest resident set in MB, from
    Snakemake benchmark TSVs (columns ``s``, ``cpu_time``, ``max_rss``).

    Rows are sorted by summed wall time, largest first, with a last row ``total``.

    Raises:
        InputError: a file lacks the ``s`` column (names the file).
    """
    from synperf.data.io import InputError

    rows = []
    for p in paths:
        t = pd.read_csv(p, sep="\t")
        if "s" not in t.columns:
            raise InputError(f"{p}: not a Snakemake benchmark file (no 's' column)")
        path = Path(p)
        rule = path.parent.name if path.parent.name != "benchmarks" else path.stem
        missing = pd.Series([float("nan")])
        rows.append({"rule": rule, "s": float(t["s"].iloc[-1]),
                     "cpu": float(pd.to_numeric(t.get("cpu_time", missing), errors="coerce").iloc[-1]),
                     "rss": float(pd.to_numeric(t.get("max_rss", missing), errors="coerce").iloc[-1])})
    if not rows:
        return pd.DataFrame(columns=STAGE_COLUMNS)
    df = pd.DataFrame(rows)
    out = df.groupby("rule").agg(jobs=("s", "size"), wall_s=("s", "sum"), longest_job_s=("s", "max"),
                                 cpu_s=("cpu", "sum"), max_rss_mb=("rss", "max")).reset_index()
    out = out.sort_values("wall_s", ascending=False)
    total = {"rule": "total", "jobs": int(out["jobs"].sum()), "wall_s": out["wall_s"].sum(),
             "longest_job_s": out["longest_job_s"].max(), "cpu_s": out["cpu_s"].sum(),
             "max_rss_mb": out["max_rss_mb"].max()}
    return pd.concat([out, pd.DataFrame([total])], ignore_index=True)[STAGE_COLUMNS].round(1)


def stage_section(table: pd.DataFrame) -> list[str]:
    """Markdown lines of the "Where the time goes" section for :func:`stage_times`' table."""
    from synperf.reporting.tables import md_table

    return ["## Where the time goes", "",
            "Wall and CPU seconds per rule of this run, from Snakemake's `benchmark:` files "
            "(`results/benchmarks/`); jobs of a rule run in parallel when cores allow, so the job's wall time is "
            "less than the summed wall time. The report itself is not included.", "", md_table(table), ""]
