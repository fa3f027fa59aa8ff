"""Builds etcd for the tests and the e2e control plane from Go modules, once, and caches it.

etcd's own `main` lives in its root module go.etcd.io/etcd/v3, whose go.mod replaces its sibling
modules with relative paths, so `go install` refuses it. The server's entry point, though, is the
package go.etcd.io/etcd/server/v3/etcdmain of a published module: the build writes a throwaway
module that requires go.etcd.io/etcd/server/v3 at the pinned release and whose `main` hands the
command line to `etcdmain.Main`, then `go build`s it (CGO off, `-trimpath`). etcd's version is a
constant of go.etcd.io/etcd/api/v3/version, so the binary reports its release without ldflags.

`gobuild` caches it as `$COREIO_CONTROLPLANE_CACHE/etcd-<version>/etcd` (default
`~/.cache/coreio/controlplane`). `ETCD_BIN` points at a binary of one's own instead;
`COREIO_ETCD_VERSION` builds another release (v3.5.3 or newer).

    python -m tests.support.etcd_build [--force]

prints the binary's path and how long getting it took.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from tests.support import gobuild
from tests.support.gobuild import Build

# The newest 3.6 patch release on the Go module proxy when this was written; pinned so that CI
# builds what was tested.
ETCD_VERSION = "v3.6.16"
_MODULE_PATH = "coreio.invalid/etcd-build"
_VERSION = re.compile(r"^v3\.(\d+)\.(\d+)$")
_MAIN = """package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""


def etcd_version() -> str:
    version = os.environ.get("COREIO_ETCD_VERSION") or ETCD_VERSION
    match = _VERSION.match(version)
    if match is None or (int(match.group(1)), int(match.group(2))) < (5, 3):
        raise ValueError(f"etcd version {version!r} is not of the form v3.N.P (v3.5.3 or newer)")
    return version


def go_mod(version: str) -> str:
    return f"module {_MODULE_PATH}\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 {version}\n"


def _build(version: str, work: Path, out: Path) -> None:
    (work / "go.mod").write_text(go_mod(version))
    (work / "main.go").write_text(_MAIN)
    binary = out / "etcd"
    gobuild.run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary), "."], work)
    reported = gobuild.reported_version(binary).splitlines()
    if not reported or reported[0] != f"etcd Version: {version.removeprefix('v')}":
        raise RuntimeError(f"built etcd reports {reported[:1]!r}, expected etcd Version: {version}")


def recipe() -> gobuild.Recipe:
    version = etcd_version()
    return gobuild.Recipe(
        binary="etcd",
        version=version,
        directory=f"etcd-{version}",
        build=lambda work, out: _build(version, work, out),
        override="ETCD_BIN",
    )


def ensure_etcd(*, force: bool = False) -> Build:
    """The cached etcd, building it first when this machine has none yet."""
    return gobuild.ensure(recipe(), force=force)


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(
        argv, prog="python -m tests.support.etcd_build", description=description, recipe=recipe
    )


if __name__ == "__main__":
    sys.exit(main())
