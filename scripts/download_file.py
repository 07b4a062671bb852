"""Rule script: download one pinned public-data file and check its sha256."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.data.download import fetch
from synperf.pipeline.rule import run

sm = snakemake  # noqa: F821
run(sm, lambda: fetch(sm.params.url, sm.output[0], sm.params.sha256))
