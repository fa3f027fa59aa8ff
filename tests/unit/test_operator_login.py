"""How the operator's kopf side logs in from a pod: the service account, at the address the
kubelet hands the pod (KUBERNETES_SERVICE_HOST/PORT), never a DNS name (found on the real node,
which has no cluster DNS: kopf's own login names https://kubernetes.default.svc)."""

from __future__ import annotations

from pathlib import Path

from apiserver import pki
from apiserver_operator.handlers import login_in_cluster


def _service_account(directory: Path) -> Path:
    directory.mkdir()
    ca = pki.create_ca("login-test")
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    (directory / "token").write_text("token-1\n")
    (directory / "namespace").write_text("coreio-system")
    return directory


def test_the_service_address_from_the_environment(tmp_path: Path) -> None:
    directory = _service_account(tmp_path / "sa")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    info = login_in_cluster(directory, env)
    assert info is not None
    assert info.server == "https://10.96.0.1:443"
    assert info.token == "token-1"
    assert info.ca_path == str(directory / "ca.crt")
    assert info.default_namespace == "coreio-system"


def test_ipv6_service_address_is_bracketed(tmp_path: Path) -> None:
    directory = _service_account(tmp_path / "sa")
    info = login_in_cluster(
        directory, {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    )
    assert info is not None and info.server == "https://[fd00::1]:6443"


def test_outside_a_pod_there_is_nothing(tmp_path: Path) -> None:
    assert login_in_cluster(tmp_path / "missing", {}) is None
    directory = _service_account(tmp_path / "sa")
    assert login_in_cluster(directory, {}) is None  # a token but no service address
