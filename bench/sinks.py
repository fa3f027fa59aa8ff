"""The receiving end of each sink for bench.export: the real receiving software where the tests
run one (the OpenTelemetry Collector, a Kafka broker, Loki), each record stamped when the receiving
end first shows it. Every harness gives the records as the exporter's JSON records (dedupKey,
resourceVersion, the Event's name and namespace at least) and `received_at` (Event name -> Unix
time of first receipt).

How receipt is seen: the webhook receiver's request; the JSON-lines file polled every 5 ms; the
records the collector passes on to its OTLP/HTTP exporter's endpoint; `otlpHttp`: OTLP/HTTP straight
to the bench's own receiver, the end the collector's k8sobjects receiver sends to too (so the two
exporters meet the same end); a Kafka consumer reading the topic as it fills; Loki's query API
polled every 100 ms (so Loki's latency includes up to that)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Protocol

import orjson
from aiokafka import AIOKafkaConsumer
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from bench.receiving import PROTOBUF, ReceivingProcess
from tests.support.kafka_broker import KafkaBroker
from tests.support.loki_server import LokiServer
from tests.support.otel_collector import Collector, LogRecord
from tests.support.otel_collector import records as otlp_records
from tests.support.waiting import stopped
from tests.support.webhook_receiver import records_of

TOPIC = "bench-events"


class Harness(Protocol):
    def target(self) -> dict[str, Any]:
        """The export's sink."""
        ...

    def start(self) -> None: ...

    def records(self) -> list[dict[str, Any]]: ...

    def received_at(self) -> dict[str, float]: ...

    def stop(self) -> None: ...


class Stamped:
    """Records kept with the time each Event name was first seen."""

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []
        self._first: dict[str, float] = {}
        self._lock = threading.Lock()

    def take(self, record: dict[str, Any], at: float) -> None:
        with self._lock:
            self._first.setdefault(record["event"]["metadata"]["name"], at)
            self._records.append(record)

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records)

    def received_at(self) -> dict[str, float]:
        with self._lock:
            return dict(self._first)


class Stoppable(Protocol):
    def stop(self) -> None: ...


class ExporterEnd:
    """Another project's exporter, run as a process, and the receiving end it sends to."""

    _process: subprocess.Popen[bytes] | None
    receiver: Stoppable

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def stop(self) -> None:
        stopped(self._process)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.receiver.stop()


class Polling(Stamped):
    """A thread calling `poll` every `interval` seconds until stopped."""

    interval = 0.005

    def __init__(self) -> None:
        super().__init__()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stopped.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()


