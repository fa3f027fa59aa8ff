"""The cluster reader of coreio and its operator (apiserver/cluster/reflector.py), against a real
server's list and watch of Events: it keeps what the server holds, and a fault of its own while
taking an object in (a parse that raises) is logged and followed by a fresh list, so the copy never
silently goes stale."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apiserver.cluster.connection import ClusterConnection
from apiserver.cluster.reflector import ClusterReader, Reflector
from apiserver.machinery.types import JSON
from tests.support.api import Api, ev_path, event
from tests.support.server import ServerProcess, start_server

NAMESPACE = "reflected"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server(tmp_path_factory.mktemp("reflector"))
    try:
        yield process
    finally:
        process.stop()


async def until(reflector: Reflector[str], holds: Callable[[set[str]], bool]) -> None:
    """Waits (15 s at most) until the names the reflector holds satisfy `holds`."""
    changed = asyncio.Event()
    reflector.on_change.append(changed.set)
    try:
        async with asyncio.timeout(15):
            while not holds({name for namespace, name in reflector.items if namespace == NAMESPACE}):
                changed.clear()
                await changed.wait()
    finally:
        reflector.on_change.remove(changed.set)


async def test_a_fault_taking_an_object_in_is_logged_and_the_resource_listed_again(
    server: ServerProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="apiserver.cluster.reflector")
    api = Api(server)
    assert api.post(ev_path(NAMESPACE), event("before", NAMESPACE)).status == 201
    faults = ["boom"]

    def parse(obj: JSON) -> str:
        name = str(obj["metadata"]["name"])
        if name in faults:
            faults.remove(name)  # once: a bug that this object's next reading does not meet
            raise KeyError(name)
        return name

    reader = ClusterReader(ClusterConnection(server.url, server.ssl_context()))
    reflector = Reflector(reader, ev_path(NAMESPACE), parse, min_backoff=0.05)
    reflector.start()
    try:
        await until(reflector, lambda names: names == {"before"})
        assert api.post(ev_path(NAMESPACE), event("boom", NAMESPACE)).status == 201
        assert api.post(ev_path(NAMESPACE), event("after", NAMESPACE)).status == 201
        await until(reflector, lambda names: names == {"before", "boom", "after"})
        assert faults == []
        assert "unexpected error; listing again" in caplog.text and "KeyError" in caplog.text
        assert api.delete(ev_path(NAMESPACE, "before")).status == 200
        await until(reflector, lambda names: names == {"boom", "after"})
    finally:
        await reflector.stop()
        await reader.close()
