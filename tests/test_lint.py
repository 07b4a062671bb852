"""Lint: ``ruff check`` on the Python folders, ``snakefmt --check`` on the workflow files (settings in
pyproject.toml) and ``snakemake --lint`` on the workflow with the default and the small CI config, which must
report nothing. A tool that is not installed skips its test with a reason, except under CI=true, where its
absence fails it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTHON_FOLDERS = ["synperf", "scripts", "tests", "tools"]
WORKFLOW_FILES = ["Snakefile", "rules/"]


def _missing(tool: str) -> None:
    """Skip when ``tool`` is not installed, or fail under CI=true, where the test extra must be installed."""
    reason = f"{tool} is not installed (pip install -e '.[test]')"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run ``cmd`` in the repository root and assert exit status 0, showing the tool's output otherwise."""
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    return proc


def test_ruff_check():
    if importlib.util.find_spec("ruff") is None:
        _missing("ruff")
    _run([sys.executable, "-m", "ruff", "check", *PYTHON_FOLDERS])


def test_snakefmt_check():
    snakefmt = shutil.which("snakefmt")
    if snakefmt is None:
        _missing("snakefmt")
    _run([snakefmt, "--check", "--line-length", "120", *WORKFLOW_FILES])


@pytest.mark.parametrize(
    "args",
    [[], ["--replace-workflow-config", "--configfile", "config/test/config.yaml"]],
    ids=["default_config", "test_config"],
)
def test_snakemake_lint(args):
    """``snakemake --lint`` exits 1 on a lint; a lint printed under exit status 0 fails the test too."""
    snakemake = shutil.which("snakemake")
    if snakemake is None:
        _missing("snakemake")
    proc = _run([snakemake, "--lint", *args])
    out = proc.stdout + proc.stderr
    assert "Lints for" not in out, out
