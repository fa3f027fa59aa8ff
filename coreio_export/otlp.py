"""The OTLP sink: each record an OpenTelemetry log record, sent to a collector over OTLP/HTTP
(protobuf bodies) or OTLP/gRPC, with the messages of opentelemetry-proto.

A record becomes what the collector's own Kubernetes Events receiver (k8seventsreceiver) makes of an
Event, so that pipelines written for it read ours: the note as the body, the type as the severity
(Warning: WARN, Normal: INFO), the Event's reason, action, name, uid and namespace as attributes, and
the object it regards as the resource (`k8s.object.*`). Added to those: the dedup key as
`log.record.uid` (the semantic conventions' unique id of a log record), the change
(`k8s.event.change`), the resourceVersion, the reporting controller and instance, and the type."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs, SeverityNumber
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import OTLPSink
from coreio_export.sinkbase import RecordSink, SinkError, SinkRejected

log = logging.getLogger("coreio.export")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SCOPE = "coreio-export"  # the instrumentation scope of every record
TIMEOUT_SECONDS = 30.0
LOGS_PATH = "/v1/logs"
PROTOBUF = "application/x-protobuf"
GRPC_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
SEVERITY = {"Warning": SeverityNumber.SEVERITY_NUMBER_WARN, "Normal": SeverityNumber.SEVERITY_NUMBER_INFO}
# The regarded object's fields, as the resource's attributes (k8seventsreceiver's names).
OBJECT_ATTRIBUTES = {
    "kind": "k8s.object.kind",
    "name": "k8s.object.name",
    "uid": "k8s.object.uid",
    "fieldPath": "k8s.object.fieldpath",
    "apiVersion": "k8s.object.api_version",
    "resourceVersion": "k8s.object.resource_version",
}


def _nanos(text: object) -> int:
    """An RFC 3339 time as Unix nanoseconds; 0 (unknown, for OTLP) when there is none or it is
    not after 1970 (OTLP's times are unsigned)."""
    if not isinstance(text, str) or not text:
        return 0
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0, (moment - EPOCH) // timedelta(microseconds=1) * 1000)


def _attributes(pairs: dict[str, object]) -> Iterator[KeyValue]:
    """Strings and integers as attributes; empty strings are left out."""
    for key, value in pairs.items():
        if isinstance(value, bool) or value is None or value == "":
            continue
        if isinstance(value, int):
            yield KeyValue(key=key, value=AnyValue(int_value=value))
        else:
            yield KeyValue(key=key, value=AnyValue(string_value=str(value)))


def occurred_nanos(event: JSON) -> int:
    """When the Event's latest occurrence was: its series' last observation, else its eventTime,
    else the deprecated timestamps, else its creation."""
    series = event.get("series") or {}
    meta = event.get("metadata") or {}
    for text in (
        series.get("lastObservedTime"),
        event.get("eventTime"),
        event.get("deprecatedLastTimestamp"),
        meta.get("creationTimestamp"),
    ):
        if nanos := _nanos(text):
            return nanos
    return 0


def log_record(item: JSON, observed: int) -> LogRecord:
    event = item["event"]
    meta = event.get("metadata") or {}
    series = event.get("series") or {}
    kind = str(event.get("type") or "")
    count = series.get("count") if isinstance(series.get("count"), int) else event.get("deprecatedCount")
    attributes = {
        "log.record.uid": item["dedupKey"],
        "k8s.event.change": item["type"],
        "k8s.event.name": meta.get("name"),
        "k8s.event.uid": meta.get("uid"),
        "k8s.event.resource_version": item["resourceVersion"],
        "k8s.namespace.name": meta.get("namespace"),
        "k8s.event.type": kind,
        "k8s.event.reason": event.get("reason"),
        "k8s.event.action": event.get("action"),
        "k8s.event.reporting_controller": event.get("reportingController"),
        "k8s.event.reporting_instance": event.get("reportingInstance"),
        "k8s.event.count": count if isinstance(count, int) else None,
    }
    return LogRecord(
        time_unix_nano=occurred_nanos(event),
        observed_time_unix_nano=observed,
        severity_number=SEVERITY.get(kind, SeverityNumber.SEVERITY_NUMBER_UNSPECIFIED),
        severity_text=kind,
        body=AnyValue(string_value=str(event.get("note") or "")),
        attributes=list(_attributes(attributes)),
    )


def export_request(batch: list[JSON]) -> ExportLogsServiceRequest:
    """The batch as one request: a ResourceLogs for each record, its resource the object the
    Event regards."""
    observed = time.time_ns()
    scope = InstrumentationScope(name=SCOPE)
    resources = []
    for item in batch:
        regarding = item["event"].get("regarding") or {}
        resource = Resource(
            attributes=list(
                _attributes({key: regarding.get(field) for field, key in OBJECT_ATTRIBUTES.items()})
            )
        )
        logs = ScopeLogs(scope=scope, log_records=[log_record(item, observed)])
        resources.append(ResourceLogs(resource=resource, scope_logs=[logs]))
    return ExportLogsServiceRequest(resource_logs=resources)


def _rejected(response: ExportLogsServiceResponse, where: str) -> None:
    """A partial success is a success that must not be sent again (the OTLP specification): said in
    the log, once a batch."""
    partial = response.partial_success
    if partial.rejected_log_records or partial.error_message:
        log.warning(
            "%s rejected %d of the batch's log records: %s",
            where,
            partial.rejected_log_records,
            partial.error_message or "(no message)",
        )


# What the OTLP specification says is worth retrying (HTTP 429, 502, 503, 504), and what a
# collector's setup may cure (401, 403, 404, 408); any other answer is a batch refused for good.
HTTP_RETRIED = frozenset({401, 403, 404, 408, 429, 502, 503, 504})
# The gRPC codes the specification says are never retried.
GRPC_REJECTED = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION})
# Too large for the collector (its gRPC receive limit is 4 MiB by default): sent again in halves.
TOO_LARGE_HTTP = 413
# How the OpenTelemetry Collector says a body was over its max_request_body_size (20 MiB by
# default): 400, with Go's error in the google.rpc.Status it answers with. A protobuf string is
# its UTF-8 bytes as they are, so the answer holds these bytes whatever its encoding.
TOO_LARGE_BODY = b"request body too large"


