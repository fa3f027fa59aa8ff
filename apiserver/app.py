"""Assembles the aiohttp application: middleware, routes and lifecycle."""

from __future__ import annotations

import platform
import sys

from aiohttp import web

from apiserver import __version__
from apiserver.auth.authn import AuthenticatorChain
from apiserver.config import Settings
from apiserver.http.discovery import Discovery
from apiserver.http.handlers import ApiHandler
from apiserver.http.limits import InFlightLimit, request_timeout
from apiserver.http.middleware import MAX_BODY_BYTES, authentication, authorization, status_errors
from apiserver.http.namespaces import ImplicitNamespaces
from apiserver.http.responses import NO_CACHE, object_response
from apiserver.http.watchstream import SEND_TIMEOUT_KEY
from apiserver.openapi.builder import OpenAPIService
from apiserver.rbac.chain import Authorization, AuthorizationConfig, build_authorization, event_writer
from apiserver.rbac.webhook import WEBHOOK_PATH
from apiserver.registry.store import ResourceStore
from apiserver.resources import KINDS
from apiserver.storage.interface import Storage, StorageError

KUBERNETES_MINOR = "33"
STORAGE_KEY = web.AppKey("storage", Storage)
AUTHORIZATION_KEY = web.AppKey("authorization", Authorization)


def version_info() -> dict[str, str]:
    return {
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "gitVersion": f"v1.{KUBERNETES_MINOR}.0-coreio.{__version__}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{_arch()}",
    }


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def build_stores(settings: Settings, storage: Storage) -> list[ResourceStore]:
    stores: list[ResourceStore] = []
    for kind in KINDS:
        ttl = settings.event_ttl_seconds if kind.plural == "events" else 0
        stores.append(
            ResourceStore(kind, storage, ttl_seconds=ttl, bookmark_interval=settings.watch_bookmark_interval)
        )
    return stores


def build_app(
    settings: Settings,
    storage: Storage,
    authenticator: AuthenticatorChain,
    authorization_config: AuthorizationConfig | None = None,
) -> web.Application:
    stores = build_stores(settings, storage)
    by_plural = {store.kind.plural: store for store in stores}
    authz = build_authorization(
        authorization_config or AuthorizationConfig(),
        role_bindings=by_plural["rolebindings"],
        write_event=event_writer(by_plural["events"]),
    )
    by_plural["rolebindings"].admission = authz.admit_role_binding
    in_flight = InFlightLimit(settings.max_requests_inflight, settings.max_mutating_requests_inflight)
    app = web.Application(
        client_max_size=MAX_BODY_BYTES,
        # In upstream's order (DefaultBuildHandlerChain): the request deadline outside
        # authentication, the in-flight limit between authentication and authorization.
        middlewares=[
            status_errors,
            request_timeout(settings.request_timeout),
            authentication(authenticator),
            in_flight.middleware,
            authorization(authz.authorizer),
        ],
    )
    app[SEND_TIMEOUT_KEY] = settings.request_timeout
    app[STORAGE_KEY] = storage
    app[AUTHORIZATION_KEY] = authz
    api = ApiHandler(stores, Discovery(tuple(KINDS)), settings.min_request_timeout)

    async def version(request: web.Request) -> web.StreamResponse:
        return object_response(request, version_info())

    async def legacy_api(request: web.Request) -> web.StreamResponse:
        return object_response(request, api.discovery.api_versions())

    async def health(request: web.Request) -> web.StreamResponse:
        check = request.path.strip("/")
        checks = {"ping": True, "storage": True}
        if check.startswith("readyz"):
            checks["authorization"] = authz.ready
        if check.startswith("readyz") or check.startswith("healthz"):
            try:
                await storage.current_revision()
            except (StorageError, OSError):
                checks["storage"] = False
        healthy = all(checks.values())
        if "verbose" in request.query:
            lines = [
                f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}" for name, ok in checks.items()
            ]
            lines.append(f"{check} check {'passed' if healthy else 'failed'}")
            text = "\n".join(lines) + "\n"
        else:
            text = "ok" if healthy else f"{check} check failed"
        return web.Response(
            status=200 if healthy else 500,
            text=text,
            content_type="text/plain",
            headers={"Cache-Control": NO_CACHE, "X-Content-Type-Options": "nosniff"},
        )

    app.router.add_route("*", "/apis", api.handle)
    app.router.add_route("*", "/apis/{tail:.*}", api.handle)
    if settings.standalone:
        # Every namespace exists implicitly; kubectl and kopf still look for the core resource.
        namespaces = ImplicitNamespaces(stores, storage, settings.min_request_timeout)
        for path in ("/api", "/api/"):
            app.router.add_get(path, namespaces.api)
        app.router.add_get("/api/v1", namespaces.api_v1)
        app.router.add_get("/api/v1/", namespaces.api_v1)
        app.router.add_get("/api/v1/namespaces", namespaces.collection)
        app.router.add_get("/api/v1/namespaces/{name}", namespaces.get)
    else:
        app.router.add_get("/api", legacy_api)
        app.router.add_get("/api/", legacy_api)
    openapi = OpenAPIService(KINDS)
    app.router.add_get("/openapi/v2", openapi.serve_v2)
    app.router.add_get("/openapi/v3", openapi.serve_v3_index)
    app.router.add_get("/openapi/v3/{path:.*}", openapi.serve_v3)
    app.router.add_get("/version", version)
    app.router.add_get("/version/", version)
    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, health)
        app.router.add_get(path + "/{check:.*}", health)

    async def on_startup(_app: web.Application) -> None:
        await storage.start()

    async def on_cleanup(_app: web.Application) -> None:
        await storage.close()

    async def metrics(request: web.Request) -> web.StreamResponse:
        return web.Response(
            text=authz.recorder.metrics_text() + in_flight.metrics_text(),
            content_type="text/plain",
            headers={"Cache-Control": NO_CACHE},
        )

    app.router.add_get("/metrics", metrics)
    app.router.add_post(WEBHOOK_PATH, authz.webhook.handle)
    app.on_startup.append(on_startup)
    app.on_startup.append(authz.on_startup)  # after the storage started
    app.on_cleanup.append(authz.on_cleanup)  # before the storage closes
    app.on_cleanup.append(on_cleanup)
    return app
