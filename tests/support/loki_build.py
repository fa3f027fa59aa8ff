"""Builds Grafana Loki for the Loki sink's tests from Go modules, once, and caches it (as etcd and
kube-apiserver are built: tests.support.gobuild).

It is Loki's own `cmd/loki` at a released version, built from a scratch module that requires it.
Loki's go.mod replaces some dependencies with Grafana's forks; a dependency's replacements do not
apply to the module that requires it, so the scratch module repeats them (read from Loki's go.mod,
not written here), except the one pointing into Loki's own tree (`pkg/push`, required at the
version Loki names).

    python -m tests.support.loki_build [--force]

prints the binary's path; a cold build takes minutes. `LOKI_BIN` overrides the build.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from tests.support import gobuild

LOKI_VERSION = "v3.7.8"
_LOKI = "github.com/grafana/loki/v3"
_MODULE_PATH = "coreio.invalid/loki"
_PROXY = {"GOPROXY": os.environ.get("COREIO_GOPROXY", "https://proxy.golang.org")}


def replacements(loki_go_mod: str) -> list[str]:
    """Loki's `replace` lines that point at other modules (not into its own tree)."""
    lines = re.findall(r"^replace\s+(\S+)\s+=>\s+(\S+)(?:\s+(\S+))?\s*$", loki_go_mod, re.MULTILINE)
    return [
        f"replace {old} => {new} {version}".rstrip() for old, new, version in lines if not new.startswith(".")
    ]


def _build(work: Path, out: Path) -> None:
    (work / "go.mod").write_text(f"module {_MODULE_PATH}\n\ngo 1.26\n\nrequire {_LOKI} {LOKI_VERSION}\n")
    gobuild.run_go(["mod", "download", f"{_LOKI}@{LOKI_VERSION}"], work, extra_env=_PROXY)
    found = gobuild.run_go(["mod", "download", "-json", f"{_LOKI}@{LOKI_VERSION}"], work, extra_env=_PROXY)
    directory = Path(re.search(r'"Dir":\s*"([^"]+)"', found).group(1))  # type: ignore[union-attr]
    with (work / "go.mod").open("a") as go_mod:
        go_mod.write("\n" + "\n".join(replacements((directory / "go.mod").read_text())) + "\n")
    gobuild.run_go(["mod", "tidy"], work, extra_env=_PROXY)
    command = ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "loki"), f"{_LOKI}/cmd/loki"]
    gobuild.run_go(command, work, extra_env=_PROXY)


def recipe() -> gobuild.Recipe:
    return gobuild.Recipe(
        binary="loki",
        version=LOKI_VERSION,
        directory=f"loki-{LOKI_VERSION}",
        build=_build,
        override="LOKI_BIN",
    )


def ensure_loki(*, force: bool = False) -> Path:
    """The Loki binary: $LOKI_BIN, or the cached build (built first when absent)."""
    if given := os.environ.get("LOKI_BIN"):
        return Path(given)
    return gobuild.ensure(recipe(), force=force).path


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(
        argv, prog="python -m tests.support.loki_build", description=description, recipe=recipe
    )


if __name__ == "__main__":
    sys.exit(main())
