# Pinned public data: each file of config/public_data_manifest.yaml is downloaded from its upstream commit
# and checked against its sha256 (only used when `public_data_dir` is this folder, the default).
import re

DOWNLOAD_DIR = config.get("download_dir", "resources/public-data")


rule download_public_file:
    output:
        f"{DOWNLOAD_DIR}/{{relpath}}",
    log:
        "results/logs/download/{relpath}.log",
    wildcard_constraints:
        relpath="|".join(re.escape(p) for p in MANIFEST),
    retries: 2
    conda:
        "../environment.yml"
    params:
        url=lambda wc: MANIFEST[wc.relpath]["url"],
        sha256=lambda wc: MANIFEST[wc.relpath]["sha256"],
    script:
        "../scripts/download_file.py"
