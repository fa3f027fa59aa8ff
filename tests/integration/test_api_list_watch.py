"""List and watch semantics over HTTP: selectors, pagination on a snapshot, resourceVersion
matching, watch from a revision, selector transitions, bookmarks, initial events, timeouts."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.server import BACKENDS, ServerProcess, backend_args, start_server
from tests.support.waiting import wait_until


@pytest.fixture(scope="module", params=BACKENDS)
def fast_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server with a one-second bookmark interval so bookmark behaviour shows quickly."""
    args = ["--watch-bookmark-interval", "1", *backend_args(request, request.param)]
    process = start_server(tmp_path_factory.mktemp(f"coreio-lw-{request.param}"), args)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def fapi(fast_server: ServerProcess) -> Api:
    return Api(fast_server)


def names(listed: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


def labelled(name: str, labels: dict[str, str]) -> dict[str, Any]:
    obj = rolebinding(name)
    obj["metadata"]["labels"] = labels
    return obj


@pytest.fixture(scope="module")
def selector_fixture(fapi: Api) -> None:
    for name, labels in [
        ("a", {"env": "prod", "tier": "web"}),
        ("b", {"env": "dev", "tier": "web"}),
        ("c", {"env": "prod"}),
        ("d", {"version": "3"}),
        ("e", {"version": "10"}),
    ]:
        assert fapi.post(rb_path("sel"), labelled(name, labels)).status == 201


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a", "c"]),
        ("env==prod", ["a", "c"]),
        ("env!=prod", ["b", "d", "e"]),
        ("env in (dev,prod)", ["a", "b", "c"]),
        ("env notin (prod)", ["b", "d", "e"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d", "e"]),
        ("env=prod,tier=web", ["a"]),
        ("version>5", ["e"]),
        ("version<5", ["d"]),
    ],
)
def test_label_selectors(fapi: Api, selector_fixture: None, selector: str, expected: list[str]) -> None:
    from urllib.parse import quote

    listed = fapi.get(f"{rb_path('sel')}?labelSelector={quote(selector)}").json
    assert names(listed) == expected


def test_field_selectors(fapi: Api) -> None:
    fapi.post(ev_path("fs"), event("one", namespace="fs"))
    warning = event("two", namespace="fs", type="Warning", reason="BackOff")
    warning["regarding"]["name"] = "web-1"
    fapi.post(ev_path("fs"), warning)
    assert names(fapi.get(f"{ev_path('fs')}?fieldSelector=type%3DWarning").json) == ["two"]
    assert names(fapi.get(f"{ev_path('fs')}?fieldSelector=regarding.name%3Dweb-0").json) == ["one"]
    assert names(fapi.get(f"{ev_path('fs')}?fieldSelector=reason!%3DBackOff").json) == ["one"]
    assert names(fapi.get(f"{ev_path('fs')}?fieldSelector=metadata.name%3Dtwo").json) == ["two"]
    assert names(
        fapi.get(f"{ev_path('fs')}?fieldSelector=reportingController%3Dexample.com/controller").json
    ) == [
        "one",
        "two",
    ]
    across = fapi.get("/apis/events.core.io/v1/events?fieldSelector=metadata.namespace%3Dfs").json
    assert names(across) == ["one", "two"]


# What kube-apiserver v1.33.13 answers for events.k8s.io/v1 Events (asked with the two Events below
# and no others in the namespace): the twelve labels of its conversion select, every other label is
# refused with 400 and the conversion's message, the first refused one in sorted order.
FIELD_LABEL_CASES: list[tuple[str, list[str] | str]] = [
    ("metadata.name=e1", ["e1"]),
    ("metadata.namespace=fl", ["e1", "e2"]),
    ("reason=Started", ["e1"]),
    ("type=Warning", ["e1"]),
    ("regarding.kind=Pod", ["e1"]),
    ("regarding.name=pod-1", ["e1"]),
    ("regarding.namespace=fl", ["e1", "e2"]),
    ("regarding.uid=u-1", ["e1"]),
    ("regarding.apiVersion=v1", ["e1"]),
    ("regarding.resourceVersion=7", ["e1"]),
    ("regarding.fieldPath=spec.containers{a}", ["e1"]),
    ("reportingController=example.com/ctl", ["e1"]),
    ("metadata.name!=e1", ["e2"]),
    ("type!=Normal", ["e1"]),
    ("reason=", []),
    ("reportingInstance=ctl-1", "field label not supported: reportingInstance"),
    ("source=example.com/ctl", "field label not supported: source"),
    ("reportingComponent=example.com/ctl", "field label not supported: reportingComponent"),
    ("involvedObject.kind=Pod", "field label not supported: involvedObject.kind"),
    ("series.count=2", "field label not supported: series.count"),
    ("note=hi", "field label not supported: note"),
    ("nonsense.field=x", "field label not supported: nonsense.field"),
    ("regarding.kind=Pod,source=x", "field label not supported: source"),
    ("reason=Started,reportingInstance=x", "field label not supported: reportingInstance"),
]


def _selected(fapi: Api, namespace: str, selector: str, *, watch: bool = False) -> list[str] | str:
    """The names a list (or a one-second watch) selects, or the message of its 400."""
    query = f"fieldSelector={quote(selector)}" + ("&watch=1&timeoutSeconds=1" if watch else "")
    response = fapi.get(f"{ev_path(namespace)}?{query}")
    if response.status == 400:
        message: str = response.json["message"]
        return message
    assert response.status == 200, response.body
    if not watch:
        return names(response.json)
    lines = [json.loads(line) for line in response.body.splitlines() if line.strip()]
    return sorted(line["object"]["metadata"]["name"] for line in lines if line["type"] == "ADDED")


def labelled_event_bodies() -> list[dict[str, Any]]:
    regarding = {
        "kind": "Pod",
        "namespace": "fl",
        "name": "pod-1",
        "uid": "u-1",
        "apiVersion": "v1",
        "resourceVersion": "7",
        "fieldPath": "spec.containers{a}",
    }
    first = event("e1", namespace="fl", type="Warning", note="hi", regarding=regarding)
    first.update(reportingController="example.com/ctl", reportingInstance="ctl-1")
    other = {"kind": "ConfigMap", "namespace": "fl", "name": "cm"}
    second = event("e2", namespace="fl", reason="Other", regarding=other)
    second.update(reportingController="other.io/x", reportingInstance="x-1")
    return [first, second]


@pytest.fixture(scope="module")
def labelled_events(fapi: Api) -> None:
    for body in labelled_event_bodies():
        assert fapi.post(ev_path("fl"), body).status == 201


@pytest.mark.parametrize(("selector", "expected"), FIELD_LABEL_CASES)
def test_event_field_labels_as_kube_apiserver(
    fapi: Api, labelled_events: None, selector: str, expected: list[str] | str
) -> None:
    assert _selected(fapi, "fl", selector) == expected
    assert _selected(fapi, "fl", selector, watch=True) == expected
    # Without any Event an accepted label selects nothing and a refused one is refused all the same.
    assert _selected(fapi, "fl-empty", selector) == ([] if isinstance(expected, list) else expected)


def test_named_watch_with_a_converted_event_label(fapi: Api, labelled_events: None) -> None:
    # kube-apiserver serves this (the selector pins the requested name); the name is added again to
    # the converted selector (involvedObject.kind=Pod), which must still parse.
    query = "fieldSelector=metadata.name%3De1,regarding.kind%3DPod&timeoutSeconds=1"
    response = fapi.get(f"/apis/events.core.io/v1/watch/namespaces/fl/events/e1?{query}")
    assert response.status == 200, response.body
    lines = [json.loads(line) for line in response.body.splitlines() if line.strip()]
    assert [(line["type"], line["object"]["metadata"]["name"]) for line in lines] == [("ADDED", "e1")]


def test_delete_collection_converts_event_labels_too(fapi: Api, labelled_events: None) -> None:
    refused = fapi.delete(f"{ev_path('fl')}?fieldSelector=reportingInstance%3Dctl-1")
    assert (refused.status, refused.json["message"]) == (400, "field label not supported: reportingInstance")
    assert fapi.delete(f"{ev_path('fl-empty')}?fieldSelector=regarding.kind%3DPod").status == 200
    assert names(fapi.get(ev_path("fl")).json) == ["e1", "e2"]


def test_pagination_is_a_consistent_snapshot(fapi: Api) -> None:
    for index in range(6):
        fapi.post(rb_path("page"), rolebinding(f"p{index}"))
    first = fapi.get(f"{rb_path('page')}?limit=4").json
    assert names(first) == ["p0", "p1", "p2", "p3"]
    assert first["metadata"]["remainingItemCount"] == 2
    # Changes after the first page do not show in later pages of the same list.
    fapi.post(rb_path("page"), rolebinding("p6"))
    fapi.delete(rb_path("page", "p5"))
    second = fapi.get(f"{rb_path('page')}?limit=4&continue={first['metadata']['continue']}").json
    assert names(second) == ["p4", "p5"]
    assert "continue" not in second["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_continue_token_with_resource_version_is_400(fapi: Api) -> None:
    first = fapi.get(f"{rb_path('page')}?limit=1").json
    token = first["metadata"]["continue"]
    response = fapi.get(f"{rb_path('page')}?limit=1&continue={token}&resourceVersion=5")
    assert response.status == 400
    assert fapi.get(f"{rb_path('page')}?continue=garbage!").status == 400


def test_limit_with_selector_fills_pages(fapi: Api, selector_fixture: None) -> None:
    first = fapi.get(f"{rb_path('sel')}?limit=1&labelSelector=env%3Dprod").json
    assert names(first) == ["a"]
    assert "remainingItemCount" not in first["metadata"]
    second = fapi.get(
        f"{rb_path('sel')}?limit=1&labelSelector=env%3Dprod&continue={first['metadata']['continue']}"
    ).json
    assert names(second) == ["c"]


def test_resource_version_match_exact_reads_the_past(fapi: Api) -> None:
    created = fapi.post(rb_path("exact"), labelled("x", {"v": "1"})).json
    past = created["metadata"]["resourceVersion"]
    fapi.patch(rb_path("exact", "x"), {"metadata": {"labels": {"v": "2"}}})
    old = fapi.get(f"{rb_path('exact')}?resourceVersion={past}&resourceVersionMatch=Exact").json
    assert old["metadata"]["resourceVersion"] == past
    assert old["items"][0]["metadata"]["labels"] == {"v": "1"}
    now = fapi.get(f"{rb_path('exact')}?resourceVersion={past}&resourceVersionMatch=NotOlderThan").json
    assert now["items"][0]["metadata"]["labels"] == {"v": "2"}
    assert int(now["metadata"]["resourceVersion"]) > int(past)


def test_too_new_resource_version_is_504_with_retry_after(fapi: Api) -> None:
    response = fapi.get(f"{rb_path('exact')}?resourceVersion=999999999")
    assert response.status == 504
    assert response.json["reason"] == "Timeout"
    assert response.json["message"].startswith("Timeout: Too large resource version: 999999999, current: ")
    assert response.json["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    assert response.headers["Retry-After"] == "1"


def collect(
    api: Api, path: str, count: int, timeout: float = 15
) -> tuple[list[dict[str, Any]], threading.Thread]:
    """Up to `count` events of the watch `path`, gathered in a thread; returns once the watch has
    answered (the server watches from then on) or failed."""
    events: list[dict[str, Any]] = []
    opened = threading.Event()

    def run() -> None:
        with api.watch(path, timeout=timeout) as stream:
            opened.set()
            for item in stream:
                events.append(item)
                if len(events) >= count:
                    return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_until(
        lambda: opened.is_set() or not thread.is_alive(), timeout=timeout, message="the watch to answer"
    )
    return events, thread


def test_watch_from_revision_with_selector_transitions(fapi: Api) -> None:
    start = fapi.get(rb_path("wsel")).json["metadata"]["resourceVersion"]
    events, thread = collect(
        fapi, f"{rb_path('wsel')}?watch=1&resourceVersion={start}&labelSelector=app%3Dweb", 3
    )
    fapi.post(rb_path("wsel"), labelled("w", {"app": "web"}))
    fapi.post(rb_path("wsel"), labelled("other", {"app": "db"}))
    fapi.patch(rb_path("wsel", "w"), {"metadata": {"labels": {"app": "api"}}})
    fapi.patch(rb_path("wsel", "other"), {"metadata": {"labels": {"app": "web"}}})
    thread.join(15)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "w"),
        ("DELETED", "w"),  # stopped matching: DELETED with its last matching state
        ("ADDED", "other"),  # started matching
    ]
    assert events[1]["object"]["metadata"]["labels"] == {"app": "web"}
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) > int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )
    assert events[0]["object"]["kind"] == "RoleBinding"


