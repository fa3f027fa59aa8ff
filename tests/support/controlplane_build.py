"""Builds the real kube-apiserver for the e2e tests from Go modules, once, and caches it.

`go install k8s.io/kubernetes/cmd/kube-apiserver@vX` refuses to work: k8s.io/kubernetes's go.mod
replaces every staging module (`k8s.io/api => ./staging/src/k8s.io/api`, ...) and `go install`
rejects main modules with replace directives. So the build writes a throwaway module that requires
`k8s.io/kubernetes vX.Y.Z` and replaces each staging module with its published twin `v0.Y.Z` (the
list is read from that version's own go.mod, which `go mod download -json` hands back), then
`go build`s `k8s.io/kubernetes/cmd/kube-apiserver` in it. The version is stamped with ldflags into
k8s.io/component-base/version (what `/version` serves; without it the server says v0.0.0 and Helm's
`kubeVersion` checks fail).

Only this recipe lives in the repository; `gobuild` builds and caches it, as
`$COREIO_CONTROLPLANE_CACHE/<version>/kube-apiserver` (default `~/.cache/coreio/controlplane`; see
`gobuild`). `KUBE_APISERVER_BIN` overrides the whole thing.

    python -m tests.support.controlplane_build [--force]

prints the binary's path and how long getting it took.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from tests.support import gobuild
from tests.support.gobuild import Build, GoUnavailable

# What the e2e set-up catches: no Go toolchain here (and no KUBE_APISERVER_BIN).
ControlPlaneUnavailable = GoUnavailable

# The newest 1.33 patch release on the Go module proxy when this was written; pinned so that CI
# builds what was tested. `COREIO_KUBE_VERSION` picks another (1.33 or newer).
KUBERNETES_VERSION = "v1.33.13"
_MODULE_PATH = "coreio.invalid/controlplane-build"
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)
_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")


def kubernetes_version() -> str:
    version = os.environ.get("COREIO_KUBE_VERSION") or KUBERNETES_VERSION
    if not _VERSION.match(version):
        raise ValueError(f"kube-apiserver version {version!r} is not of the form v1.N.P")
    return version


def build_dir(version: str | None = None) -> Path:
    return gobuild.cache_root() / (version or kubernetes_version())


def staging_modules(version: str, work: Path) -> list[str]:
    """The modules k8s.io/kubernetes@version replaces with its ./staging tree, from its go.mod."""
    info = json.loads(
        gobuild.run_go(["mod", "download", "-json", f"k8s.io/kubernetes@{version}"], work, timeout=600)
    )
    if info.get("Error"):
        raise RuntimeError(f"go mod download k8s.io/kubernetes@{version}: {info['Error']}")
    modules = sorted(set(_STAGING_REPLACE.findall(Path(info["GoMod"]).read_text())))
    if "k8s.io/apiserver" not in modules:
        raise RuntimeError(f"k8s.io/kubernetes@{version}'s go.mod replaces no staging modules")
    return modules


def go_mod(version: str, staging: list[str]) -> str:
    """The throwaway module: kubernetes at `version`, each staging module at its v0 twin."""
    staging_version = "v0." + version.removeprefix("v1.")
    replaces = "\n".join(f"\t{module} => {module} {staging_version}" for module in staging)
    return (
        f"module {_MODULE_PATH}\n\n"
        "go 1.24\n\n"
        f"require k8s.io/kubernetes {version}\n\n"
        f"replace (\n{replaces}\n)\n"
    )


def ldflags(version: str) -> str:
    match = _VERSION.match(version)
    assert match is not None
    values = {
        "gitVersion": version,
        "gitMajor": "1",
        "gitMinor": match.group(1),
        # A module zip carries no commit; empty beats upstream's unexpanded "$Format:%H$".
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    flags = ["-s", "-w"]
    # component-base is what /version serves; client-go's copy is what the server's own clients
    # (loopback, the aggregator's) put in their User-Agent.
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{name}={value}" for name, value in values.items()]
    return " ".join(flags)


def _build(version: str, work: Path, out: Path) -> None:
    (work / "go.mod").write_text(f"module {_MODULE_PATH}\n\ngo 1.24\n")
    staging = staging_modules(version, work)
    (work / "go.mod").write_text(go_mod(version, staging))
    binary = out / "kube-apiserver"
    command = "k8s.io/kubernetes/cmd/kube-apiserver"
    gobuild.run_go(["build", "-trimpath", "-ldflags", ldflags(version), "-o", str(binary), command], work)
    reported = gobuild.reported_version(binary)
    if reported != f"Kubernetes {version}":
        raise RuntimeError(f"built kube-apiserver reports {reported!r}, expected Kubernetes {version}")


def recipe() -> gobuild.Recipe:
    version = kubernetes_version()
    return gobuild.Recipe(
        binary="kube-apiserver",
        version=version,
        directory=version,
        build=lambda work, out: _build(version, work, out),
        override="KUBE_APISERVER_BIN",
    )


def ensure_kube_apiserver(*, force: bool = False) -> Build:
    """The cached kube-apiserver, building it first when this machine has none yet."""
    return gobuild.ensure(recipe(), force=force)


def kube_apiserver_path() -> Path:
    """Path of the kube-apiserver binary ($KUBE_APISERVER_BIN, or the cached build)."""
    if value := os.environ.get("KUBE_APISERVER_BIN"):
        path = Path(value)
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"KUBE_APISERVER_BIN={value} is not an executable file")
        return path
    return ensure_kube_apiserver().path


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(
        argv, prog="python -m tests.support.controlplane_build", description=description, recipe=recipe
    )


if __name__ == "__main__":
    sys.exit(main())
