"""coreio behind the control plane's aggregation layer, registered as an operator registers it.

coreio runs on loopback as a process of its own (`ServerProcess`, etcd storage under its own key
prefix in the control plane's etcd) with:

- a serving certificate from a CA of its own, naming `coreio.coreio-system.svc`: the aggregator
  verifies the backend against `<service>.<namespace>.svc` and the APIService's `caBundle`;
- delegated authentication and authorization (the default, `delegated=True`): a kubeconfig with a
  token of the ServiceAccount `coreio-system/coreio`, bound to `system:auth-delegator` and to
  `extension-apiserver-authentication-reader` in kube-system, from which coreio reads the client
  CA, the front-proxy CA and header names, and asks TokenReviews and SubjectAccessReviews;
- or (`delegated=False`) the same trust as flags: the cluster CA as `--client-ca-file`, the
  front-proxy CA as `--requestheader-client-ca-file` allowing only `front-proxy-client`.

In the cluster: Namespace `coreio-system`, a Service `coreio` of type ExternalName pointing at
`localhost` (the aggregator dials `externalName:<APIService port>` for those), one APIService
per group carrying the port and the CA bundle, and the operator's own ClusterRole and
ClusterRoleBinding `coreio:access-reviewer` (`children.access_reviewer`), which let every
authenticated user through kube-apiserver's RBAC to create the access reviews.

The files sit where `ServerProcess` and `tests.support.api.Api` look for a standalone server's
(`pki/ca.crt` = the CA of the serving certificate, `pki/admin.crt` = a client certificate), so the
same helpers talk to coreio directly.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from apiserver import pki
from apiserver_operator import children
from apiserver_operator.children import Installation
from apiserver_operator.spec import InstallationSpec
from tests.support.controlplane import FRONT_PROXY_CLIENT, ControlPlane
from tests.support.server import ServerProcess, free_port
from tests.support.waiting import wait_until

NAMESPACE = "coreio-system"
SERVICE = "coreio"
GROUPS = ("rbac.authorization.core.io", "events.core.io")
APISERVICES = tuple(f"v1.{group}" for group in GROUPS)
SERVICE_DNS = f"{SERVICE}.{NAMESPACE}.svc"
AVAILABLE_TIMEOUT = 120.0


class AggregatedCoreio:
    """`extra_args` go to coreio after those of `args()`; `etcd_prefix` keeps a second instance's
    data apart from the session's; `service_dns`: the Service name its serving certificate is for."""

    def __init__(
        self,
        plane: ControlPlane,
        data_dir: Path,
        *,
        delegated: bool = True,
        extra_args: Sequence[str] = (),
        etcd_prefix: str = "/coreio",
        service_dns: str = SERVICE_DNS,
    ) -> None:
        self.plane = plane
        self.data_dir = data_dir
        self.delegated = delegated
        self.extra_args = list(extra_args)
        self.etcd_prefix = etcd_prefix
        self.service_dns = service_dns
        self.pki_dir = data_dir / "pki"
        self.server = ServerProcess(data_dir=data_dir, port=free_port(), extra_args=[])
        self.serving_ca: pki.KeyPair | None = None
        # Seconds from registration to Available=True, and then to the OpenAPI being aggregated.
        self.available_after = 0.0
        self.openapi_after = 0.0

    @property
    def audit_log(self) -> Path:
        return self.data_dir / "audit.log"

    def _write_pki(self) -> None:
        self.serving_ca = pki.create_ca("coreio-e2e-serving-ca")
        self.serving_ca.save(self.pki_dir / "ca.crt", self.pki_dir / "ca.key")
        serving = pki.issue_serving_certificate(
            self.serving_ca,
            [self.service_dns, f"{self.service_dns}.cluster.local", "localhost", "127.0.0.1"],
            common_name=self.service_dns,
        )
        serving.save(self.pki_dir / "serving.crt", self.pki_dir / "serving.key")
        # A client certificate of the cluster CA, for tests that talk to coreio directly.
        admin = pki.issue_client_certificate(self.plane.pki.ca, "coreio-e2e-direct", ["system:masters"])
        admin.save(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")

    @property
    def cluster_kubeconfig(self) -> Path:
        return self.data_dir / "cluster.kubeconfig"

    def delegation_manifests(self) -> list[dict[str, Any]]:
        """coreio's identity in the cluster, the two roles delegation needs and read access to the
        cluster's Roles and ClusterRoles for its RBAC authorizer."""
        subject = [{"kind": "ServiceAccount", "name": SERVICE, "namespace": NAMESPACE}]
        return [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "coreio:system:auth-delegator"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:auth-delegator",
                },
                "subjects": subject,
            },
            # coreio's RBAC authorizer watches the cluster's Roles and ClusterRoles.
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "coreio:role-reader"},
                "rules": [
                    {
                        "apiGroups": ["rbac.authorization.k8s.io"],
                        "resources": ["roles", "clusterroles"],
                        "verbs": ["get", "list", "watch"],
                    },
                    # Namespace lifecycle admission reads the cluster's namespaces.
                    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
                    # The cluster's admission policies and webhooks, which coreio applies.
                    {
                        "apiGroups": ["admissionregistration.k8s.io"],
                        "resources": [
                            "validatingadmissionpolicies",
                            "validatingadmissionpolicybindings",
                            "validatingwebhookconfigurations",
                            "mutatingwebhookconfigurations",
                        ],
                        "verbs": ["get", "list", "watch"],
                    },
                    # The admission tests' params.
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "coreio:role-reader"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "coreio:role-reader",
                },
                "subjects": subject,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "coreio-auth-reader", "namespace": "kube-system"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "extension-apiserver-authentication-reader",
                },
                "subjects": subject,
            },
        ]

    def args(self) -> list[str]:
        common = [
            "--bind-address=127.0.0.1",
            f"--tls-cert-file={self.pki_dir / 'serving.crt'}",
            f"--tls-private-key-file={self.pki_dir / 'serving.key'}",
            f"--etcd-servers={self.plane.etcd.client_url}",
            f"--etcd-prefix={self.etcd_prefix}",
            f"--audit-log-path={self.audit_log}",
        ]
        if self.delegated:
            return [
                *common,
                f"--authentication-kubeconfig={self.cluster_kubeconfig}",
                f"--authorization-kubeconfig={self.cluster_kubeconfig}",
            ]
        cp = self.plane.pki.path
        return [
            *common,
            f"--client-ca-file={cp('ca.crt')}",
            f"--requestheader-client-ca-file={cp('front-proxy-ca.crt')}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        ]

    def start(self) -> None:
        """Start (or restart, on the same port) the coreio process."""
        if self.serving_ca is None:
            self._write_pki()
        if self.delegated and not self.cluster_kubeconfig.exists():
            self.plane.apply(*self.delegation_manifests())
            token = self.plane.create_token(SERVICE, NAMESPACE, duration="24h", create=False)
            self.plane.user_kubeconfig(self.cluster_kubeconfig, token=token)
        self.server.extra_args = [*self.args(), *self.extra_args]
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def manifests(self) -> list[dict[str, Any]]:
        assert self.serving_ca is not None
        ca_bundle = base64.b64encode(self.serving_ca.cert_pem).decode("ascii")
        port = self.server.port
        objects: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": NAMESPACE},
                "spec": {
                    "type": "ExternalName",
                    "externalName": "localhost",
                    "ports": [{"name": "https", "port": port, "targetPort": port, "protocol": "TCP"}],
                },
            },
        ]
        for group in GROUPS:
            objects.append(
                {
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "kind": "APIService",
                    "metadata": {"name": f"v1.{group}"},
                    "spec": {
                        "group": group,
                        "version": "v1",
                        "service": {"namespace": NAMESPACE, "name": SERVICE, "port": port},
                        "caBundle": ca_bundle,
                        "groupPriorityMinimum": 1000,
                        "versionPriority": 15,
                    },
                }
            )
        # kube-apiserver authorizes the reviews with its own RBAC before it proxies them to coreio.
        installation = Installation(NAMESPACE, SERVICE, "", InstallationSpec())
        return objects + children.access_reviewer(installation)

    def register(self) -> None:
        self.plane.apply(*self.manifests())

    def available(self, name: str) -> tuple[str, str]:
        """(status, message) of the APIService's Available condition ("" when none yet)."""
        obj = self.plane.json("get", "apiservice", name)
        for condition in obj.get("status", {}).get("conditions", []):
            if condition.get("type") == "Available":
                return str(condition.get("status", "")), str(condition.get("message", ""))
        return "", ""

    def wait_available(self, status: str = "True", timeout: float = AVAILABLE_TIMEOUT) -> float:
        """Seconds until every APIService's Available condition is `status`."""
        started = time.monotonic()
        seen: dict[str, tuple[str, str]] = {}

        def available() -> bool:
            seen.update((name, self.available(name)) for name in APISERVICES)
            return all(state == status for state, _ in seen.values())

        wait_until(
            available,
            timeout=timeout,
            interval=0.5,
            message=lambda: (
                f"APIServices Available={status}: {json.dumps(seen)}\n"
                f"coreio log: {self.log_tail()}\nkube-apiserver log: {self.plane.log_tail()}"
            ),
        )
        return time.monotonic() - started

    def wait_openapi(self, timeout: float = AVAILABLE_TIMEOUT) -> float:
        """Seconds until the cluster's OpenAPI v3 index lists both of our group versions (the
        aggregator downloads backends' specs asynchronously, after Available)."""
        started = time.monotonic()
        wanted = {f"apis/{group}/v1" for group in GROUPS}
        missing = set(wanted)

        def listed() -> bool:
            paths = json.loads(self.plane.run("get", "--raw", "/openapi/v3").stdout)["paths"]
            missing.clear()
            missing.update(wanted - set(paths))
            return not missing

        wait_until(
            listed, timeout=timeout, interval=0.5, message=lambda: f"OpenAPI v3 to list {sorted(missing)}"
        )
        return time.monotonic() - started

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.server.log_file.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def audit_events(self) -> list[dict[str, Any]]:
        try:
            lines = self.audit_log.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def unregister(self) -> None:
        for name in APISERVICES:
            self.plane.run("delete", "apiservice", name, "--ignore-not-found", "--wait=false", check=False)


