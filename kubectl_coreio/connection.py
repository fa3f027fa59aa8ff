"""The caller's connection to the API server, from its kubeconfig (the official client's loader
reads every form a kubeconfig takes: files or inline data, tokens, exec plugins), and the JSON
requests the commands make.

The requests themselves go through http.client: impersonation sends one header per group, which
the official client's header dictionary cannot hold.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client, config

DEFAULT_NAMESPACE = "default"
TIMEOUT = 30.0


class PluginError(Exception):
    """What the user is told in one line (kubectl's `error: ...`)."""


class ServerError(PluginError):
    """The server answered with a Status: shown as kubectl shows it."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        message = body.get("message") if isinstance(body, dict) else None
        reason = body.get("reason") if isinstance(body, dict) else None
        if not message:
            message = f"the server answered {status}"
        super().__init__(
            f"Error from server ({reason}): {message}" if reason else f"Error from server: {message}"
        )


@dataclass
class Connection:
    """Where to send requests, and as whom."""

    url: str
    ssl_context: ssl.SSLContext | None
    settings: Any  # the official client's Configuration (its token may refresh)
    impersonate: list[tuple[str, str]] = field(default_factory=list)
    namespace: str = DEFAULT_NAMESPACE

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json.dumps(body).encode())

    def get(self, path: str, accept: str = "application/json") -> Any:
        return self.request("GET", path, accept=accept)

    def request(
        self, method: str, path: str, body: bytes | None = None, accept: str = "application/json"
    ) -> Any:
        parts = urlsplit(self.url)
        base = parts.path.rstrip("/")
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.netloc, timeout=TIMEOUT, context=self.ssl_context
            )
        else:
            conn = http.client.HTTPConnection(parts.netloc, timeout=TIMEOUT)
        try:
            conn.putrequest(method, base + path)
            for name, value in self._headers(accept, body):
                conn.putheader(name, value)
            conn.endheaders(body)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise PluginError(f"cannot reach the server at {self.url}: {exc}") from None
        finally:
            conn.close()
        return _decoded(response.status, data)

    def _headers(self, accept: str, body: bytes | None) -> list[tuple[str, str]]:
        headers = [("Accept", accept), ("User-Agent", "kubectl-coreio")]
        if body is not None:
            headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        token = self.settings.get_api_key_with_prefix("BearerToken")
        if token:
            headers.append(("Authorization", token))
        elif self.settings.username or self.settings.password:
            headers.append(("Authorization", self.settings.get_basic_auth_token()))
        return headers + self.impersonate


def _decoded(status: int, data: bytes) -> Any:
    try:
        body = json.loads(data) if data else None
    except ValueError:
        body = None
    if status >= 400:
        if body is None:
            first = data.decode(errors="replace").strip().splitlines()[:1]
            raise PluginError(f"the server answered {status}: {first[0] if first else 'no body'}")
        raise ServerError(status, body)
    return body


def connect(
    kubeconfig: str | None,
    context: str | None,
    as_user: str | None = None,
    as_groups: list[str] | None = None,
) -> Connection:
    """The connection the kubeconfig's (current or named) context describes, acting as `as_user`
    (and `as_groups`) when given, as kubectl's --as and --as-group."""
    settings = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=settings)
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError) as exc:
        raise PluginError(f"cannot load the kubeconfig: {exc}") from None
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    namespace = (chosen or {}).get("context", {}).get("namespace") or DEFAULT_NAMESPACE
    impersonate = [("Impersonate-User", as_user)] if as_user else []
    impersonate += [("Impersonate-Group", group) for group in as_groups or []]
    if as_groups and not as_user:
        raise PluginError("requesting groups without a user: --as-group needs --as")
    return Connection(settings.host, _ssl_context(settings), settings, impersonate, namespace)


def _ssl_context(settings: Any) -> ssl.SSLContext | None:
    if not str(settings.host).startswith("https"):
        return None
    context = ssl.create_default_context(cafile=settings.ssl_ca_cert or None)
    if not settings.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if settings.cert_file:
        context.load_cert_chain(settings.cert_file, settings.key_file)
    return context
