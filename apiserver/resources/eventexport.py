"""EventExport (events.core.io/v1alpha1): which Events go to which sink, and how far they went.

A consumer of the Event history (issue 25): its spec names the Events (namespaces, then match and
drop rules as kubernetes-event-exporter's routes, each field a regular expression), one sink with
its settings (credentials only by reference to a Secret of the export's namespace), batching and
how far it may fall behind (`maxLag`); its status says the position delivered (a resourceVersion),
the lag, the last error and the counts. The exporter writes the status; a create or update of the
object itself never sets it (the status stays as it was), as for any kind with a status.

An alpha version: served only when `--runtime-config` enables events.core.io/v1alpha1.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from apiserver.machinery import formats
from apiserver.machinery.errors import (
    FieldError,
    duplicate,
    forbidden,
    forbidden_error,
    go_quote,
    invalid,
    not_supported,
    required,
    too_long,
)
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.metav1 import (
    API_VERSION_DESCRIPTION,
    KIND_DESCRIPTION,
    METADATA_DESCRIPTION,
    ObjectMeta,
    object_meta_fields,
    validate_labels,
    validate_object_meta,
    validate_object_meta_update,
)
from apiserver.machinery.printing import TableColumn, field_description, human_duration, since
from apiserver.machinery.regexp import compile_go
from apiserver.machinery.schema import INT32, INT64, TIME, Decoded, Go, decode_object
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.resources.base import (
    ADMIN_ROLE,
    READ_VERBS,
    WRITE_VERBS,
    Admission,
    ResourceKind,
    ServerChecks,
)

GROUP = "events.core.io"
VERSION = "v1alpha1"
ALL_NAMESPACES = "*"
MAX_LEASE_NAME = 253
WEBHOOK_FORMATS = ["CloudEvents", "JSON"]
# OTEL_EXPORTER_OTLP_PROTOCOL's values for the two transports collectors receive on.
OTLP_PROTOCOLS = ["grpc", "http/protobuf"]
DEFAULT_OTLP_PROTOCOL = "http/protobuf"  # the OpenTelemetry exporters' default
SINKS = ("webhook", "jsonLines", "otlp", "kafka", "loki")
# A Loki (Cortex) tenant ID: what its X-Scope-OrgID may hold.
LOKI_TENANT = re.compile(r"[a-zA-Z0-9!._*'()-]{1,150}")
# A Kafka topic's name, as Kafka's Topic.validate checks it.
KAFKA_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
PORT = re.compile(r"[0-9]{1,5}")
SERIES_MODES = ["Changes", "Every"]
MAX_BATCH_EVENTS = 10_000
MAX_BATCH_WAIT_SECONDS = 60.0
MIN_MAX_LAG_SECONDS = 60.0
MIN_MAX_LAG_REVISIONS = 1000
DEFAULT_BATCH_EVENTS = 100
DEFAULT_BATCH_WAIT = "1s"
DEFAULT_MAX_LAG = "1h"
STDOUT = "-"
NONE = "<none>"  # a cell with nothing reported yet, as kubectl shows a printer column's
_OPTIONAL = Go(omitempty=True)


class Rule(BaseModel):
    """An Event matches a rule when every field the rule sets matches it: each a regular expression
    (searched, so `Back` matches `BackOff`; anchor it with ^ and $ to match whole values)."""

    type: Annotated[str, _OPTIONAL] = Field(default="", description="The Event's type (Normal, Warning).")
    reason: Annotated[str, _OPTIONAL] = Field(default="", description="The Event's reason.")
    regardingKind: Annotated[str, _OPTIONAL] = Field(
        default="", description="The kind of the object the Event is about (regarding.kind)."
    )
    regardingName: Annotated[str, _OPTIONAL] = Field(
        default="", description="The name of the object the Event is about (regarding.name)."
    )
    reportingController: Annotated[str, _OPTIONAL] = Field(
        default="", description="The controller that reported the Event."
    )
    note: Annotated[str, _OPTIONAL] = Field(default="", description="The Event's note.")
    labels: Annotated[dict[str, str], _OPTIONAL] = Field(
        default_factory=dict,
        description="The Event's labels: each key must be present, its value matching the expression.",
    )


class SecretReference(BaseModel):
    """A Secret in the EventExport's own namespace."""

    name: Annotated[str, Go()] = Field(description="The Secret's name.")


