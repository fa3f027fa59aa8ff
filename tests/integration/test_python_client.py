"""The official Python client (kubernetes.dynamic.DynamicClient and kubernetes.watch.Watch) against
a freshly started standalone server, finding both kinds through discovery."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import config, dynamic, watch
from kubernetes.client import ApiClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError, UnprocessibleEntityError

from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[dynamic.DynamicClient]:
    api_client: ApiClient = config.new_client_from_config(config_file=str(server.kubeconfig))
    try:
        yield dynamic.DynamicClient(api_client)
    finally:
        api_client.close()


def rolebinding(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, **metadata},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "apps"}],
    }


def test_discovery_finds_both_kinds(client: dynamic.DynamicClient) -> None:
    rb = client.resources.get(api_version="rbac.authorization.core.io/v1", kind="RoleBinding")
    assert rb.name == "rolebindings" and rb.namespaced
    ev = client.resources.get(api_version="events.core.io/v1", kind="Event")
    assert ev.name == "events" and "ev" in ev.short_names
    assert set(ev.verbs) == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }


def test_crud(client: dynamic.DynamicClient) -> None:
    rb = client.resources.get(api_version="rbac.authorization.core.io/v1", kind="RoleBinding")
    created = rb.create(body=rolebinding("crud"), namespace="apps")
    assert created.metadata.name == "crud"
    assert created.subjects[0].apiGroup is None  # "" is omitted for ServiceAccount subjects

    got = rb.get(name="crud", namespace="apps")
    assert got.metadata.uid == created.metadata.uid

    patched = rb.patch(
        name="crud",
        namespace="apps",
        body={"metadata": {"labels": {"team": "blue"}}},
        content_type="application/merge-patch+json",
    )
    assert patched.metadata.labels.team == "blue"
    assert int(patched.metadata.resourceVersion) > int(created.metadata.resourceVersion)

    body = patched.to_dict()
    body["subjects"].append({"kind": "User", "name": "bob"})
    replaced = rb.replace(body=body, namespace="apps")
    assert [s.name for s in replaced.subjects] == ["default", "bob"]

    # Replacing with the stale resourceVersion is a conflict.
    stale = patched.to_dict()
    with pytest.raises(ConflictError):
        rb.replace(body=stale, namespace="apps")

    listed = rb.get(namespace="apps")
    assert "crud" in [item.metadata.name for item in listed.items]

    rb.delete(name="crud", namespace="apps")
    with pytest.raises(NotFoundError):
        rb.get(name="crud", namespace="apps")


def test_invalid_object_is_422_with_cause(client: dynamic.DynamicClient) -> None:
    rb = client.resources.get(api_version="rbac.authorization.core.io/v1", kind="RoleBinding")
    bad = rolebinding("bad")
    bad["roleRef"]["kind"] = "Pod"
    with pytest.raises(UnprocessibleEntityError) as caught:
        rb.create(body=bad, namespace="apps")
    body = caught.value.body
    assert body is not None
    assert '"field":"roleRef.kind"' in body.replace(" ", "")


def test_paginated_list(client: dynamic.DynamicClient) -> None:
    ev = client.resources.get(api_version="events.core.io/v1", kind="Event")
    for index in range(5):
        ev.create(
            namespace="paged",
            body={
                "apiVersion": "events.core.io/v1",
                "kind": "Event",
                "metadata": {"name": f"e{index}"},
                "eventTime": "2026-11-22T02:16:41.000001Z",
                "action": "Tested",
                "reason": "Paging",
                "type": "Normal",
                "reportingController": "example.com/test",
                "reportingInstance": "test-1",
                "regarding": {"kind": "Pod", "name": "p", "namespace": "paged"},
            },
        )
    names: list[str] = []
    first = ev.get(namespace="paged", limit=2)
    assert first.metadata.remainingItemCount == 3
    names += [item.metadata.name for item in first.items]
    token = first.metadata["continue"]
    while token:
        page = ev.get(namespace="paged", limit=2, _continue=token)
        names += [item.metadata.name for item in page.items]
        token = page.metadata["continue"]
    assert names == ["e0", "e1", "e2", "e3", "e4"]


def test_watch_stream_with_resume(client: dynamic.DynamicClient) -> None:
    rb = client.resources.get(api_version="rbac.authorization.core.io/v1", kind="RoleBinding")
    start = rb.get(namespace="watch-ns").metadata.resourceVersion
    seen: list[tuple[str, str, str]] = []
    done = threading.Event()

    def consume() -> None:
        watcher = watch.Watch()
        for event in rb.watch(namespace="watch-ns", resource_version=start, timeout=20, watcher=watcher):
            obj = event["object"]
            seen.append((event["type"], obj.metadata.name, obj.metadata.resourceVersion))
            if len(seen) == 3:
                watcher.stop()
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    rb.create(body=rolebinding("w1"), namespace="watch-ns")
    rb.patch(
        name="w1",
        namespace="watch-ns",
        body={"metadata": {"labels": {"x": "y"}}},
        content_type="application/merge-patch+json",
    )
    rb.delete(name="w1", namespace="watch-ns")
    assert done.wait(30), f"watch saw only {seen}"
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]

    # Resuming from the first event's resourceVersion replays only what came after it.
    resumed: list[tuple[str, str]] = []
    watcher = watch.Watch()
    for event in rb.watch(namespace="watch-ns", resource_version=seen[0][2], timeout=2, watcher=watcher):
        resumed.append((event["type"], event["object"].metadata.name))
        if len(resumed) == 2:
            watcher.stop()
    assert resumed == [("MODIFIED", "w1"), ("DELETED", "w1")]