class JSONLinesTail(Polling):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._offset, self._pending = 0, b""

    def target(self) -> dict[str, Any]:
        return {"jsonLines": {"path": str(self.path)}}

    def poll(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as file:
            file.seek(self._offset)
            chunk = file.read()
        self._offset += len(chunk)
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        now = time.time()
        for line in lines:
            self.take(orjson.loads(line), now)


class ReceivedEnd(Polling):
    """An end whose requests a receiving process (bench/receiving.py) takes, each passed to
    `take_request` with the time that process read it."""

    interval = 0.02

    def __init__(self, directory: Path, kept: bool = True) -> None:
        super().__init__()
        self.receiver = ReceivingProcess(directory / "requests", kept)

    def start(self) -> None:
        self.receiver.start()
        super().start()

    def stop(self) -> None:
        self.receiver.stop()
        super().stop()
        self.poll()  # what came before the end

    def poll(self) -> None:
        for at, kind, body in self.receiver.read():
            self.take_request(at, kind, body)

    def take_request(self, at: float, kind: str, body: bytes) -> None:
        raise NotImplementedError


class WebhookEnd(ReceivedEnd):
    """The webhook sink's receiving end."""

    def target(self) -> dict[str, Any]:
        return {"webhook": {"url": self.receiver.url}}

    def take_request(self, at: float, kind: str, body: bytes) -> None:
        for record in records_of(kind, body):
            self.take(record, at)


def from_log_record(record: LogRecord) -> dict[str, Any]:
    attributes = record.attributes
    meta = {"name": attributes["k8s.event.name"], "namespace": attributes["k8s.namespace.name"]}
    return {
        "dedupKey": attributes["log.record.uid"],
        "resourceVersion": attributes["k8s.event.resource_version"],
        "event": {"metadata": meta},
    }


class CollectorEnd:
    """OTLP over gRPC into the collector, which passes each record on as received."""

    def __init__(self, directory: Path) -> None:
        self.collector = Collector(directory)

    def target(self) -> dict[str, Any]:
        return {"otlp": {"endpoint": self.collector.grpc_url, "protocol": "grpc"}}

    def start(self) -> None:
        self.collector.start()

    def records(self) -> list[dict[str, Any]]:
        return [from_log_record(r) for r in self.collector.taken()]

    def received_at(self) -> dict[str, float]:
        return self.collector.first_seen()

    def stop(self) -> None:
        self.collector.stop()


def _protobuf_as_json(body: bytes) -> dict[str, Any]:
    """An ExportLogsServiceRequest in protobuf (coreio-export's http/protobuf) as OTLP JSON."""
    request = ExportLogsServiceRequest.FromString(body)
    document: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    return document


def _field(value: Any, *keys: str) -> Any:
    """A field of an OTLP JSON kvlist (`plain` leaves a kvlist as {"values": [...]})."""
    for key in keys:
        entries = value.get("values", []) if isinstance(value, dict) else []
        found: Any = next((e["value"] for e in entries if e.get("key") == key), {})
        value = (
            found.get("kvlistValue", next(iter(found.values()), None)) if isinstance(found, dict) else None
        )
    return value


class OtlpHttpEnd(ReceivedEnd):
    """A receiver of OTLP/HTTP in JSON of the bench's own, in a process of its own
    (bench/receiving.py), taking coreio-export's log records and those of the collector's
    k8sobjects receiver (bench/k8sobjects.py: the watch event as the body) alike, so that both
    exporters send to the same end. `seen`: (watch type, name) of each of the latter's records.

    HTTP/1.0, a connection a request: kept connections (HTTP/1.1) made the collector's exporter
    wait about 4 s a request here (not found why), which no sender meets in use."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, kept=False)
        self.seen: list[tuple[str, str]] = []
        super().start()

    @property
    def url(self) -> str:
        return self.receiver.url.rstrip("/")

    def target(self) -> dict[str, Any]:
        return {"otlp": {"endpoint": self.url, "protocol": "http/protobuf"}}

    def start(self) -> None:
        return None  # serving since it was made

    def take_request(self, at: float, kind: str, body: bytes) -> None:
        try:
            document = _protobuf_as_json(body) if kind == PROTOBUF else json.loads(body)
        except ValueError as error:
            raise ValueError(f"an OTLP/HTTP request of {kind!r} unread ({error}): {body[:200]!r}") from error
        self._take_document(document, at)

    def _take_document(self, document: dict[str, Any], now: float) -> None:
        for record in otlp_records(document):
            if "k8s.event.name" in record.attributes:  # coreio-export's
                self.take(from_log_record(record), now)
                continue
            name = str(_field(record.body, "object", "metadata", "name"))
            with self._lock:
                self.seen.append((str(_field(record.body, "type")), name))
            self.take({"event": {"metadata": {"name": name}}}, now)


class KafkaEnd(Stamped):
    """A topic of three partitions on one broker, read by a consumer as it fills."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.broker = KafkaBroker(directory)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._consume()), daemon=True)

    def target(self) -> dict[str, Any]:
        return {"kafka": {"brokers": [self.broker.bootstrap], "topic": TOPIC}}

    def start(self) -> None:
        self.broker.start()
        self.broker.create_topic(TOPIC, partitions=3)
        self._thread.start()

    async def _consume(self) -> None:
        consumer = AIOKafkaConsumer(
            TOPIC, bootstrap_servers=self.broker.bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            while not self._stopped.is_set():
                for messages in (await consumer.getmany(timeout_ms=100)).values():
                    now = time.time()
                    for message in messages:
                        self.take(orjson.loads(message.value), now)
        finally:
            await consumer.stop()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        self.broker.stop()


class LokiEnd(Polling):
    """Loki's query API polled for the entries of the bench's streams."""

    interval = 0.1

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.loki = LokiServer(directory)
        self._seen: set[str] = set()
        self._since = time.time_ns() - 3600 * 10**9

    def target(self) -> dict[str, Any]:
        return {"loki": {"url": self.loki.url}}

    def start(self) -> None:
        self.loki.start()
        super().start()

    def poll(self) -> None:
        query = urllib.parse.urlencode(
            {"query": '{job="coreio-export"}', "start": self._since, "limit": 5000, "direction": "forward"}
        )
        try:
            with urllib.request.urlopen(
                f"{self.loki.url}/loki/api/v1/query_range?{query}", timeout=10
            ) as answer:
                body = json.loads(answer.read())
        except OSError:
            return
        now, newest = time.time(), self._since
        for stream in body["data"]["result"]:
            for stamp, line, *_ in stream["values"]:
                key = stream["stream"].get("dedup_key", "") + stamp
                newest = max(newest, int(stamp))
                if key not in self._seen:
                    self._seen.add(key)
                    self.take(orjson.loads(line), now)
        # The exporter times each entry when it first sends it, one nanosecond apart: the next
        # page starts after the newest seen.
        self._since = newest + 1 if newest > self._since else self._since

    def stop(self) -> None:
        super().stop()
        self.loki.stop()


SINKS = ("jsonLines", "webhook", "otlp", "otlpHttp", "kafka", "loki")


def harness(sink: str, directory: Path) -> Harness:
    directory.mkdir(parents=True, exist_ok=True)
    if sink == "jsonLines":
        return JSONLinesTail(directory / "records.jsonl")
    if sink == "webhook":
        return WebhookEnd(directory)
    if sink == "otlp":
        return CollectorEnd(directory)
    if sink == "otlpHttp":
        return OtlpHttpEnd(directory)
    if sink == "kafka":
        return KafkaEnd(directory)
    return LokiEnd(directory)
