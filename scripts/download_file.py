"""Rule script: download one pinned public-data file and check its sha256."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.data.download import fetch

fetch(snakemake.params.url, snakemake.output[0], snakemake.params.sha256)  # noqa: F821
