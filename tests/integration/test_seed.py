"""tests.support.seed writes what coreio itself stores: the same Events, seeded into one server's
data directory and created one by one through another server's API, read back alike through the
official Python client (but for their uids and times), resourceVersions included. A running
server's data directory is not seeded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import config, dynamic
from kubernetes.client import ApiClient

from apiserver.machinery.objectmeta import format_micro_time
from apiserver.machinery.types import JSON
from apiserver.resources import EventKind
from apiserver.standalone import DataDirInUseError
from tests.support.seed import FIELD_MANAGER, seed
from tests.support.server import ServerProcess, start_server

API_VERSION = "events.core.io/v1"
EVENTS = 120
NAMESPACES = ("seed-a", "seed-b", "seed-c")
NOW = datetime(2026, 11, 22, 2, 16, 41, 123456, tzinfo=UTC)


def event_body(index: int) -> JSON:
    """Events of several shapes: Warnings, series, labels, a related object."""
    namespace = NAMESPACES[index % len(NAMESPACES)]
    observed = NOW - timedelta(seconds=index * 37)
    body: JSON = {
        "apiVersion": API_VERSION,
        "kind": "Event",
        "metadata": {"name": f"ev-{index:04d}", "namespace": namespace},
        "eventTime": format_micro_time(observed),
        "reportingController": "example.com/seed",
        "reportingInstance": "seed-1",
        "action": "Sync",
        "reason": "BackOff" if index % 4 == 1 else "Synced",
        "type": "Warning" if index % 4 == 1 else "Normal",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": f"web-{index % 3}", "apiVersion": "v1"},
        "note": f"event {index}",
    }
    if index % 5 == 2:
        body["series"] = {"count": 3, "lastObservedTime": format_micro_time(observed + timedelta(minutes=1))}
    if index % 3 == 0:
        body["metadata"]["labels"] = {"app": "web", "index": str(index)}
    if index % 7 == 3:
        body["related"] = {"kind": "Node", "name": "node-1", "apiVersion": "v1"}
    return body


def _client(server: ServerProcess) -> tuple[ApiClient, Any]:
    api_client: ApiClient = config.new_client_from_config(config_file=str(server.kubeconfig))
    return api_client, dynamic.DynamicClient(api_client).resources.get(api_version=API_VERSION, kind="Event")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("coreio-seeded")
    seed(data_dir, EventKind(), event_body, EVENTS, processes=2)
    server = start_server(data_dir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def created(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("coreio-created"))
    api_client, events = _client(server)
    try:
        for index in range(EVENTS):
            body = event_body(index)
            events.create(body=body, namespace=body["metadata"]["namespace"], field_manager=FIELD_MANAGER)
        yield server
    finally:
        api_client.close()
        server.stop()


def read_back(server: ServerProcess) -> dict[str, list[JSON]]:
    """Each namespace's Events, listed a page of 25 at a time, without their uids and times."""
    api_client, events = _client(server)
    found: dict[str, list[JSON]] = {}
    try:
        for namespace in NAMESPACES:
            found[namespace], query = [], {"limit": 25}
            while True:
                page = events.get(namespace=namespace, **query)
                found[namespace] += [_timeless(item.to_dict()) for item in page.items]
                if not page.metadata["continue"]:
                    break
                query["_continue"] = page.metadata["continue"]
    finally:
        api_client.close()
    return found


def _timeless(obj: JSON) -> JSON:
    meta = obj["metadata"]
    assert meta.pop("uid") and meta.pop("creationTimestamp")
    for entry in meta["managedFields"]:
        assert entry.pop("time")
    return obj


def test_seeded_events_read_back_as_events_created_through_the_api(
    seeded: ServerProcess, created: ServerProcess
) -> None:
    from_seed, from_api = read_back(seeded), read_back(created)
    assert [len(from_seed[namespace]) for namespace in NAMESPACES] == [40, 40, 40]
    assert from_seed == from_api


def test_a_running_servers_data_directory_is_not_seeded(seeded: ServerProcess) -> None:
    with pytest.raises(DataDirInUseError):
        seed(seeded.data_dir, EventKind(), event_body, 1)