def start_aggregated(plane: ControlPlane, data_dir: Path) -> AggregatedCoreio:
    """coreio started, registered, Available, and its OpenAPI aggregated into the cluster's."""
    coreio = AggregatedCoreio(plane, data_dir)
    coreio.start()
    try:
        coreio.register()
        coreio.available_after = coreio.wait_available()
        coreio.openapi_after = coreio.wait_openapi()
    except BaseException:
        coreio.stop()
        raise
    return coreio


@pytest.fixture(scope="session")
def aggregated_coreio(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AggregatedCoreio]:
    """coreio serving both groups through the control plane (APIServices Available)."""
    coreio = start_aggregated(control_plane, tmp_path_factory.mktemp("coreio-aggregated"))
    try:
        yield coreio
    finally:
        with contextlib.suppress(subprocess.SubprocessError, AssertionError):
            coreio.unregister()
        coreio.stop()


def settled_audit_logs(
    plane: ControlPlane, coreio: AggregatedCoreio, ids: list[tuple[str, str]], timeout: float = 10.0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """kube-apiserver's audit events and coreio's, once each pair's requests (their Audit-IDs,
    kube-apiserver's first) have their ResponseComplete event in the logs."""

    def written() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        theirs, ours = plane.audit_events(), coreio.audit_events()
        have_theirs = {e.get("auditID") for e in theirs if e.get("stage") == "ResponseComplete"}
        have_ours = {e.get("auditID") for e in ours if e.get("stage") == "ResponseComplete"}
        if all(their_id in have_theirs and our_id in have_ours for their_id, our_id in ids):
            return theirs, ours
        return None

    return wait_until(written, timeout=timeout, interval=0.1, message="the audit events to be written")
