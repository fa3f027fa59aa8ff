"""The sink an export names, opened (`open_sink`): JSON lines (written and synced to the file) and
webhooks (a 2xx answer) here; OTLP, Kafka and Loki in modules of their own. Each is a RecordSink
(coreio_export.sinkbase): the exporter advances its position only after `send` returned."""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import sys
from pathlib import Path

import aiohttp
import orjson

from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import (
    SINKS,
    STDOUT,
    JSONLinesSink,
    Sink,
    WebhookSink,
)
from coreio_export.connection import Api, ApiError
from coreio_export.kafka import kafka_sink
from coreio_export.loki import Loki
from coreio_export.otlp import otlp_sink
from coreio_export.records import cloud_event
from coreio_export.sinkbase import RecordSink, SinkError

MIB = 1 << 20
WEBHOOK_TIMEOUT = aiohttp.ClientTimeout(total=30.0)
CONTENT_TYPES = {"JSON": "application/json", "CloudEvents": "application/cloudevents-batch+json"}
ONE_CLOUDEVENT = "application/cloudevents+json"


class JSONLines:
    """One record a line, to standard output or appended to a file rotated by size."""

    name = "jsonLines"

    def __init__(self, sink: JSONLinesSink) -> None:
        self.path = None if sink.path == STDOUT else Path(sink.path)
        self.max_bytes = sink.maxSizeMiB * MIB
        self.max_files = sink.maxFiles

    async def send(self, batch: list[JSON]) -> None:
        data = b"".join(orjson.dumps(item) + b"\n" for item in batch)
        if self.path is None:
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except OSError as exc:  # a closed pipe, a full disk
                raise SinkError(f"cannot write to standard output: {exc.strerror or exc}") from None
            return
        try:
            await asyncio.to_thread(self._append, self.path, data)
        except OSError as exc:
            raise SinkError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def _append(self, path: Path, data: bytes) -> None:
        if self.max_bytes and path.exists() and path.stat().st_size + len(data) > self.max_bytes:
            self._rotate(path)
        with open(path, "ab") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())

    def _rotate(self, path: Path) -> None:
        """path.1 is the newest rotated file; beyond maxFiles the oldest goes."""
        for index in range(self.max_files - 1, 0, -1):
            older = path.with_name(f"{path.name}.{index}")
            if older.exists():
                older.replace(path.with_name(f"{path.name}.{index + 1}"))
        if self.max_files:
            path.replace(path.with_name(f"{path.name}.1"))
        else:
            path.unlink()

    async def close(self) -> None:
        return None


class Webhook:
    """Batches POSTed as a JSON array of records, or as CloudEvents (a batch, or one structured
    CloudEvent when batches hold one record)."""

    name = "webhook"

    def __init__(self, sink: WebhookSink, headers: dict[str, str], one_per_request: bool) -> None:
        self.url = sink.url
        self.format = sink.format
        self.headers = headers
        self.one_per_request = one_per_request
        self.ssl = trusted(sink.caBundle, "webhook")
        self.session = aiohttp.ClientSession(timeout=WEBHOOK_TIMEOUT)

    def _body(self, batch: list[JSON]) -> tuple[bytes, str]:
        if self.format != "CloudEvents":
            return orjson.dumps(batch), CONTENT_TYPES["JSON"]
        events = [cloud_event(item) for item in batch]
        if self.one_per_request and len(events) == 1:
            return orjson.dumps(events[0]), ONE_CLOUDEVENT
        return orjson.dumps(events), CONTENT_TYPES["CloudEvents"]

    async def send(self, batch: list[JSON]) -> None:
        body, kind = self._body(batch)
        headers = self.headers | {"Content-Type": kind}
        try:
            async with self.session.post(self.url, data=body, headers=headers, ssl=self.ssl) as response:
                answer = await response.read()
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise SinkError(f"POST {self.url}: {exc or type(exc).__name__}") from None
        if not 200 <= response.status < 300:
            first = answer.decode(errors="replace").strip().splitlines()[:1]
            raise SinkError(f"POST {self.url}: {response.status}{': ' + first[0][:200] if first else ''}")

    async def close(self) -> None:
        await self.session.close()


def sink_name(sink: Sink) -> str:
    """The field that names the sink (webhook, jsonLines or otlp): the metrics' `sink` label."""
    return next(name for name in SINKS if getattr(sink, name) is not None)


def trusted(bundle: str, sink: str) -> ssl.SSLContext | bool:
    """The TLS context that trusts `bundle` (PEM); True (the system's roots) when it is empty."""
    return tls_context(bundle, sink) if bundle else True


def tls_context(bundle: str, sink: str) -> ssl.SSLContext:
    """A TLS context trusting `bundle` (PEM), or the system's roots when it is empty."""
    try:
        return ssl.create_default_context(cadata=bundle or None)
    except (ssl.SSLError, ValueError) as exc:
        raise SinkError(f"the {sink}'s caBundle holds no usable certificate: {exc}") from None


async def open_sink(sink: Sink, api: Api, namespace: str, batch_size: int) -> RecordSink:
    if sink.jsonLines is not None:
        return JSONLines(sink.jsonLines)
    if sink.kafka is not None:
        sasl = sink.kafka.saslFrom
        values = await secret_headers(api, namespace, sasl.name, "saslFrom") if sasl is not None else None
        context = tls_context(sink.kafka.caBundle, "kafka sink") if sink.kafka.tls else None
        return kafka_sink(sink.kafka, values, context, f"{namespace}/{sasl.name if sasl else ''}")
    given = sink.webhook or sink.otlp or sink.loki
    assert given is not None  # validation: exactly one sink
    headers: dict[str, str] = {}
    if given.headersFrom is not None:
        headers = await secret_headers(api, namespace, given.headersFrom.name)
    if sink.otlp is not None:
        return otlp_sink(sink.otlp, headers, trusted(sink.otlp.caBundle, "otlp sink"))
    if sink.loki is not None:
        return Loki(sink.loki, headers, trusted(sink.loki.caBundle, "loki sink"))
    assert sink.webhook is not None
    return Webhook(sink.webhook, headers, one_per_request=batch_size == 1)


async def secret_headers(api: Api, namespace: str, name: str, field: str = "headersFrom") -> dict[str, str]:
    """The Secret's keys and values, decoded (headers, or SASL's settings); `field` the sink's
    field that names it."""
    try:
        secret = await api.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except ApiError as exc:
        raise SinkError(f"cannot read the Secret {namespace}/{name} of {field}: {exc}") from None
    try:
        data = secret.get("data") or {}
        return {key: base64.b64decode(value, validate=True).decode().strip() for key, value in data.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        what = "headers" if field == "headersFrom" else "SASL settings"
        raise SinkError(f"the Secret {namespace}/{name} of {field} cannot be read as {what}: {exc}") from None
