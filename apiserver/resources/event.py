"""Event (events.core.io/v1): schema, validation and strategy, as upstream's events.k8s.io/v1 Event.

Upstream stores events.k8s.io Events as core Events and validates them with
pkg/apis/core/validation/events.go (ValidateEventCreate/ValidateEventUpdate for a request to
events.k8s.io/v1: the legacy checks plus the strict ones). Errors here carry this API's JSON paths
where upstream prints the core type's (regarding for involvedObject, note for message,
deprecatedCount for count, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field

from apiserver.machinery import formats
from apiserver.machinery.errors import FieldError, GoRepr, invalid, required
from apiserver.machinery.metav1 import (
    API_VERSION_DESCRIPTION,
    KIND_DESCRIPTION,
    METADATA_DESCRIPTION,
    ObjectMeta,
    ObjectReference,
    go_struct,
    go_time_string,
    immutable,
    object_meta_fields,
    validate_object_meta,
    validate_object_meta_update,
)
from apiserver.machinery.printing import TableColumn, field_description, parse_time, since
from apiserver.machinery.schema import INT32, MICRO_TIME, TIME, Decoded, Go, decode_object
from apiserver.machinery.types import JSON
from apiserver.patch.schema import OBJECT_META_PATCH_SCHEMA, PatchSchema
from apiserver.resources.base import EDIT_ROLE, READ_VERBS, VIEW_ROLE, WRITE_VERBS, Expiry, ResourceKind

GROUP = "events.core.io"
EVENT_TYPE_NORMAL = "Normal"
EVENT_TYPE_WARNING = "Warning"
REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024

_OPTIONAL = Go(omitempty=True)
_DEPRECATED = "{} is the deprecated field assuring backward compatibility with core.v1 Event type."
_NAMESPACE_DEFAULT = "default"
_NAMESPACE_SYSTEM = "kube-system"
_OBJECT_REFERENCE_FIELDS = (
    ("Kind", "kind"),
    ("Namespace", "namespace"),
    ("Name", "name"),
    ("UID", "uid"),
    ("APIVersion", "apiVersion"),
    ("ResourceVersion", "resourceVersion"),
    ("FieldPath", "fieldPath"),
)


class EventSeries(BaseModel):
    """Information on a series of events, i.e. a thing that was or is happening continuously for some
    time. How often to update the series is up to the event reporters."""

    count: Annotated[int, Go(format=INT32)] = Field(
        description="count is the number of occurrences in this series up to the last heartbeat time."
    )
    lastObservedTime: Annotated[str | None, Go(format=MICRO_TIME)] = Field(
        description=(
            "lastObservedTime is the time when last Event from the series was seen before last heartbeat."
        )
    )


class EventSource(BaseModel):
    """The source from which an event is generated."""

    component: Annotated[str, _OPTIONAL] = Field(
        default="", description="Component from which the event is generated."
    )
    host: Annotated[str, _OPTIONAL] = Field(
        default="", description="Node name on which the event is generated."
    )


class Event(BaseModel):
    """Event is a report of an event somewhere in the cluster. It generally denotes some state change in
    the system. Events have a limited retention time and triggers and messages may evolve with time.
    Event consumers should not rely on the timing of an event with a given Reason reflecting a
    consistent underlying trigger, or the continued existence of events with that Reason. Events should
    be treated as informative, best-effort, supplemental data."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    metadata: Annotated[ObjectMeta, Go()] = Field(
        default_factory=ObjectMeta, description=METADATA_DESCRIPTION
    )
    eventTime: Annotated[str | None, Go(format=MICRO_TIME)] = Field(
        description="eventTime is the time when this Event was first observed. It is required."
    )
    series: Annotated[EventSeries | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description=(
            "series is data about the Event series this event represents or nil if it's a singleton Event."
        ),
    )
    reportingController: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "reportingController is the name of the controller that emitted this Event, e.g. "
            "`kubernetes.io/kubelet`. This field cannot be empty for new Events."
        ),
    )
    reportingInstance: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "reportingInstance is the ID of the controller instance, e.g. `kubelet-xyzf`. This field cannot "
            "be empty for new Events and it can have at most 128 characters."
        ),
    )
    action: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "action is what action was taken/failed regarding to the regarding object. It is "
            "machine-readable. This field cannot be empty for new Events and it can have at most 128 "
            "characters."
        ),
    )
    reason: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "reason is why the action was taken. It is human-readable. This field cannot be empty for new "
            "Events and it can have at most 128 characters."
        ),
    )
    regarding: Annotated[ObjectReference, _OPTIONAL] = Field(
        default_factory=ObjectReference,
        description=(
            "regarding contains the object this Event is about. In most cases it's an Object reporting "
            "controller implements, e.g. ReplicaSetController implements ReplicaSets and this event is "
            "emitted because it acts on some changes in a ReplicaSet object."
        ),
    )
    related: Annotated[ObjectReference | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description=(
            "related is the optional secondary object for more complex actions. E.g. when regarding object "
            "triggers a creation or deletion of related object."
        ),
    )
    note: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "note is a human-readable description of the status of this operation. Maximal length of the "
            "note is 1kB, but libraries should be prepared to handle values up to 64kB."
        ),
    )
    type: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "type is the type of this event (Normal, Warning), new types could be added in the future. It "
            "is machine-readable. This field cannot be empty for new Events."
        ),
    )
    deprecatedSource: Annotated[EventSource, _OPTIONAL] = Field(
        default_factory=EventSource,
        description=_DEPRECATED.format("deprecatedSource"),
    )
    deprecatedFirstTimestamp: Annotated[str | None, Go(omitempty=True, format=TIME)] = Field(
        default=None,
        description=(
            "deprecatedFirstTimestamp is the deprecated field assuring backward compatibility with core.v1 "
            "Event type."
        ),
    )
    deprecatedLastTimestamp: Annotated[str | None, Go(omitempty=True, format=TIME)] = Field(
        default=None,
        description=(
            "deprecatedLastTimestamp is the deprecated field assuring backward compatibility with core.v1 "
            "Event type."
        ),
    )
    deprecatedCount: Annotated[int, Go(omitempty=True, format=INT32)] = Field(
        default=0,
        description=_DEPRECATED.format("deprecatedCount"),
    )


