"""The image users build (issue 21, part 2): the Dockerfile built on a base made from Debian's
packages (tests.support.image), then run as a pod runs it: user 65532, a read-only root
filesystem, no network, the data directory an empty writable mount, the serving certificate a
mounted directory. Both entry points answer, and the server started by the image's own CMD serves
/readyz over TLS with that certificate (asked from inside the container: it has no network)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apiserver import pki
from tests.support import image
from tests.support.source_tree import MODULE_FILES, RUST_MODULES, compiled_modules
from tests.support.waiting import wait_until

pytestmark = pytest.mark.image
SERVING = "/var/run/secrets/coreio/serving"
POD = ["--rm", "--read-only", "--network=none", "--tmpfs=/var/lib/coreio:uid=65532,gid=65532,mode=0700"]


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[str, str]]:
    client = image.docker()
    tag, seconds = image.build(client)
    size = json.loads(_docker(client, "image", "inspect", tag).stdout)[0]["Size"] / 1e6
    layers = _docker(client, "history", "--format", "{{.Size}}\t{{.CreatedBy}}", tag).stdout
    print(f"\nimage {tag}: built in {seconds:.1f}s (layer cache kept), {size:.1f} MB; layers:\n{layers}")
    yield client, tag


def _docker(client: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([client, *args], capture_output=True, text=True, timeout=timeout)


def test_it_runs_as_65532(built: tuple[str, str]) -> None:
    client, tag = built
    config = json.loads(_docker(client, "image", "inspect", tag).stdout)[0]["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["coreio-apiserver"]
    uid = _docker(
        client,
        "run",
        *POD,
        "--entrypoint=python",
        tag,
        "-c",
        "import getpass, os; print(os.getuid(), os.getgid(), getpass.getuser())",
    )
    # With a name: kopf (the operator) asks getpass for it, which fails for an unknown uid.
    assert uid.stdout.split() == ["65532", "65532", "nonroot"], uid.stderr


@pytest.mark.parametrize(
    "entrypoint", ["coreio-apiserver", "coreio-operator", "kubectl-coreio", "coreio-export"]
)
def test_each_entry_point_answers(built: tuple[str, str], entrypoint: str) -> None:
    client, tag = built
    answer = _docker(client, "run", *POD, f"--entrypoint={entrypoint}", tag, "--help")
    assert answer.returncode == 0 and "usage:" in answer.stdout.lower(), answer.stderr[-2000:]


def test_the_hot_modules_are_compiled_and_no_compiler_is_left(built: tuple[str, str]) -> None:
    """The image runs the modules pyproject.toml names as mypyc's extensions, and etcd's Rust
    extension; the compilers that built them stayed in the builder stage."""
    client, tag = built
    modules = [*compiled_modules(), *RUST_MODULES]
    answer = _docker(client, "run", *POD, "--entrypoint=python", tag, "-c", MODULE_FILES, *modules)
    files = answer.stdout.split()
    assert len(files) == len(modules) and all(f.endswith(".so") for f in files), answer.stderr[-2000:]
    look = "command -v gcc cc cargo rustc || ls /opt/rust 2>/dev/null || true"
    compilers = _docker(client, "run", *POD, "--entrypoint=sh", tag, "-c", look)
    assert compilers.stdout.strip() == ""


def test_the_pure_python_modules_start_from_bytecode(built: tuple[str, str]) -> None:
    """pip compiled the installed modules in the builder: the server, whose root filesystem is
    read-only and which runs with PYTHONDONTWRITEBYTECODE, never compiles one at its start."""
    client, tag = built
    asked = (
        "import importlib.util, os, apiserver.app as app\n"
        "print(os.path.isfile(importlib.util.cache_from_source(app.__file__)))"
    )
    answer = _docker(client, "run", *POD, "--entrypoint=python", tag, "-c", asked)
    assert answer.stdout.strip() == "True", answer.stderr[-2000:]


def test_the_root_filesystem_is_read_only(built: tuple[str, str]) -> None:
    client, tag = built
    answer = _docker(client, "run", *POD, "--entrypoint=sh", tag, "-c", "touch /opt/coreio/x")
    assert answer.returncode != 0 and "Read-only file system" in answer.stderr


def test_the_server_starts_from_the_images_cmd(built: tuple[str, str], tmp_path: Path) -> None:
    client, tag = built
    ca = pki.create_ca("image-test-ca")
    serving = pki.issue_serving_certificate(ca, ["localhost", "127.0.0.1"])
    certificates = tmp_path / "serving"
    serving.save(certificates / "tls.crt", certificates / "tls.key")
    ca.save(tmp_path / "ca.crt", tmp_path / "ca.key")
    certificates.chmod(0o755)
    for path in (certificates / "tls.crt", certificates / "tls.key", tmp_path / "ca.crt"):
        path.chmod(0o644)  # as the kubelet projects a Secret (defaultMode 0644)
    name = f"coreio-image-test-{int(time.time())}"
    mounts = [f"--volume={certificates}:{SERVING}:ro", f"--volume={tmp_path / 'ca.crt'}:/ca.crt:ro"]
    started = _docker(client, "run", "--detach", f"--name={name}", *POD, *mounts, tag)
    assert started.returncode == 0, started.stderr
    probe = (
        "import ssl, urllib.request\n"
        "context = ssl.create_default_context(cafile='/ca.crt')\n"
        "answer = urllib.request.urlopen('https://localhost:8443/readyz', context=context, timeout=5)\n"
        "print(answer.read().decode())\n"
    )
    answers: list[subprocess.CompletedProcess[str]] = []

    def ready() -> bool:
        answers[:] = [_docker(client, "exec", name, "python", "-c", probe)]
        return answers[0].returncode == 0

    try:
        wait_until(
            ready,
            timeout=60,
            interval=0.5,
            message=lambda: (
                f"/readyz in the container: {answers[0].stderr[-2000:]}\n"
                + _docker(client, "logs", name).stderr[-3000:]
            ),
        )
        assert answers[0].stdout.strip() == "ok"
    finally:
        _docker(client, "rm", "--force", name)
