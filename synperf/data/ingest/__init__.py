"""Ingest adapters: one module per public data format, each producing the canonical table.

Every adapter exposes ``ingest(data_dir, registry, cfg) -> IngestResult``. It maps
the source's GPU names to registry ids (stopping with :class:`~synperf.data.io.InputError`
on an unknown GPU or a missing column), converts latencies to microseconds,
and drops the rows that the data's README lists as known-bad, counting them by
reason.
"""

from __future__ import annotations

from synperf.data.ingest import aiconfigurator, neusight, pipeweave, vidur
from synperf.data.ingest.common import IngestResult

ADAPTERS = {
    "aiconfigurator": aiconfigurator.ingest,
    "vidur": vidur.ingest,
    "neusight": neusight.ingest,
    "pipeweave": pipeweave.ingest,
}

__all__ = ["ADAPTERS", "IngestResult"]
