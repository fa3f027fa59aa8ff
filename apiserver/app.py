"""Assembles the aiohttp application: middleware, routes and lifecycle, for the kinds it serves."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from apiserver.admission import chained
from apiserver.admission.namespace import NamespaceLifecycle
from apiserver.auth.authn import AuthenticatorChain
from apiserver.config import Settings
from apiserver.http.discovery import Discovery
from apiserver.http.handlers import ApiHandler
from apiserver.http.limits import InFlightLimit, request_timeout
from apiserver.http.middleware import MAX_BODY_BYTES, authentication, authorization, status_errors
from apiserver.http.namespaces import ImplicitNamespaces
from apiserver.http.openapi import OpenAPIService
from apiserver.http.responses import object_response
from apiserver.http.system import SystemEndpoints
from apiserver.http.watchstream import SEND_TIMEOUT_KEY
from apiserver.rbac.chain import Authorization, AuthorizationConfig, server_authorization
from apiserver.rbac.webhook import WEBHOOK_PATH
from apiserver.registry.store import ResourceStore
from apiserver.resources import KINDS
from apiserver.resources.base import ResourceKind
from apiserver.storage.interface import Storage

STORAGE_KEY = web.AppKey("storage", Storage)
AUTHORIZATION_KEY = web.AppKey("authorization", Authorization)


def build_stores(
    settings: Settings, storage: Storage, kinds: Sequence[ResourceKind] = KINDS
) -> list[ResourceStore]:
    """One store a kind, its objects expiring as the kind's TTL (flag or default) says."""
    return [
        ResourceStore(
            kind,
            storage,
            ttl_seconds=settings.ttl_seconds(kind),
            bookmark_interval=settings.watch_bookmark_interval,
        )
        for kind in kinds
    ]


def build_app(
    settings: Settings,
    storage: Storage,
    authenticator: AuthenticatorChain,
    authorization_config: AuthorizationConfig | None = None,
    kinds: Sequence[ResourceKind] = KINDS,
    namespaces: NamespaceLifecycle | None = None,
) -> web.Application:
    """The server of `kinds`: each kind's store (its TTL and admission as the kind declares them,
    after namespace lifecycle when the cluster's namespaces are known), authorization over the
    RoleBindings, the API, OpenAPI and system routes, and the lifecycle."""
    stores = build_stores(settings, storage, kinds)
    authz = server_authorization(authorization_config or AuthorizationConfig(), stores)
    for store in stores:
        generic = namespaces.admission(store.kind.group_resource) if namespaces else None
        store.admission = chained([generic, store.kind.admission(authz)])
    in_flight = InFlightLimit(settings.max_requests_inflight, settings.max_mutating_requests_inflight)
    app = _application(settings, authenticator, in_flight, authz)
    app[STORAGE_KEY] = storage
    app[AUTHORIZATION_KEY] = authz
    _add_api_routes(app, settings, storage, stores)
    OpenAPIService(kinds).add_routes(app.router)
    system = SystemEndpoints(
        storage,
        ready_checks={"authorization": lambda: authz.ready},
        metrics=(authz.recorder.metrics_text, in_flight.metrics_text),
    )
    system.add_routes(app.router)
    app.router.add_post(WEBHOOK_PATH, authz.webhook.handle)
    _add_lifecycle(app, storage, authz)
    if namespaces is not None:
        _add_namespace_lifecycle(app, namespaces)
    return app


def _application(
    settings: Settings, authenticator: AuthenticatorChain, in_flight: InFlightLimit, authz: Authorization
) -> web.Application:
    """The application with its middleware, in upstream's order (DefaultBuildHandlerChain): the
    request deadline outside authentication, the in-flight limit between authentication and
    authorization."""
    app = web.Application(
        client_max_size=MAX_BODY_BYTES,
        middlewares=[
            status_errors,
            request_timeout(settings.request_timeout),
            authentication(authenticator),
            in_flight.middleware,
            authorization(authz.authorizer),
        ],
    )
    app[SEND_TIMEOUT_KEY] = settings.request_timeout
    return app


def _add_api_routes(
    app: web.Application, settings: Settings, storage: Storage, stores: list[ResourceStore]
) -> None:
    """/apis (the kinds and discovery) and /api: the core group's namespaces, implied by the
    stored objects, when standalone; an empty legacy discovery behind an aggregator."""
    api = ApiHandler(stores, Discovery(tuple(store.kind for store in stores)), settings.min_request_timeout)
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
        return

    async def legacy_api(request: web.Request) -> web.StreamResponse:
        return object_response(request, api.discovery.api_versions())

    app.router.add_get("/api", legacy_api)
    app.router.add_get("/api/", legacy_api)


def _add_lifecycle(app: web.Application, storage: Storage, authz: Authorization) -> None:
    """The storage starts first and closes last; authorization's background work (the RoleBinding
    index lists through the storage) runs in between."""

    async def start_storage(_app: web.Application) -> None:
        await storage.start()

    async def close_storage(_app: web.Application) -> None:
        await storage.close()

    app.on_startup.append(start_storage)
    app.on_startup.append(authz.on_startup)
    app.on_cleanup.append(authz.on_cleanup)
    app.on_cleanup.append(close_storage)


def _add_namespace_lifecycle(app: web.Application, namespaces: NamespaceLifecycle) -> None:
    """The cluster's namespaces are watched while the server runs."""

    async def start(_app: web.Application) -> None:
        namespaces.start()

    async def stop(_app: web.Application) -> None:
        await namespaces.stop()

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)
