"""Middleware: each request's audit ID, every failure as a Status body, and authentication (with its
audit line)."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from apiserver import logs
from apiserver.audit.event import audited_user
from apiserver.auth import impersonation as impersonating
from apiserver.auth.attributes import IMPERSONATED_KEY, USER_KEY, attributes_from_request, request_user
from apiserver.auth.authn import AuthenticatorChain
from apiserver.auth.authz import AUTHORIZER_KEY, Authorizer, forbidden
from apiserver.auth.requestinfo import RequestInfo
from apiserver.http import audit as auditing
from apiserver.http.responses import add_warnings, status_response
from apiserver.machinery import errors, requestnotes, uids
from apiserver.machinery.requestnotes import RequestNotes
from apiserver.machinery.user import UserInfo
from apiserver.registry.storage_errors import status_error
from apiserver.storage.interface import ReadsAhead, StorageUnavailableError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Paths anyone may read without credentials, as kube-apiserver's health checks.
PUBLIC_PREFIXES = ("/healthz", "/livez", "/readyz")
MAX_BODY_BYTES = 3 * 1024 * 1024
# A request's audit ID comes in this header, or else this one, or is made up; the answer carries it
# back in the first, as Go's canonical form writes kube-apiserver's `Audit-ID`.
AUDIT_ID_HEADER = "Audit-Id"
REQUEST_ID_HEADER = "X-Request-Id"
AUDIT_ID_KEY = web.RequestKey("audit_id", str)
NOTES_KEY = web.RequestKey("notes", RequestNotes)


@web.middleware
async def request_context(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Gives the request its audit ID (upstream's WithAuditInit), for its answer (`echo_audit_id`),
    its audit event and every line logged while it is handled (`apiserver.logs.request_id`)."""
    audit_id = request.headers.get(AUDIT_ID_HEADER) or request.headers.get(REQUEST_ID_HEADER) or uids.new()
    request[AUDIT_ID_KEY] = audit_id
    request[NOTES_KEY] = requestnotes.begin()
    token = logs.request_id.set(audit_id)
    try:
        return await handler(request)
    finally:
        logs.request_id.reset(token)


def read_ahead(storage: ReadsAhead) -> Middleware:
    """A GET of one object starts the storage's consistent read as it arrives (`reading_ahead`):
    every such GET reads the revision, and the request's authentication and authorization then
    run while the read is on its way. An unauthenticated GET costs the read too; concurrent reads
    are shared (one in flight at a time), so that is bounded by what authenticated GETs cost."""

    @web.middleware
    async def start_read(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "GET" or not _one_object(attributes_from_request(request)):
            return await handler(request)
        async with storage.reading_ahead():
            return await handler(request)

    return start_read


def _one_object(info: RequestInfo) -> bool:
    return info.is_resource_request and info.verb == "get" and bool(info.name)


async def echo_audit_id(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """For `on_response_prepare`: every answer to a request names its audit ID, written or streamed
    (a watch), error or not, unless the answer already names one."""
    audit_id = request.get(AUDIT_ID_KEY) if isinstance(request, web.Request) else None
    if audit_id and AUDIT_ID_HEADER not in response.headers:
        response.headers[AUDIT_ID_HEADER] = audit_id


async def add_note_warnings(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """For `on_response_prepare`: the warnings deeper layers noted (admission's), on every answer,
    error or not, as upstream's warning recorder writes them."""
    notes = request.get(NOTES_KEY) if isinstance(request, web.Request) else None
    if notes is not None and notes.warnings:
        add_warnings(response, notes.warnings)


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


def authentication(chain: AuthenticatorChain) -> Middleware:
    """Who the request is (401 when no one), and its audit (`apiserver.http.audit`): judged by the
    policy once the user is known, as upstream's WithAudit runs after WithAuthentication."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(PUBLIC_PREFIXES):
            return await handler(request)
        if not auditing.enabled():
            return await _authenticated(request, handler, await chain.authenticate(request))
        received = datetime.datetime.now(datetime.UTC)
        audit_id = request.get(AUDIT_ID_KEY) or uids.new()
        try:
            user = await chain.authenticate(request)
        except errors.StatusError as exc:
            if (failed := auditing.begin(request, None, audit_id, received)) is not None:
                failed.set_status(exc.code, exc.status)
                failed.finish(exc.code)
            raise
        audit = auditing.begin(request, user, audit_id, received)
        if audit is None:
            return await _authenticated(request, handler, user)
        if user is None:
            try:
                return await _authenticated(request, handler, user)
            except errors.StatusError as exc:
                auditing.failed_authentication(request, audit, exc)
                raise
        return await auditing.audited(request, audit, lambda: _authenticated(request, handler, user))

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
            if (audit := request.get(auditing.AUDIT_KEY)) is not None:
                # The request's own user stays `user`, as upstream's audit (which runs before
                # impersonation).
                audit.event["impersonatedUser"] = audited_user(user)
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
        if (audit := request.get(auditing.AUDIT_KEY)) is not None:
            audit.annotate_decision(decision.allowed, decision.reason)
        if not decision.allowed:
            raise forbidden(user, info, decision.reason)
        request[AUTHORIZER_KEY] = authorizer
        return await handler(request)

    return authorize
