"""Rule entry point of `characterize_gpu`: measure the local GPU's ceilings into data/hardware/<gpu>.json.

    python scripts/characterize.py --gpu h100_sxm --out data/hardware/h100_sxm.json [--registry config/gpus.yaml]
        [--settings JSON] [--log FILE]

A `shell:` command rather than `script:` (as scripts/profile.py): Snakemake reruns a `script:` job whose script
is newer than its output, which would make a GPU-less run try to re-measure a committed file.
All logic is in synperf.gpu.characterize.run (main -> characterize).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's synperf first

from synperf.gpu.characterize.run import main  # noqa: E402

sys.exit(main())
