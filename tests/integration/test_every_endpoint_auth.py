"""401 without credentials and 403 without permission on every endpoint but the health checks
(discovery, /version and OpenAPI stay readable by every authenticated user, as upstream's
system:discovery and system:public-info-viewer bindings make them)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import pki
from tests.support.api import EV_PATH, RB_PATH, Api, ev_path, event, rb_path, rolebinding
from tests.support.server import ServerProcess

RESOURCE_ENDPOINTS: list[tuple[str, str, Any]] = [
    ("GET", rb_path("locked"), None),
    ("GET", rb_path("locked", "x"), None),
    ("GET", f"{RB_PATH}/rolebindings", None),
    ("GET", f"{rb_path('locked')}?watch=1&timeoutSeconds=1", None),
    ("GET", f"{RB_PATH}/watch/namespaces/locked/rolebindings", None),
    ("POST", rb_path("locked"), rolebinding("x")),
    ("PUT", rb_path("locked", "x"), rolebinding("x")),
    ("PATCH", rb_path("locked", "x"), {"metadata": {"labels": {"a": "b"}}}),
    ("DELETE", rb_path("locked", "x"), None),
    ("DELETE", rb_path("locked"), None),
    ("GET", ev_path("locked"), None),
    ("GET", ev_path("locked", "x"), None),
    ("GET", f"{EV_PATH}/events", None),
    ("POST", ev_path("locked"), event("x", namespace="locked")),
    ("PUT", ev_path("locked", "x"), event("x", namespace="locked")),
    ("PATCH", ev_path("locked", "x"), {"metadata": {"labels": {"a": "b"}}}),
    ("DELETE", ev_path("locked", "x"), None),
    ("DELETE", ev_path("locked"), None),
    ("GET", "/metrics", None),
    (
        "POST",
        "/authorize",
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}},
    ),
]
PUBLIC_INFO = ["/apis", "/apis/events.core.io", EV_PATH, "/version", "/openapi/v2", "/openapi/v3", "/api"]
HEALTH = ["/healthz", "/livez", "/readyz", "/readyz?verbose"]


def _send(api: Api, method: str, path: str, body: Any) -> Any:
    content = "application/merge-patch+json" if method == "PATCH" else None
    return api.request(method, path, body, content_type=content)


@pytest.fixture(scope="module")
def stranger(server: ServerProcess) -> Api:
    """An authenticated user (a client certificate of the server's CA) with no RoleBinding."""
    api = Api(server, client_cert=False)
    ca = pki.KeyPair.load(server.data_dir / "pki" / "ca.crt", server.data_dir / "pki" / "ca.key")
    cert, key = server.data_dir / "stranger.crt", server.data_dir / "stranger.key"
    pki.issue_client_certificate(ca, "stranger", ("outsiders",)).save(cert, key)
    api.context.load_cert_chain(str(cert), str(key))
    return api


@pytest.mark.parametrize(
    ("method", "path", "body"), RESOURCE_ENDPOINTS + [("GET", p, None) for p in PUBLIC_INFO]
)
def test_no_credentials_is_401(server: ServerProcess, method: str, path: str, body: Any) -> None:
    response = _send(Api(server, client_cert=False), method, path, body)
    assert response.status == 401, response.body
    assert response.json["reason"] == "Unauthorized"


@pytest.mark.parametrize(("method", "path", "body"), RESOURCE_ENDPOINTS)
def test_no_permission_is_403(stranger: Api, method: str, path: str, body: Any) -> None:
    response = _send(stranger, method, path, body)
    assert response.status == 403, response.body
    status = response.json
    assert status["kind"] == "Status" and status["reason"] == "Forbidden"
    assert 'User "stranger"' in status["message"]


@pytest.mark.parametrize("path", PUBLIC_INFO)
def test_discovery_version_and_openapi_are_public_information(stranger: Api, path: str) -> None:
    assert stranger.get(path).status == 200


@pytest.mark.parametrize("path", HEALTH)
def test_health_needs_no_credentials(server: ServerProcess, path: str) -> None:
    assert Api(server, client_cert=False).get(path).status == 200
