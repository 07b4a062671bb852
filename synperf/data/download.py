"""Pinned public data: a manifest of upstream files, download with sha256 check.

The manifest (``config/public_data_manifest.yaml``) lists, for every data file the
pipeline reads, its path under the data root, the pinned upstream URL (a commit,
never a branch), its sha256 and size. :func:`fetch` downloads one file to a
temporary name, checks the hash and only then moves it into place, so a failed or
tampered download never leaves a file that looks complete.

``python -m synperf.data.download manifest <data_dir>`` rebuilds the manifest from a
local copy (the files must be unmodified upstream copies).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from synperf.data.io import InputError, atomic_path, write_text

#: data-root prefix -> (upstream repository, commit, upstream path prefix); from public-data/README.md
UPSTREAMS: dict[str, tuple[str, str, str]] = {
    "aiconfigurator/": ("ai-dynamo/aiconfigurator", "095f58a51c4ca8e61b66ec108d86f223f8d559ce",
                        "aic-core/src/aiconfigurator_core/systems/data/"),
    "vidur/compute/": ("microsoft/vidur", "7d47513363ec447a741ac5e47241580b47724fbf", "data/profiling/compute/"),
    "neusight/dataset/": ("sitar-lab/NeuSight", "6945927d9afcca2b9daf021f8395e53edc5b4eef",
                          "scripts/asplos/data/dataset/"),
    "pipeweave/": ("zksainx/pipeweave", "55e03178d15a79ca3fa8385a399fbcfb48771719", ""),
}
RAW_BASE = "https://raw.githubusercontent.com"

#: files the pipeline reads, as glob patterns under the data root
DATA_GLOBS = (
    "aiconfigurator/*/*/vllm/*/*.parquet",
    "vidur/compute/*/*/*/mlp.csv",
    "neusight/dataset/train/collect/*/p2.1.0/*.csv",
    "neusight/dataset/test/linear.csv",
    "neusight/dataset/test/bmm.csv",
    "pipeweave/dataset/gemm_fp8_*.csv",
    "pipeweave/pipetuning_test/moe_dse/moe_dse_*.csv",
    "pipeweave/pipetuning_test/moe_dse/improve/improvement*_detail.csv",
    "pipeweave/pipetuning_test/demo/topk_underperforming_*.csv",
    "pipeweave/hardware/*.json",
    # end-to-end inputs (rules/e2e.smk, synperf/e2e): real serving runs, model configs, request traces and NCCL
    # collective tables
    "pipeweave/e2e/real/*.jsonl",
    "pipeweave/config/*.json",
    "pipeweave/workload/*.csv",
    "pipeweave/dataset/collective/*/*.csv",
)
#: data-root prefixes of the end-to-end inputs: inputs of the e2e rule, not of the pipeweave kernel ingest
E2E_PREFIXES = ("pipeweave/e2e/real/", "pipeweave/config/", "pipeweave/workload/", "pipeweave/dataset/collective/")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def upstream_url(relpath: str) -> str:
    """Pinned raw URL of a data-root path, from :data:`UPSTREAMS`.

    Raises:
        KeyError: the path is under no known upstream.
    """
    for prefix, (repo, commit, upath) in UPSTREAMS.items():
        if relpath.startswith(prefix):
            tail = upath + relpath[len(prefix):]
            return f"{RAW_BASE}/{repo}/{commit}/{urllib.parse.quote(tail)}"
    raise KeyError(f"{relpath}: no upstream known for this path")


def load_manifest(path: str | os.PathLike) -> dict[str, dict]:
    """Read the manifest: ``{relpath: {"url", "sha256", "size_bytes"}}``.

    Raises:
        InputError: missing file or an entry without url/sha256.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: data manifest not found")
    doc = yaml.safe_load(path.read_text()) or {}
    files = doc.get("files")
    if not isinstance(files, dict) or not files:
        raise InputError(f"{path}: expected a non-empty mapping under key 'files'")
    for rel, entry in files.items():
        for key in ("url", "sha256"):
            if not isinstance(entry, dict) or not entry.get(key):
                raise InputError(f"{path}: files[{rel!r}] needs a {key!r}")
    return files


def fetch(url: str, dest: str | os.PathLike, sha256: str, timeout_s: float = 120.0) -> None:
    """Download ``url`` to ``dest`` atomically, verifying its sha256.

    Raises:
        InputError: the download failed or the hash differs; ``dest`` is left absent
            (or as it was).
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp, atomic_path(dest) as tmp:
            h = hashlib.sha256()
            with open(tmp, "wb") as f:
                while block := resp.read(1 << 20):
                    h.update(block)
                    f.write(block)
            if h.hexdigest() != sha256:
                raise InputError(f"{url}: sha256 {h.hexdigest()} does not match the manifest's {sha256}")
    except InputError:
        raise
    except OSError as exc:
        raise InputError(f"{url}: download failed ({exc})") from exc


def build_manifest(data_dir: str | os.PathLike, base_url: str | None = None) -> dict:
    """Manifest for every file of :data:`DATA_GLOBS` under ``data_dir``.

    With ``base_url`` the URLs are ``base_url/<relpath>`` (a mirror) instead of upstream.
    """
    data_dir = Path(data_dir)
    files = {}
    for pattern in DATA_GLOBS:
        for p in sorted(data_dir.glob(pattern)):
            rel = str(p.relative_to(data_dir))
            url = f"{base_url.rstrip('/')}/{urllib.parse.quote(rel)}" if base_url else upstream_url(rel)
            files[rel] = {"url": url, "sha256": sha256_file(p), "size_bytes": p.stat().st_size}
    return {"files": files}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m synperf.data.download")
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manifest", help="write a manifest for a local copy of the public data")
    m.add_argument("data_dir")
    m.add_argument("-o", "--output", default="config/public_data_manifest.yaml")
    m.add_argument("--base-url", default=None, help="mirror URL instead of the pinned upstream URLs")
    args = ap.parse_args(argv)
    man = build_manifest(args.data_dir, args.base_url)
    header = ("# Pinned public data read by the pipeline: path under the data root -> upstream URL at a fixed\n"
              "# commit, sha256, size. Regenerate with `python -m synperf.data.download manifest <data_dir>`.\n")
    write_text(header + yaml.safe_dump(man, sort_keys=True, width=200), args.output)
    print(f"{args.output}: {len(man['files'])} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
