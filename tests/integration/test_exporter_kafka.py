"""coreio-export's Kafka sink into a real Kafka broker (4.4, KRaft, one node, its jars from Maven
Central): the exporter starts while the broker is down, so its first batches fail and are retried;
once the broker runs, every Event of the three namespaces exported reaches the topic once, each
namespace's records in one partition (the key) and in revision order, with the dedup key and the
change as headers. Over TLS the broker is trusted through caBundle, and SASL (PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512) authenticates with the Secret's username and password (the sink's own classes:
standalone coreio serves no Secrets). On SQLite: the sink does not depend on the storage
(test_exporter.py runs the delivery itself on both)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from apiserver.resources.eventexport import KafkaSink
from coreio_export.kafka import Kafka, kafka_sink
from coreio_export.sinkbase import SinkError
from coreio_export.sinks import tls_context
from tests.support.api import Api
from tests.support.exporter import EXPORTS, ExporterProcess, export, exports_server, write_events
from tests.support.kafka_broker import PASSWORD, USER, KafkaBroker
from tests.support.kafka_build import ensure_kafka
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

WRITTEN = 90
TOPIC = "k8s-events"


@pytest.fixture(scope="module", params=["sqlite"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    ensure_kafka()  # fetched before the server starts
    yield from exports_server(request, tmp_path_factory, "exporter-kafka")


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


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-secured"), secured=True)
    try:
        broker.start()
        broker.create_topic(TOPIC, partitions=1)
        yield broker
    finally:
        broker.stop()


def records(prefix: str, count: int) -> list[dict[str, Any]]:
    return [
        {
            "dedupKey": f"{prefix}/{i}",
            "type": "ADDED",
            "resourceVersion": str(i),
            "event": {"metadata": {"namespace": "shop", "name": f"{prefix}-{i}"}},
        }
        for i in range(count)
    ]


def produced(sink: Kafka, batch: list[dict[str, Any]]) -> None:
    async def send() -> None:
        try:
            await sink.send(batch)
        finally:
            await sink.close()

    asyncio.run(send())


def test_the_sink_produces_over_tls_trusting_its_ca_bundle(secured: KafkaBroker) -> None:
    assert secured.ca is not None
    bundle = secured.ca.cert_pem.decode()
    sink = KafkaSink(brokers=[f"127.0.0.1:{secured.tls_port}"], topic=TOPIC, tls=True, caBundle=bundle)
    produced(kafka_sink(sink, None, tls_context(bundle, "kafka sink"), ""), records("tls", 5))
    untrusted = KafkaSink(brokers=[f"127.0.0.1:{secured.tls_port}"], topic=TOPIC, tls=True)
    with pytest.raises(SinkError, match="Kafka"):  # the system's roots do not know the broker's CA
        produced(kafka_sink(untrusted, None, tls_context("", "kafka sink"), ""), records("untrusted", 1))
    keys = [dict(m.headers)["dedupKey"] for m in secured.read(TOPIC, 5)]
    assert [k.decode() for k in keys] == [f"tls/{i}" for i in range(5)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_sink_authenticates_with_sasl_from_its_secret(secured: KafkaBroker, mechanism: str) -> None:
    prefix = mechanism.lower()
    topic = f"{TOPIC}-{prefix}"
    secured.create_topic(topic, partitions=1)
    sink = KafkaSink(brokers=[f"127.0.0.1:{secured.sasl_port}"], topic=topic)
    secret = {"mechanism": mechanism, "username": USER, "password": PASSWORD}
    produced(kafka_sink(sink, secret, None, "shop/sasl"), records(prefix, 3))
    wrong = secret | {"password": "not-it"}
    with pytest.raises(SinkError, match="Kafka"):
        produced(kafka_sink(sink, wrong, None, "shop/sasl"), records(f"refused-{prefix}", 1))
    taken = [dict(m.headers)["dedupKey"].decode() for m in secured.read(topic, 3)]
    assert taken == [f"{prefix}/{i}" for i in range(3)]
