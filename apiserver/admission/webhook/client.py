"""POSTing a review to a webhook, as k8s.io/apiserver's webhook client does: to `clientConfig.url`,
or to a Service as `https://<name>.<namespace>.svc:<port><path>` (port 443 unless given), trusting
`caBundle` (else the system's roots), within the webhook's timeout (sent as `?timeout=`), never
following a redirect. Connections are pooled (bounded); nothing blocks the event loop.

A Service name is resolved by the cluster's DNS, as kube-apiserver's own pods resolve it; `services`
maps such names to addresses instead (tests on loopback), the name still being the one the
certificate is verified against. Failures are worded as Go's HTTP client words them, since
upstream's messages quote them.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import math
import posixpath
import socket
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from apiserver.machinery import errors
from apiserver.machinery.errors import StatusError
from apiserver.machinery.types import JSON

POOL_SIZE = 100
# Trusted CA bundles kept as SSL contexts (upstream keeps 200 clients).
CONTEXT_CACHE = 200
USER_AGENT = "coreio-apiserver"
MAX_ERROR_TEXT = 4096
_SUCCESS = range(200, 207)


class CallFailure(Exception):
    """The POST failed; `reason` is the error as upstream's client words it, `status` the Status
    error it carries."""

    def __init__(self, reason: str, status: StatusError) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class ClientConfigError(Exception):
    """A clientConfig no client can be made of (upstream: could not get REST client)."""


class ServiceAddresses(AbstractResolver):
    """Service names resolved to the addresses given; any other name by the system's resolver."""

    def __init__(self, addresses: Mapping[str, str]) -> None:
        self.addresses = dict(addresses)
        self.fallback = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = self.addresses.get(host)
        if address is None:
            return await self.fallback.resolve(host, port, family)
        kind = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [ResolveResult(hostname=host, host=address, port=port, family=kind, proto=0, flags=0)]

    async def close(self) -> None:
        await self.fallback.close()


@dataclass(frozen=True)
class Endpoint:
    """Where a webhook is reached: the URL posted to (upstream's, with `?timeout=`) and the CA."""

    url: str
    ca_bundle: bytes


def go_duration(seconds: float) -> str:
    """`?timeout=` as upstream writes it: whole seconds, a fraction rounded up."""
    minutes, rest = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def _clean_path(path: str) -> str:
    """Go's path.Join of the API path: cleaned, "" kept empty."""
    if not path:
        return ""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if path.startswith("/") else cleaned


def endpoint(config: JSON, webhook: str, timeout: float) -> Endpoint:
    """The endpoint of a clientConfig; ClientConfigError when it names none."""
    try:
        ca = base64.b64decode(str(config.get("caBundle") or ""), validate=True)
    except (binascii.Error, ValueError):
        raise ClientConfigError(
            "unable to load root certificates: unable to parse bytes as PEM block"
        ) from None
    query = f"?timeout={go_duration(timeout)}"
    service = config.get("service")
    if isinstance(service, dict):
        port = int(service.get("port") or 443)
        host = f"{service.get('name') or ''}.{service.get('namespace') or ''}.svc"
        return Endpoint(f"https://{host}:{port}{_clean_path(str(service.get('path') or ''))}{query}", ca)
    url = str(config.get("url") or "")
    if not url:
        quoted = errors.go_quote(webhook)
        raise ClientConfigError(
            f"failed calling webhook {quoted}: webhook configuration must have either service or URL"
        )
    parts = urllib.parse.urlsplit(url)
    return Endpoint(f"{parts.scheme}://{parts.netloc}{_clean_path(parts.path)}{query}", ca)


def _certificate_error(exc: aiohttp.ClientConnectorCertificateError) -> str:
    cause = exc.certificate_error
    if isinstance(cause, ssl.SSLCertVerificationError) and cause.verify_code == 62:
        return f"tls: failed to verify certificate: x509: certificate is not valid for {exc.host}"
    return "tls: failed to verify certificate: x509: certificate signed by unknown authority"


def _connection_error(exc: aiohttp.ClientConnectorError) -> str:
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"dial tcp: lookup {exc.host}: no such host"
    if exc.os_error.errno == errno.ECONNREFUSED:
        return f"dial tcp {exc.host}:{exc.port}: connect: connection refused"
    return f"dial tcp {exc.host}:{exc.port}: {exc.os_error.strerror or exc.os_error}"


def transport_error(url: str, exc: BaseException) -> CallFailure:
    """A POST that got no answer, as Go's url.Error words it (`Post "<url>": <error>`)."""
    if isinstance(exc, TimeoutError):
        why = "context deadline exceeded"
    elif isinstance(exc, aiohttp.ClientConnectorCertificateError):
        why = _certificate_error(exc)
    elif isinstance(exc, aiohttp.ClientConnectorError):
        why = _connection_error(exc)
    elif isinstance(exc, aiohttp.ServerDisconnectedError):
        why = "EOF"
    else:
        why = str(exc) or type(exc).__name__
    return CallFailure(f'Post "{url}": {why}', errors.bad_request("error calling webhook"))


