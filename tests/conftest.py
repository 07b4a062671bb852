"""Shared fixtures. Tests that need the public data look in $SYNPERF_PUBLIC_DATA or ../shared/public-data
and skip with a reason when it is absent, except under CI=true, where its absence fails them.

The tests run in parallel (pytest-xdist, settings in pyproject.toml), and every worker builds its own session and
module fixtures: the tests that share an expensive one carry the same ``xdist_group``, so that one worker runs them
all and builds it once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GPUS = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"  # the registry the tests read

REPO = Path(__file__).resolve().parent.parent


def _public_data() -> Path | None:
    env = os.environ.get("SYNPERF_PUBLIC_DATA")
    p = Path(env) if env else REPO.parent / "shared" / "public-data"
    return p if (p / "README.md").exists() else None


def _reference() -> Path | None:
    env = os.environ.get("SYNPERF_REFERENCE")
    p = Path(env) if env else REPO.parent / "shared" / "reference"
    return p if (p / "gpu_specs.csv").exists() else None


def _missing(reason: str) -> None:
    """Skip for lack of shared data, or fail under CI=true, where the data must be present."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def public_data() -> Path:
    p = _public_data()
    if p is None:
        _missing("public data not found: set SYNPERF_PUBLIC_DATA or place it at ../shared/public-data")
    return p


@pytest.fixture(scope="session")
def reference() -> Path:
    p = _reference()
    if p is None:
        _missing("reference specs not found: set SYNPERF_REFERENCE or place them at ../shared/reference")
    return p


@pytest.fixture(scope="session")
def registry():
    from synperf.data.hardware import load_registry

    # datasheet values only: hand-computed expectations must not move when data/hardware/ gains a measurement
    return load_registry(GPUS, use_measured=False)


@pytest.fixture(scope="session")
def ingest_config() -> dict:
    """The ``ingest`` block of config/config.yaml: the Vidur and pipeweave GPU name maps live only there."""
    import yaml

    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())["ingest"]


@pytest.fixture(scope="session")
def e2e_config() -> dict:
    """The ``e2e`` block of config/config.yaml: the GPU name maps of the authors' real-run and collective files."""
    import yaml

    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())["e2e"]


@pytest.fixture(scope="session")
def vidur_measurements(public_data, ingest_config, tmp_path_factory):
    """Registry path, and the merged measurement table and summary of the Vidur source alone (tests only read them)."""
    from synperf.pipeline.ingest import ingest_source
    from synperf.pipeline.merge import merge_measurements

    d = tmp_path_factory.mktemp("vidur_measurements")
    reg = str(GPUS)
    src, summ = d / "vidur.parquet", d / "vidur.json"
    ingest_source("vidur", str(public_data), reg, ingest_config["vidur"], str(src), str(summ))
    allp, alls = d / "all.parquet", d / "summary.json"
    merge_measurements([str(src)], [str(summ)], [], reg, str(allp), str(alls))
    return reg, allp, alls


@pytest.fixture(scope="session")
def aiconfigurator_ingest(public_data, registry):
    """The aiconfigurator adapter's result on the public data (tests only read it)."""
    from synperf.data.ingest import aiconfigurator

    return aiconfigurator.ingest(public_data, registry)


@pytest.fixture(scope="session")
def default_dry_run(public_data) -> subprocess.CompletedProcess:
    """``snakemake -n --forceall`` of the default target and config on the public data, run once for the tests that
    read its plan; Snakemake prints its errors on stdout, so stderr is merged into ``.stdout``."""
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--config",
                           f"public_data_dir={public_data}"], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)


@pytest.fixture(scope="session")
def vidur_gemm(public_data, registry, ingest_config, tmp_path_factory):
    """Feature table (v2) and meta of Vidur fp16 GEMMs, one shape in four: seen A100 + H100, unseen A40."""
    import json

    import numpy as np

    from synperf.data.ingest import vidur
    from synperf.data.io import read_table, write_parquet
    from synperf.data.schema import reduce_duplicates
    from synperf.evaluation.split import shape_key
    from synperf.pipeline.features import experiment_features

    d = tmp_path_factory.mktemp("vidur_gemm")
    t = vidur.ingest(public_data, registry, ingest_config["vidur"]).table
    t, _ = reduce_duplicates(t[t.kernel == "gemm"])
    t = t[(shape_key(t, 7).to_numpy() % np.uint64(4)) == 0]
    write_parquet(t, d / "m.parquet")
    exp = {"kernel": "gemm", "sources": ["vidur"], "seen": ["a100_sxm4_80gb", "h100_sxm"], "unseen": ["a40"],
           "heldout_frac": 0.2}
    experiment_features(str(d / "m.parquet"), "gemm", exp, str(registry.path),
                        {"v2": (str(d / "f.parquet"), str(d / "f.json"))}, 0)
    return read_table(d / "f.parquet"), json.loads((d / "f.json").read_text())


def need_output(path: Path) -> Path:
    """``path``, an output of the main job (``models/``, ``results/``): skip without it, fail under
    SYNPERF_REQUIRE_OUTPUTS=1 (set by ``.ci/run`` after the main job)."""
    if not path.exists():
        if os.environ.get("SYNPERF_REQUIRE_OUTPUTS") == "1":
            pytest.fail(f"{path} missing after the main job")
        pytest.skip(f"{path} not found: run `snakemake --cores all` first")
    return path


def train_tiny_model(kernel: str, launches, registry, save_to: list[Path]):
    """A small efficiency MLP (2 epochs, 8 hidden units, feature set v2) of ``kernel`` on synthetic latencies
    (theoretical time / an efficiency drawn in [0.2, 0.6], seed 0) of ``launches`` (a ``gpu`` column plus the
    family's parameters), its ``train_gpus`` the launches' GPUs, saved in every folder of ``save_to``."""
    import numpy as np
    import pandas as pd

    from synperf.api import launch_table
    from synperf.model.estimator import TrainConfig, train
    from synperf.model.features import build_features

    rng = np.random.default_rng(0)
    table = launch_table(kernel, launches.drop(columns="gpu"), launches["gpu"].tolist(), registry)
    ff = build_features(table, registry, "v2")
    lat = ff.frame["theoretical_time_us"] / rng.uniform(0.2, 0.6, len(table))
    model = train(ff, lat, pd.Series(np.arange(len(table)) % 7), TrainConfig(max_epochs=2, hidden_sizes=[8]),
                  extra_meta={"feature_set": "v2", "train_gpus": sorted(launches["gpu"].unique())},
                  log=lambda *a: None)
    for d in save_to:
        model.save(d)
    return model
