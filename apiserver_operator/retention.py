"""Event retention: the operator's garbage collection of Events (events.core.io/v1).

coreio's storage TTL (`--event-ttl`) drops an Event a fixed time after its last write, the same for
every Event. An Installation asks for more (`spec.eventRetention`): Warnings kept longer than the
rest, a cap per namespace so that one noisy controller cannot crowd out the others (Normal Events
go before Warnings), namespaces and reasons that are never collected, and a cap of deletes per run.
`collect_events` is a run; `select_victims` is the same decision over a list, for reading and tests.

A run holds a page of Events at a time, never the cluster's: one pass over every namespace deletes
the Events too old as each page comes and counts the rest per namespace; then each namespace over
its cap is listed twice, once to find the newest `maxPerNamespace` (a heap of that size) and once
to delete those ranked below them. Its memory follows the policy (the cap, the page size and the
number of namespaces), not the number of Events.

Each delete carries the listed uid and resourceVersion as preconditions. An Event that its reporter
updated after the list (a series heartbeat moves `series.lastObservedTime` forward) is then answered
409 and survives; the next run judges it by its new time. Such a 409, and a 404 for an Event gone
meanwhile, count as "skipped", not as errors.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

import aiohttp

from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.objectmeta import format_time
from apiserver.machinery.printing import parse_time
from apiserver.machinery.types import JSON
from apiserver_operator import metrics
from apiserver_operator.kube import ApiError, KubeClient, resource_path
from apiserver_operator.spec import EventRetention

Rule = Literal["age", "count"]

LOG = logging.getLogger("coreio.operator.retention")
EVENTS_API_VERSION = "events.core.io/v1"
EVENTS_PATH = resource_path(EVENTS_API_VERSION, "events")
PAGE_SIZE = 500
DEFAULT_CONCURRENCY = 16
# A run stops deleting after this many failures: the API server is then most likely down or refusing,
# and trying the rest only delays the report. The next run finds the same victims again.
MAX_ERRORS = 50


@dataclass(frozen=True)
class Victim:
    """An Event to delete, as it was listed, and the rule that selected it."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    rule: Rule

    @property
    def path(self) -> str:
        return resource_path(EVENTS_API_VERSION, "events", self.namespace, self.name)

    def delete_options(self) -> JSON:
        # Only the Event as listed may go: a newer version (or a namesake) answers 409.
        return {"preconditions": {"uid": self.uid, "resourceVersion": self.resource_version}}


@dataclass
class RetentionReport:
    """What one run did. `skipped`: selected, but changed or gone by the time of its delete."""

    examined: int = 0
    deleted_by_age: int = 0
    deleted_by_count: int = 0
    skipped: int = 0
    errors: int = 0
    # The run stopped at maxDeletesPerRun with Events left to delete (the next run goes on).
    capped: bool = False
    duration_seconds: float = 0.0
    # The run's reference time: ages were measured from it.
    run_time: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def deleted(self) -> int:
        return self.deleted_by_age + self.deleted_by_count

    @property
    def attempted(self) -> int:
        return self.deleted + self.skipped + self.errors

    def status(self) -> JSON:
        """The Installation's `status.eventRetention`."""
        return {
            "lastRunTime": format_time(self.run_time),
            "examined": self.examined,
            "deletedByAge": self.deleted_by_age,
            "deletedByCount": self.deleted_by_count,
            "skipped": self.skipped,
            "errors": self.errors,
            "capped": self.capped,
            "durationSeconds": round(self.duration_seconds, 3),
            "lastError": None,  # a merge patch: a successful run clears the last failure's message
        }


# ----------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class _Limits:
    """The policy with its durations parsed and its lists made sets, once per run."""

    max_age: timedelta
    warning_max_age: timedelta
    max_per_namespace: int
    max_deletes: int
    exempt_namespaces: frozenset[str]
    exempt_reasons: frozenset[str]

    @classmethod
    def of(cls, policy: EventRetention) -> _Limits:
        max_age = timedelta(seconds=parse_go_duration(policy.max_age))
        warning = policy.warning_max_age
        return cls(
            max_age=max_age,
            warning_max_age=timedelta(seconds=parse_go_duration(warning)) if warning else max_age,
            max_per_namespace=policy.max_per_namespace,
            max_deletes=policy.max_deletes_per_run,
            exempt_namespaces=frozenset(policy.exempt_namespaces),
            exempt_reasons=frozenset(policy.exempt_reasons),
        )