def _is_text(content_type: str) -> bool:
    return content_type.startswith("text/")


def _generic_status(code: int, text: str) -> StatusError:
    """client-go's error for an answer that is not 2xx and not a Status (NewGenericServerResponse)."""
    known = {
        400: ("BadRequest", "the server rejected our request for an unknown reason"),
        401: ("Unauthorized", "the server has asked for the client to provide credentials"),
        403: ("Forbidden", text),
        404: ("NotFound", "the server could not find the requested resource"),
        405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
        409: ("AlreadyExists", "the server reported a conflict"),
        415: ("UnsupportedMediaType", text),
        422: ("Invalid", "the server rejected our request due to an error in our request"),
        429: (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        ),
        503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
        504: (
            "Timeout",
            "the server was unable to return a response in the time allotted, "
            "but may still be processing the request",
        ),
    }
    reason, message = known.get(
        code, ("", f"the server responded with the status code {code} but did not return more information")
    )
    if code not in known and code >= 500:
        reason = "InternalError"
        message = (
            f"an error on the server ({errors.go_quote(text)}) has prevented the request from succeeding"
        )
    details = {"causes": [{"reason": "UnexpectedServerResponse", "message": text}]}
    return StatusError(code, reason or "Unknown", message, details)


def _status_body(body: bytes) -> JSON | None:
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if isinstance(parsed, dict) and parsed.get("kind") == "Status" and parsed.get("status") == "Failure":
        return parsed
    return None


def answer_of(url: str, code: int, content_type: str, body: bytes) -> JSON:
    """The review answered; CallFailure for anything that is not a 2xx review (the rest client's
    Into: a Status body becomes its error, any other error body client-go's generic one)."""
    if code not in _SUCCESS:
        status = _status_body(body)
        if status is not None:
            message = str(status.get("message") or "")
            error = StatusError(int(status.get("code") or code), str(status.get("reason") or ""), message)
            raise CallFailure(message, error)
        text = body[:MAX_ERROR_TEXT].decode(errors="replace").strip() if _is_text(content_type) else "unknown"
        error = _generic_status(code, text)
        raise CallFailure(error.message, error)
    media = content_type.split(";")[0].strip()
    if media and media != "application/json":
        raise CallFailure(
            f"serializer for {media} doesn't exist", errors.bad_request("error calling webhook")
        )
    if not body:
        message = f"0-length response with status code: {code} and content type: {content_type}"
        raise CallFailure(message, errors.bad_request("error calling webhook"))
    try:
        parsed: Any = json.loads(body)
    except ValueError as exc:
        message = f"couldn't get version/kind; json parse error: {exc}"
        raise CallFailure(message, errors.bad_request("error calling webhook")) from None
    if not isinstance(parsed, dict):
        message = "couldn't get version/kind; json parse error: json: cannot unmarshal into Go value"
        raise CallFailure(message, errors.bad_request("error calling webhook"))
    return parsed


class WebhookClient:
    """One pool of connections for every webhook; an SSL context per CA bundle."""

    def __init__(self, services: Mapping[str, str] | None = None, pool_size: int = POOL_SIZE) -> None:
        self.services = dict(services or {})
        self.pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[bytes, ssl.SSLContext] = {}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            resolver = ServiceAddresses(self.services) if self.services else None
            connector = aiohttp.TCPConnector(limit=self.pool_size, resolver=resolver)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": USER_AGENT, "Accept": "application/json, */*"},
            )
        return self._session

    def _context(self, ca_bundle: bytes) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle:
                try:
                    context = ssl.create_default_context(cadata=ca_bundle.decode(errors="replace"))
                except ssl.SSLError:
                    raise ClientConfigError(
                        "unable to load root certificates: unable to parse bytes as PEM block"
                    ) from None
            else:
                context = ssl.create_default_context()
            if len(self._contexts) >= CONTEXT_CACHE:
                self._contexts.pop(next(iter(self._contexts)))
            self._contexts[ca_bundle] = context
        return context

    async def post(self, target: Endpoint, body: bytes, seconds: float) -> JSON:
        """The review the endpoint answers; CallFailure when it answers none."""
        tls: ssl.SSLContext | bool = (
            self._context(target.ca_bundle) if target.url.startswith("https:") else False
        )
        try:
            async with self._client().post(
                target.url,
                data=body,
                headers={"Content-Type": "application/json"},
                ssl=tls,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=seconds),
            ) as response:
                answer = await response.read()
                content_type = response.headers.get("Content-Type", "")
                code = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise transport_error(target.url, exc) from None
        return answer_of(target.url, code, content_type, answer)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
