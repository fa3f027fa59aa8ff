"""Assembles the aiohttp application: middleware, routes and lifecycle, for the kinds it serves."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from aiohttp import web

from apiserver.admission.chain import AdmissionChain, MutatingAdmission, ValidatingAdmission
from apiserver.admission.namespace import NamespaceLifecycle
from apiserver.admission.objects import AdmissionSource
from apiserver.admission.policy.plugin import ValidatingPolicies
from apiserver.admission.sources import ClusterSource
from apiserver.admission.webhook.plugins import AdmissionWebhooks
from apiserver.audit.metrics import METRICS as AUDIT_METRICS
from apiserver.auth.authn import AuthenticatorChain
from apiserver.config import VALIDATING_ADMISSION_POLICY, Settings
from apiserver.http import audit
from apiserver.http.accessreviews import AccessReviewEndpoints
from apiserver.http.discovery import Discovery, Resource
from apiserver.http.handlers import ApiHandler
from apiserver.http.health import PostStartHooks
from apiserver.http.limits import InFlightLimit, request_timeout
from apiserver.http.looplag import LoopLag
from apiserver.http.metrics import METRICS_KEY, ServerMetrics
from apiserver.http.middleware import (
    MAX_BODY_BYTES,
    add_note_warnings,
    authentication,
    authorization,
    echo_audit_id,
    impersonation,
    read_ahead,
    request_context,
    status_errors,
)
from apiserver.http.namespaces import ImplicitNamespaces
from apiserver.http.openapi import OpenAPIService
from apiserver.http.responses import object_response
from apiserver.http.selfreviews import SelfReviewEndpoints
from apiserver.http.system import (
    STORAGE_INITIALIZATION_TIMEOUT,
    STORAGE_READINESS_HOOK,
    SystemEndpoints,
    await_storage_readiness,
)
from apiserver.http.watchstream import SEND_TIMEOUT_KEY
from apiserver.http.workermetrics import WorkerSet, serve_own
from apiserver.http.workermetrics import gathered as gathered_metrics
from apiserver.machinery.tasks import BackgroundTasks
from apiserver.rbac.chain import Authorization, AuthorizationConfig, server_authorization
from apiserver.rbac.selfreviews import REVIEWS
from apiserver.rbac.webhook import WEBHOOK_PATH
from apiserver.registry.exportholds import ExportHolds
from apiserver.registry.store import ResourceStore
from apiserver.registry.stored import storage_root
from apiserver.resources import KINDS
from apiserver.resources.base import ResourceKind
from apiserver.resources.eventexport import GROUP as EXPORT_GROUP
from apiserver.resources.rolebinding import ACCESS_REVIEWS, GROUP
from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import Readiness, ReadsAhead, Storage
from apiserver.storage.metered import MeteredStorage, StorageMetrics

FIRST_HOLD_TIMEOUT = 5.0  # the EventExports' positions read at start, at most this long
STORAGE_KEY = web.AppKey("storage", Storage)
SYSTEM_KEY = web.AppKey("system", SystemEndpoints)
AUTHORIZATION_KEY = web.AppKey("authorization", Authorization)


def build_stores(
    settings: Settings,
    storage: Storage,
    kinds: Sequence[ResourceKind] = KINDS,
    metrics: StorageMetrics | None = None,
) -> list[ResourceStore]:
    """One store a kind, its objects expiring as the kind's TTL (flag or default) says; with
    `metrics`, each store's storage calls are timed under its kind's resource."""
    return [
        ResourceStore(
            kind,
            MeteredStorage(storage, metrics, str(kind.group_resource)) if metrics else storage,
            ttl_seconds=settings.ttl_seconds(kind),
            bookmark_interval=settings.watch_bookmark_interval,
        )
        for kind in kinds
    ]


def _server_metrics(settings: Settings, kinds: Sequence[ResourceKind]) -> ServerMetrics:
    return ServerMetrics(
        kinds,
        max_event_reasons=settings.events_metric_max_reasons,
        max_event_namespaces=settings.events_metric_max_namespaces,
    )


def build_app(
    settings: Settings,
    storage: Storage,
    authenticator: AuthenticatorChain,
    authorization_config: AuthorizationConfig | None = None,
    kinds: Sequence[ResourceKind] = KINDS,
    namespaces: NamespaceLifecycle | None = None,
    workers: WorkerSet | None = None,
    admission: AdmissionSource | None = None,
    hold: HistoryHold | None = None,
) -> web.Application:
    """The server of `kinds`: each kind's store (its TTL and admission as the kind declares them,
    after namespace lifecycle when the cluster's namespaces are known), authorization over the
    RoleBindings, the API, OpenAPI and system routes, and the lifecycle. `workers`: this is one of
    several worker processes, whose /metrics answers for all. `hold`: the history kept for exports."""
    metrics = _server_metrics(settings, kinds)
    stores = build_stores(settings, storage, kinds, metrics.storage)
    # What all workers would report alike (bindings' problems, object counts), the first reports.
    reporter = workers is None or workers.index == 0
    config = dataclasses.replace(authorization_config or AuthorizationConfig(), reports_problems=reporter)
    authz = server_authorization(config, stores)
    admission_used, webhooks = _add_admission(settings, stores, authz, namespaces, admission)
    in_flight = InFlightLimit(settings.max_requests_inflight, settings.max_mutating_requests_inflight)
    metrics.add(in_flight)
    metrics.add(authz.recorder)
    metrics.add(authz.index)
    metrics.add(AUDIT_METRICS)
    app = _application(settings, authenticator, in_flight, authz, metrics, storage)
    app.cleanup_ctx.append(LoopLag(metrics.registry).context)
    app[STORAGE_KEY] = storage
    app[AUTHORIZATION_KEY] = authz
    app[METRICS_KEY] = metrics
    if settings.standalone:
        # In a cluster kube-apiserver answers the self reviews; the aggregator never sends them here.
        SelfReviewEndpoints(authz.authorizer, authz.rules_for).add_routes(app)
    AccessReviewEndpoints(authz, standalone=settings.standalone).add_routes(app)
    _add_api_routes(app, settings, storage, stores)
    OpenAPIService(kinds).add_routes(app.router)
    app.router.add_post(WEBHOOK_PATH, authz.webhook.handle)
    # Start-up steps reported as upstream's post-start hooks, in its order.
    hooks = PostStartHooks()
    started = [hooks.add("generic-apiserver-start-informers")]
    if settings.max_requests_inflight or settings.max_mutating_requests_inflight:
        started.append(hooks.add("max-in-flight-filter"))
    _add_lifecycle(app, storage, authz)
    if settings.etcd_count_metric_poll_period > 0:
        counting = hooks.add("storage-object-count-tracker-hook")
        period = settings.etcd_count_metric_poll_period if reporter else 0.0
        _add_object_counts(app, metrics, stores, period, counting, storage)
    _add_storage_readiness(app, storage, hooks.add(STORAGE_READINESS_HOOK))
    _add_export_holds(app, settings, storage, kinds, hold)
    if namespaces is not None:
        _add_namespace_lifecycle(app, namespaces)
    if admission_used and isinstance(admission, ClusterSource):
        _add_namespace_lifecycle(app, admission)
    if webhooks is not None:
        app.on_cleanup.append(lambda _app: webhooks.close())
    _add_system_routes(app, storage, authz, namespaces, hooks, metrics, workers)
    app.on_startup.append(_all_done(started))  # after every start-up step above
    return app


def _add_system_routes(
    app: web.Application,
    storage: Storage,
    authz: Authorization,
    namespaces: NamespaceLifecycle | None,
    hooks: PostStartHooks,
    metrics: ServerMetrics,
    workers: WorkerSet | None,
) -> None:
    """Health (`informer-sync` once authorization's index and roles, and the cluster's namespaces
    if watched, are in), version and metrics."""

    def informers_synced() -> bool:
        return authz.ready and (namespaces is None or namespaces.namespaces.synced.is_set())

    system = SystemEndpoints(
        storage,
        ready_checks={"informer-sync": informers_synced},
        post_start_hooks=hooks,
        metrics=_exposition(app, metrics, workers),
    )
    system.add_routes(app.router)
    app[SYSTEM_KEY] = system


def _exposition(
    app: web.Application, metrics: ServerMetrics, workers: WorkerSet | None
) -> Callable[[], Awaitable[str]]:
    """/metrics' text: this server's, or with `workers` every worker's (this one serving its own to
    the others on its socket while the app runs)."""

    async def own() -> str:
        return metrics.exposition().decode()

    if workers is None:
        return own

    async def serve_siblings(_app: web.Application) -> AsyncIterator[None]:
        runner = await serve_own(workers, metrics.exposition)
        yield
        await runner.cleanup()

    app.cleanup_ctx.append(serve_siblings)

    async def gathered() -> str:
        return await gathered_metrics(workers, metrics.exposition().decode())

    return gathered


def _all_done(steps: Sequence[Callable[[], None]]) -> Callable[[web.Application], Awaitable[None]]:
    async def done(_app: web.Application) -> None:
        for step in steps:
            step()

    return done


def _application(
    settings: Settings,
    authenticator: AuthenticatorChain,
    in_flight: InFlightLimit,
    authz: Authorization,
    metrics: ServerMetrics,
    storage: Storage,
) -> web.Application:
    """The application with its middleware, in upstream's order (DefaultBuildHandlerChain): the
    audit ID first, the request metrics around every answer, the request deadline outside
    authentication, impersonation right after it, the in-flight limit before authorization. Right
    after the audit ID, a GET of one object starts its consistent read when the storage reads
    ahead (coreio's own: upstream's GET reads etcd once authorized)."""
    ahead = [read_ahead(storage)] if isinstance(storage, ReadsAhead) and storage.reads_ahead else []
    app = web.Application(
        client_max_size=MAX_BODY_BYTES,
        middlewares=[
            request_context,
            *ahead,
            metrics.middleware,
            status_errors,
            request_timeout(settings.request_timeout),
            authentication(authenticator),
            impersonation(authz.authorizer),
            in_flight.middleware,
            authorization(authz.authorizer),
        ],
    )
    app[SEND_TIMEOUT_KEY] = settings.request_timeout
    app.on_response_prepare.append(echo_audit_id)
    app.on_response_prepare.append(add_note_warnings)
    app.on_response_prepare.append(audit.on_response_prepare)
    return app


def _add_api_routes(
    app: web.Application, settings: Settings, storage: Storage, stores: list[ResourceStore]
) -> None:
    """/apis (the kinds and discovery) and /api: the core group's namespaces, implied by the
    stored objects, when standalone; an empty legacy discovery behind an aggregator."""
    # Standalone, the self reviews are served here, so discovery lists them (kubectl create -f).
    reviews = tuple(Resource.create_only(*review) for review in REVIEWS) if settings.standalone else ()
    # coreio's own reviews (kubectl coreio), beside the RoleBindings they are about.
    reviews += tuple(
        Resource.create_only(GROUP, plural, kind, namespaced=True) for plural, kind in ACCESS_REVIEWS
    )
    discovery = Discovery(tuple(store.kind for store in stores), reviews)
    api = ApiHandler(stores, discovery, settings.min_request_timeout)
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


def _add_object_counts(
    app: web.Application,
    metrics: ServerMetrics,
    stores: Sequence[ResourceStore],
    period: float,
    started: Callable[[], None],
    storage: Storage,
) -> None:
    """`apiserver_storage_objects` of each kind, counted every `period` seconds while the server
    runs, as upstream's storage-object-count-tracker does (0: by another worker); `started` once it
    runs. The first count waits for the watch caches: on SQLite a count is a scan of the whole
    range, and run beside the caches' initial lists it delayed readiness after a restart."""
    counted = [
        (store.kind, store.storage, store.prefix(None))
        for store in stores
        if isinstance(store.storage, MeteredStorage)
    ]
    tasks = BackgroundTasks()

    async def observe() -> None:
        if isinstance(storage, Readiness):
            # As the readiness hook does, it stops waiting after a while and counts all the same.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STORAGE_INITIALIZATION_TIMEOUT):
                    await storage.wait_ready()
        await metrics.observe_counts(counted, period)

    async def start(_app: web.Application) -> None:
        if period > 0:
            tasks.start(observe(), name="coreio-object-counts")
        started()

    async def stop(_app: web.Application) -> None:
        await tasks.stop()

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)


