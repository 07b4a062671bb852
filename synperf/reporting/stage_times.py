"""Where the job's time goes: the Snakemake ``benchmark:`` files of every stage, summed per rule.

Only the wall time of a benchmark file is complete. Snakemake samples a job's processes every 0.5 s for its first
~15 s and every 30 s after that (``BENCHMARK_INTERVAL`` in ``snakemake/benchmark.py``), so its ``cpu_time`` and
``max_rss`` miss what happens after the last sample: a 40 s training job reads ~15 CPU-s. The CPU time is not
reported here for that reason; the memory is reported as the largest sampled value, a lower bound.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

#: columns of :func:`stage_times`
STAGE_COLUMNS = ["rule", "jobs", "wall_s", "longest_job_s", "sampled_max_rss_mb"]


def stage_times(paths: list[str]) -> pd.DataFrame:
    """Per rule (the folder under ``results/benchmarks/``, or the file stem for single-job rules): job count,
    summed and longest wall time in seconds, and the largest sampled resident set in MB (a lower bound, see the
    module docstring), from Snakemake benchmark TSVs (columns ``s``, ``max_rss``).

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
                     "rss": float(pd.to_numeric(t.get("max_rss", missing), errors="coerce").iloc[-1])})
    if not rows:
        return pd.DataFrame(columns=STAGE_COLUMNS)
    df = pd.DataFrame(rows)
    out = df.groupby("rule").agg(jobs=("s", "size"), wall_s=("s", "sum"), longest_job_s=("s", "max"),
                                 sampled_max_rss_mb=("rss", "max")).reset_index()
    out = out.sort_values("wall_s", ascending=False)
    total = {"rule": "total", "jobs": int(out["jobs"].sum()), "wall_s": out["wall_s"].sum(),
             "longest_job_s": out["longest_job_s"].max(), "sampled_max_rss_mb": out["sampled_max_rss_mb"].max()}
    return pd.concat([out, pd.DataFrame([total])], ignore_index=True)[STAGE_COLUMNS].round(1)


def stage_section(table: pd.DataFrame) -> list[str]:
    """Markdown lines of the "Where the time goes" section for :func:`stage_times`' table."""
    from synperf.reporting.tables import md_table

    return ["## Where the time goes", "",
            "Wall seconds per rule of this run, from Snakemake's `benchmark:` files (`results/benchmarks/`); jobs "
            "of a rule run in parallel when cores allow, so the job's wall time is less than the summed wall time. "
            "The report itself is not included. CPU time is not shown: Snakemake samples a job every 0.5 s for its "
            "first ~15 s and every 30 s after that, so it misses most of a longer job's CPU time; the memory "
            "column is the largest sampled resident set, a lower bound for the same reason.", "", md_table(table),
            ""]
