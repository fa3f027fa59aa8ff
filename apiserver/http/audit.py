"""The audit log on the wire: each authenticated request judged by the policy, its event written at
RequestReceived, ResponseStarted (long-running requests, when the headers go out), ResponseComplete
or Panic, with the request's and the answer's JSON bodies when its level asks for them."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from apiserver.audit.backend import BACKEND
from apiserver.audit.event import REQUEST_RECEIVED, RESPONSE_STARTED, RequestAudit, RequestFacts, new_audit
from apiserver.audit.metrics import METRICS
from apiserver.audit.policy import Level
from apiserver.auth.attributes import attributes_from_request
from apiserver.auth.requestinfo import is_long_running
from apiserver.http import codec
from apiserver.machinery import errors, requestnotes
from apiserver.machinery.user import UserInfo
from apiserver.registry.storage_errors import status_error
from apiserver.storage.interface import StorageUnavailableError

log = logging.getLogger(__name__)

AUDIT_KEY = web.RequestKey("audit", RequestAudit)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_YAML_TYPES = frozenset({"application/yaml", "application/apply-patch+yaml"})


def enabled() -> bool:
    return BACKEND.policy is not None


def source_ips(headers: Mapping[str, str], remote: str | None) -> list[str]:
    """Upstream's utilnet.SourceIPs: X-Forwarded-For's addresses, X-Real-Ip, then the peer."""
    found: list[str] = []
    forwarded = [part.strip() for part in headers.get("X-Forwarded-For", "").split(",")]
    for candidate in [*forwarded, headers.get("X-Real-Ip", "").strip(), remote or ""]:
        try:
            address = str(ipaddress.ip_address(candidate))
        except ValueError:
            continue
        if address not in found:
            found.append(address)
    return found


def begin(
    request: web.Request, user: UserInfo | None, audit_id: str, received: datetime.datetime
) -> RequestAudit | None:
    """The request's audit, unless the policy's level for it is None."""
    policy = BACKEND.policy
    if policy is None:
        return None
    info = attributes_from_request(request)
    config = policy.evaluate(user, info)
    if config.level == Level.NONE:
        return None
    facts = RequestFacts(
        audit_id=audit_id,
        request_uri=request.path_qs,
        source_ips=source_ips(request.headers, request.remote),
        user_agent=request.headers.get("User-Agent", ""),
        received=received,
    )
    audit = new_audit(config, facts, user, info, BACKEND.write)
    # What admission notes for the audit (its annotations) goes into this event.
    notes = requestnotes.current()
    audit.annotations = notes.annotations
    notes.audit_level = int(config.level)
    audit.long_running = is_long_running(info)
    request[AUDIT_KEY] = audit
    return audit


def failed_authentication(request: web.Request, audit: RequestAudit, exc: errors.StatusError) -> None:
    """An unauthenticated request's one event, at ResponseStarted (upstream's
    WithFailedAuthenticationAudit), saying which credentials were tried."""
    audit.set_status(exc.code, {"message": _auth_methods(request)})
    audit.write(RESPONSE_STARTED)


def _auth_methods(request: web.Request) -> str:
    methods = []
    authorization = request.headers.get("Authorization", "").strip()
    scheme = authorization.split(" ")[0].lower() if " " in authorization else ""
    if scheme == "basic":
        methods.append("basic")
    if scheme == "bearer":
        methods.append("bearer")
    if request.query.get("access_token", "").strip():
        methods.append("access_token")
    transport = request.transport
    if transport is not None and transport.get_extra_info("peercert"):
        methods.append("x509")
    if methods:
        return "Authentication failed, attempted: " + ", ".join(methods)
    return "Authentication failed, no credentials provided"


async def audited(
    request: web.Request, audit: RequestAudit, handle: Callable[[], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """`handle()`'s answer, its events written around it. A blocking audit webhook holds the
    request until each is delivered; in blocking-strict mode, a RequestReceived event that could
    not be is a 500, as upstream answers it."""
    audit.write(REQUEST_RECEIVED)
    if not await audit.delivered():
        METRICS.rejected.inc()
        # Plain text, as upstream's responsewriters.InternalError.
        text = f"Internal Server Error: {json.dumps(request.path_qs)}: failed to store audit event\n"
        return web.Response(status=500, text=text, headers={"X-Content-Type-Options": "nosniff"})
    try:
        return await _handled(request, audit, handle)
    finally:
        await audit.delivered()


async def _handled(
    request: web.Request, audit: RequestAudit, handle: Callable[[], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        if audit.level >= Level.REQUEST and request.method in _BODY_METHODS and request.can_read_body:
            raw = await request.read()  # kept by aiohttp: the handler reads it again for free
            audit.set_request_object(await codec.off_loop(len(raw), lambda: _request_body(request, raw)))
        response = await handle()
    except (errors.StatusError, StorageUnavailableError) as exc:
        # As status_errors will answer it.
        failure = exc if isinstance(exc, errors.StatusError) else status_error(exc)
        audit.set_status(failure.code, failure.status)
        audit.set_response_object(failure.status)
        audit.finish(failure.code)
        raise
    except web.HTTPException as exc:
        audit.finish(exc.status)
        raise
    except (ConnectionError, asyncio.CancelledError):
        # The client went away: complete, with what was answered (a watch's 200) if anything was.
        audit.finish(500)
        raise
    except Exception as exc:
        audit.panic(exc)
        raise
    _answered(audit, response, request.method)
    audit.finish(response.status)
    return response


def request_object(request: web.Request, body: Any) -> None:
    """The decoded object of a create or an update: it completes the event's objectRef."""
    audit = request.get(AUDIT_KEY)
    if audit is not None:
        audit.complete_object_ref(body)


def _request_body(request: web.Request, raw: bytes) -> Any:
    """A JSON or YAML body as the object it holds (decoded with the handlers' own guards against
    deep nesting and aliasing); None for anything else (protobuf) or a body that does not decode."""
    try:
        if request.content_type in _YAML_TYPES:
            return codec.parse_yaml(raw).value
        if request.content_type.endswith("json"):
            return codec.decode_json(raw).value
    except (errors.StatusError, ValueError):
        log.debug("audit: request body not decoded", exc_info=True)
    return None


def _answered(audit: RequestAudit, response: web.StreamResponse, method: str) -> None:
    """What a written answer's body says: a Status's fields (at every level, as upstream's
    LogResponseObject keeps them: an error's, or a delete's success), and the body itself when the
    level is RequestResponse (a streamed answer, a watch or a long list, has none to keep)."""
    maybe_status = response.status >= 400 or method == "DELETE"
    if audit.level < Level.REQUEST_RESPONSE and not maybe_status:
        return
    if not isinstance(response, web.Response) or not isinstance(response.body, bytes):
        return
    if not response.content_type.endswith("json"):
        return
    raw = response.body
    if response.headers.get("Content-Encoding") == "gzip":
        raw = gzip.decompress(raw)
    try:
        body = json.loads(raw)
    except ValueError:
        return
    if isinstance(body, dict) and body.get("kind") == "Status":
        audit.set_status(response.status, body)
    audit.set_response_object(body)


async def on_response_prepare(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """For `on_response_prepare`: a long-running request's ResponseStarted, as its headers go out."""
    audit = request.get(AUDIT_KEY) if isinstance(request, web.Request) else None
    if audit is not None and audit.long_running and not audit.started:
        audit.set_status(response.status)
        audit.write(RESPONSE_STARTED)
        await audit.delivered()