@dataclass(frozen=True)
class _Entry:
    """What selection needs of one Event: a few fields, not the whole object, so that a run over a
    large cluster holds little more than its list of names."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    observed: datetime
    warning: bool

    def victim(self, rule: Rule) -> Victim:
        return Victim(self.namespace, self.name, self.uid, self.resource_version, rule)

    def rank(self) -> tuple[bool, datetime, str]:
        """Higher is kept longer under the count cap: Warnings above Normal Events, then newer
        above older, then by name (so that two runs over the same Events choose the same)."""
        return (self.warning, self.observed, self.name)

    def too_old(self, limits: _Limits, now: datetime) -> bool:
        return now - self.observed > (limits.warning_max_age if self.warning else limits.max_age)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def last_observed(event: JSON) -> datetime | None:
    """When the Event was last seen: its series' last observation, else its eventTime, else the
    core API's lastTimestamp, else its creation."""
    series = event.get("series")
    metadata = event.get("metadata")
    for value in (
        series.get("lastObservedTime") if isinstance(series, dict) else None,
        event.get("eventTime"),
        event.get("deprecatedLastTimestamp"),
        metadata.get("creationTimestamp") if isinstance(metadata, dict) else None,
    ):
        if (moment := parse_time(value)) is not None:
            return moment
    return None


def _project(event: JSON, limits: _Limits, now: datetime) -> _Entry | None:
    """The Event's entry, or None when retention leaves it alone (exempt, or already going)."""
    metadata = event.get("metadata")
    if not isinstance(metadata, dict):
        return None
    namespace = str(metadata.get("namespace") or "")
    if namespace in limits.exempt_namespaces or str(event.get("reason") or "") in limits.exempt_reasons:
        return None
    if metadata.get("deletionTimestamp"):
        # Deleted already, held by a finalizer: neither a victim again nor a survivor to count.
        return None
    return _Entry(
        namespace=namespace,
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        resource_version=str(metadata.get("resourceVersion") or ""),
        # An Event without a readable time counts as just seen: never wrongly taken for old, and the
        # last to go under the count limit.
        observed=last_observed(event) or now,
        warning=event.get("type") == "Warning",
    )


def _select(entries: Iterable[_Entry], limits: _Limits, now: datetime) -> list[Victim]:
    victims: list[Victim] = []
    survivors: dict[str, list[_Entry]] = defaultdict(list)
    for entry in entries:
        if entry.too_old(limits, now):
            victims.append(entry.victim("age"))
        else:
            survivors[entry.namespace].append(entry)
    if limits.max_per_namespace > 0:
        for kept in survivors.values():
            ranked = sorted(kept, key=_Entry.rank, reverse=True)
            victims += [entry.victim("count") for entry in ranked[limits.max_per_namespace :]]
    return victims


def select_victims(events: Iterable[JSON], policy: EventRetention, now: datetime) -> list[Victim]:
    """The Events (as listed) that `policy` deletes at `now`: too old first, then, per namespace,
    those ranked below the `max_per_namespace` kept (`_Entry.rank`). Exempt namespaces and reasons
    are never chosen. `collect_events` decides the same, a page at a time."""
    limits = _Limits.of(policy)
    now = _utc(now)
    entries = (_project(event, limits, now) for event in events)
    return _select((entry for entry in entries if entry is not None), limits, now)


# ----------------------------------------------------------------------------- the run


async def _delete_one(client: KubeClient, victim: Victim, report: RetentionReport) -> None:
    try:
        deleted = await client.delete(victim.path, victim.delete_options())
    except ApiError as exc:
        if exc.status != 409:
            report.errors += 1
            LOG.warning("deleting Event %s/%s: %s", victim.namespace, victim.name, exc)
            return
        deleted = False  # changed since it was listed (a heartbeat) or recreated: it stays
    except (aiohttp.ClientError, TimeoutError) as exc:
        report.errors += 1
        LOG.warning("deleting Event %s/%s: %r", victim.namespace, victim.name, exc)
        return
    if not deleted:
        report.skipped += 1
    elif victim.rule == "age":
        report.deleted_by_age += 1
    else:
        report.deleted_by_count += 1


async def _delete_into(
    client: KubeClient, victims: Sequence[Victim], report: RetentionReport, concurrency: int
) -> None:
    pending = iter(victims)

    async def worker() -> None:
        # The workers share one iterator: each takes the next victim once its delete is answered,
        # which bounds the deletes in flight without a task (or a semaphore wait) per victim.
        for victim in pending:
            if report.errors >= MAX_ERRORS:
                return
            await _delete_one(client, victim, report)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(victims))))))


async def delete_victims(
    client: KubeClient, victims: Sequence[Victim], concurrency: int = DEFAULT_CONCURRENCY
) -> RetentionReport:
    """Deletes the victims, at most `concurrency` at once, each only if unchanged since listed."""
    started = time.monotonic()
    report = RetentionReport()
    await _delete_into(client, victims, report, concurrency)
    report.duration_seconds = time.monotonic() - started
    return report


