"""kube-apiserver with coreio as its authorization webhook: a RoleBinding stored in coreio is what
lets a cluster user read ConfigMaps in a namespace of the cluster (docs/authorization-webhook.md).

The set-up is a control plane of its own (the session's shared one runs without the webhook):

- coreio, standalone, starts first (so that it holds its port before kube-apiserver and etcd pick
  theirs). Its data directory is bootstrapped here beforehand, so its CA is at hand to issue the
  client certificate kube-apiserver presents: CN `system:kube-apiserver-coreio-webhook`, no groups,
  allowed to call /authorize only through `--authorize-endpoint-users`. Standalone, coreio resolves
  roleRefs against upstream's default ClusterRoles (`view` reads configmaps).
- kube-apiserver runs `--authorization-mode=Node,RBAC,Webhook` with a webhook kubeconfig naming
  `https://127.0.0.1:<coreio port>/authorize`, coreio's CA and that client certificate;
  SubjectAccessReview v1; both answer caches 1 s.
- alice is a real cluster user: a client certificate of the cluster CA, no groups and no grant in
  the cluster's own RBAC.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver import pki, standalone
from tests.support.controlplane import ControlPlane, skip_without_control_plane, start_control_plane
from tests.support.kubectl import RB, rolebinding_yaml
from tests.support.server import ServerProcess, free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

WEBHOOK_USER = "system:kube-apiserver-coreio-webhook"
CACHE_TTL = "1s"
# How long a change in coreio may take to show in the cluster: coreio's RoleBinding index follows
# its own watch at once; kube-apiserver remembers an answer for CACHE_TTL.
SETTLE_TIMEOUT = 20.0
TEAM, OTHER = "team", "other"


def _forbidden(verb: str, resource: str, namespace: str, name: str = "") -> str:
    """What kubectl prints for kube-apiserver's 403 (a core resource, hence API group "")."""
    subject = f'{resource} "{name}"' if name else resource
    return (
        f"Error from server (Forbidden): {subject} is forbidden: "
        f'User "alice" cannot {verb} resource "{resource}" in API group "" in the namespace "{namespace}"\n'
    )


@dataclass
class WebhookCluster:
    plane: ControlPlane
    coreio: ServerProcess
    alice_kubeconfig: Path

    @property
    def audit_log(self) -> Path:
        return self.coreio.data_dir / "audit.log"

    def as_alice(self, *args: str) -> subprocess.CompletedProcess[str]:
        """kubectl against the cluster as alice."""
        return self.plane.run("--kubeconfig", str(self.alice_kubeconfig), *args, check=False)

    def coreio_kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """kubectl against coreio itself, with the admin kubeconfig coreio wrote."""
        return self.plane.run("--kubeconfig", str(self.coreio.kubeconfig), *args, input=input)

    def webhook_calls(self) -> list[dict[str, Any]]:
        """coreio's audit entries for POST /authorize."""
        try:
            lines = self.audit_log.read_text().splitlines()
        except FileNotFoundError:
            return []
        entries = [json.loads(line) for line in lines if line.strip()]
        return [e for e in entries if e["requestURI"].split("?")[0] == "/authorize" and e["verb"] == "post"]


