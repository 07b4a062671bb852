"""Shared fixtures. Tests that need the public data look in $SYNPERF_PUBLIC_DATA or ../shared/public-data
and skip with a reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _public_data() -> Path | None:
    env = os.environ.get("SYNPERF_PUBLIC_DATA")
    p = Path(env) if env else REPO.parent / "shared" / "public-data"
    return p if (p / "README.md").exists() else None


def _reference() -> Path | None:
    env = os.environ.get("SYNPERF_REFERENCE")
    p = Path(env) if env else REPO.parent / "shared" / "reference"
    return p if (p / "gpu_specs.csv").exists() else None


@pytest.fixture(scope="session")
def public_data() -> Path:
    p = _public_data()
    if p is None:
        pytest.skip("public data not found: set SYNPERF_PUBLIC_DATA or place it at ../shared/public-data")
    return p


@pytest.fixture(scope="session")
def reference() -> Path:
    p = _reference()
    if p is None:
        pytest.skip("reference specs not found: set SYNPERF_REFERENCE or place them at ../shared/reference")
    return p


@pytest.fixture(scope="session")
def registry():
    from synperf.hardware import load_registry

    # datasheet values only: hand-computed expectations must not move when data/hardware/ gains a measurement
    return load_registry(use_measured=False)