class WebhookSink(BaseModel):
    """Batches POSTed to a URL, as a JSON array of records or CloudEvents 1.0 (structured mode)."""

    url: Annotated[str, Go()] = Field(description="The http or https URL the batches are POSTed to.")
    format: Annotated[str, _OPTIONAL] = Field(
        default="JSON", description="JSON (an array of records) or CloudEvents (a batch of CloudEvents 1.0)."
    )
    headersFrom: Annotated[SecretReference | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description="A Secret whose keys and values are sent as headers (an Authorization token, say).",
    )
    caBundle: Annotated[str, _OPTIONAL] = Field(
        default="",
        description="PEM certificates that verify an https server; empty: the system's trusted roots.",
    )


class JSONLinesSink(BaseModel):
    """Records written one JSON object a line, to the exporter's standard output or to a file."""

    path: Annotated[str, Go()] = Field(description="An absolute file path, or - for standard output.")
    maxSizeMiB: Annotated[int, Go(omitempty=True, format=INT32)] = Field(
        default=0, description="The file is rotated once it holds this many MiB; 0: never rotated."
    )
    maxFiles: Annotated[int, Go(omitempty=True, format=INT32)] = Field(
        default=0, description="How many rotated files are kept besides the current one."
    )


class OTLPSink(BaseModel):
    """OpenTelemetry log records sent to a collector over OTLP (one record a change of an Event)."""

    endpoint: Annotated[str, Go()] = Field(
        description="The collector's http or https URL (https: TLS). For http/protobuf the base URL: "
        "/v1/logs is appended to its path, as to OTEL_EXPORTER_OTLP_ENDPOINT's; for grpc a URL "
        "without a path."
    )
    protocol: Annotated[str, _OPTIONAL] = Field(
        default=DEFAULT_OTLP_PROTOCOL, description="grpc or http/protobuf (OTLP over HTTP, protobuf bodies)."
    )
    headersFrom: Annotated[SecretReference | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description="A Secret whose keys and values are sent as headers (gRPC metadata for grpc).",
    )
    caBundle: Annotated[str, _OPTIONAL] = Field(
        default="",
        description="PEM certificates that verify an https collector; empty: the system's trusted roots.",
    )


class KafkaSink(BaseModel):
    """Records produced to a Kafka topic: the value the record's JSON, the key the Event's
    namespace (so one namespace's records keep their order in one partition)."""

    brokers: Annotated[list[str], Go()] = Field(description="The bootstrap brokers, host:port each.")
    topic: Annotated[str, Go()] = Field(description="The topic the records are produced to.")
    tls: Annotated[bool, _OPTIONAL] = Field(
        default=False, description="Whether the brokers are reached over TLS."
    )
    caBundle: Annotated[str, _OPTIONAL] = Field(
        default="",
        description="PEM certificates that verify the brokers (with tls); empty: the system's roots.",
    )
    saslFrom: Annotated[SecretReference | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description="A Secret holding mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), username and "
        "password: the SASL authentication to the brokers.",
    )


class LokiSink(BaseModel):
    """Records pushed to Grafana Loki (its push API), streams labelled by namespace and type."""

    url: Annotated[str, Go()] = Field(
        description="Loki's http or https base URL: /loki/api/v1/push is appended to its path."
    )
    tenant: Annotated[str, _OPTIONAL] = Field(
        default="", description="The tenant (X-Scope-OrgID) of a multi-tenant Loki; empty: none sent."
    )
    headersFrom: Annotated[SecretReference | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description="A Secret whose keys and values are sent as headers (an Authorization, say).",
    )
    caBundle: Annotated[str, _OPTIONAL] = Field(
        default="", description="PEM certificates that verify an https Loki; empty: the system's roots."
    )


class Sink(BaseModel):
    """Where the records go: exactly one of the fields."""

    webhook: Annotated[WebhookSink | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="An HTTP webhook."
    )
    jsonLines: Annotated[JSONLinesSink | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="JSON lines on standard output or in a file."
    )
    otlp: Annotated[OTLPSink | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="An OpenTelemetry collector, over OTLP."
    )
    kafka: Annotated[KafkaSink | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="A Kafka topic."
    )
    loki: Annotated[LokiSink | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="Grafana Loki."
    )


