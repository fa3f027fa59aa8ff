"""A real OpenTelemetry Collector (tests.support.otelcol_build) receiving OTLP on loopback, gRPC and
HTTP, and passing every log record on, with its OTLP/HTTP exporter in JSON, to a receiver of this
module's own that keeps them: what the collector took in, read back as the collector re-encodes it.
The exporter neither queues nor retries, so the collector answers the sender only once the records
reached the receiver."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from apiserver import pki
from tests.support.otelcol_build import ensure_collector
from tests.support.server import free_port
from tests.support.waiting import stopped, wait_until

CONFIG = """\
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}{tls}{grpc_limit}
      http:
        endpoint: 127.0.0.1:{http}{tls}{http_limit}
exporters:
  otlphttp:
    logs_endpoint: http://127.0.0.1:{received}/v1/logs
    encoding: json
    compression: none
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [otlphttp]
"""
# The receiver's smallest limits on what one request may carry (`small`): 1 MiB over gRPC (its
# setting counts whole MiB; 4 MiB by default), 256 KiB over HTTP (20 MiB by default).
GRPC_LIMIT = """
        max_recv_msg_size_mib: 1"""
HTTP_LIMIT = """
        max_request_body_size: 262144"""
TLS = """
        tls:
          cert_file: {cert}
          key_file: {key}"""


def plain(value: dict[str, Any]) -> Any:
    """An OTLP JSON AnyValue as a Python value (protojson writes 64-bit integers as strings)."""
    if "intValue" in value:
        return int(value["intValue"])
    return next(iter(value.values()), None)


@dataclass
class LogRecord:
    """One log record as the collector passed it on: its resource's attributes and its own."""

    resource: dict[str, Any]
    attributes: dict[str, Any]
    body: Any
    severity_number: int
    severity_text: str
    time_unix_nano: int
    scope: str


def records(document: dict[str, Any]) -> list[LogRecord]:
    out = []
    for resource_logs in document.get("resourceLogs", []):
        resource = resource_logs.get("resource", {}).get("attributes", [])
        for scope_logs in resource_logs.get("scopeLogs", []):
            for item in scope_logs.get("logRecords", []):
                out.append(
                    LogRecord(
                        resource={a["key"]: plain(a["value"]) for a in resource},
                        attributes={a["key"]: plain(a["value"]) for a in item.get("attributes", [])},
                        body=plain(item.get("body", {})),
                        severity_number=int(item.get("severityNumber", 0)),
                        severity_text=item.get("severityText", ""),
                        time_unix_nano=int(item.get("timeUnixNano", 0)),
                        scope=scope_logs.get("scope", {}).get("name", ""),
                    )
                )
    return out


@dataclass
class Collector:
    """The collector process and the receiver behind it. `grpc_url` and `http_url` are what an
    export's otlp sink names; nothing listens there before `start`. With `tls`, both listen over
    TLS with a certificate for 127.0.0.1 of a CA of its own (`ca`); with `small`, its receiver
    takes requests no larger than GRPC_LIMIT and HTTP_LIMIT."""

    directory: Path
    tls: bool = False
    small: bool = False
    ca: pki.KeyPair | None = None
    grpc_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    received: list[LogRecord] = field(default_factory=list)
    first: dict[str, float] = field(default_factory=dict)  # Event name -> first receipt (Unix time)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _receiver: ThreadingHTTPServer | None = None
    _process: subprocess.Popen[bytes] | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def grpc_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.http_port}"

    def _tls_block(self) -> str:
        if not self.tls:
            return ""
        self.ca = pki.create_ca("collector-ca")
        cert, key = self.directory / "collector.crt", self.directory / "collector.key"
        pki.issue_serving_certificate(self.ca, ["127.0.0.1"]).save(cert, key)
        return TLS.format(cert=cert, key=key)

    @property
    def log(self) -> Path:
        return self.directory / "otelcol.log"

    def start(self) -> None:
        self._receiver = self._serve()
        config = self.directory / "otelcol.yaml"
        received_port = self._receiver.server_address[1]
        tls = self._tls_block()
        ports = {"grpc": self.grpc_port, "http": self.http_port, "received": received_port}
        limits = {"grpc_limit": GRPC_LIMIT, "http_limit": HTTP_LIMIT} if self.small else {}
        config.write_text(CONFIG.format(tls=tls, **({"grpc_limit": "", "http_limit": ""} | limits), **ports))
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [str(ensure_collector()), "--config", f"file:{config}"], stdout=log, stderr=log
            )
        wait_until(self._both_listening, timeout=60, message=self._failed)

    def _both_listening(self) -> bool:
        return self._listening(self.grpc_port) and self._listening(self.http_port)

    def _listening(self, port: int) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise AssertionError(self._failed())
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    def _failed(self) -> str:
        return "the collector listening; its log:\n" + self.log.read_text()[-3000:]

    def _serve(self) -> ThreadingHTTPServer:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                taken, now = records(json.loads(body)), time.time()
                with collector._lock:
                    collector.received += taken
                    for record in taken:
                        collector.first.setdefault(str(record.attributes.get("k8s.event.name", "")), now)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def taken(self) -> list[LogRecord]:
        with self._lock:
            return list(self.received)

    def first_seen(self) -> dict[str, float]:
        with self._lock:
            return dict(self.first)

    def stop(self) -> None:
        stopped(self._process)
        if self._receiver is not None:
            self._receiver.shutdown()
            self._receiver.server_close()
