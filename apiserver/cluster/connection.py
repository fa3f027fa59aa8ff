"""Reaching the cluster coreio runs in: a kubeconfig context or the pod's own service account
(as client-go's loaders read them), and a small JSON client over that connection."""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from apiserver import pki
from apiserver.machinery.types import JSON

REQUEST_TIMEOUT = 10.0


class ClusterError(Exception):
    """The cluster could not be asked, or answered with an error."""


# --- connecting to the cluster ---------------------------------------------------------------


@dataclass
class ClusterConnection:
    """Where the cluster is and how to authenticate to it (one kubeconfig context)."""

    server: str
    ssl_context: ssl.SSLContext | bool
    token: str = ""
    token_file: Path | None = None

    def headers(self) -> dict[str, str]:
        token = self.token
        if self.token_file is not None:
            # Projected service-account tokens rotate on disk: read them per request.
            token = self.token_file.read_text().strip()
        return {"Authorization": f"Bearer {token}"} if token else {}


def _named(document: JSON, section: str, name: str) -> JSON:
    for item in document.get(section) or ():
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(section.rstrip("s"), {})
            return value if isinstance(value, dict) else {}
    raise ValueError(f"kubeconfig has no {section.rstrip('s')} {name!r}")


def _pem(entry: JSON, key: str, base: Path) -> bytes | None:
    if data := entry.get(f"{key}-data"):
        return base64.b64decode(data)
    if path := entry.get(key):
        return (base / str(path)).read_bytes()
    return None


def load_kubeconfig(path: Path, context: str = "") -> ClusterConnection:
    """The connection of `context` (default: the current context) in the kubeconfig at `path`."""
    document = yaml.safe_load(path.read_text()) or {}
    if not isinstance(document, dict):
        raise ValueError(f"{path}: not a kubeconfig")
    base = path.parent
    ctx = _named(document, "contexts", context or str(document.get("current-context", "")))
    cluster = _named(document, "clusters", str(ctx.get("cluster", "")))
    user = _named(document, "users", str(ctx.get("user", ""))) if ctx.get("user") else {}
    server = str(cluster.get("server", "")).rstrip("/")
    if not server:
        raise ValueError(f"{path}: cluster has no server")
    context_ssl: ssl.SSLContext | bool = True
    if server.startswith("https://"):
        ssl_context = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            ssl_context.check_hostname = False
            ssl_context.verify_mode = ssl.CERT_NONE
        elif (ca := _pem(cluster, "certificate-authority", base)) is not None:
            ssl_context = ssl.create_default_context(cadata=ca.decode())
        cert, key = _pem(user, "client-certificate", base), _pem(user, "client-key", base)
        if cert is not None and key is not None:
            _load_client_certificate(ssl_context, cert, key)
        context_ssl = ssl_context
    token_file = Path(base / user["tokenFile"]) if user.get("tokenFile") else None
    return ClusterConnection(server, context_ssl, str(user.get("token", "")), token_file)


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster_connection(
    directory: Path = SERVICE_ACCOUNT_DIR, environ: dict[str, str] | None = None
) -> ClusterConnection | None:
    """The pod's own credentials, as client-go's in-cluster config: the API server from
    KUBERNETES_SERVICE_HOST/PORT, the service account's CA and its projected token (re-read per
    request, since the kubelet rotates it). None outside a pod."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    token_file = directory / "token"
    if not host or not port or not token_file.exists():
        return None
    if ":" in host:
        host = f"[{host}]"
    context = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    return ClusterConnection(f"https://{host}:{port}", context, token_file=token_file)


def _load_client_certificate(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # `ssl` loads key pairs from files only: a private temporary directory, gone right after.
    with tempfile.TemporaryDirectory(prefix="coreio-kubeconfig-") as directory:
        cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
        pki.write_file_atomic(cert_path, cert, 0o600)
        pki.write_file_atomic(key_path, key, 0o600)
        context.load_cert_chain(cert_path, key_path)


class JsonSession:
    """Requests to the cluster over one aiohttp session (opened on first use), with the
    connection's credentials: what the server's delegation client and the operator's client share."""

    def __init__(self, connection: ClusterConnection, *, timeout: float, user_agent: str) -> None:
        self.connection = connection
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, headers={"User-Agent": self._user_agent, "Accept": "application/json"}
            )
        return self._session

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> tuple[int, str]:
        """The answer's status and text; aiohttp's and the socket's errors propagate."""
        headers = dict(self.connection.headers())
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        async with self._client().request(
            method,
            self.connection.server + path,
            params=dict(params or {}),
            data=data,
            headers=headers,
            ssl=self.connection.ssl_context,
        ) as response:
            return response.status, await response.text()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class ClusterClient(JsonSession):
    """A small JSON client for the few cluster calls delegation needs."""

    def __init__(self, connection: ClusterConnection, *, timeout: float = REQUEST_TIMEOUT) -> None:
        super().__init__(connection, timeout=timeout, user_agent="coreio-apiserver")

    async def request(self, method: str, path: str, body: JSON | None = None) -> JSON:
        try:
            status, text = await self.send(method, path, body=body)
            if status >= 300:
                raise ClusterError(f"{method} {path}: {status} {text[:300]}")
            result = json.loads(text)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise ClusterError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(result, dict):
            raise ClusterError(f"{method} {path}: answer is no object")
        return result
