"""Middleware: every failure as a Status body, and authentication."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from apiserver import errors
from apiserver.auth.authn import AuthenticatorChain
from apiserver.http.responses import status_response

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_KEY = web.AppKey("user", object)
# Paths anyone may read without credentials, as kube-apiserver's health checks.
PUBLIC_PREFIXES = ("/healthz", "/livez", "/readyz")
MAX_BODY_BYTES = 3 * 1024 * 1024


def _from_http_exception(exc: web.HTTPException) -> errors.StatusError:
    if exc.status == 404:
        return errors.StatusError(404, "NotFound", "the server could not find the requested resource", {})
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
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return status_response(request, _from_http_exception(exc))
    except Exception as exc:
        log.exception("internal error serving %s %s", request.method, request.path)
        return status_response(request, errors.internal_error(f"{type(exc).__name__}"))


def authentication(chain: AuthenticatorChain) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(PUBLIC_PREFIXES):
            return await handler(request)
        user = await chain.authenticate(request)
        if user is None:
            raise errors.unauthorized()
        request["user"] = user
        return await handler(request)

    return authenticate