def _add_export_holds(
    app: web.Application,
    settings: Settings,
    storage: Storage,
    kinds: Sequence[ResourceKind],
    hold: HistoryHold | None,
) -> None:
    """The history kept for the EventExports' positions (when they are served), refreshed while
    the server runs."""
    exports = [kind for kind in kinds if (kind.group, kind.kind) == (EXPORT_GROUP, "EventExport")]
    if hold is None or not exports:
        return
    holds = ExportHolds(storage, storage_root(exports[0]), hold, settings.compaction_interval)
    tasks = BackgroundTasks()

    async def start(_app: web.Application) -> None:
        # Set before a watch is served: else an exporter resuming below the watch cache's window
        # at a restart would meet 410 for history that is held.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FIRST_HOLD_TIMEOUT):
                await holds.refresh_logged()
        tasks.start(holds.run(), name="coreio-export-holds")

    async def stop(_app: web.Application) -> None:
        await tasks.stop()

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)


def _add_storage_readiness(app: web.Application, storage: Storage, ready: Callable[[], None]) -> None:
    """`ready` once the storage, started, has filled its watch caches: until then /readyz fails
    on `poststarthook/storage-readiness` while the server already answers."""
    tasks = BackgroundTasks()

    async def start(_app: web.Application) -> None:
        tasks.start(await_storage_readiness(storage, ready), name="coreio-storage-readiness")

    async def stop(_app: web.Application) -> None:
        await tasks.stop()

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)


