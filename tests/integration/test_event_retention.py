"""Event retention against a real coreio server process (TLS, SQLite storage).

Three thousand Events across several namespaces (Normal and Warning, backdated by ages up to five
hours, some of them series whose eventTime is old but whose last observation is recent) go through
one `collect_events` run; the test then lists what is left and compares it, name by name, with what
the policy says should be left, computed here from the ages the test gave the Events rather than by
the code under test. A second scenario updates Events between planning and deleting, to show that
the delete preconditions let a heartbeat (or a recreated namesake) survive.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from apiserver.cluster.connection import ClusterConnection, load_kubeconfig
from apiserver.machinery.objectmeta import format_micro_time
from apiserver.machinery.types import JSON
from apiserver_operator import metrics
from apiserver_operator.kube import ApiError, KubeClient, resource_path
from apiserver_operator.retention import (
    EVENTS_PATH,
    MAX_ERRORS,
    RetentionReport,
    Victim,
    collect_events,
    delete_victims,
    select_victims,
)
from apiserver_operator.spec import EventRetention
from tests.support.server import ServerProcess, free_port, start_server
from tests.support.waiting import async_wait_until

API_VERSION = "events.core.io/v1"
GC_NAMESPACES = [f"gc-{letter}" for letter in "abcde"]
EXEMPT_NAMESPACE = "gc-exempt"
HEARTBEAT_NAMESPACE = "gc-heartbeat"
EXEMPT_REASON = "KeptForAudit"
PER_NAMESPACE = 540  # 5 x 540 + 300 exempt = 3,000 Events
EXEMPT_EVENTS = 300
LIMIT = 150
MAX_AGE, WARNING_MAX_AGE = timedelta(hours=1), timedelta(hours=3)
POLICY = EventRetention(
    max_age="1h",
    warning_max_age="3h",
    max_per_namespace=LIMIT,
    # The heartbeat scenario's namespace is its own business, whichever test runs first.
    exempt_namespaces=[EXEMPT_NAMESPACE, HEARTBEAT_NAMESPACE],
    exempt_reasons=[EXEMPT_REASON],
)
CREATE_CONCURRENCY = 32


@dataclass(frozen=True)
class Spec:
    """One Event the test creates, with the facts the expectation is computed from."""

    namespace: str
    name: str
    age: timedelta  # since its last observation
    warning: bool
    series: bool
    exempt_reason: bool

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def body(self, now: datetime) -> JSON:
        observed = now - self.age
        obj: JSON = {
            "apiVersion": API_VERSION,
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.namespace},
            # A series began long ago: only series.lastObservedTime tells that it is still going.
            "eventTime": format_micro_time(observed - timedelta(hours=5) if self.series else observed),
            "action": "Sync",
            "reason": EXEMPT_REASON if self.exempt_reason else ("BackOff" if self.warning else "Synced"),
            "note": f"event {self.name}",
            "type": "Warning" if self.warning else "Normal",
            "reportingController": "example.com/controller",
            "reportingInstance": "controller-1",
            "regarding": {"kind": "Pod", "namespace": self.namespace, "name": "web-0", "apiVersion": "v1"},
        }
        if self.series:
            obj["series"] = {"count": 4, "lastObservedTime": format_micro_time(observed)}
        return obj


def make_specs() -> list[Spec]:
    specs = []
    for index, namespace in enumerate([*GC_NAMESPACES, EXEMPT_NAMESPACE]):
        for i in range(EXEMPT_EVENTS if namespace == EXEMPT_NAMESPACE else PER_NAMESPACE):
            # Distinct ages within a namespace (7919 is prime to 18000 seconds, five hours), spread
            # over the whole range, and half a second off every whole-hour limit.
            seconds = ((i + 97 * index) * 7919) % 18000 + 0.5
            specs.append(
                Spec(
                    namespace=namespace,
                    name=f"ev-{i:04d}",
                    age=timedelta(seconds=seconds),
                    warning=i % 4 == 1,
                    series=i % 5 == 2,
                    exempt_reason=i % 45 == 3,
                )
            )
    return specs


def exempt(spec: Spec) -> bool:
    return spec.namespace in POLICY.exempt_namespaces or spec.exempt_reason


def expected_victims(specs: list[Spec]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(too old, beyond the namespace's limit): the policy applied to the ages the test chose."""
    too_old = {s.key for s in specs if not exempt(s) and s.age > (WARNING_MAX_AGE if s.warning else MAX_AGE)}
    beyond: set[tuple[str, str]] = set()
    for namespace in GC_NAMESPACES:
        # Kept first: Warnings, then Normal Events, each the youngest first.
        young = sorted(
            (s for s in specs if s.namespace == namespace and not exempt(s) and s.key not in too_old),
            key=lambda s: (not s.warning, s.age),
        )
        beyond |= {s.key for s in young[LIMIT:]}
    return too_old, beyond