def _webhook_kubeconfig(path: Path, port: int, ca_file: Path, cert: Path, key: Path) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "coreio",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}/authorize",
                    "certificate-authority": str(ca_file),
                },
            }
        ],
        "users": [
            {"name": "kube-apiserver", "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "webhook", "context": {"cluster": "coreio", "user": "kube-apiserver"}}],
        "current-context": "webhook",
    }
    pki.write_file_atomic(path, yaml.safe_dump(document).encode(), 0o600)
    return path


@pytest.fixture(scope="module")
def webhook_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookCluster]:
    skip_without_control_plane()
    root = tmp_path_factory.mktemp("authorization-webhook")
    coreio_dir = root / "coreio"
    port = free_port()
    files = standalone.bootstrap(coreio_dir, port=port)
    client = pki.issue_client_certificate(pki.KeyPair.load(files.ca_cert, files.ca_key), WEBHOOK_USER)
    client.save(root / "webhook-client.crt", root / "webhook-client.key")
    coreio = ServerProcess(
        data_dir=coreio_dir,
        port=port,
        extra_args=[
            f"--authorize-endpoint-users={WEBHOOK_USER}",
            f"--audit-log-path={coreio_dir / 'audit.log'}",
        ],
    )
    coreio.start()
    try:
        config = _webhook_kubeconfig(
            root / "authorization-webhook.kubeconfig",
            port,
            files.ca_cert,
            root / "webhook-client.crt",
            root / "webhook-client.key",
        )
        plane = start_control_plane(
            root / "cluster",
            extra_flags=[
                "--authorization-mode=Node,RBAC,Webhook",
                f"--authorization-webhook-config-file={config}",
                "--authorization-webhook-version=v1",
                f"--authorization-webhook-cache-authorized-ttl={CACHE_TTL}",
                f"--authorization-webhook-cache-unauthorized-ttl={CACHE_TTL}",
            ],
        )
        try:
            alice = pki.issue_client_certificate(plane.pki.ca, "alice")
            alice_kubeconfig = plane.user_kubeconfig(root / "alice.kubeconfig", cert=alice)
            for namespace in (TEAM, OTHER):
                plane.apply(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": f"{namespace}-settings", "namespace": namespace},
                        "data": {"owner": namespace},
                    },
                )
            yield WebhookCluster(plane, coreio, alice_kubeconfig)
        finally:
            plane.stop()
    finally:
        coreio.stop()