class TooLarge(SinkError):
    """The collector refused the request for its size."""


async def in_halves_if_too_large(send: Callable[[list[JSON]], Awaitable[None]], batch: list[JSON]) -> None:
    """`send(batch)`; a batch too large for the collector is sent again as two halves, and so on
    down to single records. A record too large alone is refused for good (SinkRejected, once the
    rest is sent)."""
    refused = await _halves(send, batch)
    if refused:
        raise SinkRejected(f"{len(refused)} record(s) too large for the collector alone: {refused[0]}")


async def _halves(send: Callable[[list[JSON]], Awaitable[None]], batch: list[JSON]) -> list[str]:
    try:
        await send(batch)
    except TooLarge as exc:
        if len(batch) == 1:
            return [str(exc)]
        log.info("a batch of %d records too large for the collector: sent again in halves", len(batch))
        middle = len(batch) // 2
        return await _halves(send, batch[:middle]) + await _halves(send, batch[middle:])
    return []


class OTLPHTTP:
    """POST {endpoint}/v1/logs, protobuf bodies."""

    name = "otlp"

    def __init__(self, sink: OTLPSink, headers: dict[str, str], context: ssl.SSLContext | bool) -> None:
        parts = urlsplit(sink.endpoint)
        self.url = parts._replace(path=parts.path.rstrip("/") + LOGS_PATH).geturl()
        self.headers = headers | {"Content-Type": PROTOBUF}
        self.ssl = context
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS))

    async def send(self, batch: list[JSON]) -> None:
        await in_halves_if_too_large(self._send, batch)

    async def _send(self, batch: list[JSON]) -> None:
        body = export_request(batch).SerializeToString()
        try:
            async with self.session.post(self.url, data=body, headers=self.headers, ssl=self.ssl) as answer:
                content = await answer.read()
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise SinkError(f"POST {self.url}: {exc or type(exc).__name__}") from None
        if not 200 <= answer.status < 300:
            said = f"POST {self.url}: {answer.status} {answer.reason or ''}".rstrip()
            if answer.status == TOO_LARGE_HTTP or TOO_LARGE_BODY in content:
                raise TooLarge(said)
            if answer.status in HTTP_RETRIED:
                raise SinkError(said)
            raise SinkRejected(said)
        if answer.content_type == PROTOBUF and content:
            _rejected(ExportLogsServiceResponse.FromString(content), self.url)

    async def close(self) -> None:
        await self.session.close()


class OTLPGRPC:
    """LogsService/Export over one gRPC channel; https endpoints over TLS."""

    name = "otlp"

    def __init__(self, sink: OTLPSink, headers: dict[str, str], roots: bytes | None) -> None:
        parts = urlsplit(sink.endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
        self.target = f"{host}:{port}"
        if parts.scheme == "https":
            credentials = grpc.ssl_channel_credentials(root_certificates=roots)
            self.channel = grpc.aio.secure_channel(self.target, credentials)
        else:
            self.channel = grpc.aio.insecure_channel(self.target)
        self.metadata = tuple((key.lower(), value) for key, value in headers.items())
        self.export = self.channel.unary_unary(
            GRPC_METHOD,
            request_serializer=ExportLogsServiceRequest.SerializeToString,
            response_deserializer=ExportLogsServiceResponse.FromString,
        )

    async def send(self, batch: list[JSON]) -> None:
        await in_halves_if_too_large(self._send, batch)

    async def _send(self, batch: list[JSON]) -> None:
        try:
            response = await self.export(
                export_request(batch), timeout=TIMEOUT_SECONDS, metadata=self.metadata or None
            )
        except grpc.aio.AioRpcError as exc:
            said = f"OTLP gRPC {self.target}: {exc.code().name}: {exc.details()}"
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in str(exc.details()):
                raise TooLarge(said) from None
            if exc.code() in GRPC_REJECTED:
                raise SinkRejected(said) from None
            raise SinkError(said) from None
        _rejected(response, self.target)

    async def close(self) -> None:
        await self.channel.close()


def otlp_sink(sink: OTLPSink, headers: dict[str, str], context: ssl.SSLContext | bool) -> RecordSink:
    """The sink's transport: gRPC, or HTTP with protobuf bodies (`context`: its TLS trust)."""
    if sink.protocol == "grpc":
        return OTLPGRPC(sink, headers, sink.caBundle.encode() if sink.caBundle else system_roots())
    return OTLPHTTP(sink, headers, context)


def system_roots() -> bytes | None:
    """The system's trusted roots as PEM, as OpenSSL finds them (Python's gRPC would otherwise
    trust the roots it ships, not the system's, where HTTP trusts the system's); None where
    there is no such file (gRPC's own then)."""
    paths = ssl.get_default_verify_paths()
    for name in (paths.cafile, paths.openssl_cafile):
        if name and Path(name).is_file():
            return Path(name).read_bytes()
    return None
