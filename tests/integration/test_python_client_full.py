"""The official Python client beyond test_python_client.py's basic flow: every write of the dynamic
client (the three patch types, replace, delete, delete_collection by label), pagination across
namespaces and with selectors, watches with bookmarks and resumption, and the same operations
through `CustomObjectsApi` (the generated client most operators use for kinds it has no model of).

The server of this module sends a bookmark every second and ends watches without timeoutSeconds
after 2-4 seconds (--min-request-timeout 2), so `Watch().stream` has to resume by itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config, dynamic, watch
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError

from tests.support.server import BACKENDS, ServerProcess, backend_args, start_server

RB_GROUP, EV_GROUP, VERSION = "rbac.authorization.core.io", "events.core.io", "v1"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--watch-bookmark-interval", "1", "--min-request-timeout", "2"]
    process = start_server(
        tmp_path_factory.mktemp(f"coreio-pyclient-{request.param}"),
        [*backend_args(request, request.param), *extra],
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def api_client(server: ServerProcess) -> Iterator[ApiClient]:
    api_client: ApiClient = config.new_client_from_config(config_file=str(server.kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture(scope="module")
def dyn(api_client: ApiClient) -> dynamic.DynamicClient:
    return dynamic.DynamicClient(api_client)


@pytest.fixture(scope="module")
def rb(dyn: dynamic.DynamicClient) -> Any:
    return dyn.resources.get(api_version=f"{RB_GROUP}/{VERSION}", kind="RoleBinding")


@pytest.fixture(scope="module")
def ev(dyn: dynamic.DynamicClient) -> Any:
    return dyn.resources.get(api_version=f"{EV_GROUP}/{VERSION}", kind="Event")


@pytest.fixture(scope="module")
def custom(api_client: ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client)


def json_object(value: object) -> dict[str, Any]:
    """What CustomObjectsApi answers (typed `object`): the decoded JSON object."""
    assert isinstance(value, dict)
    return value


def rolebinding(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": f"{RB_GROUP}/{VERSION}",
        "kind": "RoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": RB_GROUP, "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "User", "name": "alice"}],
    }


def event(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": f"{EV_GROUP}/{VERSION}",
        "kind": "Event",
        "metadata": metadata,
        "eventTime": "2026-11-22T02:16:41.000001Z",
        "action": "Tested",
        "reason": "Python",
        "note": "from the python client",
        "type": "Normal",
        "reportingController": "example.com/pyclient",
        "reportingInstance": "pyclient-1",
        "regarding": {"kind": "Pod", "name": "p", "namespace": namespace},
    }


# ----------------------------------------------------------------------------- dynamic client


def test_dynamic_patch_three_ways(rb: Any) -> None:
    ns = "dyn-patch"
    created = rb.create(body=rolebinding("p", {"a": "1"}), namespace=ns)

    merged = rb.patch(
        name="p", namespace=ns, body={"metadata": {"labels": {"a": None, "b": "2"}}}, content_type=MERGE
    )
    assert merged.metadata.labels.to_dict() == {"b": "2"}

    # A JSON patch is a list: guarded by a test of the resourceVersion, as controllers do.
    json_patched = rb.patch(
        name="p",
        namespace=ns,
        body=[
            {"op": "test", "path": "/metadata/resourceVersion", "value": merged.metadata.resourceVersion},
            {"op": "add", "path": "/subjects/-", "value": {"kind": "Group", "name": "devs"}},
            {"op": "replace", "path": "/subjects/0/name", "value": "bob"},
        ],
        content_type=JSON_PATCH,
    )
    assert [(s.kind, s.name, s.apiGroup) for s in json_patched.subjects] == [
        ("User", "bob", RB_GROUP),
        ("Group", "devs", RB_GROUP),
    ]

    strategic = rb.patch(
        name="p",
        namespace=ns,
        body={"metadata": {"annotations": {"note": "smp"}}, "subjects": [{"kind": "User", "name": "carol"}]},
        content_type=STRATEGIC,
    )
    assert strategic.metadata.annotations.note == "smp"
    assert [s.name for s in strategic.subjects] == ["carol"]  # no patch strategy: the list is replaced

    got = rb.get(name="p", namespace=ns)
    assert got.metadata.uid == created.metadata.uid
    assert got.metadata.resourceVersion == strategic.metadata.resourceVersion
    assert int(got.metadata.resourceVersion) > int(created.metadata.resourceVersion)

    # The stale test fails the whole JSON patch: 422, nothing changed.
    with pytest.raises(ApiException) as failed:
        rb.patch(
            name="p",
            namespace=ns,
            body=[
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": created.metadata.resourceVersion,
                },
                {"op": "remove", "path": "/subjects"},
            ],
            content_type=JSON_PATCH,
        )
    assert failed.value.status == 422
    assert [s.name for s in rb.get(name="p", namespace=ns).subjects] == ["carol"]


def test_dynamic_replace_and_delete(ev: Any) -> None:
    ns = "dyn-replace"
    created = ev.create(body=event("r", ns), namespace=ns)
    body = created.to_dict()
    body["metadata"]["labels"] = {"replaced": "yes"}
    body["series"] = {"count": 2, "lastObservedTime": "2026-11-22T02:17:00.000002Z"}
    replaced = ev.replace(body=body, namespace=ns)
    assert replaced.metadata.labels.replaced == "yes"
    assert replaced.series.count == 2
    assert replaced.series.lastObservedTime == "2026-11-22T02:17:00.000002Z"

    status = ev.delete(name="r", namespace=ns)
    assert status.kind == "Status" and status.status == "Success"
    assert status.details.name == "r" and status.details.uid == created.metadata.uid
    with pytest.raises(NotFoundError):
        ev.get(name="r", namespace=ns)


def test_dynamic_delete_collection_by_label(ev: Any) -> None:
    ns = "dyn-sweep"
    for index in range(4):
        ev.create(body=event(f"e{index}", ns, {"batch": "old" if index % 2 else "new"}), namespace=ns)
    ev.create(body=event("e0", "dyn-sweep-other", {"batch": "old"}), namespace="dyn-sweep-other")

    deleted = ev.delete(namespace=ns, label_selector="batch=old")
    assert sorted(item.metadata.name for item in deleted.items) == ["e1", "e3"]
    assert sorted(item.metadata.name for item in ev.get(namespace=ns).items) == ["e0", "e2"]
    # Only that namespace.
    assert [item.metadata.name for item in ev.get(namespace="dyn-sweep-other").items] == ["e0"]


def test_dynamic_pagination_across_namespaces_and_with_selector(rb: Any) -> None:
    for ns in ("page-a", "page-b", "page-c"):
        for index in range(3):
            rb.create(body=rolebinding(f"rb{index}", {"pick": "yes" if index != 1 else "no"}), namespace=ns)

    def pages(**params: Any) -> list[list[tuple[str, str]]]:
        seen: list[list[tuple[str, str]]] = []
        token = None
        while True:
            page = rb.get(limit=4, _continue=token, **params)
            seen.append([(i.metadata.namespace, i.metadata.name) for i in page.items])
            token = page.metadata["continue"]
            if not token:
                return seen

    everything = [(ns, f"rb{i}") for ns in ("page-a", "page-b", "page-c") for i in range(3)]
    listed = pages()
    assert [key for page in listed for key in page if key[0].startswith("page-")] == everything

    picked = pages(label_selector="pick=yes")
    assert [len(page) for page in picked][:1] == [4]
    assert [key for page in picked for key in page] == [key for key in everything if key[1] != "rb1"]

    # remainingItemCount is given only without selectors.
    first = rb.get(namespace="page-b", limit=1)
    assert first.metadata.remainingItemCount == 2
    assert rb.get(namespace="page-b", limit=1, label_selector="pick=yes").metadata.remainingItemCount is None


def test_dynamic_watch_bookmarks_and_resume(rb: Any) -> None:
    ns = "dyn-watch"
    # Something stored first: a fresh SQLite store lists at resourceVersion "0", which a watch
    # reads as "any version" rather than as a position.
    start = rb.create(body=rolebinding("anchor"), namespace=ns).metadata.resourceVersion
    events: list[tuple[str, dict[str, Any]]] = []
    watcher = watch.Watch()
    # Bookmarks come every --watch-bookmark-interval (1 s) once the storage reports progress, which
    # an idle watch does after 5 s.
    for item in rb.watch(
        namespace=ns, resource_version=start, timeout=12, watcher=watcher, allow_watch_bookmarks=True
    ):
        events.append((item["type"], item["raw_object"]))
        if item["type"] == "BOOKMARK":
            watcher.stop()
    assert events, "no bookmark within 12 seconds"
    kind, bookmark = events[-1]
    assert kind == "BOOKMARK"
    assert bookmark["kind"] == "RoleBinding" and bookmark["apiVersion"] == f"{RB_GROUP}/{VERSION}"
    assert set(bookmark["metadata"]) == {"resourceVersion"}
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(start)
    # (The bookmark's revision may be past the anchor's: the anchor names a Role that does not exist,
    # and the authorizer records that as a Warning Event, a write of its own.)

    # Changes made while nobody watches are replayed from the bookmark's resourceVersion.
    rb.create(body=rolebinding("late"), namespace=ns)
    rb.delete(name="late", namespace=ns)
    resumed: list[tuple[str, str]] = []
    watcher = watch.Watch()
    for item in rb.watch(
        namespace=ns,
        resource_version=bookmark["metadata"]["resourceVersion"],
        timeout=5,
        watcher=watcher,
        allow_watch_bookmarks=True,
    ):
        if item["type"] != "BOOKMARK":
            resumed.append((item["type"], item["object"].metadata.name))
        if len(resumed) == 2:
            watcher.stop()
    assert resumed == [("ADDED", "late"), ("DELETED", "late")]


# ----------------------------------------------------------------------------- CustomObjectsApi


def test_custom_objects_crud(custom: k8s.CustomObjectsApi) -> None:
    ns = "custom-crud"
    created = json_object(
        custom.create_namespaced_custom_object(RB_GROUP, VERSION, ns, "rolebindings", rolebinding("c"))
    )
    assert created["kind"] == "RoleBinding" and created["metadata"]["namespace"] == ns
    assert created["subjects"] == [{"kind": "User", "name": "alice", "apiGroup": RB_GROUP}]

    got = json_object(custom.get_namespaced_custom_object(RB_GROUP, VERSION, ns, "rolebindings", "c"))
    assert got["metadata"]["uid"] == created["metadata"]["uid"]

    merged = json_object(
        custom.patch_namespaced_custom_object(
            RB_GROUP, VERSION, ns, "rolebindings", "c", {"metadata": {"labels": {"tier": "gold"}}}
        )
    )
    assert merged["metadata"]["labels"] == {"tier": "gold"}
    json_patched = json_object(
        custom.patch_namespaced_custom_object(
            RB_GROUP,
            VERSION,
            ns,
            "rolebindings",
            "c",
            [{"op": "add", "path": "/metadata/annotations", "value": {"by": "json-patch"}}],
            _content_type=JSON_PATCH,
        )
    )
    assert json_patched["metadata"]["annotations"] == {"by": "json-patch"}
    strategic = json_object(
        custom.patch_namespaced_custom_object(
            RB_GROUP,
            VERSION,
            ns,
            "rolebindings",
            "c",
            {"metadata": {"labels": {"extra": "1"}}},
            _content_type=STRATEGIC,
        )
    )
    assert strategic["metadata"]["labels"] == {"tier": "gold", "extra": "1"}

    body = dict(strategic)
    body["subjects"] = [{"kind": "ServiceAccount", "name": "bot", "namespace": "ci"}]
    replaced = json_object(
        custom.replace_namespaced_custom_object(RB_GROUP, VERSION, ns, "rolebindings", "c", body)
    )
    assert replaced["subjects"] == [{"kind": "ServiceAccount", "name": "bot", "namespace": "ci"}]
    # As kube-apiserver: a RoleBinding carries no generation, however often it changes.
    assert "generation" not in replaced["metadata"]

    # Replacing with the resourceVersion now stale: 409 Conflict, upstream's message.
    with pytest.raises(ApiException) as conflict:
        custom.replace_namespaced_custom_object(RB_GROUP, VERSION, ns, "rolebindings", "c", body)
    assert conflict.value.status == 409
    assert "the object has been modified" in str(conflict.value.body)

    status = json_object(custom.delete_namespaced_custom_object(RB_GROUP, VERSION, ns, "rolebindings", "c"))
    assert status["status"] == "Success" and status["details"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(RB_GROUP, VERSION, ns, "rolebindings", "c")
    assert missing.value.status == 404


def test_custom_objects_lists(custom: k8s.CustomObjectsApi) -> None:
    for ns in ("custom-list-a", "custom-list-b"):
        for index in range(3):
            custom.create_namespaced_custom_object(EV_GROUP, VERSION, ns, "events", event(f"ev{index}", ns))

    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = json_object(
            custom.list_namespaced_custom_object(
                EV_GROUP, VERSION, "custom-list-a", "events", limit=2, _continue=token
            )
        )
        assert page["kind"] == "EventList"
        names += [item["metadata"]["name"] for item in page["items"]]
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
    assert (names, pages) == (["ev0", "ev1", "ev2"], 2)

    everywhere = json_object(custom.list_cluster_custom_object(EV_GROUP, VERSION, "events"))
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]]
    assert [k for k in keys if k[0].startswith("custom-list-")] == [
        (ns, f"ev{i}") for ns in ("custom-list-a", "custom-list-b") for i in range(3)
    ]
    selected = json_object(
        custom.list_cluster_custom_object(
            EV_GROUP, VERSION, "events", field_selector="metadata.namespace=custom-list-b,metadata.name=ev1"
        )
    )
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in selected["items"]] == [
        ("custom-list-b", "ev1")
    ]


def test_custom_objects_watch_resumes_across_server_timeouts(custom: k8s.CustomObjectsApi) -> None:
    """Without timeout_seconds, Watch().stream reconnects whenever the server ends the stream (here
    every 2-4 s), from the last resourceVersion it saw (an event's or a bookmark's): nothing is
    lost or repeated across the reconnections."""
    ns = "custom-watch"
    start = json_object(custom.list_namespaced_custom_object(EV_GROUP, VERSION, ns, "events"))["metadata"][
        "resourceVersion"
    ]
    seen: list[tuple[str, str]] = []
    done = threading.Event()
    watcher = watch.Watch()

    def consume() -> None:
        try:
            for item in watcher.stream(
                custom.list_namespaced_custom_object,
                EV_GROUP,
                VERSION,
                ns,
                "events",
                resource_version=start,
                allow_watch_bookmarks=True,
            ):
                if item["type"] != "BOOKMARK":
                    seen.append((item["type"], item["object"]["metadata"]["name"]))
                if len(seen) == 6:
                    watcher.stop()
        finally:
            done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    deadline = time.monotonic() + 6.5  # longer than the longest stream (4 s): at least one reconnect
    index = 0
    while time.monotonic() < deadline and index < 3:
        custom.create_namespaced_custom_object(EV_GROUP, VERSION, ns, "events", event(f"w{index}", ns))
        index += 1
        time.sleep(2.2)  # writes spread over the streams' ends: the reconnects are under test
    for name in ("w0", "w1", "w2"):
        custom.delete_namespaced_custom_object(EV_GROUP, VERSION, ns, "events", name)
    assert done.wait(20), f"watch saw only {seen}"
    assert seen == [("ADDED", "w0"), ("ADDED", "w1"), ("ADDED", "w2")] + [
        ("DELETED", f"w{i}") for i in range(3)
    ]
