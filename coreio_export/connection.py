"""The exporter's connection to the API: the official client's loader reads the kubeconfig (or the
pod's service account inside a cluster), and aiohttp makes the requests, so a watch is read only
as fast as the sink takes its records (the server holds the rest, not this process).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes import client, config

from apiserver.machinery.types import JSON

TIMEOUT = aiohttp.ClientTimeout(total=60.0)
# A watch sends a bookmark each minute at least: one silent for longer is a connection gone dead.
WATCH_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=360.0)
# The pauses between tries of what failed (a sink, the status, a watch), growing.
BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0)
NOT_FOUND = 404
GONE = 410
WATCH_SECONDS = 300  # each watch ends after this, and the next one starts where it stopped
QUICK_END = 1.0  # a watch that ended sooner than this having shown nothing is tried again after a pause
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = "coreio-export"
IN_CLUSTER_HOST = "KUBERNETES_SERVICE_HOST"
POD_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class ExportError(Exception):
    """What the user is told in one line."""


class ApiError(ExportError):
    """The server answered with a Status."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.reason = body.get("reason", "") if isinstance(body, dict) else ""
        message = body.get("message") if isinstance(body, dict) else None
        super().__init__(message or f"the server answered {status}")


@dataclass
class Api:
    """Requests to one API server, as one user."""

    session: aiohttp.ClientSession
    base: str
    settings: Any  # the official client's Configuration (a token from an exec plugin may refresh)
    ssl_context: ssl.SSLContext | None

    async def get(self, path: str) -> JSON:
        return await self._json("GET", path)

    async def get_or_none(self, path: str) -> JSON | None:
        """The object at `path`, None when there is none (404)."""
        try:
            return await self.get(path)
        except ApiError as exc:
            if exc.status == NOT_FOUND:
                return None
            raise

    async def request(self, method: str, path: str, *, body: Any = None) -> JSON:
        """`method` on `path` with `body` as JSON (a Lease's create or update)."""
        data = None if body is None else orjson.dumps(body)
        return await self._json(method, path, data, "application/json" if data is not None else "")

    async def merge_patch(self, path: str, body: JSON) -> JSON:
        return await self._json("PATCH", path, orjson.dumps(body), MERGE_PATCH)

    async def _json(self, method: str, path: str, data: bytes | None = None, kind: str = "") -> JSON:
        headers = self._headers() | ({"Content-Type": kind} if kind else {})
        try:
            async with self.session.request(
                method, self.base + path, data=data, headers=headers, ssl=self._ssl(), timeout=TIMEOUT
            ) as response:
                return _decoded(response.status, await response.read())
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ExportError(
                f"cannot reach the server at {self.base}: {exc or type(exc).__name__}"
            ) from None

    async def watch(self, path: str) -> AsyncGenerator[JSON, None]:
        """The watch events of `path` (a watch URL), one JSON object each, as the server sends them;
        the next line is read only when the caller asks for it."""
        try:
            async with self.session.get(
                self.base + path, headers=self._headers(), ssl=self._ssl(), timeout=WATCH_TIMEOUT
            ) as response:
                if response.status != 200:
                    _decoded(response.status, await response.read())
                pending = b""
                async for chunk in response.content.iter_any():
                    pending += chunk
                    if b"\n" not in chunk:
                        continue
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield _line(line)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ExportError(f"the watch of {path} ended: {exc or type(exc).__name__}") from None

    def _ssl(self) -> ssl.SSLContext | bool:
        return self.ssl_context if self.ssl_context is not None else False

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        token = self.settings.get_api_key_with_prefix("BearerToken")
        if token:
            headers["Authorization"] = token
        return headers


def _line(line: bytes) -> JSON:
    try:
        change = orjson.loads(line)
    except orjson.JSONDecodeError:
        change = None
    if not isinstance(change, dict):
        raise ExportError(f"the watch sent a line that is not a JSON object: {line[:200]!r}")
    return change


def transient(error: ExportError) -> bool:
    """Whether trying again may succeed: the server unreachable, overloaded or failing (5xx, 429),
    or a list's snapshot expired (410); not a refusal (401, 403, 404, 422)."""
    return not isinstance(error, ApiError) or error.status in (410, 429) or error.status >= 500


def _decoded(status: int, data: bytes) -> JSON:
    try:
        body = orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        body = None
    if status >= 400:
        if body is None:
            first = data.decode(errors="replace").strip().splitlines()[:1]
            raise ApiError(status, {"message": f"the server answered {status}: {first[0] if first else ''}"})
        raise ApiError(status, body)
    if not isinstance(body, dict):
        raise ApiError(status, {"message": "the server's answer is not a JSON object"})
    return body


def settings(kubeconfig: str | None, context: str | None) -> tuple[Any, str]:
    """The official client's settings and the default namespace: from the kubeconfig, or, in a pod
    with no kubeconfig given, from its service account."""
    loaded = client.Configuration()
    try:
        if kubeconfig is None and context is None and IN_CLUSTER_HOST in os.environ:
            config.load_incluster_config(client_configuration=loaded)
            return loaded, _pod_namespace()
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=loaded)
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError) as exc:
        raise ExportError(f"cannot load the kubeconfig: {exc}") from None
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    return loaded, (chosen or {}).get("context", {}).get("namespace") or "default"


def _pod_namespace() -> str:
    try:
        with open(POD_NAMESPACE) as file:
            return file.read().strip() or "default"
    except OSError:
        return "default"


def ssl_context(loaded: Any) -> ssl.SSLContext | None:
    if not str(loaded.host).startswith("https"):
        return None
    context = ssl.create_default_context(cafile=loaded.ssl_ca_cert or None)
    if not loaded.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if loaded.cert_file:
        context.load_cert_chain(loaded.cert_file, loaded.key_file)
    return context
