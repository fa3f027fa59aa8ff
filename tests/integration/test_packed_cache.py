"""A server whose watch caches hold packed values (storage/cacher/packing.py) answers exactly what it
stored: 1,500 Events shaped as a cluster's, seeded into a standalone server with two workers, read
back through the official client once both workers have packed their caches; then changed, deleted,
watched and created, every read still from the packed caches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import config, dynamic

from apiserver.resources import EventKind
from apiserver.storage.cacher import packing
from tests.support.cluster_events import event_body
from tests.support.seed import seed
from tests.support.server import ServerProcess, start_server

EVENTS = packing.TRAIN_AT + 500
PACKED = "watch cache of /registry/events.core.io/events/ packed"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("coreio-packed")
    seed(data_dir, EventKind(), event_body, EVENTS, processes=2)
    process = start_server(data_dir, ["--workers=2"])
    try:
        deadline = time.monotonic() + 30
        while process.log_file.read_text().count(PACKED) < 2:
            assert time.monotonic() < deadline, process.log_file.read_text()
            time.sleep(0.1)
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def events(server: ServerProcess) -> Any:
    client = config.new_client_from_config(config_file=str(server.kubeconfig))
    return dynamic.DynamicClient(client).resources.get(api_version="events.core.io/v1", kind="Event")


def _seeded() -> dict[tuple[str, str], dict[str, Any]]:
    bodies = (event_body(index) for index in range(EVENTS))
    return {(body["metadata"]["namespace"], body["metadata"]["name"]): body for body in bodies}


def _same(item: dict[str, Any], body: dict[str, Any]) -> None:
    for field in ("note", "reason", "type", "regarding", "reportingController", "eventTime"):
        assert item[field] == body[field], field


def test_every_event_lists_back_as_stored_whole_and_in_pages(events: Any) -> None:
    seeded = _seeded()
    listed = events.get().to_dict()
    assert len(listed["items"]) == EVENTS
    for item in listed["items"]:
        _same(item, seeded[(item["metadata"]["namespace"], item["metadata"]["name"])])
    paged, token = [], None
    while True:
        page = events.get(limit=400, _continue=token).to_dict()
        paged += page["items"]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert paged == listed["items"]


def test_gets_patches_deletes_and_watches_read_the_packed_values(events: Any) -> None:
    seeded = list(_seeded().items())
    for (namespace, name), body in seeded[::150]:
        _same(events.get(name=name, namespace=namespace).to_dict(), body)
    (namespace, name), body = seeded[7]
    gone = next(other for (ns, other), _ in seeded[8:] if ns == namespace)
    start = events.get(namespace=namespace).metadata.resourceVersion
    patch = {"metadata": {"labels": {"patched": "yes"}}}
    patched = events.patch(
        name=name, namespace=namespace, body=patch, content_type="application/merge-patch+json"
    )
    assert patched.to_dict()["metadata"]["labels"] == {"patched": "yes"} and patched.note == body["note"]
    events.delete(name=gone, namespace=namespace)
    created = event_body(EVENTS + 1)
    created["metadata"] = {"name": "after-packing", "namespace": namespace}
    events.create(body=created, namespace=namespace)
    _same(events.get(name="after-packing", namespace=namespace).to_dict(), created)
    stream = events.watch(namespace=namespace, resource_version=start, timeout=3)
    seen = [(change["type"], change["raw_object"]["metadata"]["name"]) for change in stream]
    assert seen == [("MODIFIED", name), ("DELETED", gone), ("ADDED", "after-packing")]
    assert gone not in {item.metadata.name for item in events.get(namespace=namespace).items}
