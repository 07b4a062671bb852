"""Ingest adapters: one module per public data format, each producing the canonical table.

Every adapter exposes ``ingest(data_dir, registry, cfg) -> IngestResult``, ``cfg`` being the
source's ``ingest.<source>`` config block. It maps the source's GPU names to registry ids, through the
registry's ``device_names`` where the data holds device strings, else through the config block's map
(``ingest.vidur.gpu_map``, ``ingest.pipeweave.moe_gpu_map``; no map lives in code), stopping with
:class:`~synperf.data.io.InputError` on a missing map, an unknown GPU or a missing column, converts
latencies to microseconds,
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
