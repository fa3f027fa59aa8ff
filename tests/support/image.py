"""The coreio image, built from the Dockerfile the way users build it, on this machine (issue 21).

No registry is reachable here, so the base is made, not pulled: `mmdebstrap` writes a Debian
bookworm root filesystem with Python 3.11 from Debian's packages, `docker import` turns it into
the image the Dockerfile's BASE_IMAGE argument names. The machine's own CA certificates go into that
base (its egress to PyPI is through them), never into the Dockerfile. Docker's daemon and
mmdebstrap come from Debian's packages (`docker.io`), installed and started here when missing;
the daemon runs without a bridge or iptables rules (builds use the host's network to reach PyPI,
containers run with none). Everything is skipped with one line without root or apt-get."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")
HOST_CAS = Path("/usr/local/share/ca-certificates")
DOCKER_SOCKET = Path("/var/run/docker.sock")
CACHE = Path(os.environ.get("COREIO_TOOLS_CACHE", Path.home() / ".cache" / "coreio"))


def _run(*args: str, timeout: float = 600, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True, **kwargs)  # type: ignore[call-overload, no-any-return]


class DockerUnavailable(RuntimeError):
    """No root or no apt-get here: Docker's daemon cannot be installed or started."""


def docker() -> str:
    """The docker client, with Debian's daemon running; skips when neither can be had."""
    try:
        return ensure_docker()
    except DockerUnavailable as exc:
        pytest.skip(str(exc))


def ensure_docker() -> str:
    """The docker client, with Debian's daemon running (installed and started when missing)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise DockerUnavailable("the image tests need root and apt-get (Debian's docker.io and mmdebstrap)")
    if shutil.which("dockerd") is None or shutil.which("mmdebstrap") is None:
        _run("apt-get", "update", "-qq")
        _run(
            "apt-get",
            "install",
            "-y",
            "-qq",
            "docker.io",
            "mmdebstrap",
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    client = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else "docker"
    if subprocess.run([client, "info"], capture_output=True).returncode != 0:
        CACHE.mkdir(parents=True, exist_ok=True)
        log = (CACHE / "dockerd.log").open("ab")
        subprocess.Popen(
            ["dockerd", "--iptables=false", "--bridge=none"], stdout=log, stderr=log, start_new_session=True
        )
        wait_until(
            lambda: subprocess.run([client, "info"], capture_output=True).returncode == 0,
            timeout=60,
            interval=0.5,
            message=lambda: f"dockerd to start: {(CACHE / 'dockerd.log').read_text()[-2000:]}",
        )
    return client


def base_image(client: str) -> str:
    """The Debian base, tagged by what it holds (packages and the machine's CAs): made once."""
    cas = b"".join(p.read_bytes() for p in sorted(HOST_CAS.glob("*.crt"))) if HOST_CAS.is_dir() else b""
    tag = "coreio-test-base:" + hashlib.sha256(" ".join(BASE_PACKAGES).encode() + cas).hexdigest()[:12]
    if subprocess.run([client, "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    tarball = CACHE / "base.tar"
    CACHE.mkdir(parents=True, exist_ok=True)
    hooks = []
    if cas:
        hooks = [
            f"--customize-hook=copy-in {HOST_CAS} /usr/local/share",
            '--customize-hook=chroot "$1" update-ca-certificates',
        ]
    include = ",".join(BASE_PACKAGES)
    _run(
        "mmdebstrap", "--quiet", "--variant=minbase", f"--include={include}", *hooks, "bookworm", str(tarball)
    )
    _run(client, "import", str(tarball), tag)
    tarball.unlink()
    return tag


def build(client: str, tag: str = "coreio:test") -> tuple[str, float]:
    """The image built from the repository's Dockerfile on the made base; its tag and build time.
    The classic builder: BuildKit would fetch the `syntax` frontend from a registry."""
    started = time.monotonic()
    base = base_image(client)
    _run(
        client,
        "build",
        "--network=host",
        f"--build-arg=BASE_IMAGE={base}",
        f"--tag={tag}",
        str(ROOT),
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
        timeout=900,
    )
    return tag, time.monotonic() - started