# ----------------------------------------------------------------------------- helpers


async def create_all(client: KubeClient, bodies: list[JSON]) -> None:
    pending = iter(bodies)

    async def worker() -> None:
        for body in pending:
            await client.create(resource_path(API_VERSION, "events", body["metadata"]["namespace"]), body)

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))


async def list_events(client: KubeClient) -> dict[tuple[str, str], JSON]:
    found: dict[tuple[str, str], JSON] = {}
    async for page in client.list_pages(EVENTS_PATH, {"limit": "500"}):
        for item in page.get("items") or []:
            found[(item["metadata"]["namespace"], item["metadata"]["name"])] = item
    return found


def gc_samples() -> dict[str, float]:
    def sample(name: str, labels: dict[str, str] | None = None) -> float:
        return metrics.REGISTRY.get_sample_value(name, labels or {}) or 0.0

    return {
        "age": sample("coreio_operator_events_deleted_total", {"rule": "age"}),
        "count": sample("coreio_operator_events_deleted_total", {"rule": "count"}),
        "success": sample("coreio_operator_event_gc_runs_total", {"result": "success"}),
        "error": sample("coreio_operator_event_gc_runs_total", {"result": "error"}),
        "durations": sample("coreio_operator_event_gc_duration_seconds_count"),
    }


@pytest.fixture(scope="module")
def gc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server(tmp_path_factory.mktemp("coreio-retention"))
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def client(gc_server: ServerProcess) -> AsyncIterator[KubeClient]:
    kube = KubeClient(load_kubeconfig(gc_server.kubeconfig))
    try:
        yield kube
    finally:
        await kube.close()


# ----------------------------------------------------------------------------- the big run


@dataclass
class Outcome:
    specs: list[Spec]
    before: dict[tuple[str, str], JSON]
    report: RetentionReport
    after: dict[tuple[str, str], JSON]
    metrics_delta: dict[str, float]
    second: RetentionReport
    setup_seconds: float


async def run_scenario(server: ServerProcess) -> Outcome:
    specs = make_specs()
    now = datetime.now(UTC)
    client = KubeClient(load_kubeconfig(server.kubeconfig))
    try:
        started = time.monotonic()
        await create_all(client, [spec.body(now) for spec in specs])
        setup_seconds = time.monotonic() - started
        before = await list_events(client)
        samples = gc_samples()
        report = await collect_events(client, POLICY, now)
        delta = {key: value - samples[key] for key, value in gc_samples().items()}
        after = await list_events(client)
        second = await collect_events(client, POLICY, now)
    finally:
        await client.close()
    return Outcome(specs, before, report, after, delta, second, setup_seconds)


@pytest.fixture(scope="module")
def outcome(gc_server: ServerProcess) -> Outcome:
    # A run of its own event loop: one collection run, shared by the plain tests below.
    result = asyncio.run(run_scenario(gc_server))
    print(
        f"\nevent retention: {len(result.specs)} Events created in {result.setup_seconds:.1f}s; "
        f"GC run examined {result.report.examined}, deleted {result.report.deleted} "
        f"({result.report.deleted_by_age} by age, {result.report.deleted_by_count} by count) "
        f"in {result.report.duration_seconds:.2f}s"
    )
    return result


def ours(events: dict[tuple[str, str], JSON]) -> set[tuple[str, str]]:
    return {key for key in events if key[0] != HEARTBEAT_NAMESPACE}


def test_exactly_the_expected_events_are_left(outcome: Outcome) -> None:
    too_old, beyond = expected_victims(outcome.specs)
    everything = {spec.key for spec in outcome.specs}
    assert ours(outcome.before) == everything
    assert ours(outcome.after) == everything - too_old - beyond


