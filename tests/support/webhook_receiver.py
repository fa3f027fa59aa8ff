"""A webhook receiver on loopback for the exporter's webhook sink: the stdlib's threading HTTP
server, started late (until then the sink is down: connection refused), optionally slow, parsing
each batch it takes: a JSON array of records, or CloudEvents read with the CloudEvents SDK
(structured mode, each CloudEvent of the batch)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from cloudevents.core.bindings.http import HTTPMessage, from_http
from cloudevents.core.formats.json import JSONFormat

BATCH_TYPE = "application/cloudevents-batch+json"


@dataclass
class Receiver:
    port: int
    delay: float = 0.0  # seconds each request is held before its 200
    records: list[dict[str, Any]] = field(default_factory=list)
    received_at: dict[str, float] = field(default_factory=dict)  # Event name -> first receipt (Unix time)
    content_types: set[str] = field(default_factory=set)
    headers: list[dict[str, str]] = field(default_factory=list)  # each request's, in order
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/events"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                kind = self.headers["Content-Type"]
                receiver.headers.append(dict(self.headers.items()))
                time.sleep(receiver.delay)  # the slow sink under test
                receiver.take(kind, body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def take(self, kind: str, body: bytes) -> None:
        self.content_types.add(kind)
        for record in records_of(kind, body):
            self.received_at.setdefault(record["event"]["metadata"]["name"], time.time())
            self.records.append(record)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def records_of(kind: str, body: bytes) -> list[dict[str, Any]]:
    """The records of one request of the webhook sink, as its JSON format sends them (an array of
    records) or read from its CloudEvents (one, or a batch) with the CloudEvents SDK."""
    if kind == "application/json":
        records: list[dict[str, Any]] = orjson.loads(body)
        return records
    items = orjson.loads(body) if kind == BATCH_TYPE else [orjson.loads(body)]
    return [from_cloudevent(item) for item in items]


def from_cloudevent(item: dict[str, Any]) -> dict[str, Any]:
    message = HTTPMessage(headers={"content-type": "application/cloudevents+json"}, body=orjson.dumps(item))
    event = from_http(message, JSONFormat())
    data = event.get_data()
    assert isinstance(data, dict)
    return {
        "dedupKey": event.get_id(),
        "resourceVersion": data["metadata"]["resourceVersion"],
        "event": data,
        "type": event.get_type(),
    }
