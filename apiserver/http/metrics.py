"""The server's Prometheus metrics: one registry a server, in kube-apiserver's names, labels and
buckets (k8s.io/apiserver's endpoints/metrics and storage metrics).

- `apiserver_request_total` and `apiserver_request_duration_seconds`: each request upstream
  instruments, i.e. a kind's API routes, aggregated discovery (`/apis`) and the health checks,
  labelled as upstream labels them (LIST apart from GET, WATCH, APPLY apart from PATCH; POST, PUT,
  DELETE; the scope of the route), once its answer is written (a watch when it ends). Refusals by
  authentication and authorization are not counted; 429s from the in-flight limit are.
- `apiserver_watch_events_total` and `apiserver_registered_watchers`, by group, version and kind.
- `apiserver_storage_objects`, by resource, counted every `--etcd-count-metric-poll-period`.
- `etcd_request_duration_seconds` and its counters, from `apiserver.storage.metered`.
- `coreio_events_written_total`, the Events stored, by type, reason and namespace (eventmetrics).
- The process's `process_*` gauges (resident memory, open descriptors, CPU), under the names Go's
  client gives them, and `coreio_asyncio_tasks`, the tasks alive on the event loop: this server's
  `go_goroutines`, where a leak shows first.

Anything else with a `collect()` (the in-flight limit, the RBAC problem counter) joins the
registry with `add`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Protocol

import prometheus_client
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from apiserver.auth.attributes import INFO_KEY
from apiserver.auth.requestinfo import RequestInfo, request_info
from apiserver.http.eventmetrics import MAX_NAMESPACES, MAX_REASONS, EventsWritten
from apiserver.http.middleware import Handler
from apiserver.http.responses import RESOURCE_KIND_KEY
from apiserver.machinery.mediatypes import APPLY_PATCH_TYPE
from apiserver.machinery.series import Series
from apiserver.machinery.types import JSON
from apiserver.registry.store import WatchEventOut
from apiserver.resources.base import ResourceKind
from apiserver.resources.event import EventKind
from apiserver.storage.interface import StorageError
from apiserver.storage.metered import LATENCY_BUCKETS, StorageMetrics

log = logging.getLogger(__name__)

COMPONENT = "apiserver"
# Upstream instruments its health endpoints with an empty component, the path as subresource.
HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
AGGREGATED_DISCOVERY_PATH = "/apis"
# The verbs upstream reports; any other method is reported as "other".
REPORTED_VERBS = frozenset(
    {
        "APPLY",
        "CONNECT",
        "CREATE",
        "DELETE",
        "DELETECOLLECTION",
        "GET",
        "LIST",
        "PATCH",
        "POST",
        "PROXY",
        "PUT",
        "UPDATE",
        "WATCH",
        "WATCHLIST",
    }
)
CONNECT_SUBRESOURCES = frozenset({"log", "exec", "portforward", "attach", "proxy"})
REQUEST_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")
WATCH_LABELS = ("group", "version", "kind")
# The handlers mark an aggregated discovery answer, which upstream counts (legacy discovery is not).
AGGREGATED_DISCOVERY_KEY = web.RequestKey("aggregated_discovery", bool)
TOO_MANY_REQUESTS = 429


class ObjectCounter(Protocol):
    async def count(self, prefix: str) -> int: ...


def _dry_run(request: web.Request) -> str:
    """As upstream: empty without dryRun, else its values sorted and deduplicated, or "invalid"."""
    if "dryRun" not in request.query_string:
        return ""
    values = request.query.getall("dryRun", [])
    if not values or any(value != "All" for value in values):
        return "invalid"
    return ",".join(sorted(set(values)))


def _scope(method: str, info: RequestInfo) -> str:
    """The scope of the route: one object (named, or being created), a namespace, or the cluster."""
    if not info.is_resource_request:
        return ""
    if info.name or method == "POST":
        return "resource"
    return "namespace" if info.namespace else "cluster"


def _watch_asked(request: web.Request) -> bool:
    values = request.query.getall("watch", [])
    return request.method == "GET" and bool(values) and values[0].lower() not in ("0", "false")


def reported_verb(request: web.Request, info: RequestInfo, scope: str) -> str:
    """The verb label: the method, GET on a collection as LIST, and WATCH, APPLY and CONNECT told
    apart; a method upstream does not know is "other"."""
    verb = request.method.upper()
    if verb in ("GET", "HEAD"):
        verb = "GET" if scope in ("resource", "") else "LIST"
    if info.verb == "watch" or _watch_asked(request):
        verb = "WATCH"
    if verb == "PATCH" and request.headers.get("Content-Type") == APPLY_PATCH_TYPE:
        verb = "APPLY"
    if info.is_resource_request and info.subresource in CONNECT_SUBRESOURCES:
        verb = "CONNECT"
    return verb if verb in REPORTED_VERBS else "other"


class _TaskCollector:
    """The tasks alive on the running event loop (none reported when asked off the loop)."""

    def collect(self) -> Iterator[Metric]:
        try:
            tasks = asyncio.all_tasks()
        except RuntimeError:
            return
        yield GaugeMetricFamily(
            "coreio_asyncio_tasks", "Number of asyncio tasks that currently exist.", value=len(tasks)
        )


class ServerMetrics:
    """One server's registry, its request and watch metrics, and the storage's."""

    def __init__(
        self,
        served: Iterable[ResourceKind] = (),
        *,
        max_event_reasons: int = MAX_REASONS,
        max_event_namespaces: int = MAX_NAMESPACES,
    ) -> None:
        # Upstream exposes no `_created` series; prometheus_client would add one to each counter.
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self.served = {(kind.group, kind.version, kind.plural) for kind in served}
        self.requests = Counter(
            "apiserver_request",
            "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group,"
            " version, resource, scope, component, and HTTP response code.",
            (*REQUEST_LABELS, "code"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "[STABLE] Response latency distribution in seconds for each verb, dry run value, group,"
            " version, resource, subresource, scope and component.",
            REQUEST_LABELS,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._requests, self._latency = Series(self.requests), Series(self.latency)
        self.watch_events = Counter(
            "apiserver_watch_events",
            "[ALPHA] Number of events sent in watch clients",
            WATCH_LABELS,
            registry=self.registry,
        )
        self.watchers = Gauge(
            "apiserver_registered_watchers",
            "[ALPHA] Number of watches open on a kind, by group, version and kind.",
            WATCH_LABELS,
            registry=self.registry,
        )
        self.objects = Gauge(
            "apiserver_storage_objects",
            "[STABLE] Number of stored objects at the time of last check split by kind. In case of a"
            " fetching error, the value will be -1.",
            ("resource",),
            registry=self.registry,
        )
        self.storage = StorageMetrics(self.registry)
        self.events = EventsWritten(
            self.registry, max_reasons=max_event_reasons, max_namespaces=max_event_namespaces
        )
        ProcessCollector(registry=self.registry)
        self.registry.register(_TaskCollector())

    def add(self, collector: Collector) -> None:
        self.registry.register(collector)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (0.0.4, as kube-apiserver answers a plain GET)."""
        return generate_latest(self.registry)

    # ------------------------------------------------------------------ requests

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Counts and times each request upstream instruments, from its arrival until its answer
        is written; outermost but for the request context, so that every error is an answer."""
        start = time.perf_counter()
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            self.observe(request, exc.status, time.perf_counter() - start)
            raise
        except asyncio.CancelledError:
            # The client left (its handler is cancelled): a watch had answered 200 at its start.
            if _watch_asked(request) or request_info(request.method, request.path, {}).verb == "watch":
                self.observe(request, 200, time.perf_counter() - start)
            raise
        self.observe(request, response.status, time.perf_counter() - start)
        return response

    def observe(self, request: web.Request, code: int, seconds: float) -> None:
        labels = self.request_labels(request, code)
        if labels is None:
            return
        self._requests(*labels, str(code)).inc()
        self._latency(*labels).observe(seconds)

    def request_labels(self, request: web.Request, code: int) -> tuple[str, ...] | None:
        """The request's labels (REQUEST_LABELS), or None for one upstream does not count."""
        path = request.path
        # The path's own name, not a fieldSelector's: what authorization read is the same without
        # a query.
        info = request.get(INFO_KEY) if not request.query_string else None
        info = info or request_info(request.method, path, {})
        scope = _scope(request.method, info)
        verb = reported_verb(request, info, scope)
        if path in HEALTH_PATHS:
            return (verb, _dry_run(request), "", "", "", path, "", "")
        if path == AGGREGATED_DISCOVERY_PATH and request.get(AGGREGATED_DISCOVERY_KEY):
            return (verb, _dry_run(request), "", "", "", path, "", COMPONENT)
        dropped = code == TOO_MANY_REQUESTS
        if not info.is_resource_request:
            return (verb, _dry_run(request), "", "", "", "", "", COMPONENT) if dropped else None
        served = (info.api_group, info.api_version, info.resource) in self.served
        if not served or not (dropped or RESOURCE_KIND_KEY in request):
            return None
        group, version, resource = info.api_group, info.api_version, info.resource
        return (verb, _dry_run(request), group, version, resource, info.subresource, scope, COMPONENT)

    def stored(self, kind: ResourceKind, obj: JSON) -> None:
        """A write stored `obj`, an object of `kind`: Events are counted."""
        if isinstance(kind, EventKind):
            self.events.stored(obj)

    # ------------------------------------------------------------------ watches

    @contextlib.contextmanager
    def watching(self, kind: ResourceKind) -> Iterator[None]:
        """While inside, one more watcher of `kind` is registered."""
        gauge = self.watchers.labels(kind.group, kind.version, kind.kind)
        gauge.inc()
        try:
            yield
        finally:
            gauge.dec()

    def counted(
        self, kind: ResourceKind, events: AsyncIterator[WatchEventOut]
    ) -> AsyncIterator[WatchEventOut]:
        """`events`, each counted as it is handed on to be sent."""
        return _counted(self.watch_events.labels(kind.group, kind.version, kind.kind), events)

    # ------------------------------------------------------------------ stored objects

    async def count_objects(self, stores: Iterable[tuple[ResourceKind, ObjectCounter, str]]) -> None:
        """Sets `apiserver_storage_objects` of each (kind, storage, key prefix): -1 if counting failed."""
        for kind, storage, prefix in stores:
            try:
                count = await storage.count(prefix)
            except (StorageError, OSError) as exc:
                log.debug("could not count %s: %s", kind.group_resource, exc)
                count = -1
            self.objects.labels(str(kind.group_resource)).set(count)

    async def observe_counts(
        self, stores: Iterable[tuple[ResourceKind, ObjectCounter, str]], period: float
    ) -> None:
        """Counts the stored objects every `period` seconds, from now on (run it as a task)."""
        counted = list(stores)
        while True:
            await self.count_objects(counted)
            await asyncio.sleep(period)


async def _counted(counter: Counter, events: AsyncIterator[WatchEventOut]) -> AsyncIterator[WatchEventOut]:
    try:
        async for event in events:
            counter.inc()
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


METRICS_KEY = web.AppKey("metrics", ServerMetrics)