class Batch(BaseModel):
    """How records are gathered before they are sent."""

    maxEvents: Annotated[int, Go(omitempty=True, format=INT32)] = Field(
        default=DEFAULT_BATCH_EVENTS,
        description=f"At most this many records a batch (1 to {MAX_BATCH_EVENTS}).",
    )
    maxWait: Annotated[str, _OPTIONAL] = Field(
        default=DEFAULT_BATCH_WAIT,
        description="A batch is sent once its first record has waited this long (a duration, at most 1m).",
    )


class EventExportSpec(BaseModel):
    """Which Events are exported, to which sink, and how."""

    namespaces: Annotated[list[str], _OPTIONAL] = Field(
        default_factory=list,
        description="The namespaces whose Events are exported; * alone: every namespace; empty: the "
        "EventExport's own.",
    )
    match: Annotated[list[Rule], _OPTIONAL] = Field(
        default_factory=list,
        description="An Event is exported if it matches one of these (none: every Event).",
    )
    drop: Annotated[list[Rule], _OPTIONAL] = Field(
        default_factory=list, description="... and matches none of these."
    )
    sink: Annotated[Sink, Go()] = Field(description="Where the records go.")
    batch: Annotated[Batch, _OPTIONAL] = Field(default_factory=Batch, description="How records are batched.")
    series: Annotated[str, _OPTIONAL] = Field(
        default="Every",
        description="Every: a record for every change of an Event; Changes: a series' heartbeats (its "
        "count and last observed time moving on alone) are not exported.",
    )
    maxLag: Annotated[str, _OPTIONAL] = Field(
        default=DEFAULT_MAX_LAG,
        description="How far behind the history the export may fall (a duration, at least 1m) before it "
        "is marked Lagging, the history it held is released and it lists anew (the gap is reported).",
    )
    maxLagRevisions: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0,
        description="How many revisions behind the newest the export may fall before its history is "
        f"released, whatever maxLag says (at least {MIN_MAX_LAG_REVISIONS}; 0: no such bound). It "
        "bounds what the storage keeps for an export whose exporter is down.",
    )


class Lag(BaseModel):
    """How far the position is behind the newest Event."""

    revisions: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0, description="Revisions written since the position."
    )
    seconds: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0, description="Seconds since the oldest Event not yet delivered was written."
    )


class Counts(BaseModel):
    """What the exporter did, since the EventExport was created."""

    sent: Annotated[int, Go(omitempty=True, format=INT64)] = Field(default=0, description="Records sent.")
    failed: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0, description="Records whose sending failed (each is retried)."
    )
    batches: Annotated[int, Go(omitempty=True, format=INT64)] = Field(default=0, description="Batches sent.")
    gaps: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0, description="Times the export fell behind its maxLag and listed anew."
    )


class Condition(BaseModel):
    """One aspect of the export's state (metav1.Condition)."""

    type: Annotated[str, Go()] = Field(description="Ready or Lagging.")
    status: Annotated[str, Go()] = Field(description="True, False or Unknown.")
    observedGeneration: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0, description="The metadata.generation the condition was set for."
    )
    lastTransitionTime: Annotated[str | None, Go(format=TIME)] = Field(
        description="When the condition last changed its status."
    )
    reason: Annotated[str, Go()] = Field(description="Why, in CamelCase.")
    message: Annotated[str, Go()] = Field(description="Why, for people.")