# ----------------------------------------------------------------------------- validation


def _s(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _d(obj: Any, key: str) -> JSON:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _count(obj: Any, key: str) -> int:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _length(value: str) -> int:
    return formats.byte_length(value)


def _object_reference(ref: JSON) -> tuple[str, ...]:
    return tuple(_s(ref, key) for _, key in _OBJECT_REFERENCE_FIELDS)


def _object_reference_shown(ref: JSON | None) -> GoRepr | None:
    # %#v of the internal core.ObjectReference (a nil *ObjectReference prints as "null").
    if ref is None:
        return None
    return go_struct("core.ObjectReference", [(go, _s(ref, key)) for go, key in _OBJECT_REFERENCE_FIELDS])


def _source(obj: JSON) -> tuple[str, str]:
    source = _d(obj, "deprecatedSource")
    return (_s(source, "component"), _s(source, "host"))


def _series(obj: JSON) -> tuple[int, str] | None:
    series = obj.get("series")
    if not isinstance(series, dict):
        return None
    return (_count(series, "count"), _s(series, "lastObservedTime"))


def _namespace(obj: JSON) -> str:
    return _s(_d(obj, "metadata"), "namespace")


def legacy_validate_event(obj: JSON) -> list[FieldError]:
    """legacyValidateEvent: what every Event must pass, whatever API version it came through."""
    errs: list[FieldError] = []
    namespace = _namespace(obj)
    regarding_namespace = _s(_d(obj, "regarding"), "namespace")
    if not obj.get("eventTime"):
        # An old-style Event: regarding.namespace and the Event's namespace must agree.
        if not regarding_namespace:
            if namespace not in ("", _NAMESPACE_DEFAULT):
                errs.append(
                    invalid("regarding.namespace", regarding_namespace, "does not match event.namespace")
                )
        elif namespace != regarding_namespace:
            errs.append(invalid("regarding.namespace", regarding_namespace, "does not match event.namespace"))
    else:
        if not regarding_namespace and namespace not in (_NAMESPACE_DEFAULT, _NAMESPACE_SYSTEM):
            errs.append(invalid("regarding.namespace", regarding_namespace, "does not match event.namespace"))
        controller = _s(obj, "reportingController")
        if not controller:
            errs.append(required("reportingController"))
        errs += [
            invalid("reportingController", controller, msg) for msg in formats.is_qualified_name(controller)
        ]
        for path, limit in (
            ("reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT),
            ("action", ACTION_LENGTH_LIMIT),
            ("reason", REASON_LENGTH_LIMIT),
        ):
            value = _s(obj, path)
            if not value:
                errs.append(required(path))
            if _length(value) > limit:
                errs.append(invalid(path, "", f"can have at most {limit} characters"))
        if _length(_s(obj, "note")) > NOTE_LENGTH_LIMIT:
            errs.append(invalid("note", "", f"can have at most {NOTE_LENGTH_LIMIT} characters"))
    # Upstream names this field "namespace"; here it is the Event's metadata.namespace.
    errs += [invalid("metadata.namespace", namespace, msg) for msg in formats.is_dns1123_subdomain(namespace)]
    return errs


def validate_series(obj: JSON) -> list[FieldError]:
    """validateV1EventSeries."""
    errs: list[FieldError] = []
    series = obj.get("series")
    if isinstance(series, dict):
        if _count(series, "count") < 2:
            errs.append(invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            errs.append(required("series.lastObservedTime"))
    return errs


def validate_event_create(obj: JSON) -> list[FieldError]:
    """ValidateEventCreate for a request to events.k8s.io/v1."""
    errs = legacy_validate_event(obj)
    errs += validate_object_meta(_d(obj, "metadata"), formats.name_is_dns_subdomain)
    errs += validate_series(obj)
    if not obj.get("eventTime"):
        errs.append(required("eventTime"))
    event_type = _s(obj, "type")
    if event_type not in (EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING):
        errs.append(invalid("type", "", f"has invalid value: {event_type}"))
    for path in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp"):
        if obj.get(path):
            errs.append(invalid(path, "", "needs to be unset"))
    if _count(obj, "deprecatedCount") != 0:
        errs.append(invalid("deprecatedCount", "", "needs to be unset"))
    if any(_source(obj)):
        errs.append(invalid("deprecatedSource", "", "needs to be unset"))
    return errs


def validate_event_update(obj: JSON, old: JSON) -> list[FieldError]:
    """ValidateEventUpdate for a request to events.k8s.io/v1: only metadata and series may change."""
    errs = legacy_validate_event(obj)
    errs += validate_object_meta_update(_d(obj, "metadata"), _d(old, "metadata"))
    if _series(obj) != _series(old):
        errs += validate_series(obj)

    def same_string(path: str) -> list[FieldError]:
        return immutable(path, _s(obj, path), _s(old, path), _s(obj, path))

    def same_time(path: str) -> list[FieldError]:
        new_time, old_time = obj.get(path) or None, old.get(path) or None
        return immutable(path, new_time, old_time, GoRepr(go_time_string(new_time)))

    regarding, old_regarding = _d(obj, "regarding"), _d(old, "regarding")
    errs += immutable(
        "regarding",
        _object_reference(regarding),
        _object_reference(old_regarding),
        _object_reference_shown(regarding),
    )
    errs += same_string("reason")
    errs += same_string("note")
    source = _source(obj)
    errs += immutable(
        "deprecatedSource",
        source,
        _source(old),
        go_struct("core.EventSource", [("Component", source[0]), ("Host", source[1])]),
    )
    errs += same_time("deprecatedFirstTimestamp")
    errs += same_time("deprecatedLastTimestamp")
    count = _count(obj, "deprecatedCount")
    errs += immutable("deprecatedCount", count, _count(old, "deprecatedCount"), count)
    errs += same_string("reason")  # upstream checks reason twice
    errs += same_string("type")
    errs += same_time("eventTime")
    errs += same_string("action")
    related = obj.get("related") if isinstance(obj.get("related"), dict) else None
    old_related = old.get("related") if isinstance(old.get("related"), dict) else None
    errs += immutable(
        "related",
        None if related is None else _object_reference(related),
        None if old_related is None else _object_reference(old_related),
        _object_reference_shown(related),
    )
    errs += same_string("reportingController")
    errs += same_string("reportingInstance")
    return errs


# ----------------------------------------------------------------------------- printing

# The core Event printer's columns, which upstream prints events.k8s.io Events with too.
TABLE_COLUMNS = (
    TableColumn("Last Seen", "string", field_description(EventSeries, "lastObservedTime")),
    TableColumn("Type", "string", field_description(Event, "type")),
    TableColumn("Reason", "string", field_description(Event, "reason")),
    TableColumn("Object", "string", field_description(Event, "regarding")),
    TableColumn("Subobject", "string", field_description(ObjectReference, "fieldPath"), priority=1),
    TableColumn("Source", "string", field_description(Event, "reportingController"), priority=1),
    TableColumn("Message", "string", field_description(Event, "note")),
    TableColumn("First Seen", "string", field_description(Event, "eventTime"), priority=1),
    TableColumn("Count", "string", field_description(EventSeries, "count"), priority=1),
    TableColumn("Name", "string", field_description(ObjectMeta, "name"), format="name", priority=1),
)


def format_event_source(obj: JSON) -> str:
    """formatEventSource: `component, host`, each falling back to reportingController and
    reportingInstance; the host part is left out when empty."""
    component, host = _source(obj)
    component = component or _s(obj, "reportingController")
    host = host or _s(obj, "reportingInstance")
    return f"{component}, {host}" if host else component


def table_row(obj: JSON, now: datetime) -> list[Any]:
    """printEvent, wide, on the core Event this one converts to: the deprecated* fields are the core
    Event's firstTimestamp, lastTimestamp, count and source."""
    first_timestamp = obj.get("deprecatedFirstTimestamp")
    first_seen = since(first_timestamp if parse_time(first_timestamp) else obj.get("eventTime"), now)
    last_timestamp = obj.get("deprecatedLastTimestamp")
    last_seen = since(last_timestamp, now) if parse_time(last_timestamp) else first_seen
    count = _count(obj, "deprecatedCount")
    series = obj.get("series")
    if isinstance(series, dict):
        last_seen = since(series.get("lastObservedTime"), now)
        count = _count(series, "count")
    elif count == 0:
        # A singleton event of the new API carries no count.
        count = 1
    regarding = _d(obj, "regarding")
    kind, name = _s(regarding, "kind").lower(), _s(regarding, "name")
    return [
        last_seen,
        _s(obj, "type"),
        _s(obj, "reason"),
        f"{kind}/{name}" if name else kind,
        _s(regarding, "fieldPath"),
        format_event_source(obj),
        _s(obj, "note").strip(),
        first_seen,
        count,
        _s(_d(obj, "metadata"), "name"),
    ]


# ----------------------------------------------------------------------------- field selectors

_REGARDING_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def selectable_fields(obj: JSON) -> dict[str, str]:
    """The field set selectors match: upstream's ToSelectableFields of the core Event that an
    events.k8s.io Event is stored as, so under the core type's names (involvedObject.*,
    reportingComponent, source). `FIELD_LABEL_CONVERSION` maps this API's labels onto them."""
    regarding = _d(obj, "regarding")
    controller = _s(obj, "reportingController")
    fields = object_meta_fields(obj)
    for key in _REGARDING_FIELDS:
        fields[f"involvedObject.{key}"] = _s(regarding, key)
    fields["reason"] = _s(obj, "reason")
    fields["reportingComponent"] = controller
    # The core Event's source.component, or the reporting controller of a new-style Event.
    fields["source"] = _source(obj)[0] or controller
    fields["type"] = _s(obj, "type")
    return fields


# events.k8s.io/v1's field label conversion (AddFieldLabelConversionsForEvent): the labels a field
# selector may name, each with the field of `selectable_fields` it matches. Any other label is
# refused with "field label not supported: <label>", the core names of the field set (source,
# reportingComponent, involvedObject.*) and reportingInstance included, as kube-apiserver v1.33 does.
FIELD_LABEL_CONVERSION: Mapping[str, str] = MappingProxyType(
    {
        "metadata.name": "metadata.name",
        "metadata.namespace": "metadata.namespace",
        "reason": "reason",
        "type": "type",
        "reportingController": "reportingComponent",
        **{f"regarding.{key}": f"involvedObject.{key}" for key in _REGARDING_FIELDS},
    }
)


# ----------------------------------------------------------------------------- patch

# events/v1 Event has no list fields of its own.
PATCH_SCHEMA = OBJECT_META_PATCH_SCHEMA


# ----------------------------------------------------------------------------- strategy


class EventKind(ResourceKind):
    group: ClassVar[str] = GROUP
    version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "Event"
    list_kind: ClassVar[str] = "EventList"
    plural: ClassVar[str] = "events"
    singular: ClassVar[str] = "event"
    short_names: ClassVar[tuple[str, ...]] = ("ev",)
    model: ClassVar[type[BaseModel]] = Event
    patch_schema: ClassVar[PatchSchema] = PATCH_SCHEMA
    field_label_conversion: ClassVar[Mapping[str, str] | None] = FIELD_LABEL_CONVERSION
    table_columns: ClassVar[tuple[TableColumn, ...]] = TABLE_COLUMNS
    # events.k8s.io Events are stored and served as the internal core Event.
    go_type: ClassVar[str] = "core.Event"
    # The core Event strategy's garbage collection policy is Unsupported: a delete never adds the
    # orphan or foregroundDeletion finalizer (and drops one the Event carries).
    garbage_collected: ClassVar[bool] = False
    # kube-apiserver's --event-ttl (upstream's default is one hour too).
    expiry: ClassVar[Expiry | None] = Expiry(
        "--event-ttl", 3600, "how long an Event lives: a Go duration (1h0m0s) or seconds"
    )
    # Upstream's events.k8s.io Event is a second API over the storage of core events, which view
    # reads and edit writes; events.core.io Events are the only Event API here, so they get the
    # core events' treatment.
    role_verbs: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType(
        {EDIT_ROLE: WRITE_VERBS, VIEW_ROLE: READ_VERBS}
    )

    def decode(self, data: JSON, *, unstructured: bool = False) -> Decoded:
        return decode_object(Event, data, kind=self.kind, version=self.version, unstructured=unstructured)

    def prepare_for_create(self, obj: JSON) -> None:
        """Nothing beyond the generic metadata handling, as upstream."""

    def prepare_for_update(self, obj: JSON, old: JSON) -> None:
        """Nothing beyond the generic metadata handling, as upstream."""

    def validate(self, obj: JSON) -> list[FieldError]:
        return validate_event_create(obj)

    def validate_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        return validate_event_update(obj, old)

    def selectable_fields(self, obj: JSON) -> dict[str, str]:
        return selectable_fields(obj)

    def table_row(self, obj: JSON, now: datetime) -> list[Any]:
        return table_row(obj, now)