def _wait_until(
    check: Callable[[], subprocess.CompletedProcess[str]],
    done: Callable[[subprocess.CompletedProcess[str]], bool],
    timeout: float = SETTLE_TIMEOUT,
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Runs `check` until `done` says so; the last result and the seconds it took."""
    started = time.monotonic()
    results: list[subprocess.CompletedProcess[str]] = []

    def settled() -> bool:
        results[:] = [check()]
        return done(results[0])

    wait_until(
        settled,
        timeout=timeout,
        interval=0.2,
        message=lambda: f"it to settle: {results[0].returncode} {results[0].stderr}",
    )
    return results[0], time.monotonic() - started


def test_kube_apiserver_enforces_a_rolebinding_stored_in_coreio(webhook_cluster: WebhookCluster) -> None:
    cluster = webhook_cluster

    # No grant anywhere: the cluster's RBAC has no opinion, coreio none either, so 403.
    denied = cluster.as_alice("get", "configmaps", "-n", TEAM)
    assert (denied.returncode, denied.stdout, denied.stderr) == (
        1,
        "",
        _forbidden("list", "configmaps", TEAM),
    )
    # coreio was asked (its audit line may land just after kube-apiserver had the answer).
    asked = wait_until(cluster.webhook_calls, timeout=5, interval=0.1, message="kube-apiserver to ask coreio")
    assert {(e["user"]["username"], e["responseStatus"]["code"]) for e in asked} == {(WEBHOOK_USER, 200)}

    # The grant, stored in coreio (not in the cluster): ClusterRole view to alice in `team`.
    created = cluster.coreio_kubectl("create", "-f", "-", input=rolebinding_yaml("alice-view", TEAM))
    assert created.stdout == "rolebinding.rbac.authorization.core.io/alice-view created\n"
    allowed, took = _wait_until(
        lambda: cluster.as_alice("get", "configmaps", "-n", TEAM, "-o", "name"),
        lambda result: result.returncode == 0,
    )
    assert allowed.stdout == f"configmap/{TEAM}-settings\n"
    read = cluster.as_alice(
        "get", "configmap", f"{TEAM}-settings", "-n", TEAM, "-o", "jsonpath={.data.owner}"
    )
    assert (read.returncode, read.stdout) == (0, TEAM)
    # view reads; it does not write.
    changed = cluster.as_alice("delete", "configmap", f"{TEAM}-settings", "-n", TEAM)
    assert (changed.returncode, changed.stderr) == (
        1,
        _forbidden("delete", "configmaps", TEAM, f"{TEAM}-settings"),
    )
    # The binding is in `team` only.
    elsewhere = cluster.as_alice("get", "configmaps", "-n", OTHER)
    assert (elsewhere.returncode, elsewhere.stderr) == (1, _forbidden("list", "configmaps", OTHER))
    # Nor does the cluster's own RBAC know of it (the grant lives in coreio alone).
    assert cluster.plane.json("get", "rolebindings.rbac.authorization.k8s.io", "-n", TEAM)["items"] == []

    # Taking the grant away: refused again once kube-apiserver's cached answer has expired.
    cluster.coreio_kubectl("delete", RB, "alice-view", "-n", TEAM)
    revoked, revoke_took = _wait_until(
        lambda: cluster.as_alice("get", "configmaps", "-n", TEAM),
        lambda result: result.returncode != 0,
    )
    assert (revoked.returncode, revoked.stderr) == (1, _forbidden("list", "configmaps", TEAM))
    print(
        f"granted in the cluster {took:.2f}s after the RoleBinding was stored, "
        f"revoked {revoke_took:.2f}s after it was deleted"
    )


def _unreachable(port: int, namespace: str) -> str:
    """What kubectl prints when kube-apiserver could not ask the webhook and no other authorizer
    allowed: upstream's authorization filter answers an authorizer error with 500, not 403."""
    return (
        'Error from server (InternalError): an error on the server ("Internal Server Error: '
        f'\\"/api/v1/namespaces/{namespace}/configmaps?limit=500\\": '
        f'Post \\"https://127.0.0.1:{port}/authorize?timeout=30s\\": '
        f'dial tcp 127.0.0.1:{port}: connect: connection refused") '
        "has prevented the request from succeeding (get configmaps)\n"
    )


def test_coreio_unreachable_grants_nothing(webhook_cluster: WebhookCluster) -> None:
    """With coreio down its grants are off: what only coreio allowed fails (500: kube-apiserver
    could not ask), while what the cluster's own RBAC allows keeps working, since RBAC answers
    before the webhook is asked."""
    cluster, plane = webhook_cluster, webhook_cluster.plane
    cluster.coreio_kubectl("create", "-f", "-", input=rolebinding_yaml("alice-view-again", TEAM))
    # A grant of the cluster's own RBAC in `other`. (A Role with its rules spelled out: the cluster's
    # `view` is an aggregated ClusterRole, empty here, where no controller-manager aggregates it.)
    plane.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "configmap-reader", "namespace": OTHER},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "alice-reads-configmaps", "namespace": OTHER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
        },
    )

    def list_team() -> subprocess.CompletedProcess[str]:
        return cluster.as_alice("get", "configmaps", "-n", TEAM, "-o", "name")

    try:
        _wait_until(list_team, lambda result: result.returncode == 0)
        cluster.coreio.stop()
        refused, took_down = _wait_until(list_team, lambda result: result.returncode != 0)
        assert (refused.returncode, refused.stderr) == (1, _unreachable(cluster.coreio.port, TEAM))
        # The cluster's own grant needs no webhook.
        other = cluster.as_alice("get", "configmaps", "-n", OTHER, "-o", "name")
        assert (other.returncode, other.stdout) == (0, f"configmap/{OTHER}-settings\n"), other.stderr

        cluster.coreio.start()
        back, came_back = _wait_until(list_team, lambda result: result.returncode == 0)
        assert back.stdout == f"configmap/{TEAM}-settings\n"
        print(f"coreio stopped: refused after {took_down:.2f}s; restarted: allowed after {came_back:.2f}s")
    finally:
        if cluster.coreio.process is None or cluster.coreio.process.poll() is not None:
            cluster.coreio.start()
        cluster.coreio_kubectl("delete", RB, "alice-view-again", "-n", TEAM, "--ignore-not-found")
        plane.run("delete", "rolebinding", "alice-reads-configmaps", "-n", OTHER, "--ignore-not-found")
        plane.run("delete", "role", "configmap-reader", "-n", OTHER, "--ignore-not-found")
