"""Middleware: each request's audit ID, every failure as a Status body, and authentication (with its
audit line)."""

from __future__ import annotations

import datetime
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from apiserver import logs
from apiserver.auth import impersonation as impersonating
from apiserver.auth.attributes import IMPERSONATED_KEY, USER_KEY, attributes_from_request, request_user
from apiserver.auth.authn import AuthenticatorChain
from apiserver.auth.authz import AUTHORIZER_KEY, Authorizer, forbidden
from apiserver.http.responses import status_response
from apiserver.machinery import errors
from apiserver.machinery.user import UserInfo
from apiserver.registry.storage_errors import status_error
from apiserver.storage.interface import StorageUnavailableError

log = logging.getLogger(__name__)
# One audit.k8s.io/v1 Event a request (level Metadata) as a JSON line. Silent unless the command line
# gives it a destination (--audit-log-path), so the check below costs nothing by default.
audit_log = logging.getLogger("coreio.audit")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Paths anyone may read without credentials, as kube-apiserver's health checks.
PUBLIC_PREFIXES = ("/healthz", "/livez", "/readyz")
MAX_BODY_BYTES = 3 * 1024 * 1024
# A request's audit ID comes in this header, or else this one, or is made up; the answer carries it
# back in the first, as Go's canonical form writes kube-apiserver's `Audit-ID`.
AUDIT_ID_HEADER = "Audit-Id"
REQUEST_ID_HEADER = "X-Request-Id"
AUDIT_ID_KEY = web.RequestKey("audit_id", str)


@web.middleware
async def request_context(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Gives the request its audit ID (upstream's WithAuditInit), for its answer (`echo_audit_id`),
    its audit event and every line logged while it is handled (`apiserver.logs.request_id`)."""
    audit_id = (
        request.headers.get(AUDIT_ID_HEADER) or request.headers.get(REQUEST_ID_HEADER) or str(uuid.uuid4())
    )
    request[AUDIT_ID_KEY] = audit_id
    token = logs.request_id.set(audit_id)
    try:
        return await handler(request)
    finally:
        logs.request_id.reset(token)


async def echo_audit_id(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """For `on_response_prepare`: every answer to a request names its audit ID, written or streamed
    (a watch), error or not, unless the answer already names one."""
    audit_id = request.get(AUDIT_ID_KEY) if isinstance(request, web.Request) else None
    if audit_id and AUDIT_ID_HEADER not in response.headers:
        response.headers[AUDIT_ID_HEADER] = audit_id


def _from_http_exception(exc: web.HTTPException) -> errors.StatusError:
    if exc.status == 404:
        return errors.route_not_found()
    if exc.status == 405:
        return errors.method_not_allowed()
    if exc.status == 413:
        return errors.too_large(f"Request entity too large: limit is {MAX_BODY_BYTES}")
    reason = exc.reason or "Error"
    return errors.StatusError(exc.status, reason.replace(" ", ""), exc.text or reason)


@web.middleware
async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except errors.StatusError as exc:
        return status_response(request, exc)
    except StorageUnavailableError as exc:
        # The registry maps the storage errors of its operations; this catches any other call's.
        return status_response(request, status_error(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return status_response(request, _from_http_exception(exc))
    except Exception as exc:
        log.exception("internal error serving %s %s", request.method, request.path)
        return status_response(request, errors.internal_error(f"{type(exc).__name__}"))


def _micro_time(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def audit_event(
    request: web.Request, user: UserInfo | None, code: int, received: datetime.datetime
) -> dict[str, Any]:
    """The audit.k8s.io/v1 Event of a finished request, at level Metadata (no bodies)."""
    info = attributes_from_request(request)
    event: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": request.get(AUDIT_ID_KEY) or request.headers.get(AUDIT_ID_HEADER) or str(uuid.uuid4()),
        "stage": "ResponseComplete",
        "requestURI": request.path_qs,
        "verb": info.verb,
        "user": {},
        "sourceIPs": [request.remote] if request.remote else [],
        "userAgent": request.headers.get("User-Agent", ""),
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": _micro_time(received),
        "stageTimestamp": _micro_time(datetime.datetime.now(datetime.UTC)),
    }
    if user is not None:
        event["user"] = _audited_user(user)
    impersonated = request.get(IMPERSONATED_KEY)
    if impersonated is not None:
        # The request's own user stays `user`, as upstream's audit (which runs before impersonation).
        event["impersonatedUser"] = _audited_user(impersonated)
    if info.is_resource_request:
        ref = {
            "resource": info.resource,
            "namespace": info.namespace,
            "name": info.name,
            "apiGroup": info.api_group,
            "apiVersion": info.api_version,
            "subresource": info.subresource,
        }
        event["objectRef"] = {k: v for k, v in ref.items() if v}
    return event


def _audited_user(user: UserInfo) -> dict[str, Any]:
    audited: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        audited["uid"] = user.uid
    if user.extra:
        audited["extra"] = {k: list(v) for k, v in user.extra.items()}
    return audited


def authentication(chain: AuthenticatorChain) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(PUBLIC_PREFIXES):
            return await handler(request)
        if not audit_log.isEnabledFor(logging.INFO):
            return await _authenticated(request, handler, await chain.authenticate(request))
        received = datetime.datetime.now(datetime.UTC)
        user: UserInfo | None = None
        code = 500
        try:
            user = await chain.authenticate(request)
            response = await _authenticated(request, handler, user)
            code = response.status
            return response
        except errors.StatusError as exc:
            code = exc.code
            raise
        except web.HTTPException as exc:
            code = exc.status
            raise
        finally:
            audit_log.info(json.dumps(audit_event(request, user, code, received), separators=(",", ":")))

    return authenticate


async def _authenticated(request: web.Request, handler: Handler, user: UserInfo | None) -> web.StreamResponse:
    if user is None:
        raise errors.unauthorized()
    request[USER_KEY] = user
    return await handler(request)


def impersonation(authorizer: Authorizer) -> Middleware:
    """Acting as another user (`apiserver.auth.impersonation`), after authentication: each thing the
    Impersonate-* headers ask for is authorized for the authenticated user, then the request goes on
    as the user asked for (kept apart, for the audit)."""

    @web.middleware
    async def impersonate(request: web.Request, handler: Handler) -> web.StreamResponse:
        requestor = request_user(request)
        if requestor is None:
            return await handler(request)
        try:
            asked = impersonating.requested(request.headers.items())
        except impersonating.WithoutUserError as exc:
            return web.Response(
                status=500,
                text=exc.body(request.raw_path),
                content_type="text/plain",
                charset="utf-8",
                headers={"X-Content-Type-Options": "nosniff"},
            )
        if asked:
            user = await impersonating.impersonate(authorizer, requestor, asked)
            request[USER_KEY] = request[IMPERSONATED_KEY] = user
        return await handler(request)

    return impersonate


def authorization(authorizer: Authorizer) -> Middleware:
    """Asks `authorizer` about every authenticated request (after `authentication`)."""

    @web.middleware
    async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = request_user(request)
        if request.path.startswith(PUBLIC_PREFIXES) or not isinstance(user, UserInfo):
            return await handler(request)
        info = attributes_from_request(request)
        decision = await authorizer.authorize(user, info)
        if not decision.allowed:
            raise forbidden(user, info, decision.reason)
        request[AUTHORIZER_KEY] = authorizer
        return await handler(request)

    return authorize
