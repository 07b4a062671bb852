"""Pipeline stage: public sources -> canonical measurement tables (the merge is :mod:`synperf.pipeline.merge`)."""

from __future__ import annotations

import time
from pathlib import Path

from synperf.data.hardware import load_registry
from synperf.data.ingest import ADAPTERS
from synperf.data.io import InputError, write_json, write_parquet


def ingest_source(source: str, data_dir: str, registry_path: str, source_cfg: dict | None,
                  out_table: str, out_summary: str, *, measured_dir: str | None = None,
                  listed_files: list[str] | None = None) -> None:
    """Run one ingest adapter; write its canonical table and a summary (rows, dropped by reason).

    ``listed_files``: the files the workflow declared as this rule's inputs (the manifest's files of the source,
    paths under ``data_dir`` or absolute). A file the adapter read that is not among them is refused: the DAG
    would not rerun when it changes.

    Raises:
        InputError: the adapter read a file outside ``listed_files`` (names it and the manifest).
    """
    registry = load_registry(registry_path, measured_dir)
    t0 = time.time()
    res = ADAPTERS[source](Path(data_dir), registry, source_cfg or {})
    if listed_files is not None:
        listed = {Path(p).resolve() for p in listed_files}
        unlisted = sorted(f for f in res.files if (Path(data_dir) / f).resolve() not in listed)
        if unlisted:
            raise InputError(f"{Path(data_dir) / unlisted[0]}: read by the {source} adapter but not listed in the "
                             f"public-data manifest ({len(unlisted)} such file(s)); add it to the manifest "
                             "(config/public_data_manifest.yaml) or remove it from the data folder")
    write_parquet(res.table, out_table)
    write_json({"source": source, "rows": len(res.table), "dropped": dict(res.dropped), "files": res.files,
                "seconds": round(time.time() - t0, 2)}, out_summary)
