"""Server-side printing: columns and cells of each kind, ages, the Table and PartialObjectMetadata
conversions, Accept negotiation and gzip, as kube-apiserver produces them."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from apiserver.http import table
from apiserver.http.responses import (
    GZIP_THRESHOLD_BYTES,
    RESOURCE_KIND_KEY,
    negotiate,
    negotiate_stream,
    object_response,
    status_response,
)
from apiserver.machinery import errors
from apiserver.machinery.printing import human_duration, since
from apiserver.machinery.types import JSON
from apiserver.resources import EventKind, RoleBindingKind

SECOND = 10**9
MILLISECOND = 10**6
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
YEAR = 365 * DAY
NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
RB = RoleBindingKind()
EV = EventKind()
TABLE_V1 = "application/json;as=Table;v=v1;g=meta.k8s.io"
TABLE_V1BETA1 = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
KUBECTL_ACCEPT = f"{TABLE_V1},{TABLE_V1BETA1},application/json"


def ago(delta: timedelta, *, micro: bool = False) -> str:
    when = NOW - delta
    if micro:
        return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def rolebinding(name: str = "readers", **extra: Any) -> JSON:
    obj: JSON = {
        "kind": "RoleBinding",
        "apiVersion": "rbac.authorization.core.io/v1",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": "u-1",
            "resourceVersion": "17",
            "creationTimestamp": ago(timedelta(minutes=5)),
            "labels": {"app": "demo"},
        },
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.core.io", "name": "alice"}],
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
    }
    obj.update(extra)
    return obj


def event(**extra: Any) -> JSON:
    obj: JSON = {
        "kind": "Event",
        "apiVersion": "events.core.io/v1",
        "metadata": {
            "name": "web-0.1",
            "namespace": "team-a",
            "resourceVersion": "21",
            "creationTimestamp": ago(timedelta(minutes=1)),
        },
        "eventTime": ago(timedelta(minutes=3), micro=True),
        "reportingController": "example.com/controller",
        "reportingInstance": "controller-1",
        "action": "Started",
        "reason": "Started",
        "regarding": {"kind": "Pod", "namespace": "team-a", "name": "web-0", "apiVersion": "v1"},
        "note": "  container started\n",
        "type": "Normal",
    }
    obj.update(extra)
    return obj


def listing(kind: str, items: list[JSON], **meta: Any) -> JSON:
    return {"kind": kind, "apiVersion": "x/v1", "metadata": {"resourceVersion": "30", **meta}, "items": items}


# ----------------------------------------------------------------------------- HumanDuration


@pytest.mark.parametrize(
    ("nanoseconds", "expected"),
    [
        # duration_test.go TestHumanDuration
        (SECOND, "1s"),
        (70 * SECOND, "70s"),
        (190 * SECOND, "3m10s"),
        (70 * MINUTE, "70m"),
        (47 * HOUR, "47h"),
        (49 * HOUR, "2d1h"),
        ((8 * 24 + 2) * HOUR, "8d"),
        (367 * DAY, "367d"),
        (2 * YEAR + 25 * HOUR, "2y1d"),
        (8 * YEAR + 2 * HOUR, "8y"),
        # TestHumanDurationBoundaries
        (-2 * SECOND, "<invalid>"),
        (-2 * SECOND + 1, "0s"),
        (0, "0s"),
        (SECOND - MILLISECOND, "0s"),
        (2 * MINUTE - MILLISECOND, "119s"),
        (2 * MINUTE, "2m"),
        (2 * MINUTE + SECOND, "2m1s"),
        (10 * MINUTE - MILLISECOND, "9m59s"),
        (10 * MINUTE, "10m"),
        (10 * MINUTE + SECOND, "10m"),
        (3 * HOUR - MILLISECOND, "179m"),
        (3 * HOUR, "3h"),
        (3 * HOUR + MINUTE, "3h1m"),
        (8 * HOUR - MILLISECOND, "7h59m"),
        (8 * HOUR, "8h"),
        (8 * HOUR + 59 * MINUTE, "8h"),
        (2 * DAY - MILLISECOND, "47h"),
        (2 * DAY, "2d"),
        (2 * DAY + HOUR, "2d1h"),
        (8 * DAY - MILLISECOND, "7d23h"),
        (8 * DAY, "8d"),
        (8 * DAY + 23 * HOUR, "8d"),
        (2 * YEAR - MILLISECOND, "729d"),
        (2 * YEAR, "2y"),
        (2 * YEAR + 23 * HOUR, "2y"),
        (2 * YEAR + 23 * HOUR + 59 * MINUTE, "2y"),
        (2 * YEAR + DAY - MILLISECOND, "2y"),
        (2 * YEAR + DAY, "2y1d"),
        (3 * YEAR, "3y"),
        (4 * YEAR, "4y"),
        (5 * YEAR, "5y"),
        (6 * YEAR, "6y"),
        (7 * YEAR, "7y"),
        (8 * YEAR - MILLISECOND, "7y364d"),
        (8 * YEAR, "8y"),
        (8 * YEAR + 364 * DAY, "8y"),
        (9 * YEAR, "9y"),
    ],
)
def test_human_duration(nanoseconds: int, expected: str) -> None:
    assert human_duration(nanoseconds) == expected


def test_since_unset_and_zero_times_are_unknown() -> None:
    assert since(None, NOW) == "<unknown>"
    assert since("", NOW) == "<unknown>"
    assert since("0001-01-01T00:00:00Z", NOW) == "<unknown>"
    assert since(ago(timedelta(seconds=90)), NOW) == "90s"
    assert since(ago(timedelta(hours=-1)), NOW) == "<invalid>"  # in the future


# ----------------------------------------------------------------------------- RoleBinding


def test_rolebinding_columns() -> None:
    columns = [c.definition() for c in RB.table_columns]
    assert [(c["name"], c["type"], c["format"], c["priority"]) for c in columns] == [
        ("Name", "string", "name", 0),
        ("Role", "string", "", 0),
        ("Age", "string", "", 0),
        ("Users", "string", "", 1),
        ("Groups", "string", "", 1),
        ("ServiceAccounts", "string", "", 1),
    ]
    assert list(columns[0]) == ["name", "type", "format", "description", "priority"]
    assert columns[1]["description"].startswith("RoleRef can reference a Role")
    assert columns[3]["description"] == "Users in the roleBinding"


def test_rolebinding_cells_join_subjects_by_kind() -> None:
    subjects = [
        {"kind": "User", "name": "alice"},
        {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"},
        {"kind": "Group", "name": "devs"},
        {"kind": "User", "name": "bob"},
        {"kind": "Group", "name": "ops"},
        {"kind": "ServiceAccount", "name": "deployer", "namespace": "team-a"},
    ]
    cells = RB.table_row(rolebinding(subjects=subjects), NOW)
    assert cells == [
        "readers",
        "ClusterRole/view",
        "5m",
        "alice, bob",
        "devs, ops",
        "ci/bot, team-a/deployer",
    ]


def test_rolebinding_cells_without_subjects() -> None:
    obj = rolebinding(roleRef={"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "edit"})
    del obj["subjects"]
    assert RB.table_row(obj, NOW) == ["readers", "Role/edit", "5m", "", "", ""]


# ----------------------------------------------------------------------------- Event


def test_event_columns() -> None:
    columns = [(c.name, c.priority, c.format) for c in EV.table_columns]
    assert columns == [
        ("Last Seen", 0, ""),
        ("Type", 0, ""),
        ("Reason", 0, ""),
        ("Object", 0, ""),
        ("Subobject", 1, ""),
        ("Source", 1, ""),
        ("Message", 0, ""),
        ("First Seen", 1, ""),
        ("Count", 1, ""),
        ("Name", 1, "name"),
    ]
    assert all(c.type == "string" for c in EV.table_columns)


def test_event_singleton_counts_one_and_first_seen_is_event_time() -> None:
    cells = EV.table_row(event(), NOW)
    assert cells == [
        "3m",
        "Normal",
        "Started",
        "pod/web-0",
        "",
        "example.com/controller, controller-1",
        "container started",
        "3m",
        1,
        "web-0.1",
    ]


def test_event_series_gives_last_seen_and_count() -> None:
    series = {"count": 7, "lastObservedTime": ago(timedelta(seconds=30), micro=True)}
    cells = EV.table_row(event(series=series), NOW)
    assert cells[0] == "30s"
    assert cells[7] == "3m"
    assert cells[8] == 7


def test_event_series_without_last_observed_time() -> None:
    cells = EV.table_row(event(series={"count": 2, "lastObservedTime": None}), NOW)
    assert cells[0] == "<unknown>"
    assert cells[8] == 2


def test_event_deprecated_fields_are_the_core_timestamps_count_and_source() -> None:
    obj = event(
        deprecatedFirstTimestamp=ago(timedelta(hours=2)),
        deprecatedLastTimestamp=ago(timedelta(minutes=10)),
        deprecatedCount=4,
        deprecatedSource={"component": "kubelet", "host": "node-1"},
    )
    cells = EV.table_row(obj, NOW)
    assert cells[0] == "10m"
    assert cells[5] == "kubelet, node-1"
    assert cells[7] == "120m"
    assert cells[8] == 4


def test_event_last_seen_falls_back_to_first_seen() -> None:
    cells = EV.table_row(event(deprecatedFirstTimestamp=ago(timedelta(hours=5))), NOW)
    assert cells[0] == cells[7] == "5h"


def test_event_without_any_time() -> None:
    obj = event()
    del obj["eventTime"]
    cells = EV.table_row(obj, NOW)
    assert cells[0] == cells[7] == "<unknown>"


@pytest.mark.parametrize(
    ("source", "controller", "instance", "expected"),
    [
        ({}, "example.com/c", "c-1", "example.com/c, c-1"),
        ({}, "example.com/c", "", "example.com/c"),
        ({"component": "kubelet"}, "example.com/c", "c-1", "kubelet, c-1"),
        ({"host": "node-1"}, "example.com/c", "c-1", "example.com/c, node-1"),
        ({}, "", "c-1", ", c-1"),
        ({}, "", "", ""),
    ],
)
def test_event_source(source: JSON, controller: str, instance: str, expected: str) -> None:
    obj = event(deprecatedSource=source, reportingController=controller, reportingInstance=instance)
    assert EV.table_row(obj, NOW)[5] == expected


def test_event_object_is_lowercase_kind_and_name() -> None:
    regarding = {"kind": "ReplicaSet", "name": "web-7d9", "fieldPath": "spec.containers{app}"}
    cells = EV.table_row(event(regarding=regarding), NOW)
    assert cells[3] == "replicaset/web-7d9"
    assert cells[4] == "spec.containers{app}"
    assert EV.table_row(event(regarding={"kind": "Node"}), NOW)[3] == "node"
    assert EV.table_row(event(regarding={}), NOW)[3] == ""


# ----------------------------------------------------------------------------- Table


def test_table_of_one_object() -> None:
    result = table.table(RB, rolebinding(), "meta.k8s.io/v1", "", NOW)
    assert list(result) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    assert result["kind"] == "Table"
    assert result["apiVersion"] == "meta.k8s.io/v1"
    assert result["metadata"] == {"resourceVersion": "17"}
    assert len(result["columnDefinitions"]) == 6
    [row] = result["rows"]
    assert list(row) == ["cells", "object"]
    assert row["cells"][:2] == ["readers", "ClusterRole/view"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": rolebinding()["metadata"],
    }


def test_table_of_a_list_carries_the_list_meta() -> None:
    body = listing("RoleBindingList", [rolebinding("a"), rolebinding("b")], **{"continue": "tok"})
    body["metadata"]["remainingItemCount"] = 3
    result = table.table(RB, body, "meta.k8s.io/v1beta1", "Metadata", NOW)
    assert result["metadata"] == {"resourceVersion": "30", "continue": "tok", "remainingItemCount": 3}
    assert [row["cells"][0] for row in result["rows"]] == ["a", "b"]
    assert {row["object"]["apiVersion"] for row in result["rows"]} == {"meta.k8s.io/v1beta1"}


def test_table_of_an_empty_list() -> None:
    result = table.table(EV, listing("EventList", []), "meta.k8s.io/v1", "", NOW)
    assert result["rows"] == []
    assert len(result["columnDefinitions"]) == 10


@pytest.mark.parametrize(
    ("include", "expected_kind"),
    [("", "PartialObjectMetadata"), ("Metadata", "PartialObjectMetadata"), ("Object", "RoleBinding")],
)
def test_include_object(include: str, expected_kind: str) -> None:
    [row] = table.table(RB, rolebinding(), "meta.k8s.io/v1", include, NOW)["rows"]
    assert row["object"]["kind"] == expected_kind
    if include == "Object":
        assert row["object"] == rolebinding()


def test_include_object_none_writes_null() -> None:
    [row] = table.table(RB, rolebinding(), "meta.k8s.io/v1", "None", NOW)["rows"]
    assert row == {"cells": row["cells"], "object": None}


def test_initial_events_end_bookmark_keeps_its_metadata_even_with_none() -> None:
    bookmark = {
        "kind": "RoleBinding",
        "apiVersion": "rbac.authorization.core.io/v1",
        "metadata": {"resourceVersion": "40", "annotations": {"k8s.io/initial-events-end": "true"}},
    }
    [row] = table.table(RB, bookmark, "meta.k8s.io/v1", "None", NOW)["rows"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            "resourceVersion": "40",
            "creationTimestamp": None,
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }
    assert row["cells"] == ["", "/", "<unknown>", "", "", ""]


def test_include_object_is_validated() -> None:
    with pytest.raises(errors.StatusError) as caught:
        table.include_object_option({"includeObject": "All"})
    assert caught.value.code == 400
    assert caught.value.message == (
        'Unable to convert to Table as requested: includeObject: Invalid value: "All": '
        "must be 'Metadata', 'Object', 'None', or empty"
    )


def test_default_table_convertor_for_a_kind_without_printer() -> None:
    class Plain(RoleBindingKind):
        table_columns = ()

        def table_row(self, obj: JSON, now: datetime) -> list[Any]:
            return super(RoleBindingKind, self).table_row(obj, now)

    result = table.table(Plain(), rolebinding(), "meta.k8s.io/v1", "", NOW)
    assert [(c["name"], c["type"]) for c in result["columnDefinitions"]] == [
        ("Name", "string"),
        ("Created At", "date"),
    ]
    assert result["rows"][0]["cells"] == ["readers", ago(timedelta(minutes=5))]


# ----------------------------------------------------------------------------- PartialObjectMetadata


def test_partial_object_metadata_orders_metadata_as_go() -> None:
    meta = {"labels": {"a": "b"}, "name": "x", "creationTimestamp": "2026-01-01T00:00:00Z", "uid": "u"}
    result = table.partial_object_metadata({"metadata": meta}, "meta.k8s.io/v1")
    assert list(result["metadata"]) == ["name", "uid", "creationTimestamp", "labels"]


def test_transform_partial_object_metadata_list() -> None:
    body = listing("RoleBindingList", [rolebinding("a")])
    target = table.Target("PartialObjectMetadataList", "meta.k8s.io", "v1")
    result = table.transform(RB, body, target, "")
    assert result["kind"] == "PartialObjectMetadataList"
    assert result["metadata"] == {"resourceVersion": "30"}
    assert result["items"][0]["kind"] == "PartialObjectMetadata"
    assert result["items"][0]["metadata"]["name"] == "a"
    # An empty list: upstream's items slice stays nil.
    assert table.transform(RB, listing("RoleBindingList", []), target, "")["items"] is None


def test_transform_mismatched_list_and_object_is_not_acceptable() -> None:
    single = table.Target("PartialObjectMetadata", "meta.k8s.io", "v1")
    several = table.Target("PartialObjectMetadataList", "meta.k8s.io", "v1")
    with pytest.raises(errors.StatusError) as caught:
        table.transform(RB, listing("RoleBindingList", []), single, "")
    assert caught.value.code == 406
    assert caught.value.message == (
        "you requested PartialObjectMetadata, but the requested object is a list (*rbac.RoleBindingList)"
    )
    with pytest.raises(errors.StatusError) as caught:
        table.transform(EV, event(), several, "")
    assert caught.value.message == (
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.Event)"
    )


def test_status_is_never_transformed() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    target = table.Target("Table", "meta.k8s.io", "v1")
    assert table.transform(RB, status, target, "") is status


# ----------------------------------------------------------------------------- watch


def test_watch_transform_headers_only_first() -> None:
    transform = table.WatchTransform(RB, table.Target("Table", "meta.k8s.io", "v1"), "")
    first, second = transform(rolebinding("a")), transform(rolebinding("b"))
    assert first["columnDefinitions"] is not None and len(first["columnDefinitions"]) == 6
    assert second["columnDefinitions"] is None
    assert second["rows"][0]["cells"][0] == "b"
    assert second["metadata"] == {"resourceVersion": "17"}


def test_watch_transform_status_passes_and_uses_up_the_headers() -> None:
    transform = table.WatchTransform(EV, table.Target("Table", "meta.k8s.io", "v1"), "")
    status = errors.expired("too old resource version: 1 (5)").status
    assert transform(status) is status
    assert transform(event())["columnDefinitions"] is None


def test_watch_transform_partial_object_metadata() -> None:
    single = table.WatchTransform(RB, table.Target("PartialObjectMetadata", "meta.k8s.io", "v1"), "")
    assert single(rolebinding())["kind"] == "PartialObjectMetadata"
    # A list kind cannot apply to one object: upstream sends the object unchanged.
    several = table.WatchTransform(RB, table.Target("PartialObjectMetadataList", "meta.k8s.io", "v1"), "")
    assert several(rolebinding()) == rolebinding()


# ----------------------------------------------------------------------------- negotiation


@pytest.mark.parametrize(
    ("accept", "media", "target"),
    [
        ("", "application/json", None),
        (KUBECTL_ACCEPT, "application/json", ("Table", "v1")),
        (f"{TABLE_V1BETA1},application/json", "application/json", ("Table", "v1beta1")),
        ("application/yaml;as=Table;v=v1;g=meta.k8s.io", "application/yaml", ("Table", "v1")),
        ("*/*;as=Table;v=v1;g=meta.k8s.io", "application/json", ("Table", "v1")),
        (
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json",
            "application/json",
            None,
        ),
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/yaml", "application/yaml", None),
        ("application/json;as=Pod;v=v1;g=meta.k8s.io,application/json", "application/json", None),
        ("application/json;as=Table;v=v1;g=example.com,application/json", "application/json", None),
        (
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json",
            "application/json",
            ("PartialObjectMetadataList", "v1"),
        ),
        (
            "application/yaml;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io",
            "application/yaml",
            ("PartialObjectMetadata", "v1beta1"),
        ),
        ("application/json;stream=watch", "application/json", None),
    ],
)
def test_negotiate_on_resource_endpoints(accept: str, media: str, target: tuple[str, str] | None) -> None:
    fmt = negotiate(accept, transforms=True)
    assert fmt.media_type == media
    got = None if fmt.target is None else (fmt.target.kind, fmt.target.version)
    assert got == target


def test_negotiate_elsewhere_skips_transformations() -> None:
    assert negotiate(KUBECTL_ACCEPT).target is None
    with pytest.raises(errors.StatusError) as caught:
        negotiate(TABLE_V1)
    assert caught.value.code == 406


@pytest.mark.parametrize(
    "accept", ["text/html", "application/vnd.kubernetes.protobuf", "application/yaml;stream=watch"]
)
def test_negotiate_not_acceptable(accept: str) -> None:
    with pytest.raises(errors.StatusError) as caught:
        negotiate(accept, transforms=True)
    assert caught.value.code == 406
    assert caught.value.reason == "NotAcceptable"


def test_watch_needs_a_streaming_format() -> None:
    assert negotiate_stream(KUBECTL_ACCEPT).target is not None
    with pytest.raises(errors.StatusError) as caught:
        negotiate_stream("application/yaml")
    assert caught.value.code == 406
    assert "application/json;stream=watch" in caught.value.message


# ----------------------------------------------------------------------------- responses


def request(accept: str = "", *, query: str = "", kind: Any = RB, encoding: str = "") -> Any:
    headers = {"Accept": accept} if accept else {}
    if encoding:
        headers["Accept-Encoding"] = encoding
    req = make_mocked_request("GET", f"/apis/x{query}", headers=headers)
    if kind is not None:
        req[RESOURCE_KIND_KEY] = kind
    return req


def test_object_response_table_with_include_object() -> None:
    response = object_response(request(KUBECTL_ACCEPT, query="?includeObject=Object"), rolebinding())
    assert response.content_type == "application/json"
    body = json.loads(response.body)  # type: ignore[arg-type]
    assert body["kind"] == "Table"
    assert body["rows"][0]["object"]["kind"] == "RoleBinding"


def test_object_response_without_a_kind_is_plain() -> None:
    response = object_response(request(KUBECTL_ACCEPT, kind=None), {"kind": "APIGroupList"})
    assert json.loads(response.body) == {"kind": "APIGroupList"}  # type: ignore[arg-type]


def test_status_response_with_only_a_transformation_acceptable() -> None:
    exc = errors.bad_request("nope")
    response = status_response(request(TABLE_V1), exc)
    assert response.status == 400
    assert response.content_type == "application/json"
    assert response.body == json.dumps(exc.status, indent=2).encode()


def test_gzip_above_threshold_only() -> None:
    small = object_response(request(encoding="gzip"), rolebinding())
    assert "Content-Encoding" not in small.headers
    items = [rolebinding(f"rb-{i:05d}") for i in range(400)]
    body = listing("RoleBindingList", items)
    plain = object_response(request(), body)
    assert len(plain.body) > GZIP_THRESHOLD_BYTES  # type: ignore[arg-type]
    zipped = object_response(request(encoding="deflate, gzip"), body)
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert zipped.headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(zipped.body) == plain.body  # type: ignore[arg-type]
    # Only the bare token counts, as upstream compares it.
    weighted = object_response(request(encoding="gzip;q=1.0"), body)
    assert "Content-Encoding" not in weighted.headers
