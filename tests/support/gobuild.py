"""Go programs for the tests, built from Go modules once per machine and cached.

What `controlplane_build` (kube-apiserver) and `etcd_build` (etcd) share. A recipe writes a
throwaway module into a scratch directory and builds one binary into its `out/`; this module finds
the Go toolchain, runs go in a clean environment (CGO off, no workspace, `-mod=mod`), and keeps the
result as `<cache root>/<name>/` with a stamp (`build.json`: version, Go version, build time). The
build runs under a file lock in a scratch directory beside its destination and is renamed into
place, so concurrent sessions neither race nor see a half-written binary. Go's own module and build
caches (GOMODCACHE, GOCACHE) are used as configured: a rebuild after clearing our directory is fast.

The cache root is `$COREIO_CONTROLPLANE_CACHE`, else `$XDG_CACHE_HOME/coreio/controlplane`, else
`~/.cache/coreio/controlplane`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

BUILD_TIMEOUT = 3600.0
_STAMP = "build.json"


class GoUnavailable(RuntimeError):
    """No Go toolchain here (and no prebuilt binary named by the recipe's override variable)."""


@dataclass(frozen=True)
class Build:
    path: Path
    version: str
    seconds: float  # what this call took (0-ish when it was cached)
    built: bool  # False: served from our cache


@dataclass(frozen=True)
class Recipe:
    """How to build `binary` at `version` into `cache_root()/directory`.

    `build(work, out)` writes the module into `work` and the binary to `out/<binary>`; `override`
    names the environment variable that points at a binary of one's own instead (for messages)."""

    binary: str
    version: str
    directory: str
    build: Callable[[Path, Path], None]
    override: str

    @property
    def path(self) -> Path:
        return cache_root() / self.directory


def cache_root() -> Path:
    if root := os.environ.get("COREIO_CONTROLPLANE_CACHE"):
        return Path(root)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "coreio" / "controlplane"


def go_binary(override: str = "") -> str:
    """The go command: $GO_BIN, `go` on PATH, or /usr/local/go/bin/go."""
    go = os.environ.get("GO_BIN") or shutil.which("go")
    if go is None and os.access("/usr/local/go/bin/go", os.X_OK):
        go = "/usr/local/go/bin/go"
    if go is None:
        either = f" or {override}" if override else ""
        raise GoUnavailable(f"no Go toolchain on PATH (set GO_BIN{either})")
    return go


def go_available() -> bool:
    try:
        go_binary()
    except GoUnavailable:
        return False
    return True


def go_env() -> dict[str, str]:
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


def run_go(
    args: list[str], work: Path, *, timeout: float = BUILD_TIMEOUT, extra_env: dict[str, str] | None = None
) -> str:
    """`go args...` in `work` (with `extra_env` over the clean environment); its stdout, or
    RuntimeError with the tail of stderr."""
    done = subprocess.run(
        [go_binary(), *args],
        cwd=work,
        env={**go_env(), **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


def reported_version(binary: Path) -> str:
    """What `binary --version` prints (stripped)."""
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def cached(recipe: Recipe) -> Path | None:
    """The finished binary of `recipe`, if our cache holds it at the recipe's version."""
    directory = recipe.path
    binary = directory / recipe.binary
    try:
        stamp = json.loads((directory / _STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("version") != recipe.version or not os.access(binary, os.X_OK):
        return None
    return binary


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _build(recipe: Recipe) -> None:
    directory = recipe.path
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        started = time.monotonic()
        out = work / "out"
        out.mkdir()
        recipe.build(work, out)
        shutil.copy2(work / "go.mod", out / "go.mod")
        seconds = time.monotonic() - started
        go_version = run_go(["env", "GOVERSION"], work).strip()
        stamp = {"version": recipe.version, "go": go_version, "build_seconds": round(seconds, 1)}
        (out / _STAMP).write_text(json.dumps(stamp) + "\n")
        if directory.exists():  # a broken leftover (complete ones are returned before building)
            shutil.rmtree(directory)
        out.rename(directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ensure(recipe: Recipe, *, force: bool = False) -> Build:
    """The cached binary of `recipe`, building it first when this machine has none yet."""
    started = time.monotonic()
    if not force and (binary := cached(recipe)) is not None:
        return Build(binary, recipe.version, time.monotonic() - started, built=False)
    go_binary(recipe.override)  # fail before taking the lock where there is no toolchain
    directory = recipe.path
    with locked(directory.parent / f".{directory.name}.lock"):
        if not force and (binary := cached(recipe)) is not None:  # built meanwhile
            return Build(binary, recipe.version, time.monotonic() - started, built=False)
        _build(recipe)
    return Build(directory / recipe.binary, recipe.version, time.monotonic() - started, built=True)


def main(argv: list[str] | None, *, prog: str, description: str, recipe: Callable[[], Recipe]) -> int:
    """A command line that builds (or finds cached) one recipe and prints the binary's path."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--force", action="store_true", help="rebuild even when a cached binary exists")
    args = parser.parse_args(argv)
    chosen = recipe()
    build = ensure(chosen, force=args.force)
    print(build.path)
    how = "built" if build.built else "cached"
    print(f"{chosen.binary} {build.version}: {how} in {build.seconds:.1f}s", file=sys.stderr)
    return 0