def _add_admission(
    settings: Settings,
    stores: Sequence[ResourceStore],
    authz: Authorization,
    namespaces: NamespaceLifecycle | None,
    source: AdmissionSource | None,
) -> tuple[bool, AdmissionWebhooks | None]:
    """Each store's admission chain: namespace lifecycle, the kind's checks, the cluster's plugins.
    Whether any plugin reads the source (else the cluster's configuration is not watched), and the
    webhook plugins, whose client the server closes when it stops."""
    validating = _validating_plugins(settings, source, authz)
    # Admission webhooks (MutatingAdmissionWebhook first, ValidatingAdmissionWebhook last).
    disabled = settings.disable_admission_plugins
    webhooks = AdmissionWebhooks.over(source, disabled, authorizer=authz.authorizer) if source else None
    mutating: list[MutatingAdmission] = []
    if webhooks is not None and webhooks.mutating is not None:
        mutating.append(webhooks.mutating)
    if webhooks is not None and webhooks.validating is not None:
        validating.append(webhooks.validating)
    for store in stores:
        store.admission = AdmissionChain(
            namespace=namespaces.admission(store.kind.group_resource) if namespaces else None,
            mutating=mutating,
            kind_checks=store.kind.admission(authz),
            validating=validating,
        )
    return bool(validating or mutating), webhooks


def _validating_plugins(
    settings: Settings, source: AdmissionSource | None, authz: Authorization
) -> list[ValidatingAdmission]:
    """The validating plugins on, in upstream's order, over the admission configuration's source."""
    if source is None:
        return []
    plugins: list[ValidatingAdmission] = []
    if VALIDATING_ADMISSION_POLICY not in settings.disable_admission_plugins:
        plugins.append(ValidatingPolicies(source, authz.authorizer))
    return plugins


def _add_namespace_lifecycle(app: web.Application, namespaces: NamespaceLifecycle | ClusterSource) -> None:
    """The cluster's namespaces (or admission configuration) are watched while the server runs."""

    async def start(_app: web.Application) -> None:
        namespaces.start()

    async def stop(_app: web.Application) -> None:
        await namespaces.stop()

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)
