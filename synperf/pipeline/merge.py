"""Pipeline stage: merge the source tables and our own measurements into one checked table.

Imports the analytical work model (:mod:`synperf.model.kernels`) for the physical-ceiling check of
:mod:`synperf.data.quality`; the per-source ingest (:mod:`synperf.pipeline.ingest`) does not.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from synperf.data.hardware import load_registry
from synperf.data.io import InputError, read_artefact, read_table, write_json, write_parquet
from synperf.data.quality import QualitySettings, check_table, duplicate_spread
from synperf.data.schema import KERNELS, conform, reduce_duplicates, validate


def check_own_file(df: pd.DataFrame, path: str | Path) -> None:
    """Refuse an own measurement file ``<measurements_dir>/<gpu>/<kernel>.parquet`` that holds no row, is named
    after no kernel family, or holds a row whose ``gpu`` or ``kernel`` is not the one its folder and file name say.

    Raises:
        InputError: ``"<path>: no rows; ..."``, ``"<path>: 'gemm2' is not a kernel family; ..."`` or
            ``"<path> row 3: gpu = 'a100_sxm4_80gb', but the file is under h100_sxm/; ..."``.
    """
    path = Path(path)
    gpu, kernel = path.parent.name, path.stem
    if kernel not in KERNELS:
        raise InputError(f"{path}: {kernel!r} is not a kernel family; expected <gpu>/<kernel>.parquet with a kernel "
                         f"of {list(KERNELS)}")
    if df.empty:
        raise InputError(f"{path}: no rows; delete the file or profile {kernel} on {gpu} again")
    for col, expected, where in (("gpu", gpu, f"under {gpu}/"), ("kernel", kernel, f"named {path.name}")):
        if col not in df.columns:
            raise InputError(f"{path}: no {col!r} column; expected the canonical schema")
        values = df[col].astype("string")
        bad = (values != expected).fillna(True).to_numpy(dtype=bool)
        if bad.any():
            i = int(bad.argmax())
            raise InputError(f"{path} row {i}: {col} = {values.iloc[i]!r}, but the file is {where}; expected "
                             f"only {col} {expected!r} in <gpu>/<kernel>.parquet")


def merge_measurements(tables: list[str], summaries: list[str], own_measurements: list[str], registry_path: str,
                       out_table: str, out_summary: str, *, measured_dir: str | None = None,
                       quality: dict | None = None) -> None:
    """Concatenate source tables and our own measurements, reduce duplicates, drop impossible rows.

    Duplicates of one key are reduced to their median only within one source and source version; how far
    duplicates of a key disagree (within or across sources) is written per GPU and kernel to the summary's
    ``duplicate_spread``. Rows above a physical ceiling of their GPU and rows of a GPU group slower than a
    less capable sibling are dropped (:mod:`synperf.data.quality`) and counted under ``dropped``; the sibling
    comparisons are written to ``sibling_comparisons``. Own measurements keep their ``source``
    (``synperf_profiler``).

    Args:
        quality: the config's ``ingest.quality`` thresholds (:class:`synperf.data.quality.QualitySettings`).

    Raises:
        InputError: a table (e.g. a profiled Parquet under data/measurements) is unreadable or not canonical, an
            own measurement file is empty or holds rows of another GPU or kernel than its path names
            (:func:`check_own_file`), or a quality setting is out of range.
    """
    settings = QualitySettings.from_dict(quality)
    registry = load_registry(registry_path, measured_dir)
    frames = []
    for path in list(tables) + list(own_measurements):
        df = read_table(path)
        if path in own_measurements:
            check_own_file(df, path)
            df = conform(df, str(path))
        frames.append(validate(df, str(path), registry.ids))
    df = pd.concat(frames, ignore_index=True)
    rows_in = len(df)
    spread = duplicate_spread(df, settings.duplicate_spread_ratio)
    df, removed = reduce_duplicates(df)
    dup_keys = int((df["n_duplicates"] > 1).sum())
    df, checks = check_table(df, registry, settings)
    dropped: Counter = Counter()
    for s in summaries:
        dropped.update(read_artefact(s, "ingest", keys=("dropped",))["dropped"])
    dropped.update(checks["dropped"])
    counts = df.groupby(["source", "kernel", "gpu"]).size().reset_index(name="rows")
    write_parquet(df, out_table)
    write_json({
        "rows_in": rows_in, "rows_out": len(df), "duplicate_rows_merged": removed,
        "duplicate_keys": dup_keys, "quality_dropped": checks["dropped"],
        "dropped": dict(dropped), "own_measurement_files": list(own_measurements),
        "row_counts": counts.to_dict(orient="records"),
        "duplicate_spread": spread.to_dict(orient="records"),
        "sibling_comparisons": checks["sibling_comparisons"], "quality_unchecked": checks["unchecked"],
        "quality_settings": checks["settings"],
    }, out_summary)