def test_report_counts_match(outcome: Outcome) -> None:
    too_old, beyond = expected_victims(outcome.specs)
    report = outcome.report
    assert report.examined == len(outcome.before)
    assert (report.deleted_by_age, report.deleted_by_count) == (len(too_old), len(beyond))
    assert (report.skipped, report.errors) == (0, 0)
    assert report.status()["deletedByAge"] == len(too_old)


def test_warnings_use_warning_max_age(outcome: Outcome) -> None:
    by_key = {spec.key: spec for spec in outcome.specs}
    left = [by_key[key] for key in ours(outcome.after) if not exempt(by_key[key])]
    assert all(spec.age <= MAX_AGE for spec in left if not spec.warning)
    assert all(spec.age <= WARNING_MAX_AGE for spec in left if spec.warning)
    # Warnings older than max_age, which a Normal Event of that age would not have outlived.
    assert any(spec.warning and spec.age > MAX_AGE for spec in left)


def test_series_are_judged_by_their_last_observation(outcome: Outcome) -> None:
    by_key = {spec.key: spec for spec in outcome.specs}
    left = [by_key[key] for key in ours(outcome.after)]
    # Their eventTime is five hours back, past every limit: only lastObservedTime kept them.
    assert any(spec.series and not exempt(spec) for spec in left)


def test_each_namespace_keeps_its_warnings_first_then_its_newest(outcome: Outcome) -> None:
    for namespace in GC_NAMESPACES:
        left = [s for s in outcome.specs if s.namespace == namespace and s.key in outcome.after]
        counted = [s for s in left if not exempt(s)]
        assert len(counted) == LIMIT, namespace
        gone_young = [
            s
            for s in outcome.specs
            if s.namespace == namespace
            and not exempt(s)
            and s.key not in outcome.after
            and s.age <= (WARNING_MAX_AGE if s.warning else MAX_AGE)
        ]
        assert gone_young, f"{namespace}: the count limit should have deleted some"
        # Normal Events go first: a Warning goes only once no Normal Event is kept.
        assert not ([s for s in gone_young if s.warning] and [s for s in counted if not s.warning])
        for warning in (False, True):
            kept = [s.age for s in counted if s.warning == warning]
            gone = [s.age for s in gone_young if s.warning == warning]
            assert not kept or not gone or max(kept) < min(gone), (namespace, warning)


def test_exempt_namespaces_and_reasons_are_untouched(outcome: Outcome) -> None:
    exempt_keys = {spec.key for spec in outcome.specs if exempt(spec)}
    assert exempt_keys <= set(outcome.after)
    for key in exempt_keys:
        assert (
            outcome.after[key]["metadata"]["resourceVersion"]
            == outcome.before[key]["metadata"]["resourceVersion"]
        )
    by_namespace = Counter(namespace for namespace, _ in ours(outcome.after))
    assert by_namespace[EXEMPT_NAMESPACE] == EXEMPT_EVENTS


def test_metrics_follow_the_run(outcome: Outcome) -> None:
    report = outcome.report
    assert outcome.metrics_delta == {
        "age": report.deleted_by_age,
        "count": report.deleted_by_count,
        "success": 1,
        "error": 0,
        "durations": 1,
    }
    assert b"coreio_operator_reconcile_total" in metrics.exposition()


def test_a_second_run_at_the_same_time_deletes_nothing(outcome: Outcome) -> None:
    second = outcome.second
    assert (second.deleted, second.skipped, second.errors) == (0, 0, 0)
    assert second.examined == len(outcome.after)


# ----------------------------------------------------------------------------- changes meanwhile


