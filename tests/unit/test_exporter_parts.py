"""The exporter's parts on their own: which Events an export selects (its rules, a series'
heartbeats), the records and CloudEvents a sink receives, the status it writes, and how the server
dates a position to decide whether the history after it is still held."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
import orjson
import pytest

from apiserver.registry.exportholds import ExportHolds, RevisionClock, position_age
from apiserver.resources.eventexport import EventExportSpec
from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import KeyValue, ListResult
from coreio_export.connection import ApiError, ExportError, transient
from coreio_export.metrics import ExportMetrics, serve
from coreio_export.progress import Progress
from coreio_export.reader import Gap, Item, Reader
from coreio_export.records import cloud_event, record
from coreio_export.selection import Selection
from tests.support.api import event
from tests.support.waiting import async_wait_until


def spec(**fields: Any) -> EventExportSpec:
    return EventExportSpec.model_validate({"sink": {"jsonLines": {"path": "-"}}} | fields)


def stored(name: str, ns: str = "shop", rv: int = 7, **fields: Any) -> dict[str, Any]:
    obj = event(name, ns, **fields)
    obj["metadata"] |= {"namespace": ns, "uid": f"uid-{name}", "resourceVersion": str(rv)}
    return obj


def test_an_export_selects_its_namespace_then_matches_then_drops() -> None:
    chosen = Selection(spec(match=[{"type": "Warning"}], drop=[{"reason": "^Back"}]), "shop")
    assert chosen.watched_namespace == "shop"
    assert chosen.wants("ADDED", stored("a", type="Warning", reason="Failed"))
    assert not chosen.wants("ADDED", stored("b", type="Normal", reason="Failed"))
    assert not chosen.wants("ADDED", stored("c", type="Warning", reason="BackOff"))
    assert not chosen.wants("ADDED", stored("d", "elsewhere", type="Warning", reason="Failed"))


def test_a_rule_matches_when_every_field_it_sets_matches() -> None:
    rule = {"regardingKind": "^Pod$", "regardingName": "web", "labels": {"team": "^a$"}}
    chosen = Selection(spec(namespaces=["*"], match=[rule]), "shop")
    assert chosen.watched_namespace == ""
    labelled = stored("a", "other")
    labelled["metadata"]["labels"] = {"team": "a"}
    assert chosen.wants("ADDED", labelled)
    assert not chosen.wants("ADDED", stored("b", "other"))  # no label
    labelled["regarding"] = {"kind": "Node", "name": "web"}
    assert not chosen.wants("ADDED", labelled)


def test_several_namespaces_are_watched_together_and_kept_to_those_listed() -> None:
    chosen = Selection(spec(namespaces=["a", "b"]), "a")
    assert chosen.watched_namespace == ""
    assert chosen.wants("ADDED", stored("x", "b")) and not chosen.wants("ADDED", stored("x", "c"))


def test_with_series_changes_a_heartbeat_is_not_exported_but_a_change_is() -> None:
    chosen = Selection(spec(series="Changes"), "shop")
    first = stored("a", series={"count": 2, "lastObservedTime": "2026-11-27T10:00:00.000000Z"})
    assert chosen.wants("ADDED", first)
    beat = stored("a", rv=8, series={"count": 3, "lastObservedTime": "2026-11-27T10:01:00.000000Z"})
    assert not chosen.wants("MODIFIED", beat)
    changed = stored(
        "a", rv=9, note="a new note", series={"count": 4, "lastObservedTime": "2026-11-27T10:02:00.000000Z"}
    )
    assert chosen.wants("MODIFIED", changed)
    assert Selection(spec(), "shop").wants("MODIFIED", beat)  # Every: each change


def test_a_record_carries_its_dedup_key_and_a_cloudevent_its_source() -> None:
    item = record("MODIFIED", stored("a", rv=42))
    assert (item["dedupKey"], item["type"], item["resourceVersion"]) == ("uid-a/42", "MODIFIED", "42")
    cloud = cloud_event(item)
    assert cloud["specversion"] == "1.0" and cloud["id"] == "uid-a/42"
    assert cloud["source"] == "/apis/events.core.io/v1/namespaces/shop/events/a"
    assert cloud["type"] == "io.core.events.v1.event.modified"
    assert cloud["subject"] == "Pod/web-0" and cloud["time"] == item["event"]["eventTime"]


def test_the_status_keeps_a_transition_time_until_the_status_changes() -> None:
    progress = Progress(generation=3, position=10, newest=25)
    progress.condition("Ready", True, "Delivering", "ok")
    since = progress.conditions["Ready"].since
    progress.conditions["Ready"].since = "2026-01-01T00:00:00Z"
    progress.condition("Ready", True, "Delivering", "still ok")
    assert progress.conditions["Ready"].since == "2026-01-01T00:00:00Z"
    progress.failure(5, "POST x: 503", 0.0)
    assert progress.conditions["Ready"].since >= since and progress.conditions["Ready"].status == "False"
    body = progress.body()["status"]
    assert body["position"] == "10" and body["lag"]["revisions"] == 15
    assert body["counts"] == {"sent": 0, "failed": 5, "batches": 0, "gaps": 0}
    assert body["observedGeneration"] == 3 and body["lastError"] == "POST x: 503"
    assert Progress.from_status(body, 3).conditions["Ready"].reason == "SinkFailed"


def test_a_position_is_dated_by_when_the_store_moved_past_it() -> None:
    clock = RevisionClock()
    for second, revision in ((100.0, 10), (105.0, 20), (110.0, 30)):
        clock.record(second, revision)
    at = {"status": {"position": "15"}}
    assert position_age(at, clock, 200.0) == 95.0  # revision 16 was first seen at 105
    assert position_age({"status": {"position": "30"}}, clock, 200.0) == 0.0  # not moved past yet
    # Before the samples (a restart): dated by the first sample, whatever its last success says.
    before = {"status": {"position": "3", "lastSuccessTime": "1970-01-01T00:00:50Z"}}
    assert position_age(before, clock, 200.0) == 100.0


class FakeStorageForUnitTests:
    """A fake of the storage for these unit tests only: its current revision, and the exports it
    lists."""

    def __init__(self, revision: int, exports: list[dict[str, Any]]) -> None:
        self.revision = revision
        self.exports = exports

    async def current_revision(self) -> int:
        return self.revision

    async def list(self, prefix: str, **_: Any) -> ListResult:
        items = [KeyValue(f"{prefix}{i}", orjson.dumps(e), 1, 1) for i, e in enumerate(self.exports)]
        return ListResult(items, self.revision, False, 0)


def held_export(uid: str, position: int, **spec: Any) -> dict[str, Any]:
    meta = {"uid": uid, "namespace": "shop", "name": uid}
    return {"metadata": meta, "spec": spec, "status": {"position": str(position)}}


async def test_the_hold_is_the_lowest_position_within_its_bounds_and_a_release_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage = FakeStorageForUnitTests(10, [])
    hold = HistoryHold()
    holds = ExportHolds(storage, "/registry/x/", hold)  # type: ignore[arg-type]
    await holds.refresh(0.0)  # the store at revision 10 from second 0, past 12 from second 5
    storage.revision = 13
    await holds.refresh(5.0)
    storage.revision = 20
    storage.exports = [held_export("w", 12, maxLag="1h"), held_export("v", 15), held_export("new", 0)]
    await holds.refresh(1100.0)
    assert hold.revision == 12  # the lowest position held; an export with no position holds nothing
    storage.exports[0]["spec"]["maxLag"] = "1m"  # 12 was passed at second 5: 1,095 s behind
    await holds.refresh(1100.0)
    await holds.refresh(1101.0)
    assert hold.revision == 15
    storage.revision = 1016  # 1,001 revisions past 15
    storage.exports[1]["spec"]["maxLagRevisions"] = 1000
    await holds.refresh(1102.0)
    assert hold.revision == 0
    released = [r.getMessage() for r in caplog.records if "no longer kept" in r.getMessage()]
    assert released == [
        "EventExport shop/w is 1095s behind, past its maxLag of 1m: the history after its position 12 "
        "is no longer kept",
        "EventExport shop/v is 1001 revisions behind, past its maxLagRevisions of 1000: the history "
        "after its position 15 is no longer kept",
    ]
    storage.exports = [{"metadata": {}, "spec": {}, "status": {"position": "x"}}, held_export("u", 1015)]
    await holds.refresh(1103.0)
    assert hold.revision == 1015  # a malformed position holds nothing and stops nothing


def test_a_hold_limits_compaction_and_covers_watches_from_after_it() -> None:
    hold = HistoryHold()
    assert hold.compaction_target(100) == 100 and not hold.covers(50)
    assert hold.next_compaction(0, 0) == 0 and hold.next_compaction(100, 0) == 100
    hold.revision = 40
    assert hold.compaction_target(100) == 40 and hold.compaction_target(30) == 30
    assert hold.next_compaction(100, 0) == 40 and hold.next_compaction(100, 40) == 0
    assert hold.covers(40) and hold.covers(90) and not hold.covers(39)


class FakeWatchApiForUnitTests:
    """A fake of the exporter's Api for these unit tests only: each watch answers the next script
    (a list of watch events, then an exception to raise or None), each list the pages given."""

    def __init__(
        self, scripts: list[tuple[list[dict[str, Any]], Exception | None]], pages: list[dict[str, Any]]
    ):
        self.scripts = scripts
        self.pages = pages
        self.watched: list[str] = []

    async def watch(self, path: str) -> AsyncGenerator[dict[str, Any], None]:
        self.watched.append(path)
        if not self.scripts:
            await asyncio.Event().wait()  # a watch that stays open
        changes, failure = self.scripts.pop(0)
        for change in changes:
            yield change
        if failure is not None:
            raise failure

    async def get(self, path: str) -> dict[str, Any]:
        return self.pages.pop(0)


def change(kind: str, name: str, rv: int, ns: str = "shop") -> dict[str, Any]:
    return {"type": kind, "object": stored(name, ns, rv)}


async def read(
    api: FakeWatchApiForUnitTests, after: int, items: int, watches: int
) -> tuple[list[Item | Gap], Reader]:
    """`items` read from a reader over `api`, once it has started `watches` watches."""
    queue: asyncio.Queue[Item | Gap] = asyncio.Queue()
    reader = Reader(api, Selection(spec(), "shop"), queue)  # type: ignore[arg-type]
    task = asyncio.create_task(reader.run(after))
    got = [await asyncio.wait_for(queue.get(), 5) for _ in range(items)]
    await async_wait_until(lambda: len(api.watched) >= watches, timeout=5, message=f"{watches} watches")
    task.cancel()
    return got, reader


async def test_a_watch_broken_midway_goes_on_from_the_last_revision_queued() -> None:
    broken = ExportError("the watch of ... ended: ServerDisconnectedError")
    api = FakeWatchApiForUnitTests([([change("ADDED", "a", 11), change("ADDED", "b", 12)], broken)], [])
    got, reader = await read(api, 10, 2, watches=2)
    assert [(i.revision, i.change) for i in got if isinstance(i, Item)] == [(11, "ADDED"), (12, "ADDED")]
    assert "resourceVersion=10&" in api.watched[0] and "resourceVersion=12&" in api.watched[1]
    assert reader.cursor == 12


async def test_gone_at_the_start_relists_in_revision_order_then_reports_the_gap() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    later = {
        "metadata": {"resourceVersion": "30"},
        "items": [stored("b", rv=25), stored("a", rv=21), stored("old", rv=5)],
    }
    api = FakeWatchApiForUnitTests([([gone], None)], [later])
    got, reader = await read(api, 10, 3, watches=2)
    assert [i.revision for i in got if isinstance(i, Item)] == [21, 25]  # not the one before 10
    assert got[2] == Gap(after=10, listed_at=30)
    assert reader.cursor == 30


async def test_gone_midway_watches_again_from_the_cursor_without_a_relist() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    api = FakeWatchApiForUnitTests(
        [([change("ADDED", "a", 11), gone], None), ([change("MODIFIED", "a", 14)], None)], []
    )
    got, _ = await read(api, 10, 2, watches=2)
    assert [(i.revision, i.change) for i in got if isinstance(i, Item)] == [(11, "ADDED"), (14, "MODIFIED")]
    assert "resourceVersion=11&" in api.watched[1]


async def test_a_refusal_ends_the_reading() -> None:
    forbidden = ApiError(403, {"message": "events is forbidden", "reason": "Forbidden"})
    api = FakeWatchApiForUnitTests([([], forbidden)], [])
    queue: asyncio.Queue[Item | Gap] = asyncio.Queue()
    reader = Reader(api, Selection(spec(), "shop"), queue)  # type: ignore[arg-type]
    with pytest.raises(ApiError):
        await asyncio.wait_for(reader.run(10), 5)
    assert transient(ApiError(503, {})) and transient(ApiError(410, {})) and not transient(forbidden)


async def test_metrics_are_served_and_a_taken_port_is_one_error() -> None:
    metrics = ExportMetrics("shop", "w")
    metrics.sink("jsonLines")
    metrics.delivered(3, 1700000000.0)
    runner = await serve(metrics, "127.0.0.1:0")
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as got:
            text = await got.text()
        labels = 'export="w",export_namespace="shop",sink="jsonLines"'
        assert f"coreio_export_records_sent_total{{{labels}}} 3.0" in text
        assert f"coreio_export_gaps_total{{{labels}}} 0.0" in text  # every series from the start
        with pytest.raises(ExportError, match=f"cannot serve metrics on 127.0.0.1:{port}: "):
            await serve(metrics, f"127.0.0.1:{port}")
    finally:
        await runner.cleanup()
