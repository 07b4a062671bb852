"""Rule entry point of `profile_kernel`: profile one kernel family on the local GPU.

    python scripts/profile.py --kernel gemm --gpu h100_sxm --sweep config/sweeps/gemm.yaml \
        --out data/measurements/h100_sxm/gemm.parquet [--registry config/gpus.yaml] [--profiling JSON] [--log FILE]

A `shell:` command rather than `script:` on purpose: Snakemake reruns a `script:` job whose script file is newer
than its output, which would make a GPU-less `snakemake --cores all` try to re-profile committed measurements.
All logic is in synperf.gpu.profiling.runner.profile_kernel.
"""
import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's synperf first

from synperf.data.io import InputError  # noqa: E402
from synperf.gpu.profiling import ProfilingError  # noqa: E402
from synperf.gpu.profiling.runner import profile_kernel  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--kernel", required=True)
ap.add_argument("--gpu", required=True, help="registry id the visible GPU must have")
ap.add_argument("--sweep", required=True, type=Path)
ap.add_argument("--out", required=True, type=Path)
ap.add_argument("--registry", default="config/gpus.yaml")
ap.add_argument("--profiling", default="{}", help="the config block `profiling` as JSON")
ap.add_argument("--log", default=None, type=Path)
args = ap.parse_args()
handlers = [logging.StreamHandler(sys.stderr)]
if args.log is not None:
    args.log.parent.mkdir(parents=True, exist_ok=True)
    handlers.append(logging.FileHandler(args.log, mode="a"))
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers)
try:
    profile_kernel(args.kernel, args.gpu, args.sweep, args.out, registry_path=args.registry,
                   profiling=json.loads(args.profiling))
except (ProfilingError, InputError) as exc:  # a clear message instead of a traceback
    logging.error("profile_kernel %s/%s: %s", args.gpu, args.kernel, exc)
    sys.exit(1)
