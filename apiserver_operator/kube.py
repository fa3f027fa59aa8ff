"""A small asyncio client for the Kubernetes API: JSON over aiohttp, credentials from a kubeconfig
(`KUBECONFIG`, `~/.kube/config`) or from the pod's service account.

Written here rather than taken from a library: kopf brings no public client, the official client is
synchronous, and the operator needs only a handful of verbs (get, list pages, server-side apply,
merge patch, create, delete with preconditions). Credentials are loaded, and the session held, by
the code coreio's delegated authentication uses (`apiserver.cluster.connection`).
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from apiserver.cluster.connection import (
    ClusterConnection,
    JsonSession,
    in_cluster_connection,
    load_kubeconfig,
)
from apiserver.machinery.types import JSON

APPLY = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
FIELD_MANAGER = "coreio-operator"
REQUEST_TIMEOUT = 30.0


class ApiError(Exception):
    """A non-2xx answer: `status` is the HTTP code, `body` the Status object (when one came)."""

    def __init__(self, method: str, path: str, status: int, body: JSON) -> None:
        self.status = status
        self.body = body
        self.reason = str(body.get("reason", ""))
        message = str(body.get("message", "")) or json.dumps(body)[:300]
        super().__init__(f"{method} {path}: {status} {self.reason}: {message}")


def resource_path(api_version: str, plural: str, namespace: str = "", name: str = "") -> str:
    """`/api/v1/...` for the core group, `/apis/<group>/<version>/...` otherwise."""
    path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    if name:
        path += f"/{name}"
    return path


def connection_from_environment() -> ClusterConnection:
    """`KUBECONFIG` (its first file), else `~/.kube/config`, else the pod's service account."""
    if kubeconfig := os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]:
        return load_kubeconfig(Path(kubeconfig).expanduser())
    default = Path("~/.kube/config").expanduser()
    if default.exists():
        return load_kubeconfig(default)
    connection = in_cluster_connection()
    if connection is None:
        raise RuntimeError("no kubeconfig (KUBECONFIG, ~/.kube/config) and not running in a pod")
    return connection


class KubeClient(JsonSession):
    def __init__(self, connection: ClusterConnection, *, timeout: float = REQUEST_TIMEOUT) -> None:
        super().__init__(connection, timeout=timeout, user_agent="coreio-operator")

    @property
    def ssl(self) -> ssl.SSLContext | bool:
        return self.connection.ssl_context

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> JSON:
        status, text = await self.send(method, path, params=params, body=body, content_type=content_type)
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            answer = {"message": text[:300]}
        if not isinstance(answer, dict):
            answer = {"message": text[:300]}
        if status >= 300:
            raise ApiError(method, path, status, answer)
        return answer

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        return await self.request("GET", path, params=params)

    async def get_or_none(self, path: str) -> JSON | None:
        try:
            return await self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def list_pages(self, path: str, params: Mapping[str, str] | None = None) -> AsyncIterator[JSON]:
        """Each page of a paged list (`limit`/`continue`). A walk that outlives its snapshot (the
        storage compacted it: 410 Expired) goes on with the token the 410 carries, an inconsistent
        rest as the API offers it, rather than failing after minutes of work (client-go's pager
        starts over instead; a walk of hundreds of thousands could then never end)."""
        query = dict(params or {})
        while True:
            try:
                page = await self.get(path, query)
            except ApiError as exc:
                token = exc.body.get("metadata", {}).get("continue") if exc.status == 410 else None
                if not token or "continue" not in query:
                    raise
                query["continue"] = str(token)
                continue
            yield page
            token = page.get("metadata", {}).get("continue")
            if not token:
                return
            query["continue"] = str(token)

    async def apply(self, path: str, obj: JSON, *, field_manager: str = FIELD_MANAGER) -> JSON:
        """Server-side apply of `obj` at `path` (its name included), taking over conflicts."""
        params = {"fieldManager": field_manager, "force": "true"}
        return await self.request("PATCH", path, params=params, body=obj, content_type=APPLY)

    async def merge_patch(self, path: str, patch: JSON) -> JSON:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def create(self, path: str, obj: JSON) -> JSON:
        return await self.request("POST", path, body=obj)

    async def delete(self, path: str, options: JSON | None = None) -> bool:
        """Deletes; False when there was nothing to delete."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", **options} if options else None
        try:
            await self.request("DELETE", path, body=body)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True
