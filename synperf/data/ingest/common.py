"""Shared pieces of the ingest adapters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from synperf.data.checks import gpu_name_map
from synperf.data.io import InputError, read_table, require_columns
from synperf.data.schema import conform, validate

MS_TO_US = 1000.0


@dataclass
class IngestResult:
    """Output of one adapter.

    Attributes:
        table: canonical measurement table (validated).
        dropped: rows removed before the table, by reason (``known_bad:...``,
            ``unsupported_...``); every key is reported.
        files: data files read, relative to the data root.
    """

    table: pd.DataFrame
    dropped: Counter = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)


def find_files(data_dir: Path, pattern: str, source: str) -> list[Path]:
    """Sorted files under ``data_dir`` matching ``pattern``; error if none."""
    files = sorted(data_dir.glob(pattern))
    if not files:
        raise InputError(
            f"{data_dir}: no {source} files match {pattern!r}; is `public_data_dir` pointing at the "
            "public-data folder (see docs/data.md)?"
        )
    return files


def load(path: Path, columns: list[str] | tuple[str, ...], **kwargs) -> pd.DataFrame:
    """Read a table and check that ``columns`` exist (errors name the file)."""
    df = read_table(path, **kwargs)
    require_columns(df, columns, str(path))
    return df


def check_latency(values: pd.Series, path: Path, column: str) -> None:
    """Stop on a NaN, non-numeric or non-positive latency, naming file, row and column."""
    num = pd.to_numeric(values, errors="coerce")
    bad = num.isna() | (num <= 0)
    if bad.any():
        pos = int(bad.to_numpy().nonzero()[0][0])
        raise InputError(
            f"{path}: row {pos} (data row {pos + 2} counting the header): column {column!r} = "
            f"{values.iloc[pos]!r}; expected a latency > 0 ({int(bad.sum())} such row(s))"
        )


def config_gpu_map(cfg: Mapping[str, Any] | None, source: str, key: str) -> dict[str, str]:
    """The GPU name map ``cfg[key]`` of the ``ingest.<source>`` config block: the source's GPU names -> registry ids.

    Raises:
        InputError: the key is missing, empty or not a mapping (names ``ingest.<source>.<key>``).
    """
    return gpu_name_map((cfg or {}).get(key), f"ingest.{source}.{key}", f"the {source} data's GPU")


def map_names(names: pd.Series, mapping: dict[str, str], path: Path, what: str) -> pd.Series:
    """Map source GPU names with a fixed table, failing on an unknown one."""
    unknown = sorted(set(names.astype(str)) - set(mapping))
    if unknown:
        raise InputError(f"{path}: unknown GPU {unknown[0]!r} in {what}; known: {sorted(mapping)}")
    return names.astype(str).map(mapping)


def finish(frames: list[pd.DataFrame], registry, where: str) -> pd.DataFrame:
    """Concatenate adapter frames into one validated canonical table."""
    frames = [f for f in frames if len(f)]
    df = conform(pd.concat(frames, ignore_index=True)) if frames else conform(pd.DataFrame())
    return validate(df, where, registry.ids)


def rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