class _Run:
    """One run's state: the policy, its reference time, what it did, and its deletes (capped)."""

    def __init__(self, client: KubeClient, policy: EventRetention, now: datetime, concurrency: int) -> None:
        self.client, self.limits, self.now = client, _Limits.of(policy), now
        self.report = RetentionReport(run_time=now)
        self.concurrency = concurrency

    @property
    def stopped(self) -> bool:
        return self.report.capped or self.report.errors >= MAX_ERRORS

    def entries(self, page: JSON) -> list[_Entry]:
        items = page.get("items") or []
        projected = (_project(item, self.limits, self.now) for item in items if isinstance(item, dict))
        return [entry for entry in projected if entry is not None]

    async def delete(self, victims: Sequence[Victim]) -> None:
        left = self.limits.max_deletes - self.report.attempted
        if len(victims) > left:
            victims, self.report.capped = victims[: max(0, left)], True
        await _delete_into(self.client, victims, self.report, self.concurrency)

    async def pages(self, namespace: str = "") -> AsyncIterator[JSON]:
        path = resource_path(EVENTS_API_VERSION, "events", namespace) if namespace else EVENTS_PATH
        async for page in self.client.list_pages(path, {"limit": str(PAGE_SIZE)}):
            yield page
            if self.stopped:
                return


async def _age_pass(run: _Run) -> Counter[str]:
    """Every Event, a page at a time: the too old deleted as their page comes, the others counted
    per namespace."""
    survivors: Counter[str] = Counter()
    async for page in run.pages():
        run.report.examined += len(page.get("items") or [])
        victims = []
        for entry in run.entries(page):
            if entry.too_old(run.limits, run.now):
                victims.append(entry.victim("age"))
            else:
                survivors[entry.namespace] += 1
        await run.delete(victims)
    return survivors


async def _cutoff(run: _Run, namespace: str) -> tuple[bool, datetime, str] | None:
    """The rank of the last Event the namespace keeps under its cap (the cap's newest, held in a
    heap of the cap's size); None when it holds no more than that."""
    limit = run.limits.max_per_namespace
    kept: list[tuple[bool, datetime, str]] = []
    async for page in run.pages(namespace):
        for entry in run.entries(page):
            if entry.too_old(run.limits, run.now):
                continue
            if len(kept) < limit:
                heapq.heappush(kept, entry.rank())
            elif entry.rank() > kept[0]:
                heapq.heapreplace(kept, entry.rank())
    return kept[0] if len(kept) == limit else None


async def _count_pass(run: _Run, namespace: str) -> None:
    """Deletes the namespace's Events ranked below its cap's newest (and any grown too old since)."""
    cutoff = await _cutoff(run, namespace)
    if cutoff is None:
        return
    async for page in run.pages(namespace):
        victims = []
        for entry in run.entries(page):
            if entry.too_old(run.limits, run.now):
                victims.append(entry.victim("age"))
            elif entry.rank() < cutoff:
                victims.append(entry.victim("count"))
        await run.delete(victims)


def _record(report: RetentionReport) -> None:
    metrics.EVENTS_DELETED.labels(rule="age").inc(report.deleted_by_age)
    metrics.EVENTS_DELETED.labels(rule="count").inc(report.deleted_by_count)
    metrics.EVENTS_SKIPPED.inc(report.skipped)
    metrics.EVENT_DELETE_ERRORS.inc(report.errors)
    metrics.EVENT_GC_RUNS.labels(result="error" if report.errors else "success").inc()
    metrics.EVENT_GC_DURATION.observe(report.duration_seconds)


async def collect_events(
    client: KubeClient,
    policy: EventRetention,
    now: datetime | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> RetentionReport:
    """One garbage-collection run (see the module's docstring), with its metrics and a log line. A
    run whose list fails counts as an error run and raises (the next run tries again); failed
    deletes do not raise, they are counted in the report and make the run an error run."""
    now = _utc(now) if now is not None else datetime.now(UTC)
    started = time.monotonic()
    run = _Run(client, policy, now, concurrency)
    try:
        survivors = await _age_pass(run)
        if run.limits.max_per_namespace > 0:
            for namespace in sorted(survivors):
                if survivors[namespace] > run.limits.max_per_namespace and not run.stopped:
                    await _count_pass(run, namespace)
    except Exception:
        metrics.EVENT_GC_RUNS.labels(result="error").inc()
        metrics.EVENT_GC_DURATION.observe(time.monotonic() - started)
        raise
    report = replace(run.report, duration_seconds=time.monotonic() - started)
    _record(report)
    LOG.info(
        "event retention: examined %d, deleted %d (%d by age, %d by count), skipped %d, errors %d%s,"
        " in %.2fs",
        report.examined,
        report.deleted,
        report.deleted_by_age,
        report.deleted_by_count,
        report.skipped,
        report.errors,
        " (capped)" if report.capped else "",
        report.duration_seconds,
    )
    return report
