"""coreio-export's Loki sink into a real Grafana Loki (3.7, built from Go modules): the exporter
starts while Loki is down, so its first batches fail and are retried; once Loki runs, every Event
is one entry of its (job, namespace, type) stream, its line the record, its time the Event's, its
dedup key in the structured metadata, each once. On SQLite: the sink does not depend on the storage
(test_exporter.py runs the delivery itself on both)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from tests.support.api import Api
from tests.support.exporter import EXPORTS, GROUP_VERSION, ExporterProcess, export, write_events
from tests.support.loki_build import ensure_loki
from tests.support.loki_server import LokiServer
from tests.support.server import ServerProcess, module_server
from tests.support.waiting import wait_until

WRITTEN = 60
EVENTS = "/apis/events.core.io/v1"


@pytest.fixture(scope="module", params=["sqlite"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    ensure_loki()  # built before the server starts
    enabled = [f"--runtime-config={GROUP_VERSION}=true"]
    yield from module_server(request, tmp_path_factory, "exporter-loki", enabled)


def test_events_become_loki_entries_once(server: ServerProcess, tmp_path: Path) -> None:
    admin, ns = Api(server), f"loki-{uuid.uuid4().hex[:6]}"
    loki = LokiServer(tmp_path)
    assert (
        admin.post(
            f"{EXPORTS}/namespaces/{ns}/eventexports", export("to-loki", {"loki": {"url": loki.url}})
        ).status
        == 201
    )
    exporter = ExporterProcess(server, ns, "to-loki", tmp_path / "exporter.log")
    exporter.start()
    path = f"{EXPORTS}/namespaces/{ns}/eventexports/to-loki"
    try:
        wait_until(lambda: admin.get(path).json.get("status", {}).get("position"), timeout=30)
        written = asyncio.run(write_events(server, [ns], rate=100, seconds=WRITTEN / 100, prefix="l"))
        assert written.refused == 0
        wait_until(
            lambda: admin.get(path).json["status"].get("lastError"), timeout=60, message="a failed batch"
        )
        loki.start()  # down until now
        wait_until(lambda: admin.get(path).json["status"]["counts"].get("sent") == WRITTEN, timeout=60)
        assert exporter.stop() == 0
        stored = admin.get(f"{EVENTS}/namespaces/{ns}/events").json["items"]
        at = datetime.fromisoformat(stored[0]["eventTime"])
        start = (int(at.timestamp()) - 60) * 10**9
        found = loki.entries(f'{{job="coreio-export",namespace="{ns}"}}', start, time.time_ns())
    finally:
        exporter.stop()
        loki.stop()
    assert len(found) == WRITTEN
    by_key = {labels["dedup_key"]: (labels, stamp, line) for labels, stamp, line in found}
    assert len(by_key) == WRITTEN  # each once
    for event in stored:
        meta = event["metadata"]
        labels, stamp, line = by_key[f"{meta['uid']}/{meta['resourceVersion']}"]
        assert (labels["job"], labels["namespace"], labels["type"]) == ("coreio-export", ns, event["type"])
        moment = datetime.fromisoformat(event["eventTime"])
        assert stamp == int(moment.timestamp()) * 10**9 + moment.microsecond * 1000
        record = orjson.loads(line)
        assert (record["type"], record["event"]) == ("ADDED", event)
