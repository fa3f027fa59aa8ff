"""The stored RoleBindings in memory, for the RBAC authorizer, and where their problems are reported.

`BindingIndex` keeps namespace -> RoleBindings current from the registry's list+watch (an informer
over our own storage), so that authorizing reads no storage. Each new revision of a binding is
handed to a checker (the authorizer's `check_binding`), which reports its part-7 problems;
`ProblemReporter` lets each through once per revision, and `ProblemRecorder` is where they land,
each on its own: a log line, a counter (`coreio_rbac_binding_errors_total{reason}`) and a Warning
Event (events.core.io/v1) regarding the RoleBinding. The index's own gauge,
`coreio_rbac_binding_index_resource_version`, says how far it has followed the store: a binding
written at resourceVersion N grants in a worker once that worker's gauge reaches N.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import re
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from apiserver.machinery import formats
from apiserver.machinery.errors import StatusError
from apiserver.machinery.options import ListOptions
from apiserver.machinery.types import JSON
from apiserver.rbac.authorizer import Binding, BindingProblem, ProblemReporter
from apiserver.registry.decoded import ObjectList
from apiserver.registry.store import WatchEventOut
from apiserver.resources.event import GROUP as EVENTS_GROUP
from apiserver.resources.event import NOTE_LENGTH_LIMIT, REPORTING_INSTANCE_LENGTH_LIMIT
from apiserver.resources.rolebinding import GROUP
from apiserver.storage.interface import StorageError

log = logging.getLogger(__name__)

EVENTS_API_VERSION = f"{EVENTS_GROUP}/v1"
REPORTING_CONTROLLER = "coreio-rbac-authorizer"
EVENT_ACTION = "Authorize"
METRIC_NAME = "coreio_rbac_binding_errors_total"
INDEX_METRIC_NAME = "coreio_rbac_binding_index_resource_version"


class RoleBindingStore(Protocol):
    """What the index reads: `apiserver.registry.store.ResourceStore` of rolebindings."""

    async def list(self, namespace: str | None, opts: ListOptions) -> ObjectList: ...

    async def watch(self, namespace: str | None, opts: ListOptions) -> AsyncIterator[WatchEventOut]: ...


class BindingIndex:
    """namespace -> name -> `Binding`, kept by `run()` (list, then watch from the list's revision;
    relist after 410 Gone). `ready` once the first list is in."""

    def __init__(
        self,
        *,
        checker: Callable[[Binding], None] | None = None,
        reporter: ProblemReporter | None = None,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.checker = checker
        self.reporter = reporter
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.resource_version = ""
        self._by_namespace: dict[str, dict[str, Binding]] = {}
        self._synced = asyncio.Event()
        self._recheck: asyncio.TimerHandle | None = None

    # -- BindingLister

    def role_bindings(self, namespace: str) -> Sequence[Binding]:
        return tuple(self._by_namespace.get(namespace, {}).values())

    @property
    def ready(self) -> bool:
        return self._synced.is_set()

    async def wait_ready(self) -> None:
        await self._synced.wait()

    def __len__(self) -> int:
        return sum(len(names) for names in self._by_namespace.values())

    def all_bindings(self) -> list[Binding]:
        return [b for names in self._by_namespace.values() for b in names.values()]

    def collect(self) -> Iterator[Metric]:
        """The resourceVersion reached, for the server's metrics registry (0 before the first list)."""
        gauge = GaugeMetricFamily(
            INDEX_METRIC_NAME,
            "The resourceVersion of RoleBindings the RBAC authorizer's index has followed the store to.",
        )
        version = self.resource_version
        gauge.add_metric((), float(version) if version.isdigit() else 0.0)
        yield gauge

    # -- changes

    def replace(self, objects: Iterable[JSON], resource_version: str = "") -> None:
        """A fresh list: everything not in it is gone."""
        fresh: dict[str, dict[str, Binding]] = {}
        for obj in objects:
            binding = Binding.from_object(obj)
            fresh.setdefault(binding.namespace, {})[binding.name] = binding
        old = self._by_namespace
        self._by_namespace = fresh
        for namespace, names in old.items():
            for name in names:
                if name not in fresh.get(namespace, {}) and self.reporter is not None:
                    self.reporter.forget(namespace, name)
        for names in fresh.values():
            for binding in names.values():
                previous = old.get(binding.namespace, {}).get(binding.name)
                if previous is None or previous.resource_version != binding.resource_version:
                    self._check(binding)
        if resource_version:
            self.resource_version = resource_version
        self._synced.set()

    def apply(self, event_type: str, obj: JSON) -> None:
        """One watch event (ADDED, MODIFIED, DELETED; others only move the revision)."""
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if event_type in ("ADDED", "MODIFIED"):
            binding = Binding.from_object(obj)
            self._by_namespace.setdefault(binding.namespace, {})[binding.name] = binding
            self._check(binding)
        elif event_type == "DELETED":
            binding = Binding.from_object(obj)
            names = self._by_namespace.get(binding.namespace, {})
            names.pop(binding.name, None)
            if not names:
                self._by_namespace.pop(binding.namespace, None)
            if self.reporter is not None:
                self.reporter.forget(binding.namespace, binding.name)
        if version:
            self.resource_version = version

    def _check(self, binding: Binding) -> None:
        if self.checker is None:
            return
        try:
            self.checker(binding)
        except Exception:
            log.exception("checking RoleBinding %s/%s failed", binding.namespace, binding.name)

    def recheck_all(self) -> None:
        """Checks every binding again (roles changed: a roleRef may have stopped resolving). The
        reporter still lets each problem through once per binding revision."""
        for binding in self.all_bindings():
            self._check(binding)

    def schedule_recheck(self, delay: float = 1.0) -> None:
        """`recheck_all` soon, once for a burst of calls (a role source's `on_change` hook)."""
        if self._recheck is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.recheck_all()
            return

        def fire() -> None:
            self._recheck = None
            self.recheck_all()

        self._recheck = loop.call_later(delay, fire)

    # -- list+watch

    async def run(self, store: RoleBindingStore) -> None:
        """Keeps the index current forever (run it as a task; cancel to stop)."""
        backoff = self.min_backoff
        relist = True
        while True:
            try:
                if relist:
                    listed = await store.list(None, ListOptions())
                    items = [shared.obj for shared in listed.shared()]
                    self.replace(items, str(listed.head["metadata"]["resourceVersion"]))
                    relist = False
                    backoff = self.min_backoff
                ended = await self._watch(store)
                if ended is None:
                    continue  # the stream just ended: watch again from where it stopped
                # An ERROR ended it: list again, as client-go's reflector does. Resuming would meet
                # the same event again (an object that no longer decodes, until it is deleted).
                relist = True
                if ended == 410:
                    continue  # our revision was compacted away: relist at once
            except StatusError as exc:
                relist = relist or exc.code == 410
                log.warning("RoleBinding index: %s; retrying in %.1fs", exc.message, backoff)
            except (StorageError, OSError) as exc:
                log.warning("RoleBinding index: %s; retrying in %.1fs", exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    async def _watch(self, store: RoleBindingStore) -> int | None:
        """Applies watch events from `resource_version` on; the code of an ERROR event that ended
        the stream, or None when it just ended."""
        opts = ListOptions(resource_version=self.resource_version, watch=True, allow_watch_bookmarks=True)
        events = await store.watch(None, opts)
        try:
            async for event in events:
                if event.type == "ERROR":
                    log.info("RoleBinding watch ended: %s", event.object.get("message", ""))
                    code = event.object.get("code")
                    return code if isinstance(code, int) else 500
                self.apply(event.type, event.object)
        finally:
            if isinstance(events, AsyncGenerator):
                await events.aclose()
        return None


# ----------------------------------------------------------------------------- reporting

_NOT_DNS = re.compile(r"[^a-z0-9.-]+")


def event_name(binding_name: str, moment_ns: int) -> str:
    """`<binding>.<hex nanoseconds>` as upstream's event recorders name Events; a binding name that
    is no DNS subdomain (RoleBinding names may hold `:` or capitals) is folded into one."""
    base = binding_name
    if formats.is_dns1123_subdomain(base) or len(base) > 200:
        base = _NOT_DNS.sub("-", base.lower())[:200].strip(".-") or "rolebinding"
    return f"{base}.{moment_ns:x}"


def warning_event(
    problem: BindingProblem,
    *,
    controller: str = REPORTING_CONTROLLER,
    instance: str = "",
    now: datetime.datetime | None = None,
) -> JSON:
    """The events.core.io/v1 Warning Event recording `problem`, regarding its RoleBinding."""
    moment = now or datetime.datetime.now(datetime.UTC)
    since_epoch = moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    regarding: JSON = {
        "kind": "RoleBinding",
        "namespace": problem.namespace,
        "name": problem.name,
        "apiVersion": f"{GROUP}/v1",
    }
    if problem.uid:
        regarding["uid"] = problem.uid
    if problem.resource_version:
        regarding["resourceVersion"] = problem.resource_version
    note = problem.message
    if len(note.encode()) > NOTE_LENGTH_LIMIT:
        note = note.encode()[: NOTE_LENGTH_LIMIT - 3].decode(errors="ignore") + "..."
    return {
        "apiVersion": EVENTS_API_VERSION,
        "kind": "Event",
        "metadata": {
            "name": event_name(problem.name, since_epoch // datetime.timedelta(microseconds=1) * 1000),
            "namespace": problem.namespace,
        },
        "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": controller,
        "reportingInstance": (instance or socket.gethostname())[:REPORTING_INSTANCE_LENGTH_LIMIT],
        "action": EVENT_ACTION,
        "reason": problem.reason.value,
        "regarding": regarding,
        "note": note,
        "type": "Warning",
    }


class ProblemRecorder:
    """The sink of part-7 problems (a `ProblemReporter` hook): logs each, counts it by reason, and
    queues a Warning Event that `run()` writes with `write_event` (e.g. the events store's create).
    Never blocks authorization: a full queue drops Events (the log line and the count remain).
    Not `reporting`, it leaves all that to another worker of the same server.

    One Event per problem, not one per binding listing them all: an Event has a single reason, so
    each keeps the counter's reason label and can be selected by it (`fieldSelector=reason=...`);
    and a binding's problems are found at different times (its own when it changes, its roleRef's
    when roles change), which one Event per binding could only follow by reporting again what it
    already reported."""

    def __init__(
        self,
        write_event: Callable[[JSON], Awaitable[object]] | None = None,
        *,
        controller: str = REPORTING_CONTROLLER,
        instance: str = "",
        queue_size: int = 1000,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        reporting: bool = True,
    ) -> None:
        self.write_event = write_event
        self.reporting = reporting
        self.clock = clock
        self.controller = controller
        self.instance = instance or socket.gethostname()
        self.counts: dict[str, int] = {}
        self.dropped = 0
        self._queue: asyncio.Queue[JSON] = asyncio.Queue(maxsize=queue_size)
        self._last_moment: datetime.datetime | None = None

    def __call__(self, problem: BindingProblem) -> None:
        if not self.reporting:  # another worker of this server reports it
            return
        log.warning("RBAC: %s (grants nothing until fixed)", problem)
        self.counts[problem.reason.value] = self.counts.get(problem.reason.value, 0) + 1
        if self.write_event is None:
            return
        event = warning_event(problem, controller=self.controller, instance=self.instance, now=self._moment())
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    def _moment(self) -> datetime.datetime:
        # A binding's problems are recorded together, and an Event's name is the binding's plus the
        # moment: each moment is later than the one before, so that no Event takes another's name.
        now = self.clock()
        if self._last_moment is not None and now <= self._last_moment:
            now = self._last_moment + datetime.timedelta(microseconds=1)
        self._last_moment = now
        return now

    async def run(self) -> None:
        """Writes queued Events forever (run it as a task)."""
        assert self.write_event is not None
        while True:
            event = await self._queue.get()
            try:
                await self.write_event(event)
            except Exception as exc:
                log.warning(
                    "could not record Event %s/%s: %s",
                    event["metadata"]["namespace"],
                    event["metadata"]["name"],
                    exc,
                )

    async def drain(self) -> None:
        """Writes what is queued now (tests; shutdown)."""
        assert self.write_event is not None
        while not self._queue.empty():
            event = self._queue.get_nowait()
            with contextlib.suppress(Exception):
                await self.write_event(event)

    def collect(self) -> Iterator[Metric]:
        """The counter, for the server's metrics registry."""
        counter = CounterMetricFamily(
            METRIC_NAME,
            "RoleBinding errors reported by the RBAC authorizer (part 7), by reason.",
            labels=("reason",),
        )
        for reason, count in sorted(self.counts.items()):
            counter.add_metric((reason,), count)
        yield counter

    def metrics_text(self) -> str:
        """The counter in Prometheus' text format."""
        return generate_latest(self).decode()
