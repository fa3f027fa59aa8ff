"""The operator's Event retention over 300,000 Events, under the chart's memory limit (issue 22).

The Events are written straight into a stopped coreio's SQLite data directory (tests.support.seed:
each as the server's create path makes it, in about a minute where the API takes five); the real
server then starts on the directory (TLS, one worker as the operator runs it under the chart's
spec) and reads some back through the official Python client; then one run of the operator's
retention (`collect_events` with a KubeClient, as the operator's daemon calls it) goes through
them all in a process of its own, whose peak memory must stay under the operator's memory limit in
charts/coreio/values.yaml. The figures are printed, with or without -s; about 80 s on two idle cores.

The policy is the chart's: the CRD's defaults (maxAge 1h, maxDeletesPerRun 10,000, no cap per
namespace). 50 namespaces of 6,000 Events, a quarter of them Warnings, notes of 300 bytes, ages
spread over two hours; the 10,250 listed last (in the last two namespaces) are the ones older than
maxAge: more than a run may delete, so the run deletes 10,000 of them and stops, capped, on its last
page, having gone through all 300,000. Listed last, because a run deletes the due Events of a page
before it asks for the next, and a page continued after a write is read from SQLite rather than
the watch cache, where counting the keys left (remainingItemCount) takes up to a second at 300,000
Events: due Events all over the list would make 600 such pages, minutes of the server's time. No
Event's age lies within 15 minutes under maxAge, so the time between seeding and the run changes no
Event's verdict.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import config, dynamic
from kubernetes.client import ApiClient

from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.objectmeta import format_micro_time, parse_time
from apiserver.machinery.types import JSON
from apiserver.resources import EventKind
from apiserver_operator import retention
from tests.support.retention_run import (
    RunFigures,
    chart_memory_limit_mib,
    chart_server_args,
    chart_spec,
    run_in_process,
)
from tests.support.seed import FIELD_MANAGER, Seeded, seed
from tests.support.server import ServerProcess, start_server

pytestmark = pytest.mark.scale

API_VERSION = "events.core.io/v1"
EVENTS = 300_000
NAMESPACES = 50
SPREAD = timedelta(hours=2)
MARGIN = timedelta(minutes=15)
NOTE = "Back-off restarting failed container web in pod web-0: " + "x" * 244  # 300 bytes
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True)
class Layout:
    """The Events by position in the list's order (namespace, then name): the `due` listed last are
    older than `max_age`, the others younger than it by MARGIN at least."""

    count: int
    due: int
    max_age: timedelta

    def namespace(self, position: int) -> str:
        return f"scale-{position * NAMESPACES // self.count:02d}"

    def name(self, position: int) -> str:
        return f"ev-{position:06d}"

    def age(self, position: int) -> timedelta:
        spread = ((position * 7919) % 7200 + 0.5) / 7200  # in (0, 1), scattered
        if position < self.count - self.due:
            return (self.max_age - MARGIN) * spread
        return self.max_age + (SPREAD - self.max_age) * spread

    def positions(self, namespace: str) -> range:
        index = int(namespace.removeprefix("scale-"))
        return range(-(-index * self.count // NAMESPACES), -(-(index + 1) * self.count // NAMESPACES))


def chart_layout() -> Layout:
    """Half a page more due Events than the chart's maxDeletesPerRun, older than its maxAge."""
    policy = chart_spec().event_retention
    due = policy.max_deletes_per_run + retention.PAGE_SIZE // 2
    return Layout(EVENTS, due, timedelta(seconds=parse_go_duration(policy.max_age)))


def event_body(layout: Layout, now: datetime, position: int) -> JSON:
    """The create request's body of the Event at `position`, its age counted from `now`."""
    namespace, warning = layout.namespace(position), position % 4 == 1
    return {
        "apiVersion": API_VERSION,
        "kind": "Event",
        "metadata": {"name": layout.name(position), "namespace": namespace},
        "eventTime": format_micro_time(now - layout.age(position)),
        "reportingController": "example.com/scale",
        "reportingInstance": "scale-1",
        "action": "Sync",
        "reason": "BackOff" if warning else "Synced",
        "type": "Warning" if warning else "Normal",
        "regarding": {
            "kind": "Pod",
            "namespace": namespace,
            "name": f"web-{position % 7}",
            "apiVersion": "v1",
        },
        "note": NOTE,
    }


