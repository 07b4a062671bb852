"""Pipeline stage: public sources -> canonical measurement tables (the merge is :mod:`synperf.pipeline.merge`)."""

from __future__ import annotations

import time
from pathlib import Path

from synperf.data.hardware import load_registry
from synperf.data.ingest import ADAPTERS
from synperf.data.io import write_json, write_parquet


def ingest_source(source: str, data_dir: str, registry_path: str, source_cfg: dict | None,
                  out_table: str, out_summary: str, *, measured_dir: str | None = None) -> None:
    """Run one ingest adapter; write its canonical table and a summary (rows, dropped by reason)."""
    registry = load_registry(registry_path, measured_dir)
    t0 = time.time()
    res = ADAPTERS[source](Path(data_dir), registry, source_cfg or {})
    write_parquet(res.table, out_table)
    write_json({"source": source, "rows": len(res.table), "dropped": dict(res.dropped), "files": res.files,
                "seconds": round(time.time() - t0, 2)}, out_summary)
