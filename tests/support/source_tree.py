"""Copies of the repository as a fresh clone holds it, for the tests that build what users install."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `python -c MODULE_FILES module...` prints where each named module was imported from, one a line.
MODULE_FILES = (
    "import importlib, sys\nfor name in sys.argv[1:]:\n    print(importlib.import_module(name).__file__)\n"
)


# The modules setup.py builds from Rust (no Python source of their own).
RUST_MODULES = ["apiserver.storage.etcd._rpc"]


def tracked_copy(destination: Path) -> Path:
    """The files git tracks, copied to `destination` (no .venv, no build leftovers)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode & 0o777)
    return destination


def compiled_modules() -> list[str]:
    """The modules setup.py compiles with mypyc, dotted (pyproject.toml's [tool.coreio.mypyc])."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    paths = config["tool"]["coreio"]["mypyc"]["modules"]
    return [str(Path(path).with_suffix("")).replace("/", ".") for path in paths]
