"""coreio-export's Kafka sink into a real Kafka broker (4.4, KRaft, one node, its jars from Maven
Central): the exporter starts while the broker is down, so its first batches fail and are retried;
once the broker runs, every Event of the three namespaces exported reaches the topic once, each
namespace's records in one partition (the key) and in revision order, with the dedup key and the
change as headers. On SQLite: the sink does not depend on the storage (test_exporter.py runs the
delivery itself on both)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.api import Api
from tests.support.exporter import EXPORTS, GROUP_VERSION, ExporterProcess, export, write_events
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_build import ensure_kafka
from tests.support.server import ServerProcess, module_server
from tests.support.waiting import wait_until

WRITTEN = 90
TOPIC = "k8s-events"


@pytest.fixture(scope="module", params=["sqlite"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    ensure_kafka()  # fetched before the server starts
    yield from module_server(
        request, tmp_path_factory, "exporter-kafka", [f"--runtime-config={GROUP_VERSION}=true"]
    )


def test_events_reach_the_topic_once_in_order_per_namespace(server: ServerProcess, tmp_path: Path) -> None:
    admin, run = Api(server), uuid.uuid4().hex[:6]
    namespaces = [f"kafka-{run}-{i}" for i in range(3)]
    broker = KafkaBroker(tmp_path)
    sink = {"kafka": {"brokers": [broker.bootstrap], "topic": TOPIC}}
    body = export("to-kafka", sink, namespaces=namespaces)
    assert admin.post(f"{EXPORTS}/namespaces/{namespaces[0]}/eventexports", body).status == 201
    exporter = ExporterProcess(server, namespaces[0], "to-kafka", tmp_path / "exporter.log")
    exporter.start()
    path = f"{EXPORTS}/namespaces/{namespaces[0]}/eventexports/to-kafka"
    try:
        wait_until(lambda: admin.get(path).json.get("status", {}).get("position"), timeout=30)
        written = asyncio.run(write_events(server, namespaces, rate=200, seconds=WRITTEN / 200, prefix="k"))
        assert written.refused == 0
        wait_until(
            lambda: admin.get(path).json["status"].get("lastError"), timeout=60, message="a failed batch"
        )
        broker.start()  # down until now
        broker.create_topic(TOPIC, partitions=3)
        messages = broker.read(TOPIC, WRITTEN)
        assert exporter.stop() == 0
    finally:
        exporter.stop()
        broker.stop()
    assert len(messages) == WRITTEN
    keys = [dict(m.headers)["dedupKey"].decode() for m in messages]
    assert len(set(keys)) == WRITTEN  # each once
    stored = {(ns, int(rv)) for ns, _, rv, _ in written.events}
    partitions: dict[str, set[int]] = {}
    order: dict[str, list[int]] = {}
    for m in messages:
        record = orjson.loads(m.value)
        meta = record["event"]["metadata"]
        assert m.key.decode() == meta["namespace"]
        assert dict(m.headers) == {"dedupKey": record["dedupKey"].encode(), "type": b"ADDED"}
        assert record["dedupKey"] == f"{meta['uid']}/{meta['resourceVersion']}"
        partitions.setdefault(meta["namespace"], set()).add(m.partition)
        order.setdefault(meta["namespace"], []).append(int(meta["resourceVersion"]))
    assert {(ns, rv) for ns, rvs in order.items() for rv in rvs} == stored
    assert all(len(p) == 1 for p in partitions.values())  # one partition a namespace
    assert all(rvs == sorted(rvs) for rvs in order.values())  # in revision order there
    assert admin.get(path).json["status"]["counts"]["sent"] == WRITTEN
