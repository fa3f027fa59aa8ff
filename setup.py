"""The build: every module stays Python source, and the hot ones are also compiled with mypyc (as mypy
and black ship themselves) where a C compiler and Python's headers are present (issue 24). etcd's
unary calls also get a Rust extension (native/etcd_rpc, built with setuptools-rust) where cargo is
present; without it they go through grpcio.

COREIO_MYPYC chooses: `auto` (the default) compiles when it can and falls back to the pure-Python
modules, with one line saying why, when it cannot; `1` requires the compile (the image and CI's
wheels); `0` never compiles. Editable installs stay pure unless COREIO_MYPYC=1, so that an edit to a
source file takes effect (a compiled module would shadow it). COREIO_NATIVE chooses the same way
for the Rust extension (`scripts/test` builds it in place with `build_rust --inplace`)."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# Which modules: pyproject.toml's [tool.coreio.mypyc], where the tests read them too.
COMPILED = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coreio"]["mypyc"]["modules"]

# mypyc type-checks what it compiles. The build environment holds none of the runtime dependencies,
# so their imports are left untyped there, whatever [tool.mypy] says for the editor and CI.
MYPY_FLAGS = (
    "--config-file=",
    "--ignore-missing-imports",
    "--follow-imports=silent",
    "--python-version=3.11",
)

CHOICE = os.environ.get("COREIO_MYPYC", "auto").strip().lower()
NATIVE = os.environ.get("COREIO_NATIVE", "auto").strip().lower()
# The Rust extension: its module and its crate.
RUST_MODULE, RUST_CRATE = "apiserver.storage.etcd._rpc", "native/etcd_rpc/Cargo.toml"


def _say(line: str) -> None:
    print(f"coreio build: {line}", file=sys.stderr)


def _why_not_compiled() -> str | None:
    """Why this machine cannot compile the modules, or None when it can."""
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        return f"no Python headers ({headers})"
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    return None


def _building_binaries(choice: str) -> bool:
    """Whether this run builds a wheel or extensions (metadata and sdists need no compile)."""
    commands = set(sys.argv[1:])
    if "editable_wheel" in commands:
        return choice == "1"
    return bool(commands & {"bdist_wheel", "build", "build_ext", "build_rust", "install"})


def _compiled_extensions() -> list[Any]:
    if CHOICE == "0" or not _building_binaries(CHOICE) or "build_rust" in sys.argv:
        return []
    missing = _why_not_compiled()
    if missing is not None:
        if CHOICE == "1":
            raise SystemExit(f"coreio build: COREIO_MYPYC=1 but {missing}")
        _say(f"{missing}: the pure-Python modules are installed")
        return []
    from mypyc.build import mypycify

    try:
        return list(mypycify([*MYPY_FLAGS, *COMPILED], opt_level="3", group_name="coreio"))
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error (a newer pydantic, say)
        if CHOICE == "1":
            raise
        _say(f"mypyc could not compile ({exc!r}): the pure-Python modules are installed")
        return []


def _rust_extensions() -> list[Any]:
    if NATIVE == "0" or not _building_binaries(NATIVE):
        return []
    if shutil.which("cargo") is None:
        if NATIVE == "1":
            raise SystemExit("coreio build: COREIO_NATIVE=1 but no cargo (Rust) on PATH")
        _say("no cargo (Rust): etcd's calls go through grpcio")
        return []
    from setuptools_rust import Binding, RustExtension

    # optional: under `auto`, a failed cargo build leaves grpcio doing the calls (setuptools-rust
    # says why); --locked: the crates Cargo.lock pins, or no build; debug=False: optimized in place
    # too (setuptools-rust's default builds an in-place build_ext unoptimized).
    return [
        RustExtension(
            RUST_MODULE,
            path=RUST_CRATE,
            binding=Binding.PyO3,
            py_limited_api=True,
            optional=NATIVE != "1",
            args=["--locked"],
            debug=False,
        )
    ]


class OptionalBuildExt(build_ext):
    """The compiled modules when they build; the pure-Python ones, with one line, when they do not."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # the compiler's own errors differ by platform and setuptools version
            if CHOICE == "1":
                raise
            _say(f"the compile failed ({exc}): the pure-Python modules are installed")


setup(
    ext_modules=_compiled_extensions(),
    rust_extensions=_rust_extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
)