async def test_events_changed_after_planning_survive(client: KubeClient) -> None:
    now = datetime.now(UTC)
    policy = EventRetention(max_age="1h", exempt_namespaces=[*GC_NAMESPACES, EXEMPT_NAMESPACE])
    specs = [
        Spec(HEARTBEAT_NAMESPACE, f"hb-{i:02d}", timedelta(hours=2), False, True, False) for i in range(20)
    ]
    await create_all(client, [spec.body(now) for spec in specs])

    listed = list((await list_events(client)).values())
    victims, examined = select_victims(listed, policy, now), len(listed)
    ours_only = [victim for victim in victims if victim.namespace == HEARTBEAT_NAMESPACE]
    assert len(ours_only) == len(victims) == 20 and examined >= 20
    assert {victim.rule for victim in victims} == {"age"}

    beating, gone, recreated = ["hb-00", "hb-01", "hb-02"], "hb-03", "hb-04"
    for name in beating:
        # A series heartbeat: the reporter bumps the count and the last observation.
        path = resource_path(API_VERSION, "events", HEARTBEAT_NAMESPACE, name)
        await client.merge_patch(path, {"series": {"count": 5, "lastObservedTime": format_micro_time(now)}})
    await client.delete(resource_path(API_VERSION, "events", HEARTBEAT_NAMESPACE, gone))
    await client.delete(resource_path(API_VERSION, "events", HEARTBEAT_NAMESPACE, recreated))
    await create_all(client, [specs[4].body(now)])

    report = await delete_victims(client, victims)
    assert (report.deleted_by_age, report.deleted_by_count, report.skipped, report.errors) == (15, 0, 5, 0)
    left = {name for namespace, name in await list_events(client) if namespace == HEARTBEAT_NAMESPACE}
    assert left == {*beating, recreated}

    # The next run judges them anew: the heartbeats are recent now, the namesake is still old.
    victims = select_victims((await list_events(client)).values(), policy, now)
    assert [victim.name for victim in victims] == [recreated]


async def test_unreachable_server_is_an_error_run() -> None:
    connection = ClusterConnection(server=f"https://127.0.0.1:{free_port()}", ssl_context=False)
    unreachable = KubeClient(connection, timeout=5)
    samples = gc_samples()
    try:
        with pytest.raises(aiohttp.ClientError):
            await collect_events(unreachable, POLICY)
        victims = [Victim("ns", f"e-{i}", "uid", "1", "age") for i in range(MAX_ERRORS * 3)]
        report = await delete_victims(unreachable, victims, concurrency=4)
    finally:
        await unreachable.close()
    assert gc_samples()["error"] == samples["error"] + 1
    # It gives up after MAX_ERRORS failures (plus those already in flight) instead of trying them all.
    assert MAX_ERRORS <= report.errors < MAX_ERRORS + 4
    assert report.deleted == report.skipped == 0


# ----------------------------------------------------------------------------- past its snapshot


async def _refusal(kube: KubeClient, query: dict[str, str]) -> ApiError | None:
    """The error a list of gc-compacted Events with `query` is refused with; None if answered."""
    try:
        await kube.get(resource_path(API_VERSION, "events", "gc-compacted"), query)
    except ApiError as error:
        return error
    return None


async def test_a_run_longer_than_its_snapshot_goes_on(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The storage compacts while a run walks its pages (every second here; five minutes by
    default, which a run over hundreds of thousands of Events outlasts): the 410 on the next page
    carries a token to go on with, and the run uses it instead of failing after its work so far."""
    server = start_server(tmp_path_factory.mktemp("compacting"), ["--etcd-compaction-interval=1s"])
    kube = KubeClient(load_kubeconfig(server.kubeconfig))
    try:
        now = datetime.now(UTC)
        specs = [
            Spec("gc-compacted", f"c-{i:04d}", timedelta(hours=2), False, False, False) for i in range(300)
        ]
        await create_all(kube, [spec.body(now) for spec in specs])
        pages, expired = 0, False
        async for page in kube.list_pages(
            resource_path(API_VERSION, "events", "gc-compacted"), {"limit": "100"}
        ):
            pages += 1
            if pages == 1:
                # A write after the snapshot, then a compaction past it.
                await create_all(
                    kube, [Spec("gc-compacted", "late", timedelta(0), False, False, False).body(now)]
                )
                probe = {"limit": "100", "continue": str(page["metadata"]["continue"])}
                gone = await async_wait_until(
                    functools.partial(_refusal, kube, probe),
                    timeout=10,
                    message="a compaction past the snapshot",
                )
                expired = gone.status == 410
        assert expired and pages >= 3
        report = await collect_events(kube, EventRetention(max_age="1h"), now)
        assert report.deleted_by_age == 300 and report.errors == 0
    finally:
        await kube.close()
        server.stop()