class EventExportStatus(BaseModel):
    """What the exporter reports."""

    observedGeneration: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0, description="The metadata.generation the exporter last acted on."
    )
    position: Annotated[str, _OPTIONAL] = Field(
        default="", description="The resourceVersion up to which every Event was delivered."
    )
    lag: Annotated[Lag | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="How far behind the position is."
    )
    lastError: Annotated[str, _OPTIONAL] = Field(default="", description="The sink's last error.")
    lastSuccessTime: Annotated[str | None, Go(omitempty=True, pointer=True, format=TIME)] = Field(
        default=None, description="When a batch was last acknowledged."
    )
    counts: Annotated[Counts | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="What was sent."
    )
    conditions: Annotated[list[Condition], _OPTIONAL] = Field(
        default_factory=list,
        description="Ready and Lagging.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class EventExport(BaseModel):
    """EventExport sends the Events it selects to a sink, in order, resuming where it stopped: its
    position is kept by the server, which keeps the history it has not delivered yet."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    metadata: Annotated[ObjectMeta, _OPTIONAL] = Field(
        default_factory=ObjectMeta, description=METADATA_DESCRIPTION
    )
    spec: Annotated[EventExportSpec, Go()] = Field(description="What is exported, and where.")
    status: Annotated[EventExportStatus, _OPTIONAL] = Field(
        default_factory=EventExportStatus, description="How far the export went."
    )


# ----------------------------------------------------------------------------- defaults


def set_defaults(obj: JSON) -> None:
    """The scheme's defaults, set where a decoded object leaves a field empty (as upstream's
    SetDefaults_ functions): the webhook's format, OTLP's protocol, the batch, the series mode
    and maxLag."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    sink = _d(spec, "sink")
    webhook, otlp = sink.get("webhook"), sink.get("otlp")
    if isinstance(webhook, dict) and not webhook.get("format"):
        webhook["format"] = "JSON"
    if isinstance(otlp, dict) and not otlp.get("protocol"):
        otlp["protocol"] = DEFAULT_OTLP_PROTOCOL
    batch = spec.setdefault("batch", {})
    if isinstance(batch, dict):
        batch["maxEvents"] = batch.get("maxEvents") or DEFAULT_BATCH_EVENTS
        batch["maxWait"] = batch.get("maxWait") or DEFAULT_BATCH_WAIT
    spec["series"] = spec.get("series") or "Every"
    spec["maxLag"] = spec.get("maxLag") or DEFAULT_MAX_LAG


# ----------------------------------------------------------------------------- validation


