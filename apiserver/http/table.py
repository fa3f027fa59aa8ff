"""Transformations a client may ask for in its Accept header (`as=Table;g=meta.k8s.io;v=v1`):
Table, PartialObjectMetadata and PartialObjectMetadataList, built as k8s.io/apiserver's handlers
build them (endpoints/handlers/response.go) from the kind's printer columns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from apiserver.machinery import errors
from apiserver.machinery.metav1 import ObjectMeta
from apiserver.machinery.printing import TableColumn, field_description
from apiserver.machinery.types import JSON
from apiserver.registry.store import INITIAL_EVENTS_END_ANNOTATION
from apiserver.resources.base import ResourceKind

META_GROUP = "meta.k8s.io"
META_VERSIONS = ("v1", "v1beta1")
TABLE = "Table"
PARTIAL_OBJECT_METADATA = "PartialObjectMetadata"
PARTIAL_OBJECT_METADATA_LIST = "PartialObjectMetadataList"
INCLUDE_NONE = "None"
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"
# ObjectMeta's fields in Go's declaration order, the order its JSON is written in.
_OBJECT_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)


# rest.NewDefaultTableConvertor's columns, for a kind without a printer of its own.
DEFAULT_COLUMNS = (
    TableColumn("Name", "string", field_description(ObjectMeta, "name"), format="name"),
    TableColumn("Created At", "date", field_description(ObjectMeta, "creationTimestamp")),
)


@dataclass(frozen=True)
class Target:
    """The kind a response is converted to (the Accept header's as/g/v parameters)."""

    kind: str
    group: str
    version: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def served_as(self, media_type: str) -> bool:
        """Whether a resource endpoint converts to this target in `media_type`, as RequestScope's
        AllowsMediaTypeTransform decides: Table as JSON or YAML, the metadata kinds in any format."""
        if self.group != META_GROUP or self.version not in META_VERSIONS:
            return False
        if self.kind == TABLE:
            return media_type in ("application/json", "application/yaml")
        return self.kind in (PARTIAL_OBJECT_METADATA, PARTIAL_OBJECT_METADATA_LIST)


def include_object_option(query: Mapping[str, str]) -> str:
    """TableOptions.includeObject from the query, validated as upstream (empty means Metadata)."""
    value = query.get("includeObject", "")
    if value not in ("", INCLUDE_NONE, INCLUDE_METADATA, INCLUDE_OBJECT):
        err = errors.invalid("includeObject", value, "must be 'Metadata', 'Object', 'None', or empty")
        raise errors.bad_request(f"Unable to convert to Table as requested: {err}")
    return value


def table_options(target: Target, query: Mapping[str, str]) -> str:
    """The includeObject option of a conversion: read (and checked) only for a Table."""
    return include_object_option(query) if target.kind == TABLE else ""


def columns(kind: ResourceKind) -> tuple[TableColumn, ...]:
    return kind.table_columns or DEFAULT_COLUMNS


def _not_acceptable(message: str) -> errors.StatusError:
    return errors.StatusError(406, "NotAcceptable", message)


def _is_status(body: JSON) -> bool:
    return body.get("kind") == "Status" and body.get("apiVersion") == "v1"


def _is_list(kind: ResourceKind, body: JSON) -> bool:
    return body.get("kind") == kind.list_kind


def _meta(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def object_meta(meta: JSON) -> JSON:
    """ObjectMeta as a typed Go struct writes it: fields in declaration order and, as in
    Kubernetes 1.33, a zero creationTimestamp written as null."""
    ordered: JSON = {key: meta[key] for key in _OBJECT_META_ORDER if key in meta}
    ordered.setdefault("creationTimestamp", None)
    ordered = {key: ordered[key] for key in _OBJECT_META_ORDER if key in ordered}
    ordered.update({key: value for key, value in meta.items() if key not in ordered})
    return ordered


def partial_object_metadata(obj: JSON, api_version: str) -> JSON:
    """meta.AsPartialObjectMetadata: the object's whole metadata, under the meta.k8s.io kind."""
    return {"kind": PARTIAL_OBJECT_METADATA, "apiVersion": api_version, "metadata": object_meta(_meta(obj))}


def _list_meta(body: JSON) -> JSON:
    meta = _meta(body)
    # Strings are omitted when empty; remainingItemCount (a pointer upstream) whenever it is unset.
    return {
        key: meta[key]
        for key in ("resourceVersion", "continue", "remainingItemCount")
        if meta.get(key) not in (None, "")
    }


def partial_object_metadata_list(body: JSON, api_version: str) -> JSON:
    items = [partial_object_metadata(item, api_version) for item in body.get("items") or []]
    return {
        "kind": PARTIAL_OBJECT_METADATA_LIST,
        "apiVersion": api_version,
        "metadata": _list_meta(body),
        # Upstream appends to a nil slice, so an empty list's items are written as null.
        "items": items or None,
    }


def _ends_initial_events(obj: JSON) -> bool:
    annotations = _meta(obj).get("annotations")
    return isinstance(annotations, dict) and annotations.get(INITIAL_EVENTS_END_ANNOTATION) == "true"


def _row_object(obj: JSON, include_object: str, api_version: str) -> JSON | None:
    if include_object == INCLUDE_OBJECT:
        return obj
    # Even with None, the bookmark that ends the initial events keeps its metadata (the annotation).
    if include_object == INCLUDE_NONE and not _ends_initial_events(obj):
        return None
    return partial_object_metadata(obj, api_version)


def table(
    kind: ResourceKind,
    body: JSON,
    api_version: str,
    include_object: str,
    now: datetime,
    *,
    headers: bool = True,
) -> JSON:
    """The kind's printer over one object or a list: every column (wide ones too), a row per
    object, and the list's (or the object's) resourceVersion."""
    if _is_list(kind, body):
        objects = list(body.get("items") or [])
        meta = _list_meta(body)
    else:
        objects = [body]
        resource_version = _meta(body).get("resourceVersion")
        meta = {"resourceVersion": resource_version} if resource_version else {}
    rows = [
        {"cells": kind.table_row(obj, now), "object": _row_object(obj, include_object, api_version)}
        for obj in objects
    ]
    return {
        "kind": TABLE,
        "apiVersion": api_version,
        "metadata": meta,
        # Not omitempty upstream: without headers the definitions are written as null.
        "columnDefinitions": [c.definition() for c in columns(kind)] if headers else None,
        "rows": rows,
    }


def transform(kind: ResourceKind, body: JSON, target: Target | None, include_object: str) -> JSON:
    """The response body converted to `target` (None: unchanged). A Status is never converted."""
    if target is None or _is_status(body):
        return body
    if target.kind == TABLE:
        return table(kind, body, target.api_version, include_object, datetime.now(UTC))
    if target.kind == PARTIAL_OBJECT_METADATA:
        if _is_list(kind, body):
            raise _not_acceptable(
                f"you requested PartialObjectMetadata, but the requested object is a list "
                f"(*{kind.go_type}List)"
            )
        return partial_object_metadata(body, target.api_version)
    if not _is_list(kind, body):
        raise _not_acceptable(
            f"you requested PartialObjectMetadataList, but the requested object is not a list "
            f"(*{kind.go_type})"
        )
    return partial_object_metadata_list(body, target.api_version)


class WatchTransform:
    """Converts each watch event's object as upstream's watch encoder does: the first event's Table
    carries the column definitions and later ones do not; a conversion that cannot apply to a
    single object (PartialObjectMetadataList) leaves the object as it is."""

    def __init__(self, kind: ResourceKind, target: Target, include_object: str) -> None:
        self.kind = kind
        self.target = target
        self.include_object = include_object
        self.headers = True

    def __call__(self, obj: JSON) -> JSON:
        headers, self.headers = self.headers, False
        if _is_status(obj):
            return obj
        if self.target.kind == TABLE:
            now = datetime.now(UTC)
            return table(self.kind, obj, self.target.api_version, self.include_object, now, headers=headers)
        if self.target.kind == PARTIAL_OBJECT_METADATA:
            return partial_object_metadata(obj, self.target.api_version)
        return obj
