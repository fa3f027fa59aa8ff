"""Running the real kubectl against a test server through the kubeconfig the server wrote, and the
manifests the kubectl tests share.

The `kubectl_cli` fixture is kubectl on the module's `server` (registered in the root conftest)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver import pki
from tests.support.server import ServerProcess

RB = "rolebindings.rbac.authorization.core.io"
EV = "events.events.core.io"


class Kubectl:
    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig

    def command(self, *args: str) -> list[str]:
        return [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args]

    def run(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Runs kubectl; `env` adds variables to this process's environment (KUBE_EDITOR, say)."""
        result = subprocess.run(
            self.command(*args),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **env} if env else None,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def json(self, *args: str, input: str | None = None) -> Any:
        return json.loads(self.run(*args, "-o", "json", input=input).stdout)


@pytest.fixture(scope="module")
def kubectl_cli(kubectl: Path, server: ServerProcess) -> Kubectl:
    """kubectl with the admin's kubeconfig of the module's `server`."""
    return Kubectl(kubectl, server.kubeconfig)


def rolebinding_yaml(name: str, namespace: str, subjects: list[dict[str, str]] | None = None) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "rbac.authorization.core.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "demo"}},
            "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
            "subjects": subjects or [{"kind": "User", "name": "alice"}],
        }
    )


def event_body(name: str, namespace: str) -> dict[str, Any]:
    """A valid events.core.io/v1 Event the tests share."""
    return {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": "2026-11-22T02:16:41.123456Z",
        "action": "Scheduled",
        "reason": "Started",
        "note": "container started",
        "type": "Normal",
        "reportingController": "example.com/controller",
        "reportingInstance": "controller-1",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "web-0", "apiVersion": "v1"},
    }


def event_yaml(name: str, namespace: str) -> str:
    return yaml.safe_dump(event_body(name, namespace))


def as_user(kubectl: Kubectl, server: ServerProcess, user: str) -> Kubectl:
    """kubectl with a client certificate for `user` (no groups) from the server's CA."""
    ca = pki.KeyPair.load(server.data_dir / "pki" / "ca.crt", server.data_dir / "pki" / "ca.key")
    pair = pki.issue_client_certificate(ca, user, ())
    document = yaml.safe_load(server.kubeconfig.read_text())
    document["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
        "client-key-data": base64.b64encode(pair.key_pem).decode(),
    }
    path = server.data_dir / f"{user}.kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return Kubectl(kubectl.binary, path)
