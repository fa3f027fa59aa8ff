"""The pure half of Event retention: which Events a policy selects, and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apiserver.machinery.objectmeta import format_micro_time, format_time
from apiserver_operator.retention import RetentionReport, Victim, last_observed, select_victims
from apiserver_operator.spec import EventRetention

NOW = datetime(2030, 5, 17, 12, 0, 0, tzinfo=UTC)


def event(
    name: str, age: timedelta, *, namespace: str = "ns", type_: str = "Normal", reason: str = "Pulled"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "7"},
        "eventTime": format_micro_time(NOW - age),
        "type": type_,
        "reason": reason,
    }


def names(victims: list[Victim], rule: str | None = None) -> set[str]:
    return {victim.name for victim in victims if rule is None or victim.rule == rule}


def test_age_is_strictly_past_max_age() -> None:
    events = [
        event("old", timedelta(minutes=61)),
        event("edge", timedelta(hours=1)),
        event("new", timedelta()),
    ]
    victims = select_victims(events, EventRetention(max_age="1h"), NOW)
    assert victims == [Victim("ns", "old", "uid-old", "7", "age")]


def test_warnings_use_their_own_age_and_fall_back_to_max_age() -> None:
    events = [
        event("warning-2h", timedelta(hours=2), type_="Warning"),
        event("warning-4h", timedelta(hours=4), type_="Warning"),
        event("normal-2h", timedelta(hours=2)),
    ]
    assert names(select_victims(events, EventRetention(max_age="1h", warning_max_age="3h"), NOW)) == {
        "warning-4h",
        "normal-2h",
    }
    assert names(select_victims(events, EventRetention(max_age="1h"), NOW)) == {
        "warning-2h",
        "warning-4h",
        "normal-2h",
    }


def test_last_observation_prefers_series_then_event_time_then_legacy_then_creation() -> None:
    old, recent = NOW - timedelta(hours=5), NOW - timedelta(minutes=1)
    series = {
        "eventTime": format_micro_time(old),
        "series": {"count": 3, "lastObservedTime": format_micro_time(recent)},
    }
    legacy = {
        "deprecatedLastTimestamp": format_time(recent),
        "metadata": {"creationTimestamp": format_time(old)},
    }
    created = {"metadata": {"creationTimestamp": format_time(recent)}}
    assert last_observed(series) == recent
    assert last_observed({"eventTime": format_micro_time(recent)}) == recent
    assert last_observed(legacy) == recent.replace(microsecond=0)
    assert last_observed(created) == recent.replace(microsecond=0)
    assert last_observed({"eventTime": "not a time"}) is None


def test_a_series_heartbeat_keeps_an_old_event() -> None:
    beating = event("beating", timedelta(hours=5))
    beating["series"] = {"count": 9, "lastObservedTime": format_micro_time(NOW - timedelta(minutes=2))}
    assert select_victims([beating], EventRetention(max_age="1h"), NOW) == []


def test_an_event_without_a_readable_time_is_never_too_old() -> None:
    timeless = {"metadata": {"name": "timeless", "namespace": "ns"}, "eventTime": "garbage"}
    assert select_victims([timeless], EventRetention(max_age="0s"), NOW) == []


def test_count_limit_keeps_the_newest_per_namespace() -> None:
    events = [event(f"a-{minutes}", timedelta(minutes=minutes), namespace="a") for minutes in range(10)]
    events += [event(f"b-{minutes}", timedelta(minutes=minutes), namespace="b") for minutes in range(3)]
    events.append(event("a-expired", timedelta(hours=2), namespace="a"))
    victims = select_victims(events, EventRetention(max_age="1h", max_per_namespace=4), NOW)
    assert names(victims, "age") == {"a-expired"}
    # The expired one is not among the survivors, so it takes no place within the limit.
    assert names(victims, "count") == {f"a-{minutes}" for minutes in range(4, 10)}


def test_count_limit_takes_normal_events_before_warnings() -> None:
    """A Warning outlives every Normal Event of its namespace under the cap, however old it is
    (within its own age limit)."""
    events = [event(f"n-{minutes}", timedelta(minutes=minutes)) for minutes in range(1, 6)]
    events += [
        event(f"w-{minutes}", timedelta(minutes=30 + minutes), type_="Warning") for minutes in range(3)
    ]
    victims = select_victims(events, EventRetention(max_age="1h", max_per_namespace=4), NOW)
    assert names(victims, "count") == {"n-2", "n-3", "n-4", "n-5"}
    victims = select_victims(events, EventRetention(max_age="1h", max_per_namespace=2), NOW)
    assert names(victims, "count") == {f"n-{minutes}" for minutes in range(1, 6)} | {"w-2"}


def test_count_limit_zero_means_unlimited() -> None:
    events = [event(f"e-{i}", timedelta(seconds=i)) for i in range(50)]
    assert select_victims(events, EventRetention(max_age="1h", max_per_namespace=0), NOW) == []


def test_equal_times_break_ties_by_name() -> None:
    events = [event(name, timedelta(minutes=5)) for name in ("c", "a", "b")]
    victims = select_victims(events, EventRetention(max_per_namespace=1), NOW)
    assert names(victims, "count") == {"a", "b"}


def test_exempt_namespaces_and_reasons_are_untouched_and_not_counted() -> None:
    policy = EventRetention(
        max_age="1h", max_per_namespace=1, exempt_namespaces=["kube-system"], exempt_reasons=["Audit"]
    )
    events = [
        event("system-old", timedelta(days=3), namespace="kube-system"),
        event("system-new", timedelta(), namespace="kube-system"),
        event("audit-old", timedelta(days=3), reason="Audit"),
        event("audit-new", timedelta(), reason="Audit"),
        event("plain", timedelta(minutes=1)),
    ]
    assert select_victims(events, policy, NOW) == []


def test_events_being_deleted_are_left_alone() -> None:
    going = event("going", timedelta(days=1))
    going["metadata"]["deletionTimestamp"] = format_time(NOW)
    assert select_victims([going, event("kept", timedelta())], EventRetention(max_per_namespace=1), NOW) == []


def test_naive_now_is_taken_as_utc() -> None:
    victims = select_victims([event("old", timedelta(hours=2))], EventRetention(), NOW.replace(tzinfo=None))
    assert names(victims) == {"old"}


def test_victim_deletes_with_preconditions() -> None:
    victim = Victim("ns", "e1", "u-1", "42", "age")
    assert victim.path == "/apis/events.core.io/v1/namespaces/ns/events/e1"
    assert victim.delete_options() == {"preconditions": {"uid": "u-1", "resourceVersion": "42"}}


def test_report_status_is_camel_case_with_rfc3339_time() -> None:
    report = RetentionReport(
        examined=10,
        deleted_by_age=3,
        deleted_by_count=2,
        skipped=1,
        errors=0,
        duration_seconds=1.23456,
        run_time=NOW,
    )
    assert report.deleted == 5
    assert report.status() == {
        "lastRunTime": "2030-05-17T12:00:00Z",
        "examined": 10,
        "deletedByAge": 3,
        "deletedByCount": 2,
        "skipped": 1,
        "errors": 0,
        "capped": False,
        "durationSeconds": 1.235,
        "lastError": None,  # cleared, by the merge patch, after a failed run
    }
