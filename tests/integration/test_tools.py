"""The fetched kubectl and Helm run, and kubectl accepts the standalone kubeconfig and certificates."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from apiserver import pki, standalone
from tests.support import tools
from tests.support.tls import serve_whoami

pytestmark = pytest.mark.tools


def _env(tmp_path: Path) -> dict[str, str]:
    # Nothing from the developer's ~/.kube or Helm config may leak in.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "KUBECONFIG": os.devnull}


def test_kubectl_is_1_33(kubectl: Path, tmp_path: Path) -> None:
    assert kubectl != Path("/usr/bin/kubectl")
    done = subprocess.run(
        [str(kubectl), "version", "--client", "-o", "json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        check=True,
    )
    version = json.loads(done.stdout)["clientVersion"]
    assert (version["major"], version["minor"]) == ("1", "33")
    assert version["gitVersion"].startswith(tools.KUBECTL_VERSION_PREFIX)


def test_helm_is_4(helm: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(helm), "version", "--short"], env=_env(tmp_path), capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("v4."), done.stdout


def test_fetched_binaries_are_cached_with_their_versions() -> None:
    if os.environ.get("KUBECTL_BIN") or os.environ.get("HELM_BIN"):
        pytest.skip("binaries overridden by KUBECTL_BIN/HELM_BIN")
    found = tools.ensure_tools()
    assert found.kubectl.parent == tools.tools_dir()
    assert found.kubectl_version.startswith("v1.33.")
    assert found.helm_version.startswith("v4.")
    assert tools.kubectl_version(found.kubectl) == found.kubectl_version
    assert tools.helm_version(found.helm) == found.helm_version


async def _kubectl(kubectl: Path, tmp_path: Path, *args: str) -> str:
    # Asynchronous, so that the server under test keeps running on this event loop.
    proc = await asyncio.create_subprocess_exec(
        str(kubectl),
        *args,
        env=_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_kubectl_uses_the_standalone_kubeconfig(kubectl: Path, tmp_path: Path) -> None:
    """kubectl verifies the serving certificate and authenticates with the admin certificate."""
    data = tmp_path / "data"
    files = standalone.bootstrap(data, port=6443)
    serving = pki.ServingCertificate(files.serving_cert, files.serving_key, files.ca_cert)
    async with serve_whoami(serving) as port:
        files = standalone.bootstrap(data, port=port)
        out = await _kubectl(
            kubectl, tmp_path, "--kubeconfig", str(files.kubeconfig), "get", "--raw", "/whoami"
        )
        assert json.loads(out) == {
            "user": "coreio-admin",
            "groups": ["system:masters"],
            "authorization": None,
        }

        # A bearer-token client without a certificate connects too (client certificates are optional).
        out = await _kubectl(
            kubectl,
            tmp_path,
            f"--server={files.server_url}",
            f"--certificate-authority={files.ca_cert}",
            f"--token={files.admin_token}",
            "get",
            "--raw",
            "/whoami",
        )
        assert json.loads(out) == {"user": None, "groups": [], "authorization": f"Bearer {files.admin_token}"}

        config = json.loads(
            await _kubectl(
                kubectl, tmp_path, "--kubeconfig", str(files.kubeconfig), "config", "view", "-o", "json"
            )
        )
        assert config["current-context"] == "coreio"
        assert config["contexts"][0]["context"]["namespace"] == "default"
