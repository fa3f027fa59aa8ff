"""coreio-export's Loki sink into a real Grafana Loki (3.7, built from Go modules): the exporter
starts while Loki is down, so its first batches fail and are retried; once Loki runs, every Event
is one entry of its (job, namespace, type) stream, its line the record, its time when it was sent,
its dedup key in the structured metadata, each once. A record Loki refuses for good (longer than it
takes) is counted failed, named in lastError, and the export goes on. On SQLite: the sink does not
depend on the storage (test_exporter.py runs the delivery itself on both)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.api import Api, event
from tests.support.exporter import EXPORTS, ExporterProcess, export, exports_server, write_events
from tests.support.loki_build import ensure_loki
from tests.support.loki_server import LokiServer
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

WRITTEN = 60
EVENTS = "/apis/events.core.io/v1"


@pytest.fixture(scope="module", params=["sqlite"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    ensure_loki()  # built before the server starts
    yield from exports_server(request, tmp_path_factory, "exporter-loki")


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
        began = time.time_ns()
        written = asyncio.run(write_events(server, [ns], rate=100, seconds=WRITTEN / 100, prefix="l"))
        assert written.refused == 0
        wait_until(
            lambda: admin.get(path).json["status"].get("lastError"), timeout=60, message="a failed batch"
        )
        loki.start()  # down until now
        wait_until(lambda: admin.get(path).json["status"]["counts"].get("sent") == WRITTEN, timeout=60)
        assert exporter.stop() == 0
        stored = admin.get(f"{EVENTS}/namespaces/{ns}/events").json["items"]
        ended = time.time_ns()
        found = loki.entries(f'{{job="coreio-export",namespace="{ns}"}}', began, ended)
    finally:
        exporter.stop()
        loki.stop()
    assert len(found) == WRITTEN
    by_key = {labels["dedup_key"]: (labels, stamp, line) for labels, stamp, line in found}
    assert len(by_key) == WRITTEN  # each once
    for one in stored:
        meta = one["metadata"]
        labels, stamp, line = by_key[f"{meta['uid']}/{meta['resourceVersion']}"]
        assert (labels["job"], labels["namespace"], labels["type"]) == ("coreio-export", ns, one["type"])
        assert began <= stamp <= ended  # when the exporter sent it
        record = orjson.loads(line)
        assert (record["type"], record["event"]) == ("ADDED", one)


def test_a_record_loki_refuses_for_good_is_counted_failed_and_the_export_goes_on(
    server: ServerProcess, tmp_path: Path
) -> None:
    admin, ns = Api(server), f"loki-old-{uuid.uuid4().hex[:6]}"
    loki = LokiServer(tmp_path)
    loki.start()
    body = export("old", {"loki": {"url": loki.url}})
    assert admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body).status == 201
    exporter = ExporterProcess(server, ns, "old", tmp_path / "exporter.log")
    began = time.time_ns()
    exporter.start()
    path = f"{EXPORTS}/namespaces/{ns}/eventexports/old"
    try:
        wait_until(lambda: admin.get(path).json.get("status", {}).get("position"), timeout=30)
        # A record longer than the Loki's max_line_size (8 KB): refused with a 400.
        large = event("large", ns, metadata={"name": "large", "annotations": {"a": "x" * 10_000}})
        assert admin.post(f"{EVENTS}/namespaces/{ns}/events", large).status == 201
        wait_until(lambda: admin.get(path).json["status"]["counts"].get("failed") == 1, timeout=30)
        assert "refused the batch for good: 400" in admin.get(path).json["status"]["lastError"]
        asyncio.run(write_events(server, [ns], rate=100, seconds=0.1, prefix="after"))
        wait_until(lambda: admin.get(path).json["status"]["counts"].get("sent") == 10, timeout=30)
        assert exporter.stop() == 0
        found = loki.entries(f'{{namespace="{ns}"}}', began, time.time_ns())
    finally:
        exporter.stop()
        loki.stop()
    assert sorted(orjson.loads(line)["event"]["metadata"]["name"] for _, _, line in found) == [
        f"after-{i}" for i in range(10)
    ]
