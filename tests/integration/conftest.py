"""What several modules here share: the wheel and sdist built once a run (about 35 s with the hot
modules compiled), for the wheel's own tests and for the suite run against its compiled modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.source_tree import tracked_copy


@pytest.fixture(scope="session")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tracked files, as a fresh clone holds them."""
    return tracked_copy(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="session")
def dist(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it with the hot modules compiled and etcd's Rust extension
    (as CI and the image build it: COREIO_MYPYC=1 and COREIO_NATIVE=1 fail the build rather than
    fall back)."""
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(source)]
    built = subprocess.run(
        command,
        cwd=source,
        env={**os.environ, "COREIO_MYPYC": "1", "COREIO_NATIVE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, f"{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    return out