def test_watch_without_resource_version_starts_with_current_objects(fapi: Api) -> None:
    fapi.post(rb_path("winit"), rolebinding("existing"))
    events, thread = collect(fapi, f"{rb_path('winit')}?watch=true", 2)
    fapi.post(rb_path("winit"), rolebinding("later"))
    thread.join(15)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "existing"),
        ("ADDED", "later"),
    ]


def test_send_initial_events_ends_with_bookmark(fapi: Api) -> None:
    fapi.post(rb_path("wsie"), rolebinding("one"))
    fapi.post(rb_path("wsie"), rolebinding("two"))
    path = (
        f"{rb_path('wsie')}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&resourceVersion="
    )
    events, thread = collect(fapi, path, 3)
    thread.join(15)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    bookmark = events[2]["object"]
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["kind"] == "RoleBinding"
    assert int(bookmark["metadata"]["resourceVersion"]) >= max(
        int(e["object"]["metadata"]["resourceVersion"]) for e in events[:2]
    )


def test_bookmarks_when_asked_with_either_spelling(fapi: Api) -> None:
    for param in ("allowWatchBookmarks", "allowWatcokmarks"):
        start = fapi.get(rb_path("wbm")).json["metadata"]["resourceVersion"]
        events, thread = collect(
            fapi, f"{rb_path('wbm')}?watch=1&resourceVersion={start}&{param}=true", 1, timeout=20
        )
        thread.join(20)
        assert events and events[0]["type"] == "BOOKMARK", param
        assert set(events[0]["object"]["metadata"]) == {"resourceVersion"}


