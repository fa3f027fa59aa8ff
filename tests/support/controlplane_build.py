"""Builds the real kube-apiserver for the e2e tests from Go modules, once, and caches it.

`go install k8s.io/kubernetes/cmd/kube-apiserver@vX` refuses to work: k8s.io/kubernetes's go.mod
replaces every staging module (`k8s.io/api => ./staging/src/k8s.io/api`, ...) and `go install`
rejects main modules with replace directives. So the build writes a throwaway module that requires
`k8s.io/kubernetes vX.Y.Z` and replaces each staging module with its published twin `v0.Y.Z` (the
list is read from that version's own go.mod, which `go mod download -json` hands back), then
`go build`s `k8s.io/kubernetes/cmd/kube-apiserver` in it. The version is stamped with ldflags into
k8s.io/component-base/version (what `/version` serves; without it the server says v0.0.0 and Helm's
`kubeVersion` checks fail).

Only this recipe lives in the repository. The binary goes to
`$COREIO_CONTROLPLANE_CACHE/<version>/kube-apiserver` (default
`$XDG_CACHE_HOME/coreio/controlplane` or `~/.cache/coreio/controlplane`), built under a file lock and
renamed into place, so concurrent sessions neither race nor see a half-written binary. Go's own module
and build caches (GOMODCACHE, GOCACHE) are used as configured, so a rebuild after clearing our
directory is fast. `KUBE_APISERVER_BIN` overrides the whole thing.

    python -m tests.support.controlplane_build [--force]

prints the binary's path and how long getting it took.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The newest 1.33 patch release on the Go module proxy when this was written; pinned so that CI
# builds what was tested. `COREIO_KUBE_VERSION` picks another (1.33 or newer).
KUBERNETES_VERSION = "v1.33.13"
BUILD_TIMEOUT = 3600.0
_STAMP = "build.json"
_MODULE_PATH = "coreio.invalid/controlplane-build"
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)
_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")


class ControlPlaneUnavailable(RuntimeError):
    """No Go toolchain here (and no KUBE_APISERVER_BIN)."""


@dataclass(frozen=True)
class Build:
    path: Path
    version: str
    seconds: float  # what this call took (0-ish when it was cached)
    built: bool  # False: served from our cache


def kubernetes_version() -> str:
    version = os.environ.get("COREIO_KUBE_VERSION") or KUBERNETES_VERSION
    if not _VERSION.match(version):
        raise ValueError(f"kube-apiserver version {version!r} is not of the form v1.N.P")
    return version


def cache_root() -> Path:
    if root := os.environ.get("COREIO_CONTROLPLANE_CACHE"):
        return Path(root)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "coreio" / "controlplane"


def build_dir(version: str | None = None) -> Path:
    return cache_root() / (version or kubernetes_version())


def go_binary() -> str:
    go = os.environ.get("GO_BIN") or shutil.which("go")
    if go is None and os.access("/usr/local/go/bin/go", os.X_OK):
        go = "/usr/local/go/bin/go"
    if go is None:
        raise ControlPlaneUnavailable("no Go toolchain on PATH (set GO_BIN or KUBE_APISERVER_BIN)")
    return go


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    flags = [f for f in env.get("GOFLAGS", "").split() if not f.startswith("-mod=")]
    env.update(
        GOFLAGS=" ".join([*flags, "-mod=mod"]),
        CGO_ENABLED="0",
        GOWORK="off",  # a go.work above the cache dir must not pull our module into a workspace
    )
    env.pop("GOOS", None)
    env.pop("GOARCH", None)
    return env


def _go(args: list[str], work: Path, *, timeout: float = BUILD_TIMEOUT) -> str:
    done = subprocess.run(
        [go_binary(), *args],
        cwd=work,
        env=_go_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


def staging_modules(version: str, work: Path) -> list[str]:
    """The modules k8s.io/kubernetes@version replaces with its ./staging tree, from its go.mod."""
    info = json.loads(_go(["mod", "download", "-json", f"k8s.io/kubernetes@{version}"], work, timeout=600))
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


def _cached(directory: Path, version: str) -> Path | None:
    binary = directory / "kube-apiserver"
    try:
        stamp = json.loads((directory / _STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("version") != version or not os.access(binary, os.X_OK):
        return None
    return binary


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _build(directory: Path, version: str) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        started = time.monotonic()
        (work / "go.mod").write_text(f"module {_MODULE_PATH}\n\ngo 1.24\n")
        staging = staging_modules(version, work)
        (work / "go.mod").write_text(go_mod(version, staging))
        out = work / "out"
        out.mkdir()
        _go(
            [
                "build",
                "-trimpath",
                "-ldflags",
                ldflags(version),
                "-o",
                str(out / "kube-apiserver"),
                "k8s.io/kubernetes/cmd/kube-apiserver",
            ],
            work,
        )
        reported = subprocess.run(
            [str(out / "kube-apiserver"), "--version"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
        if reported != f"Kubernetes {version}":
            raise RuntimeError(f"built kube-apiserver reports {reported!r}, expected Kubernetes {version}")
        shutil.copy2(work / "go.mod", out / "go.mod")
        seconds = time.monotonic() - started
        go_version = _go(["env", "GOVERSION"], work).strip()
        (out / _STAMP).write_text(
            json.dumps({"version": version, "go": go_version, "build_seconds": round(seconds, 1)}) + "\n"
        )
        if directory.exists():  # a broken leftover (complete ones are returned before building)
            shutil.rmtree(directory)
        out.rename(directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ensure_kube_apiserver(*, force: bool = False) -> Build:
    """The cached kube-apiserver, building it first when this machine has none yet."""
    version = kubernetes_version()
    directory = build_dir(version)
    started = time.monotonic()
    if not force and (binary := _cached(directory, version)) is not None:
        return Build(binary, version, time.monotonic() - started, built=False)
    with _locked(directory.parent / f".{directory.name}.lock"):
        if not force and (binary := _cached(directory, version)) is not None:  # built meanwhile
            return Build(binary, version, time.monotonic() - started, built=False)
        _build(directory, version)
    return Build(directory / "kube-apiserver", version, time.monotonic() - started, built=True)


def kube_apiserver_path() -> Path:
    """Path of the kube-apiserver binary ($KUBE_APISERVER_BIN, or the cached build)."""
    if value := os.environ.get("KUBE_APISERVER_BIN"):
        path = Path(value)
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"KUBE_APISERVER_BIN={value} is not an executable file")
        return path
    return ensure_kube_apiserver().path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.controlplane_build", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when a cached binary exists")
    args = parser.parse_args(argv)
    build = ensure_kube_apiserver(force=args.force)
    print(build.path)
    how = "built" if build.built else "cached"
    print(f"kube-apiserver {build.version}: {how} in {build.seconds:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