def expected_run(
    layout: Layout, now: datetime, run_time: datetime, cap: int, page: int = retention.PAGE_SIZE
) -> tuple[list[int], int]:
    """(positions deleted, Events examined) by a run at `run_time`: the due Events of each page go
    as the page comes, `cap` at most; the run stops after the page of the first due one past it."""
    due = [p for p in range(layout.count) if run_time - (now - layout.age(p)) > layout.max_age]
    if len(due) <= cap:
        return due, layout.count
    return due[:cap], min(layout.count, (due[cap] // page + 1) * page)


@dataclass
class Scale:
    layout: Layout
    now: datetime
    seeded: Seeded
    server: ServerProcess
    start_seconds: float

    @property
    def first_revision(self) -> int:
        return self.seeded.revision - self.seeded.count + 1


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scale]:
    layout, data_dir, now = chart_layout(), tmp_path_factory.mktemp("coreio-scale"), datetime.now(UTC)
    seeded = seed(data_dir, EventKind(), functools.partial(event_body, layout, now), layout.count)
    started = time.monotonic()
    server = start_server(data_dir, chart_server_args(), ready_timeout=180)
    try:
        yield Scale(layout, now, seeded, server, time.monotonic() - started)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def events(scale: Scale) -> Iterator[Any]:
    """The Event resource of the official Python client (kubernetes.dynamic)."""
    api_client: ApiClient = config.new_client_from_config(config_file=str(scale.server.kubeconfig))
    try:
        yield dynamic.DynamicClient(api_client).resources.get(api_version=API_VERSION, kind="Event")
    finally:
        api_client.close()


def list_namespace(events: Any, namespace: str) -> list[Any]:
    """Every Event of the namespace, a page at a time."""
    items: list[Any] = []
    query: dict[str, Any] = {"limit": retention.PAGE_SIZE}
    while True:
        page = events.get(namespace=namespace, **query)
        items += page.items
        if not page.metadata["continue"]:
            return items
        query["_continue"] = page.metadata["continue"]


def test_the_seeded_events_read_back_through_the_api(scale: Scale, events: Any) -> None:
    """What the seeding wrote reads back as a create would have made it: the body, the server's
    metadata, the revision of the create in its turn; a namespace lists in order, page by page."""
    layout, position = scale.layout, scale.layout.count - scale.layout.due
    got = events.get(namespace=layout.namespace(position), name=layout.name(position)).to_dict()
    body = event_body(layout, scale.now, position)
    assert {key: got[key] for key in body if key != "metadata"} == {
        key: value for key, value in body.items() if key != "metadata"
    }
    meta = got["metadata"]
    assert meta["resourceVersion"] == str(scale.first_revision + position)
    assert UID.fullmatch(meta["uid"])
    assert scale.now - timedelta(seconds=1) <= parse_time(meta["creationTimestamp"]) <= datetime.now(UTC)
    assert [(m["manager"], m["operation"]) for m in meta["managedFields"]] == [(FIELD_MANAGER, "Update")]

    positions = layout.positions(layout.namespace(0))
    listed = list_namespace(events, layout.namespace(0))
    assert [item.metadata.name for item in listed] == [layout.name(p) for p in positions]
    assert [item.metadata.resourceVersion for item in listed] == [
        str(scale.first_revision + p) for p in positions
    ]


def report_figures(scale: Scale, run: RunFigures, limit: float) -> str:
    report = run.report
    return (
        f"\nretention at scale: {scale.layout.count:,} Events in {NAMESPACES} namespaces\n"
        f"  seeded in      {scale.seeded.seconds:6.1f} s\n"
        f"  server ready   {scale.start_seconds:6.1f} s\n"
        f"  run            {report.duration_seconds:6.1f} s: lists {run.list_seconds:.1f} s,"
        f" deletes {run.delete_seconds:.1f} s (examined {report.examined:,}, deleted {report.deleted:,},"
        f" capped {report.capped})\n"
        f"  peak RSS       {run.peak_mib:6.1f} MiB (the chart's limit for the operator: {limit:.0f} MiB)"
    )


def test_a_run_over_300000_events_stays_under_the_charts_memory_limit(
    scale: Scale, events: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    policy, limit = chart_spec().event_retention, chart_memory_limit_mib()
    run = run_in_process(scale.server.kubeconfig, policy)
    with capsys.disabled():
        print(report_figures(scale, run, limit))
    assert run.peak_mib < limit
    report, cap = run.report, policy.max_deletes_per_run
    assert report.run_time - scale.now < MARGIN, "the run began too late for the Events' ages"
    deleted, examined = expected_run(scale.layout, scale.now, report.run_time, cap)
    assert (report.examined, report.deleted_by_age, report.capped) == (examined, cap, True)
    assert examined == scale.layout.count  # the run went through every Event
    assert (report.deleted_by_count, report.skipped, report.errors) == (0, 0, 0)
    assert_left(scale.layout, events, set(deleted))


def assert_left(layout: Layout, events: Any, deleted: set[int]) -> None:
    """The Events left are all but the `deleted`: name by name where any went, and in number."""
    for namespace in sorted({layout.namespace(p) for p in deleted}):
        left = [item.metadata.name for item in list_namespace(events, namespace)]
        assert left == [layout.name(p) for p in layout.positions(namespace) if p not in deleted]
    first = events.get(limit=1)
    assert len(first.items) + first.metadata.remainingItemCount == layout.count - len(deleted)
