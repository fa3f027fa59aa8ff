"""The exporter's parts on their own: which Events an export selects (its rules, a series'
heartbeats), the records and CloudEvents a sink receives, the status it writes, and how the server
dates a position to decide whether the history after it is still held."""

from __future__ import annotations

from typing import Any

from apiserver.registry.exportholds import ExportHolds, RevisionClock, position_age
from apiserver.resources.eventexport import EventExportSpec
from apiserver.storage.holds import HistoryHold
from coreio_export.progress import Progress
from coreio_export.records import cloud_event, record
from coreio_export.selection import Selection
from tests.support.api import event


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
    before = {"status": {"position": "3", "lastSuccessTime": "1970-01-01T00:00:50Z"}}
    assert position_age(before, clock, 200.0) == 150.0  # before the samples: its last success
    assert position_age({"status": {"position": "3"}}, clock, 200.0) == 100.0  # else the first sample


def test_an_export_past_its_max_lag_is_released_once() -> None:
    holds = ExportHolds(storage=None, root="/registry/x/", hold=HistoryHold())  # type: ignore[arg-type]
    for second, revision in ((0.0, 10), (1000.0, 20)):
        holds.clock.record(second, revision)
    export = {"metadata": {"uid": "u"}, "spec": {"maxLag": "1h"}, "status": {"position": "12"}}
    assert holds._held_position(export, 1100.0) == 12
    export["spec"]["maxLag"] = "1m"
    assert holds._held_position(export, 1100.0) == 0
    assert holds._held_position({"metadata": {}, "spec": {}, "status": {}}, 1100.0) == 0


def test_a_hold_limits_compaction_and_covers_watches_from_after_it() -> None:
    hold = HistoryHold()
    assert hold.compaction_target(100) == 100 and not hold.covers(50)
    hold.revision = 40
    assert hold.compaction_target(100) == 40 and hold.compaction_target(30) == 30
    assert hold.covers(40) and hold.covers(90) and not hold.covers(39)