def test_timeout_seconds_ends_the_stream(fapi: Api) -> None:
    began = time.monotonic()
    with fapi.watch(f"{rb_path('wto')}?watch=1&timeoutSeconds=1") as stream:
        assert list(stream) == []
    assert time.monotonic() - began < 10


def test_finalizers_hold_deletion_until_removed(fapi: Api) -> None:
    body = rolebinding("held")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    created = fapi.post(rb_path("fin"), body).json
    start = created["metadata"]["resourceVersion"]
    events, thread = collect(fapi, f"{rb_path('fin')}?watch=1&resourceVersion={start}", 2)
    response = fapi.delete(rb_path("fin", "held"))
    # 200 with the marked object, as kube-apiserver (202 only for orphanDependents=false).
    assert response.status == 200
    held = response.json
    assert held["kind"] == "RoleBinding" and held["metadata"]["deletionTimestamp"]
    assert (
        fapi.get(rb_path("fin", "held")).json["metadata"]["deletionTimestamp"]
        == held["metadata"]["deletionTimestamp"]
    )
    # Removing the last finalizer deletes it.
    assert fapi.patch(rb_path("fin", "held"), {"metadata": {"finalizers": None}}).status == 200
    assert fapi.get(rb_path("fin", "held")).status == 404
    thread.join(15)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]