def _d(obj: Any, key: str) -> JSON:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _l(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def _s(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _expression(path: str, value: str) -> list[FieldError]:
    # RE2, as Go's regexp (kubernetes-event-exporter's): its syntax, and matching in linear time
    # over notes that anybody who writes Events chooses.
    try:
        compile_go(value)
    except ValueError as error:
        return [invalid(path, value, f"must be a valid regular expression: {error}")]
    return []


def validate_rule(rule: JSON, path: str) -> list[FieldError]:
    errs = [
        error
        for field in ("type", "reason", "regardingKind", "regardingName", "reportingController", "note")
        for error in _expression(f"{path}.{field}", _s(rule, field))
    ]
    labels = _d(rule, "labels")
    errs += validate_labels({key: "" for key in labels}, f"{path}.labels")
    for key, value in labels.items():
        errs += _expression(f"{path}.labels[{key}]", value if isinstance(value, str) else "")
    if not any(_s(rule, field) for field in ("type", "reason", "regardingKind", "regardingName")) and not (
        any(_s(rule, field) for field in ("reportingController", "note")) or labels
    ):
        errs.append(required(path, "a rule must set at least one field"))
    return errs


def validate_namespaces(namespaces: list[Any]) -> list[FieldError]:
    if ALL_NAMESPACES in namespaces and len(namespaces) > 1:
        return [invalid("spec.namespaces", ALL_NAMESPACES, "must be the only entry when given")]
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, namespace in enumerate(namespaces):
        path = f"spec.namespaces[{i}]"
        if namespace in seen:
            errs.append(invalid(path, namespace, "must not be listed twice"))
        seen.add(namespace)
        if namespace != ALL_NAMESPACES:
            errs += [invalid(path, namespace, msg) for msg in formats.is_dns1123_label(namespace)]
    return errs


def _duration(path: str, value: str, low: float, high: float | None) -> list[FieldError]:
    try:
        seconds = parse_go_duration(value)
    except ValueError:
        return [invalid(path, value, "must be a duration such as 30s, 5m or 1h")]
    if seconds < low or (high is not None and seconds > high):
        bound = f"between {low:g}s and {high:g}s, inclusive" if high is not None else f"at least {low:g}s"
        return [invalid(path, value, f"must be {bound}")]
    return []


def validate_url(url: str, path: str) -> list[FieldError]:
    """A webhook's URL: absolute http or https, printable, its port in range, no credentials."""
    if not url:
        return [required(path)]
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for its check: a port out of range raises
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return [invalid(path, url, "must be an absolute http or https URL")]
    if not url.isprintable() or " " in url:
        return [invalid(path, url, "must not hold spaces or control characters")]
    if parts.username is not None or parts.password is not None:
        return [forbidden(path, "must not hold credentials; use headersFrom")]
    return []


def validate_headers_from(sink: JSON, path: str, field: str = "headersFrom") -> list[FieldError]:
    headers = sink.get(field)
    if not isinstance(headers, dict):
        return []
    name = _s(headers, "name")
    if not name:
        return [required(f"{path}.{field}.name")]
    return [invalid(f"{path}.{field}.name", name, msg) for msg in formats.is_dns1123_subdomain(name)]


def validate_broker(broker: Any, path: str) -> list[FieldError]:
    host, _, port = broker.rpartition(":") if isinstance(broker, str) else ("", "", "")
    if (
        not host
        or not PORT.fullmatch(port)
        or not 0 < int(port) < 65536
        or not host.isprintable()
        or " " in host
    ):
        return [invalid(path, broker, "must be host:port, the port between 1 and 65535")]
    return []


def validate_kafka(kafka: JSON, path: str) -> list[FieldError]:
    brokers = _l(kafka, "brokers")
    errs = [] if brokers else [required(f"{path}.brokers")]
    for i, broker in enumerate(brokers):
        errs += validate_broker(broker, f"{path}.brokers[{i}]")
    topic = _s(kafka, "topic")
    if not topic:
        errs.append(required(f"{path}.topic"))
    elif not KAFKA_TOPIC.fullmatch(topic) or topic in (".", ".."):
        words = "must be 1 to 249 letters, digits, '.', '_' or '-', and not . or .."
        errs.append(invalid(f"{path}.topic", topic, words))
    if kafka.get("caBundle") and not kafka.get("tls"):
        errs.append(forbidden(f"{path}.caBundle", "only with tls: true"))
    return errs + validate_headers_from(kafka, path, "saslFrom")


def validate_webhook(webhook: JSON, path: str) -> list[FieldError]:
    errs = validate_url(_s(webhook, "url"), f"{path}.url")
    if _s(webhook, "format") not in WEBHOOK_FORMATS:
        errs.append(not_supported(f"{path}.format", _s(webhook, "format"), WEBHOOK_FORMATS))
    return errs + validate_headers_from(webhook, path)


def validate_otlp(otlp: JSON, path: str) -> list[FieldError]:
    endpoint, protocol = _s(otlp, "endpoint"), _s(otlp, "protocol")
    errs = validate_url(endpoint, f"{path}.endpoint")
    if protocol not in OTLP_PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", protocol, OTLP_PROTOCOLS))
    elif protocol == "grpc" and not errs and urlsplit(endpoint).path.strip("/"):
        errs.append(invalid(f"{path}.endpoint", endpoint, "must have no path for the grpc protocol"))
    if not errs and (urlsplit(endpoint).query or urlsplit(endpoint).fragment):
        errs.append(invalid(f"{path}.endpoint", endpoint, "must have no query or fragment"))
    return errs + validate_headers_from(otlp, path)


def validate_json_lines(sink: JSON, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    file = _s(sink, "path")
    if not file:
        errs.append(required(f"{path}.path"))
    elif file != STDOUT and (not file.startswith("/") or posixpath.normpath(file) != file):
        errs.append(
            invalid(
                f"{path}.path", file, "must be an absolute path without .. or //, or - for standard output"
            )
        )
    for field in ("maxSizeMiB", "maxFiles"):
        value = sink.get(field, 0)
        if isinstance(value, int) and value < 0:
            errs.append(invalid(f"{path}.{field}", value, "must be greater than or equal to 0"))
    for field in ("maxSizeMiB", "maxFiles"):
        if file == STDOUT and sink.get(field):
            errs.append(forbidden(f"{path}.{field}", "standard output is not rotated"))
    return errs


def validate_loki(loki: JSON, path: str) -> list[FieldError]:
    errs = validate_url(_s(loki, "url"), f"{path}.url")
    tenant = _s(loki, "tenant")
    if tenant and (not LOKI_TENANT.fullmatch(tenant) or tenant in (".", "..")):
        words = "must be 1 to 150 letters, digits or !-_.*'() and not . or .."
        errs.append(invalid(f"{path}.tenant", tenant, words))
    return errs + validate_headers_from(loki, path)


def validate_sink(sink: JSON) -> list[FieldError]:
    given = [name for name in SINKS if isinstance(sink.get(name), dict)]
    if len(given) != 1:
        detail = "exactly one sink must be given" if given else "a sink must be given"
        return (
            [invalid("spec.sink", ", ".join(given) or "", detail)]
            if given
            else [required("spec.sink", detail)]
        )
    if given == ["webhook"]:
        return validate_webhook(_d(sink, "webhook"), "spec.sink.webhook")
    if given == ["otlp"]:
        return validate_otlp(_d(sink, "otlp"), "spec.sink.otlp")
    if given == ["kafka"]:
        return validate_kafka(_d(sink, "kafka"), "spec.sink.kafka")
    if given == ["loki"]:
        return validate_loki(_d(sink, "loki"), "spec.sink.loki")
    return validate_json_lines(_d(sink, "jsonLines"), "spec.sink.jsonLines")


def validate_spec(spec: JSON) -> list[FieldError]:
    errs = validate_namespaces(_l(spec, "namespaces"))
    for field in ("match", "drop"):
        for i, rule in enumerate(_l(spec, field)):
            errs += validate_rule(rule if isinstance(rule, dict) else {}, f"spec.{field}[{i}]")
    errs += validate_sink(_d(spec, "sink"))
    batch = _d(spec, "batch")
    events = batch.get("maxEvents", DEFAULT_BATCH_EVENTS)
    if isinstance(events, int) and not 1 <= events <= MAX_BATCH_EVENTS:
        errs.append(
            invalid("spec.batch.maxEvents", events, f"must be between 1 and {MAX_BATCH_EVENTS}, inclusive")
        )
    errs += _duration("spec.batch.maxWait", _s(batch, "maxWait"), 0.0, MAX_BATCH_WAIT_SECONDS)
    if _s(spec, "series") not in SERIES_MODES:
        errs.append(not_supported("spec.series", _s(spec, "series"), SERIES_MODES))
    errs += _duration("spec.maxLag", _s(spec, "maxLag"), MIN_MAX_LAG_SECONDS, None)
    revisions = spec.get("maxLagRevisions", 0)
    if isinstance(revisions, int) and revisions and revisions < MIN_MAX_LAG_REVISIONS:
        errs.append(
            invalid("spec.maxLagRevisions", revisions, f"must be 0 or at least {MIN_MAX_LAG_REVISIONS}")
        )
    return errs


_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
CONDITION_STATUSES = ["False", "True", "Unknown"]
MAX_REASON_LENGTH = 1024
MAX_MESSAGE_LENGTH = 32768
_REASON_MESSAGE = (
    "a condition reason must start with alphabetic character, optionally followed by a string of "
    "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'"
)


def _not_negative(obj: JSON, field: str, path: str) -> list[FieldError]:
    value = obj.get(field, 0)
    if isinstance(value, int) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


def validate_condition(condition: JSON, path: str) -> list[FieldError]:
    """metav1.Condition's checks (upstream's ValidateCondition)."""
    kind = _s(condition, "type")
    errs = [invalid(f"{path}.type", kind, m) for m in formats.is_qualified_name(kind)]
    if _s(condition, "status") not in CONDITION_STATUSES:
        errs.append(not_supported(f"{path}.status", _s(condition, "status"), CONDITION_STATUSES))
    errs += _not_negative(condition, "observedGeneration", f"{path}.observedGeneration")
    if not condition.get("lastTransitionTime"):
        errs.append(required(f"{path}.lastTransitionTime", "must be set"))
    reason = _s(condition, "reason")
    if not reason:
        errs.append(required(f"{path}.reason", "must be set"))
    elif not _REASON.fullmatch(reason):
        errs.append(invalid(f"{path}.reason", reason, _REASON_MESSAGE))
    if formats.byte_length(reason) > MAX_REASON_LENGTH:
        errs.append(too_long(f"{path}.reason", "", MAX_REASON_LENGTH))
    if formats.byte_length(_s(condition, "message")) > MAX_MESSAGE_LENGTH:
        errs.append(too_long(f"{path}.message", "", MAX_MESSAGE_LENGTH))
    return errs


def validate_status(status: JSON) -> list[FieldError]:
    """What the exporter writes: a position that is a resourceVersion, counts, lags and
    generations not below 0, conditions as metav1's, one of each type."""
    position = _s(status, "position")
    errs: list[FieldError] = []
    if position and not (position.isascii() and position.isdigit()):
        errs.append(invalid("status.position", position, "must be a resourceVersion (digits)"))
    errs += _not_negative(status, "observedGeneration", "status.observedGeneration")
    for group, fields in (
        ("lag", ("revisions", "seconds")),
        ("counts", ("sent", "failed", "batches", "gaps")),
    ):
        for field in fields:
            errs += _not_negative(_d(status, group), field, f"status.{group}.{field}")
    seen: set[str] = set()
    for i, condition in enumerate(_l(status, "conditions")):
        path = f"status.conditions[{i}]"
        condition = condition if isinstance(condition, dict) else {}
        errs += validate_condition(condition, path)
        if _s(condition, "type") in seen:
            errs.append(duplicate(f"{path}.type", _s(condition, "type")))
        seen.add(_s(condition, "type"))
    return errs


# ----------------------------------------------------------------------------- admission


def lease_name(name: str) -> str:
    """The Lease (in the export's namespace) through which the replicas of the export `name`'s
    exporter elect the one that exports: `coreio-export --leader-elect` takes it, and the operator
    creates it for the exporters it deploys and gives them the right to it by this name. A name
    too long for a Lease (253 characters) ends in a hash of it instead."""
    lease = f"coreio-export-{name}"
    if len(lease) <= MAX_LEASE_NAME:
        return lease
    return f"{lease[: MAX_LEASE_NAME - 9].rstrip('-.')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def exported_namespaces(obj: JSON) -> list[str]:
    """The namespaces whose Events `obj` exports: "" for every namespace."""
    listed = [n for n in _l(_d(obj, "spec"), "namespaces") if isinstance(n, str)]
    if ALL_NAMESPACES in listed:
        return [""]
    return listed or [_s(_d(obj, "metadata"), "namespace")]


def secrets_read(obj: JSON) -> list[str]:
    """The Secrets (of its own namespace) whose values `obj`'s exporter reads."""
    sink = _d(_d(obj, "spec"), "sink")
    read = (
        ("webhook", "headersFrom"),
        ("otlp", "headersFrom"),
        ("kafka", "saslFrom"),
        ("loki", "headersFrom"),
    )
    names = (_s(_d(_d(sink, kind), field), "name") for kind, field in read)
    return [name for name in names if name]


def needed_rights(obj: JSON, namespace: str) -> Iterator[tuple[str, str, str, str, str, str]]:
    """What an export's author must be allowed, each as (verb, group, resource, namespace, name,
    the refusal's words): to list and watch the Events exported, and to get the Secrets read."""
    for where in exported_namespaces(obj):
        scope = f"in the namespace {go_quote(where)}" if where else "cluster-wide"
        for verb in ("list", "watch"):
            yield verb, GROUP, "events", where, "", f"{verb} events {scope}, which it would export"
    for secret in secrets_read(obj):
        yield (
            "get",
            "",
            "secrets",
            namespace,
            secret,
            f"get the secret {go_quote(secret)}, which its sink reads",
        )


def export_guard(checks: ServerChecks, kind: ResourceKind) -> Admission:
    """No escalation through an export: its author must be able to read what it sends out of the
    cluster, or the write is forbidden (as a RoleBinding's author must hold what it grants)."""

    async def admit(user: UserInfo | None, namespace: str, obj: JSON, old: JSON | None) -> None:
        if user is None or (old is not None and old.get("spec") == obj.get("spec")):
            return  # a write of the server's own, or one that exports nothing new
        for verb, group, resource, where, named, words in needed_rights(obj, namespace):
            if not await checks.allows(user, verb, group, resource, where, named):
                name = _s(_d(obj, "metadata"), "name")
                raise forbidden_error(kind.group_resource, name, f"user {go_quote(user.name)} cannot {words}")

    return admit


# ----------------------------------------------------------------------------- printing


def sink_name(obj: JSON) -> str:
    sink = _d(_d(obj, "spec"), "sink")
    return next((name for name in SINKS if isinstance(sink.get(name), dict)), "")


def condition(obj: JSON, kind: str) -> str:
    """The status (True, False, Unknown) of the condition `kind`, empty when not reported."""
    found: Iterator[str] = (
        _s(c, "status")
        for c in _l(_d(obj, "status"), "conditions")
        if isinstance(c, dict) and c.get("type") == kind
    )
    return next(found, "")


def lag_shown(obj: JSON) -> str:
    status = _d(obj, "status")
    if not _s(status, "position"):
        return ""
    seconds = _d(status, "lag").get("seconds", 0)
    return human_duration(seconds * 10**9) if isinstance(seconds, int) else ""


TABLE_COLUMNS = (
    TableColumn("Name", "string", field_description(ObjectMeta, "name"), format="name"),
    TableColumn("Sink", "string", field_description(EventExportSpec, "sink")),
    TableColumn("Position", "string", field_description(EventExportStatus, "position")),
    TableColumn("Lag", "string", field_description(Lag, "seconds")),
    TableColumn("Ready", "string", "Whether the export delivers (its Ready condition)."),
    TableColumn("Age", "string", field_description(ObjectMeta, "creationTimestamp")),
)


class EventExportKind(ResourceKind):
    group: ClassVar[str] = GROUP
    version: ClassVar[str] = VERSION
    kind: ClassVar[str] = "EventExport"
    list_kind: ClassVar[str] = "EventExportList"
    plural: ClassVar[str] = "eventexports"
    singular: ClassVar[str] = "eventexport"
    model: ClassVar[type[BaseModel]] = EventExport
    table_columns: ClassVar[tuple[TableColumn, ...]] = TABLE_COLUMNS
    status_subresource: ClassVar[bool] = True
    go_type: ClassVar[str] = "events.EventExport"
    # Exporting sends a namespace's Events out of the cluster: namespace admins decide it, and only
    # they read it (a webhook's URL may hold a token, as view reads no Secret).
    role_verbs: ClassVar[dict[str, tuple[str, ...]]] = {ADMIN_ROLE: READ_VERBS + WRITE_VERBS}

    def admission(self, checks: ServerChecks) -> Admission:
        return export_guard(checks, self)

    def decode(self, data: JSON, *, unstructured: bool = False) -> Decoded:
        decoded = decode_object(
            EventExport, data, kind=self.kind, version=self.version, unstructured=unstructured
        )
        set_defaults(decoded.obj)
        return decoded

    def prepare_for_create(self, obj: JSON) -> None:
        """The status is the exporter's: a new export has none yet; its generation starts at 1."""
        obj.pop("status", None)
        _d(obj, "metadata")["generation"] = 1

    def prepare_for_update(self, obj: JSON, old: JSON) -> None:
        """A change of the spec is a new generation (the status was kept: `keep_status`)."""
        generation = _d(old, "metadata").get("generation", 1)
        _d(obj, "metadata")["generation"] = generation + (obj.get("spec") != old.get("spec"))

    def validate(self, obj: JSON) -> list[FieldError]:
        return validate_object_meta(_d(obj, "metadata"), formats.name_is_dns_subdomain) + validate_spec(
            _d(obj, "spec")
        )

    def validate_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        meta = validate_object_meta_update(_d(obj, "metadata"), _d(old, "metadata"))
        return meta + validate_spec(_d(obj, "spec"))

    def validate_status_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        return validate_status(_d(obj, "status"))

    def selectable_fields(self, obj: JSON) -> dict[str, str]:
        return object_meta_fields(obj)

    def table_row(self, obj: JSON, now: datetime) -> list[Any]:
        meta = _d(obj, "metadata")
        return [
            meta.get("name") or "",
            sink_name(obj),
            _s(_d(obj, "status"), "position") or NONE,
            lag_shown(obj) or NONE,
            condition(obj, "Ready") or NONE,
            since(meta.get("creationTimestamp"), now),
        ]
