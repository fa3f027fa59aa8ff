"""A small synchronous HTTPS client for tests that check exact responses of the real server."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.server import ServerProcess


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def header_values(self, name: str) -> list[str]:
        return self.headers.get_all(name) or []


class Api:
    def __init__(self, server: ServerProcess, *, client_cert: bool = True, token: str | None = None) -> None:
        self.server = server
        self.context = server.ssl_context(client_cert=client_cert)
        self.token = token

    def connection(self, timeout: float = 30) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.server.port, context=self.context, timeout=timeout
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Response:
        all_headers = dict(headers or {})
        data: bytes | None = raw
        if body is not None and raw is None:
            data = json.dumps(body).encode()
            all_headers.setdefault("Content-Type", content_type or "application/json")
        elif content_type:
            all_headers["Content-Type"] = content_type
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        conn = self.connection()
        try:
            conn.request(method, path, body=data, headers=all_headers)
            response = conn.getresponse()
            return Response(response.status, response.headers, response.read())
        finally:
            conn.close()

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return self.request("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return self.request("PUT", path, body, **kwargs)

    def patch(
        self, path: str, body: Any, content_type: str = "application/merge-patch+json", **kwargs: Any
    ) -> Response:
        return self.request("PATCH", path, body, content_type=content_type, **kwargs)

    def delete(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return self.request("DELETE", path, body, **kwargs)

    @contextmanager
    def watch(self, path: str, timeout: float = 30) -> Iterator[Iterator[dict[str, Any]]]:
        """Opens a watch and yields an iterator over its decoded events (one JSON object a line)."""
        conn = self.connection(timeout=timeout)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        assert response.status == 200, response.read()

        def lines() -> Iterator[dict[str, Any]]:
            while True:
                line = response.readline()
                if not line:
                    return
                yield json.loads(line)

        try:
            yield lines()
        finally:
            conn.close()


RB_PATH = "/apis/rbac.authorization.core.io/v1"
EV_PATH = "/apis/events.core.io/v1"


def rb_path(namespace: str, name: str = "") -> str:
    return f"{RB_PATH}/namespaces/{namespace}/rolebindings" + (f"/{name}" if name else "")


def ev_path(namespace: str, name: str = "") -> str:
    return f"{EV_PATH}/namespaces/{namespace}/events" + (f"/{name}" if name else "")


def rolebinding(name: str, **overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}],
    }
    obj.update(overrides)
    return obj


def event(name: str, namespace: str = "default", **overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-11-22T02:16:41.123456Z",
        "action": "Started",
        "reason": "Started",
        "note": "container started",
        "type": "Normal",
        "reportingController": "example.com/controller",
        "reportingInstance": "controller-1",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "web-0", "apiVersion": "v1"},
    }
    obj.update(overrides)
    return obj


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> Api:
    return Api(server)
