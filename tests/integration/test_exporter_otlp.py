"""coreio-export's OTLP sink into the real OpenTelemetry Collector (built from Go modules), over
OTLP/gRPC and OTLP/HTTP: the exporter starts while the collector is down, so its first batches
are refused and retried; once the collector runs, every Event written reaches it once, as the log
record the collector's own Kubernetes Events receiver would make (note, severity, reason, the
regarded object as the resource), with the dedup key as log.record.uid. Over TLS, the collector's
certificate is trusted through the sink's caBundle. A batch larger than the collector takes in one
request is sent again in halves, none lost. On SQLite: the sink does not depend on the storage
(test_exporter.py runs the delivery itself on both)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api
from tests.support.exporter import EXPORTS, ExporterProcess, export, exports_server, write_events
from tests.support.otel_collector import Collector
from tests.support.otelcol_build import ensure_collector
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

EVENTS = "/apis/events.core.io/v1"
WRITTEN = 60
LARGE = 1500  # Events in the batch too large for the collector
# OpenTelemetry's severity numbers: WARN is 13, INFO is 9 (the collector writes the number).
SEVERITY = {"Warning": (13, "Warning"), "Normal": (9, "Normal")}


@pytest.fixture(scope="module")
def collector_binary() -> Path:
    return ensure_collector()


@pytest.fixture(scope="module", params=["sqlite"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, collector_binary: Path
) -> Iterator[ServerProcess]:
    yield from exports_server(request, tmp_path_factory, "exporter-otlp")


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    collector = Collector(tmp_path)
    try:
        yield collector
    finally:
        collector.stop()


@pytest.fixture
def tls_collector(tmp_path: Path) -> Iterator[Collector]:
    collector = Collector(tmp_path, tls=True)
    try:
        collector.start()
        yield collector
    finally:
        collector.stop()


def nanos(text: str) -> int:
    moment = datetime.fromisoformat(text)
    return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_events_reach_the_collector_once_as_log_records(
    server: ServerProcess, collector: Collector, tmp_path: Path, protocol: str
) -> None:
    admin, ns = Api(server), f"otlp-{uuid.uuid4().hex[:6]}"
    endpoint = collector.grpc_url if protocol == "grpc" else collector.http_url
    body = export("to-otel", {"otlp": {"endpoint": endpoint, "protocol": protocol}})
    assert admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body).status == 201
    exporter = ExporterProcess(server, ns, "to-otel", tmp_path / "exporter.log")
    exporter.start()
    try:
        path = f"{EXPORTS}/namespaces/{ns}/eventexports/to-otel"
        wait_until(lambda: admin.get(path).json.get("status", {}).get("position"), timeout=30)
        written = asyncio.run(write_events(server, [ns], rate=100, seconds=WRITTEN / 100, prefix="e"))
        assert written.refused == 0
        wait_until(
            lambda: admin.get(path).json["status"].get("lastError"),
            timeout=30,
            message="the refused batch in the status' lastError",
        )
        collector.start()  # down until now: the batches were refused and are retried
        wait_until(lambda: len(collector.taken()) >= WRITTEN, timeout=60, message="every record collected")
        assert exporter.stop() == 0
    finally:
        exporter.stop()
    check_records(admin, ns, collector.taken())
    status = admin.get(path).json["status"]
    assert status["counts"]["sent"] == WRITTEN
    assert status["counts"]["failed"] >= 1  # the batches the collector was down for


def check_records(admin: Api, ns: str, taken: list[Any]) -> None:
    stored = {e["metadata"]["name"]: e for e in admin.get(f"{EVENTS}/namespaces/{ns}/events").json["items"]}
    assert len(stored) == WRITTEN
    by_key = {r.attributes["log.record.uid"]: r for r in taken}
    assert len(by_key) == len(taken) == WRITTEN  # each once
    for event in stored.values():
        meta = event["metadata"]
        record = by_key[f"{meta['uid']}/{meta['resourceVersion']}"]
        assert (record.severity_number, record.severity_text) == SEVERITY[event["type"]]
        assert record.body == event["note"]
        assert record.time_unix_nano == nanos(event["eventTime"])
        assert record.scope == "coreio-export"
        assert record.attributes | {"k8s.event.uid": meta["uid"]} == {
            "log.record.uid": f"{meta['uid']}/{meta['resourceVersion']}",
            "k8s.event.change": "ADDED",
            "k8s.event.name": meta["name"],
            "k8s.event.uid": meta["uid"],
            "k8s.event.resource_version": meta["resourceVersion"],
            "k8s.namespace.name": ns,
            "k8s.event.type": event["type"],
            "k8s.event.reason": event["reason"],
            "k8s.event.action": event["action"],
            "k8s.event.reporting_controller": event["reportingController"],
            "k8s.event.reporting_instance": event["reportingInstance"],
        }
        assert record.resource == {
            "k8s.object.kind": "Pod",
            "k8s.object.name": "web-0",
            "k8s.object.api_version": "v1",
        }


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_collector_over_tls_is_trusted_through_the_ca_bundle(
    server: ServerProcess, tls_collector: Collector, tmp_path: Path, protocol: str
) -> None:
    admin, ns = Api(server), f"otlps-{uuid.uuid4().hex[:6]}"
    assert tls_collector.ca is not None
    endpoint = tls_collector.grpc_url if protocol == "grpc" else tls_collector.http_url
    sink = {"endpoint": endpoint, "protocol": protocol, "caBundle": tls_collector.ca.cert_pem.decode()}
    assert admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", export("tls", {"otlp": sink})).status == 201
    exporter = ExporterProcess(server, ns, "tls", tmp_path / "exporter.log")
    exporter.start()
    try:
        path = f"{EXPORTS}/namespaces/{ns}/eventexports/tls"
        wait_until(lambda: admin.get(path).json.get("status", {}).get("position"), timeout=30)
        asyncio.run(write_events(server, [ns], rate=100, seconds=0.1, prefix="s"))
        wait_until(lambda: len(tls_collector.taken()) >= 10, timeout=30, message="10 records over TLS")
        assert exporter.stop() == 0
    finally:
        exporter.stop()
    assert sorted(r.attributes["k8s.event.name"] for r in tls_collector.taken()) == [
        f"s-{i}" for i in range(10)
    ]
    assert admin.get(path).json["status"]["counts"].get("failed", 0) == 0  # 0 is left out


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_batch_too_large_for_the_collector_is_sent_in_halves(
    server: ServerProcess, tmp_path: Path, protocol: str
) -> None:
    """1,500 Events of a 1,000-character note pile up while the collector is down; the batch the
    exporter then holds (about 2 MB) is more than the collector takes in one request (1 MiB over
    gRPC, 256 KiB over HTTP), which it refuses for its size: sent again in halves (the exporter
    says so), every record arrives once, and none is counted failed for its size."""
    collector = Collector(tmp_path, small=True)
    admin, ns = Api(server), f"otlp-{uuid.uuid4().hex[:6]}"
    endpoint = collector.grpc_url if protocol == "grpc" else collector.http_url
    body = export("large", {"otlp": {"endpoint": endpoint, "protocol": protocol}})
    body["spec"]["batch"] = {"maxEvents": LARGE, "maxWait": "3s"}
    assert admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body).status == 201
    exporter = ExporterProcess(server, ns, "large", tmp_path / "exporter.log")
    exporter.start()
    path = f"{EXPORTS}/namespaces/{ns}/eventexports/large"
    try:
        wait_until(lambda: admin.get(path).json.get("status", {}).get("position"), timeout=30)
        note = {"note": "n" * 1000}
        written = asyncio.run(
            write_events(server, [ns], rate=1000, seconds=LARGE / 1000, prefix="big", fields=note)
        )
        assert written.refused == 0
        wait_until(lambda: admin.get(path).json["status"].get("lastError"), timeout=30)
        collector.start()
        # Every record: on a loaded machine the 1,500 take longer to write than the batch waits,
        # and the last few come in a second batch, sent after the first.
        wait_until(
            lambda: len(collector.taken()) >= LARGE, timeout=60, message=lambda: exporter.log.read_text()
        )
        assert exporter.stop() == 0
    finally:
        exporter.stop()
        collector.stop()
    keys = [r.attributes["log.record.uid"] for r in collector.taken()]
    assert len(keys) == len(set(keys)) == LARGE
    assert "too large for the collector: sent again in halves" in (tmp_path / "exporter.log").read_text()
    status = admin.get(path).json["status"]
    assert status["counts"]["sent"] == LARGE
    assert "too large" not in status.get("lastError", "")