def test_send_initial_events_false_starts_from_now(fapi: Api) -> None:
    fapi.post(rb_path("wsief"), rolebinding("before"))
    path = f"{rb_path('wsief')}?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
    events, thread = collect(fapi, path, 1)
    fapi.post(rb_path("wsief"), rolebinding("after"))
    thread.join(15)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "after")]


def test_a_list_of_megabytes_streams_alike_in_every_encoding(fapi: Api) -> None:
    """A list whose objects take more than a megabyte goes out as it is encoded (chunked, no
    Content-Length): compact, gzip-compressed and pretty, each the same list as its pages read
    at the same revision."""
    for index in range(300):
        body = event(f"e{index:03d}", "big")
        body["metadata"]["annotations"] = {"example.com/padding": "n" * 4000}
        assert fapi.post(ev_path("big"), body).status == 201
    plain = fapi.get(ev_path("big"), headers={"User-Agent": "kubectl/v1.33"})
    assert plain.status == 200
    assert plain.headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in plain.headers
    listed = plain.json
    assert names(listed) == [f"e{index:03d}" for index in range(300)]
    revision = listed["metadata"]["resourceVersion"]
    zipped = fapi.get(ev_path("big"), headers={"User-Agent": "kubectl/v1.33", "Accept-Encoding": "gzip"})
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(zipped.body))["items"] == listed["items"]
    pretty = fapi.get(ev_path("big"), headers={"User-Agent": "curl/8.5.0"})
    assert pretty.body.startswith(b'{\n  "kind": "EventList",') and pretty.json["items"] == listed["items"]
    pages: list[dict[str, Any]] = []
    page = fapi.get(f"{ev_path('big')}?limit=120&resourceVersion={revision}&resourceVersionMatch=Exact").json
    while True:
        pages += page["items"]
        token = page["metadata"].get("continue")
        if not token:
            break
        page = fapi.get(f"{ev_path('big')}?limit=120&continue={quote(token)}").json
    assert pages == listed["items"]
