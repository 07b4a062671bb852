"""Rule script: download one pinned public-data file and check its sha256."""
from synperf.download import fetch

fetch(snakemake.params.url, snakemake.output[0], snakemake.params.sha256)  # noqa: F821
