"""OpenAPI documents generated from the served kinds' models, served as kube-apiserver serves them.

- `/openapi/v2`: one Swagger 2.0 document with every path and definition (JSON only; a client that
  accepts nothing but protobuf gets 406).
- `/openapi/v3`: the index of OpenAPI 3.0 documents, one per group-version (plus `apis` and one per
  group), each linked with `?hash=<content hash>`; `/openapi/v3/<path>` serves them, immutable and
  cacheable for a year when asked by hash (k8s.io/kube-openapi's handler3).

Schemas come from `schema.fields_of` over the pydantic models, with openapi-gen's conventions: refs for
structs and timestamps, `default` for value structs and required scalars, `required` from the models,
`x-kubernetes-*` extensions from the models' `json_schema_extra`. The shared meta types that no
served kind models (ListMeta, Status, DeleteOptions, discovery types, ...) are declared here the same
way. kubectl needs two things from the v3 documents: the `fieldValidation` query parameter on every
write operation (else it falls back to a protobuf /openapi/v2 it cannot get here), and kind schemas
tagged with `x-kubernetes-group-version-kind` (what `kubectl explain` looks up).

Documents are built once; they only change with the code.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, Field
from pydantic.config import JsonDict

from apiserver import __version__
from apiserver.http import codec
from apiserver.http.responses import NO_CACHE
from apiserver.machinery import errors
from apiserver.machinery.metav1 import (
    API_VERSION_DESCRIPTION,
    KIND_DESCRIPTION,
    ManagedFieldsEntry,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
)
from apiserver.machinery.schema import (
    INT32,
    INT64,
    FieldSpec,
    FreeForm,
    Go,
    ListOf,
    MapOf,
    Scalar,
    Struct,
    Timestamp,
    TypeSpec,
    fields_of,
)
from apiserver.machinery.types import JSON
from apiserver.resources.base import ResourceKind

META_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1."
TIME = META_PREFIX + "Time"
MICRO_TIME = META_PREFIX + "MicroTime"
FIELDS_V1 = META_PREFIX + "FieldsV1"

JSON_TYPE = codec.JSON_TYPE
WATCH_STREAM_TYPE = "application/json;stream=watch"
IMMUTABLE = "public, immutable"

_OPTIONAL = Go(omitempty=True)
_ATOMIC_LIST: JsonDict = {"x-kubernetes-list-type": "atomic"}


# ----------------------------------------------------------------------------- shared meta types
# Declared like the kinds' models (Go struct order, Go markers) so one generator serves all.


class ListMeta(BaseModel):
    """Metadata that synthetic resources (lists and status objects) must have."""

    selfLink: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."
        ),
    )
    resourceVersion: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "The server's internal version of this list, which clients pass back unmodified to watch "
            "from it or to ask for data at least this new. Opaque. Populated by the system. Read-only."
        ),
    )
    continue_: Annotated[str, _OPTIONAL] = Field(
        default="",
        alias="continue",
        description=(
            "Set when the client asked for a limited number of items and more are available: pass it "
            "back as the continue parameter of the same list to get the next chunk. Opaque; it expires "
            "after some minutes."
        ),
    )
    remainingItemCount: Annotated[int | None, Go(omitempty=True, pointer=True, format=INT64)] = Field(
        default=None,
        description=(
            "The number of items after this chunk, when known (not for lists with selectors). An "
            "estimate: clients should not rely on it being set or exact."
        ),
    )


class StatusCause(BaseModel):
    """One cause of a failed request, for instance one invalid field among several."""

    reason: Annotated[str, _OPTIONAL] = Field(
        default="", description="A machine-readable description of the cause of the error."
    )
    message: Annotated[str, _OPTIONAL] = Field(
        default="", description="A human-readable description of the cause of the error."
    )
    field: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "The field that caused the error, as a JSON path of its serialization: dots for nested "
            'fields, zero-based indexes for list items (e.g. "subjects[0].kind").'
        ),
    )


class StatusDetails(BaseModel):
    """Additional details a server may set on a Status; which ones depends on the Status reason."""

    name: Annotated[str, _OPTIONAL] = Field(
        default="", description="The name of the resource the Status is about, if there is one."
    )
    group: Annotated[str, _OPTIONAL] = Field(
        default="", description="The API group of the resource the Status is about."
    )
    kind: Annotated[str, _OPTIONAL] = Field(
        default="", description="The kind (or resource) the Status is about."
    )
    uid: Annotated[str, _OPTIONAL] = Field(
        default="", description="The UID of the resource the Status is about, if there is one."
    )
    causes: Annotated[list[StatusCause], _OPTIONAL] = Field(
        default_factory=list,
        description="The individual causes of the failure, when the reason provides them.",
        json_schema_extra=_ATOMIC_LIST,
    )
    retryAfterSeconds: Annotated[int, Go(omitempty=True, format=INT32)] = Field(
        default=0, description="If set, the number of seconds to wait before retrying the operation."
    )


class Status(BaseModel):
    """The result of a call that returns no object: every failure, and successful deletes."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    metadata: Annotated[ListMeta, _OPTIONAL] = Field(
        default_factory=ListMeta, description="Standard list metadata."
    )
    status: Annotated[str, _OPTIONAL] = Field(
        default="", description='Status of the operation: "Success" or "Failure".'
    )
    message: Annotated[str, _OPTIONAL] = Field(
        default="", description="A human-readable description of the status of this operation."
    )
    reason: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            'A machine-readable reason for a "Failure" status; it refines the HTTP status code but does '
            "not override it. Empty when no reason is known."
        ),
    )
    details: Annotated[StatusDetails | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="Extended data associated with the reason.", json_schema_extra=_ATOMIC_LIST
    )
    code: Annotated[int, Go(omitempty=True, format=INT32)] = Field(
        default=0, description="The suggested HTTP status code of this Status, 0 if not set."
    )


class Preconditions(BaseModel):
    """Conditions an operation (update, delete) requires before it is carried out."""

    uid: Annotated[str | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="The UID the object must have."
    )
    resourceVersion: Annotated[str | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="The resourceVersion the object must have."
    )


class DeleteOptions(BaseModel):
    """Options of a delete request."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    gracePeriodSeconds: Annotated[int | None, Go(omitempty=True, pointer=True, format=INT64)] = Field(
        default=None,
        description=(
            "The number of seconds before the object should be deleted; non-negative, zero means "
            "immediately. Unset uses the default of the type."
        ),
    )
    preconditions: Annotated[Preconditions | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description="Must be fulfilled before the deletion is carried out, else the delete answers 409.",
    )
    orphanDependents: Annotated[bool | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description=(
            'Deprecated: use propagationPolicy. Whether the dependents are orphaned (the "orphan" '
            "finalizer is added to or removed from the object). Cannot be combined with propagationPolicy."
        ),
    )
    propagationPolicy: Annotated[str | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description=(
            "Whether and how dependents are garbage collected: 'Orphan', 'Background' or 'Foreground'. "
            "Cannot be combined with orphanDependents."
        ),
    )
    dryRun: Annotated[list[str], _OPTIONAL] = Field(
        default_factory=list,
        description=(
            "When present, the request is processed but nothing is persisted. Valid values: All (every "
            "dry-run stage runs). An unknown value fails the request."
        ),
        json_schema_extra=_ATOMIC_LIST,
    )
    ignoreStoreReadErrorWithClusterBreakingPotential: Annotated[
        bool | None, Go(omitempty=True, pointer=True)
    ] = Field(
        default=None,
        description=(
            "If true, an object that cannot be read from storage (it cannot be decoded, for instance) is "
            "deleted anyway, bypassing the normal deletion flow. This may break the cluster: use it only "
            "to remove a corrupt object."
        ),
    )


class RawExtension(BaseModel):
    """An embedded object of any kind, kept as it was sent."""


class WatchEvent(BaseModel):
    """One event of a watch stream."""

    type: Annotated[str, Go()] = Field(
        description="ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.",
    )
    object: Annotated[RawExtension, Go()] = Field(
        description=(
            "ADDED, MODIFIED: the new state of the object. DELETED: its last state. BOOKMARK: the kind "
            "with only metadata.resourceVersion (and annotations when needed). ERROR: a Status."
        ),
    )


class Patch(BaseModel):
    """The body of a PATCH request; its form depends on the request's Content-Type."""


class GroupVersionForDiscovery(BaseModel):
    """One version of an API group."""

    groupVersion: Annotated[str, Go()] = Field(description='The group and version, "group/version".')
    version: Annotated[str, Go()] = Field(description="The version alone.")


class ServerAddressByClientCIDR(BaseModel):
    """The address clients from a network should use to reach the server."""

    clientCIDR: Annotated[str, Go()] = Field(description="The network the address applies to.")
    serverAddress: Annotated[str, Go()] = Field(
        description="The address, host or host:port, clients of that network should use."
    )


class APIGroup(BaseModel):
    """The name and versions of an API group."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    name: Annotated[str, Go()] = Field(description="The name of the group.")
    versions: Annotated[list[GroupVersionForDiscovery], Go()] = Field(
        description="The versions the group serves.", json_schema_extra=_ATOMIC_LIST
    )
    preferredVersion: Annotated[GroupVersionForDiscovery, _OPTIONAL] = Field(
        default_factory=lambda: GroupVersionForDiscovery(groupVersion="", version=""),
        description="The version clients should prefer.",
    )
    serverAddressByClientCIDRs: Annotated[list[ServerAddressByClientCIDR], _OPTIONAL] = Field(
        default_factory=list,
        description="Which address clients of which network should use to reach the server.",
        json_schema_extra=_ATOMIC_LIST,
    )


class APIGroupList(BaseModel):
    """The API groups a server serves."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    groups: Annotated[list[APIGroup], Go()] = Field(description="The groups.", json_schema_extra=_ATOMIC_LIST)


class APIResource(BaseModel):
    """A resource of a group-version: its names, scope and verbs."""

    name: Annotated[str, Go()] = Field(description="The plural name of the resource.")
    singularName: Annotated[str, Go()] = Field(description="The singular name of the resource.")
    namespaced: Annotated[bool, Go()] = Field(description="Whether the resource is namespaced.")
    group: Annotated[str, _OPTIONAL] = Field(
        default="", description="The preferred group of the resource, if not the list's."
    )
    version: Annotated[str, _OPTIONAL] = Field(
        default="", description="The preferred version of the resource, if not the list's."
    )
    kind: Annotated[str, Go()] = Field(description="The kind of the resource's objects.")
    verbs: Annotated[list[str], Go()] = Field(
        description="The verbs the resource supports (get, list, watch, create, update, patch, delete, ...)."
    )
    shortNames: Annotated[list[str], _OPTIONAL] = Field(
        default_factory=list, description="Suggested short names.", json_schema_extra=_ATOMIC_LIST
    )
    categories: Annotated[list[str], _OPTIONAL] = Field(
        default_factory=list,
        description="The groupings the resource belongs to (e.g. 'all').",
        json_schema_extra=_ATOMIC_LIST,
    )
    storageVersionHash: Annotated[str, _OPTIONAL] = Field(
        default="", description="An opaque hash of the resource's storage version."
    )


class APIResourceList(BaseModel):
    """The resources of a group-version."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    groupVersion: Annotated[str, Go()] = Field(description="The group-version the list is for.")
    resources: Annotated[list[APIResource], Go()] = Field(
        description="The resources.", json_schema_extra=_ATOMIC_LIST
    )


# Upstream's names of the shared types (the Go package path, reversed domain first).
_SHARED_NAMES: dict[type[BaseModel], str] = {
    **{
        model: META_PREFIX + model.__name__
        for model in (
            ObjectMeta,
            OwnerReference,
            ManagedFieldsEntry,
            ListMeta,
            Status,
            StatusDetails,
            StatusCause,
            DeleteOptions,
            Preconditions,
            WatchEvent,
            Patch,
            APIGroup,
            APIGroupList,
            APIResource,
            APIResourceList,
            GroupVersionForDiscovery,
            ServerAddressByClientCIDR,
        )
    },
    ObjectReference: "io.k8s.api.core.v1.ObjectReference",
    RawExtension: "io.k8s.apimachinery.pkg.runtime.RawExtension",
}

# Schemas of types that are not structs on the wire.
_SCALAR_DEFINITIONS: dict[str, JSON] = {
    TIME: {
        "description": "A timestamp in RFC 3339 form, in UTC, to the second.",
        "type": "string",
        "format": "date-time",
    },
    MICRO_TIME: {
        "description": "A timestamp in RFC 3339 form, in UTC, to the microsecond.",
        "type": "string",
        "format": "date-time",
    },
    FIELDS_V1: {
        "description": (
            "A set of fields as a trie in JSON: each key is '.' (the field itself, mapped to an empty "
            "set), 'f:<name>' (a struct field or map key), 'v:<value>' (a list item by value), "
            "'i:<index>' (a list item by position) or 'k:<keys>' (a list item by its key fields)."
        ),
        "type": "object",
    },
}


# ----------------------------------------------------------------------------- names


def kind_prefix(kind: ResourceKind) -> str:
    """The definition-name prefix of a kind's types: the group's domain reversed (as upstream's Go
    package paths start), then the rest of the group and the version:
    rbac.authorization.core.io/v1 -> io.core.rbac.authorization.v1."""
    labels = kind.group.split(".")
    domain, rest = labels[-2:], labels[:-2]
    return ".".join([*reversed(domain), *rest, kind.version]) + "."


def operation_id_part(text: str, *, capitalize: bool) -> str:
    """Upstream's ToValidOperationID: letters kept, other characters dropped and the next letter
    capitalized (rbac.authorization.core.io -> RbacAuthorizationCoreIo)."""
    out: list[str] = []
    upper = capitalize
    for i, ch in enumerate(text):
        if ch.isalpha() or ch == "_" or (i != 0 and ch.isdigit()):
            out.append(ch.upper() if upper else ch)
            upper = False
        else:
            upper = True
    return "".join(out)


def _group_id(group: str) -> str:
    # kube-apiserver trims ".k8s.io"; our groups keep their full name.
    return group.removesuffix(".k8s.io")


def operation_id(verb: str, rest: str, group: str, version: str = "") -> str:
    """As GetOperationIDAndTags builds it: verb, group, version, then the rest of the route's name."""
    out = verb + operation_id_part(_group_id(group), capitalize=True)
    if version:
        out += operation_id_part(version, capitalize=True)
    return out + rest


def tag(group: str, version: str = "") -> str:
    out = operation_id_part(_group_id(group), capitalize=False)
    return out + "_" + operation_id_part(version, capitalize=False) if version else out


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _doc(model: type[BaseModel]) -> str:
    """A model's docstring as one description: lines joined, paragraphs kept."""
    text = inspect.cleandoc(model.__doc__ or "")
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


# ----------------------------------------------------------------------------- schemas


def _gvk(group: str, version: str, kind: str) -> JSON:
    return {"group": group, "kind": kind, "version": version}


def _ref(name: str) -> JSON:
    return {"$ref": "#/definitions/" + name}


_SCALAR_TYPES: dict[str, JSON] = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    INT32: {"type": "integer", "format": "int32"},
    INT64: {"type": "integer", "format": "int64"},
}


@dataclass
class SchemaBuilder:
    """Definitions (Swagger 2.0 style, `#/definitions/` refs) of models and everything they use."""

    definitions: dict[str, JSON] = field(default_factory=dict)
    names: dict[type[BaseModel], str] = field(default_factory=lambda: dict(_SHARED_NAMES))

    def name_of(self, model: type[BaseModel], prefix: str) -> str:
        name = self.names.get(model)
        if name is None:
            name = prefix + model.__name__
            taken = [m for m, n in self.names.items() if n == name]
            if taken:
                raise ValueError(f"two models named {name}: {taken[0]!r} and {model!r}")
            self.names[model] = name
        return name

    def add(self, model: type[BaseModel], prefix: str, extensions: JSON | None = None) -> str:
        """Defines `model` (and what it references) unless already defined; returns its name."""
        name = self.name_of(model, prefix)
        if name in self.definitions:
            if extensions:
                self.definitions[name].update(extensions)
            return name
        schema: JSON = {"description": _doc(model), "type": "object"}
        self.definitions[name] = schema  # before the fields: models may refer to themselves
        specs = fields_of(model)
        if specs:
            schema["properties"] = {spec.name: self.property(spec, prefix) for spec in specs}
            required = [spec.name for spec in specs if spec.required]
            if required:
                schema["required"] = required
        extra = model.model_config.get("json_schema_extra")
        if isinstance(extra, dict):
            schema.update({k: copy.deepcopy(v) for k, v in extra.items() if k.startswith("x-")})
        if extensions:
            schema.update(extensions)
        return name

    def type_schema(self, t: TypeSpec, prefix: str) -> JSON:
        if isinstance(t, Scalar):
            return dict(_SCALAR_TYPES[t.name])
        if isinstance(t, Timestamp):
            name = MICRO_TIME if t.micro else TIME
            self.definitions.setdefault(name, dict(_SCALAR_DEFINITIONS[name]))
            return _ref(name)
        if isinstance(t, Struct):
            return _ref(self.add(t.model, prefix))
        if isinstance(t, ListOf):
            return {"type": "array", "items": self.element(t.item, prefix)}
        if isinstance(t, MapOf):
            return {"type": "object", "additionalProperties": self.element(t.value, prefix)}
        self.definitions.setdefault(FIELDS_V1, dict(_SCALAR_DEFINITIONS[FIELDS_V1]))
        return _ref(FIELDS_V1)

    def zero(self, t: TypeSpec) -> Any:
        """openapi-gen's default of a value-typed Go member (zero scalars, {} for structs), None where
        that default would not satisfy the schema: {} for a struct with required fields, and for a
        Time (a string on the wire, whose zero marshals as null). Upstream emits those anyway, which
        makes its documents fail a strict OpenAPI validator; here they are left out."""
        if isinstance(t, Scalar):
            return "" if t.name == "string" else False if t.name == "bool" else 0
        if isinstance(t, Struct) and "required" not in self.definitions[self.names[t.model]]:
            return {}
        return None

    def element(self, t: TypeSpec, prefix: str) -> JSON:
        schema = self.type_schema(t, prefix)
        zero = self.zero(t)
        if zero is not None:
            schema["default"] = zero
        return schema

    def property(self, spec: FieldSpec, prefix: str) -> JSON:
        schema = self.type_schema(spec.type, prefix)
        if spec.description:
            schema["description"] = spec.description
        if not spec.go.pointer and not isinstance(spec.type, FreeForm):
            zero = self.zero(spec.type)
            # Value structs get {} even when omitempty; scalars only when not.
            if zero == {} or (zero is not None and not spec.go.omitempty):
                schema["default"] = zero
        schema.update({k: copy.deepcopy(v) for k, v in spec.extensions.items() if k.startswith("x-")})
        return schema

    def add_list(self, kind: ResourceKind) -> str:
        """The list kind of a kind (no model of its own: metadata and items, as every list)."""
        prefix = kind_prefix(kind)
        name = prefix + kind.list_kind
        self.definitions[name] = {
            "description": f"{kind.list_kind} is a list of {kind.kind} objects.",
            "type": "object",
            "properties": {
                "kind": {"description": KIND_DESCRIPTION, "type": "string"},
                "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
                "metadata": {
                    **self.type_schema(Struct(ListMeta), META_PREFIX),
                    "default": self.zero(Struct(ListMeta)),
                    "description": "Standard list metadata.",
                },
                "items": {
                    "description": f"The {kind.kind} objects.",
                    **self.type_schema(ListOf(Struct(kind.model)), prefix),
                },
            },
            "required": ["items"],
            "x-kubernetes-group-version-kind": [_gvk(kind.group, kind.version, kind.list_kind)],
        }
        return name


# ----------------------------------------------------------------------------- operations


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # "string", "boolean", "integer"
    description: str
    location: str = "query"


def _q(name: str, type_: str, description: str) -> Param:
    return Param(name, type_, description)


P_ALLOW_WATCH_BOOKMARKS = _q(
    "allowWatchBookmarks",
    "boolean",
    'allowWatchBookmarks asks for watch events of type "BOOKMARK". The server sends them at its '
    "discretion: clients must not rely on their timing or on getting any. Ignored unless this is a watch.",
)
P_ALLOW_WATCH_BOOKMARKS_SEED = _q(
    "allowWatcokmarks",
    "boolean",
    "The interface document's spelling of allowWatchBookmarks; the server treats both alike.",
)
P_CONTINUE = _q(
    "continue",
    "string",
    "The continue token of a previous list response, asking for the next chunk of the same list (same "
    "query otherwise). A token that has expired answers 410 Gone carrying a new token, which continues "
    "from the latest data instead of the first list's snapshot. Not supported for watches.",
)
P_DRY_RUN = _q(
    "dryRun",
    "string",
    "When present, the request is processed but nothing is persisted. Valid values: All (every dry-run "
    "stage runs). An unknown value fails the request.",
)
P_FIELD_MANAGER = _q(
    "fieldManager",
    "string",
    "The name of the actor making these changes, recorded in managedFields. At most 128 characters, "
    "printable characters only.",
)
P_FIELD_MANAGER_PATCH = _q(
    "fieldManager",
    "string",
    P_FIELD_MANAGER.description + " Required for apply patches (application/apply-patch+yaml), optional "
    "for the other patch types.",
)
P_FIELD_SELECTOR = _q(
    "fieldSelector", "string", "A selector restricting the objects by their fields. Defaults to everything."
)
P_FIELD_VALIDATION = _q(
    "fieldValidation",
    "string",
    "How the server treats unknown and duplicate fields in the body of a POST, PUT or PATCH. Ignore: "
    "they are dropped silently. Warn (the default): they are dropped and each is reported in a Warning "
    "header. Strict: the request fails with BadRequest naming all of them.",
)
P_FORCE = _q(
    "force",
    "boolean",
    "force makes an apply patch take over fields that other managers own. Must be unset for the other "
    "patch types.",
)
P_GRACE_PERIOD = _q(
    "gracePeriodSeconds",
    "integer",
    "The number of seconds before the object should be deleted; non-negative, zero means immediately. "
    "Unset uses the default of the type.",
)
P_IGNORE_STORE_READ_ERROR = _q(
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "boolean",
    "If true, an object that cannot be read from storage (it cannot be decoded, for instance) is deleted "
    "anyway, bypassing the normal deletion flow. This may break the cluster: use it only to remove a "
    "corrupt object.",
)
P_LABEL_SELECTOR = _q(
    "labelSelector", "string", "A selector restricting the objects by their labels. Defaults to everything."
)
P_LIMIT = _q(
    "limit",
    "integer",
    "The most items one list response may hold. When more remain, metadata.continue carries a token for "
    "the next chunk; all chunks come from one consistent snapshot. A response may hold fewer items, even "
    "none, and still have more: only an empty continue means the end. Not supported for watches.",
)
P_ORPHAN_DEPENDENTS = _q(
    "orphanDependents",
    "boolean",
    'Deprecated: use propagationPolicy. Whether the dependents are orphaned (the "orphan" finalizer is '
    "added to or removed from the object). Cannot be combined with propagationPolicy.",
)
P_PRETTY = _q(
    "pretty",
    "string",
    "If 'true', the output is pretty printed. Defaults to 'false' unless the user agent is a browser or "
    "a command-line HTTP tool (curl, wget).",
)
P_PROPAGATION_POLICY = _q(
    "propagationPolicy",
    "string",
    "Whether and how dependents are garbage collected: 'Orphan', 'Background' or 'Foreground'. Cannot be "
    "combined with orphanDependents.",
)
P_RESOURCE_VERSION = _q(
    "resourceVersion",
    "string",
    "Which resource versions the request may be served from. Unset: the most recent data (a consistent "
    'read). "0": any version. Otherwise data at least as new as this one (or exactly it, with '
    "resourceVersionMatch=Exact). A watch starts after it. Defaults to unset.",
)
P_RESOURCE_VERSION_MATCH = _q(
    "resourceVersionMatch",
    "string",
    "How resourceVersion applies to a list: NotOlderThan or Exact. Should be set whenever a list sets "
    "resourceVersion. Defaults to unset.",
)
P_SEND_INITIAL_EVENTS = _q(
    "sendInitialEvents",
    "boolean",
    "With watch=true, the stream starts with synthetic ADDED events for the current objects, then a "
    'BOOKMARK annotated "k8s.io/initial-events-end": "true", then the changes. Requires '
    "resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true.",
)
P_TIMEOUT_SECONDS = _q(
    "timeoutSeconds", "integer", "Timeout of the list or watch call, whatever the activity."
)
P_WATCH = _q(
    "watch",
    "boolean",
    "Watch for changes to the described resources and return them as a stream of add, update and remove "
    "notifications. Set resourceVersion to start after a known version.",
)
P_NAMESPACE = Param(
    "namespace", "string", "object name and auth scope, such as for teams and projects", "path"
)

LIST_PARAMS = (
    P_ALLOW_WATCH_BOOKMARKS,
    P_ALLOW_WATCH_BOOKMARKS_SEED,
    P_CONTINUE,
    P_FIELD_SELECTOR,
    P_LABEL_SELECTOR,
    P_LIMIT,
    P_RESOURCE_VERSION,
    P_RESOURCE_VERSION_MATCH,
    P_SEND_INITIAL_EVENTS,
    P_TIMEOUT_SECONDS,
    P_WATCH,
)
WRITE_PARAMS = (P_DRY_RUN, P_FIELD_MANAGER, P_FIELD_VALIDATION)
PATCH_PARAMS = (P_DRY_RUN, P_FIELD_MANAGER_PATCH, P_FIELD_VALIDATION, P_FORCE)
DELETE_PARAMS = (
    P_DRY_RUN,
    P_GRACE_PERIOD,
    P_IGNORE_STORE_READ_ERROR,
    P_ORPHAN_DEPENDENTS,
    P_PROPAGATION_POLICY,
)
DELETE_COLLECTION_PARAMS = (
    *DELETE_PARAMS,
    P_CONTINUE,
    P_FIELD_SELECTOR,
    P_LABEL_SELECTOR,
    P_LIMIT,
    P_RESOURCE_VERSION,
    P_RESOURCE_VERSION_MATCH,
    P_SEND_INITIAL_EVENTS,
    P_TIMEOUT_SECONDS,
)

OBJECT_TYPES = (JSON_TYPE, codec.YAML_TYPE)
LIST_TYPES = (JSON_TYPE, WATCH_STREAM_TYPE, codec.YAML_TYPE)
PATCH_BODY_TYPES = (
    codec.APPLY_PATCH_TYPE,
    codec.JSON_PATCH_TYPE,
    codec.MERGE_PATCH_TYPE,
    codec.STRATEGIC_PATCH_TYPE,
)
_STATUS_TEXT = {"200": "OK", "201": "Created", "202": "Accepted"}


@dataclass(frozen=True)
class Operation:
    method: str  # get, post, put, patch, delete
    operation_id: str
    description: str
    tag: str
    responses: tuple[tuple[str, str], ...]  # (code, definition name)
    produces: tuple[str, ...] = OBJECT_TYPES
    params: tuple[Param, ...] = ()
    body: str = ""  # definition name of the request body
    body_required: bool = True
    consumes: tuple[str, ...] = ("*/*",)
    action: str = ""
    gvk: JSON | None = None


@dataclass(frozen=True)
class PathItem:
    path: str
    operations: tuple[Operation, ...]
    params: tuple[Param, ...] = ()


def _sorted(params: Iterable[Param]) -> tuple[Param, ...]:
    return tuple(sorted(params, key=lambda p: p.name))


def resource_paths(kind: ResourceKind, object_name: str, list_name: str) -> list[PathItem]:
    """Every route of a namespaced kind, as kube-apiserver's installer names and documents them."""
    g, v, k = kind.group, kind.version, kind.kind
    base = f"/apis/{g}/{v}"
    gvk = _gvk(g, v, k)
    tg = tag(g, v)
    status = META_PREFIX + "Status"
    watch_event = META_PREFIX + "WatchEvent"
    name_param = Param("name", "string", f"name of the {k}", "path")
    collection = f"{base}/namespaces/{{namespace}}/{kind.plural}"

    def op(method: str, verb: str, rest: str, description: str, action: str, **kw: Any) -> Operation:
        return Operation(
            method,
            operation_id(verb, rest, g, v),
            description,
            tg,
            action=action,
            gvk=gvk,
            **kw,
        )

    list_description = f"list or watch objects of kind {k}"
    watch_list_description = (
        f"watch individual changes to a list of {k}. deprecated: use the 'watch' parameter with a list "
        "operation instead."
    )
    watch_description = (
        f"watch changes to an object of kind {k}. deprecated: use the 'watch' parameter with a list "
        "operation instead, filtered to a single item with the 'fieldSelector' parameter."
    )
    return [
        PathItem(
            f"{base}/{kind.plural}",
            (
                op(
                    "get",
                    "list",
                    f"{k}ForAllNamespaces",
                    list_description,
                    "list",
                    responses=(("200", list_name),),
                    produces=LIST_TYPES,
                ),
            ),
            _sorted((*LIST_PARAMS, P_PRETTY)),
        ),
        PathItem(
            collection,
            (
                op(
                    "get",
                    "list",
                    f"Namespaced{k}",
                    list_description,
                    "list",
                    responses=(("200", list_name),),
                    produces=LIST_TYPES,
                    params=_sorted(LIST_PARAMS),
                ),
                op(
                    "post",
                    "create",
                    f"Namespaced{k}",
                    f"create {_article(k)} {k}",
                    "post",
                    responses=(("200", object_name), ("201", object_name), ("202", object_name)),
                    params=_sorted(WRITE_PARAMS),
                    body=object_name,
                ),
                op(
                    "delete",
                    "delete",
                    f"CollectionNamespaced{k}",
                    f"delete collection of {k}",
                    "deletecollection",
                    responses=(("200", status),),
                    params=_sorted(DELETE_COLLECTION_PARAMS),
                    body=META_PREFIX + "DeleteOptions",
                    body_required=False,
                ),
            ),
            (P_NAMESPACE, P_PRETTY),
        ),
        PathItem(
            f"{collection}/{{name}}",
            (
                op(
                    "get",
                    "read",
                    f"Namespaced{k}",
                    f"read the specified {k}",
                    "get",
                    responses=(("200", object_name),),
                ),
                op(
                    "put",
                    "replace",
                    f"Namespaced{k}",
                    f"replace the specified {k}",
                    "put",
                    responses=(("200", object_name), ("201", object_name)),
                    params=_sorted(WRITE_PARAMS),
                    body=object_name,
                ),
                op(
                    "patch",
                    "patch",
                    f"Namespaced{k}",
                    f"partially update the specified {k}",
                    "patch",
                    responses=(("200", object_name), ("201", object_name)),
                    params=_sorted(PATCH_PARAMS),
                    body=META_PREFIX + "Patch",
                    consumes=PATCH_BODY_TYPES,
                ),
                op(
                    "delete",
                    "delete",
                    f"Namespaced{k}",
                    f"delete {_article(k)} {k}",
                    "delete",
                    responses=(("200", status), ("202", status)),
                    params=_sorted(DELETE_PARAMS),
                    body=META_PREFIX + "DeleteOptions",
                    body_required=False,
                ),
            ),
            (name_param, P_NAMESPACE, P_PRETTY),
        ),
        PathItem(
            f"{base}/watch/{kind.plural}",
            (
                op(
                    "get",
                    "watch",
                    f"{k}ListForAllNamespaces",
                    watch_list_description,
                    "watchlist",
                    responses=(("200", watch_event),),
                    produces=LIST_TYPES,
                ),
            ),
            _sorted((*LIST_PARAMS, P_PRETTY)),
        ),
        PathItem(
            f"{base}/watch/namespaces/{{namespace}}/{kind.plural}",
            (
                op(
                    "get",
                    "watch",
                    f"Namespaced{k}List",
                    watch_list_description,
                    "watchlist",
                    responses=(("200", watch_event),),
                    produces=LIST_TYPES,
                ),
            ),
            (P_NAMESPACE, *_sorted((*LIST_PARAMS, P_PRETTY))),
        ),
        PathItem(
            f"{base}/watch/namespaces/{{namespace}}/{kind.plural}/{{name}}",
            (
                op(
                    "get",
                    "watch",
                    f"Namespaced{k}",
                    watch_description,
                    "watch",
                    responses=(("200", watch_event),),
                    produces=LIST_TYPES,
                ),
            ),
            (name_param, P_NAMESPACE, *_sorted((*LIST_PARAMS, P_PRETTY))),
        ),
    ]


def _discovery_path(path: str, operation: str, description: str, response: str, tag_: str) -> PathItem:
    return PathItem(
        path,
        (Operation("get", operation, description, tag_, responses=((("200", META_PREFIX + response)),)),),
    )


# ----------------------------------------------------------------------------- documents


@dataclass
class Documents:
    """The Swagger 2.0 document and the OpenAPI 3.0 documents keyed by their index path
    (`apis`, `apis/<group>`, `apis/<group>/<version>`)."""

    v2: JSON
    v3: dict[str, JSON]


_SECURITY_SCHEME: JSON = {
    "description": "Bearer Token authentication",
    "type": "apiKey",
    "name": "authorization",
    "in": "header",
}


def _v2_param(param: Param) -> JSON:
    out: JSON = {
        "description": param.description,
        "in": param.location,
        "name": param.name,
        "type": param.type,
        "uniqueItems": True,
    }
    if param.location == "path":
        out["required"] = True
    return out


def _v3_param(param: Param) -> JSON:
    out: JSON = {
        "description": param.description,
        "in": param.location,
        "name": param.name,
        "schema": {"type": param.type, "uniqueItems": True},
    }
    if param.location == "path":
        out["required"] = True
    return out


def _v2_operation(op: Operation) -> JSON:
    params = [_v2_param(p) for p in op.params]
    if op.body:
        body: JSON = {"in": "body", "name": "body", "schema": _ref(op.body)}
        if op.body_required:
            body["required"] = True
        params.insert(0, body)
    out: JSON = {
        "consumes": list(op.consumes),
        "description": op.description,
        "operationId": op.operation_id,
        "produces": list(op.produces),
        "responses": {
            **{
                code: {"description": _STATUS_TEXT[code], "schema": _ref(name)} for code, name in op.responses
            },
            "401": {"description": "Unauthorized"},
        },
        "schemes": ["https"],
        "tags": [op.tag],
    }
    if params:
        out["parameters"] = params
    if op.action:
        out["x-kubernetes-action"] = op.action
    if op.gvk:
        out["x-kubernetes-group-version-kind"] = dict(op.gvk)
    return out


def _v3_ref(name: str) -> JSON:
    return {"$ref": "#/components/schemas/" + name}


def _v3_operation(op: Operation) -> JSON:
    out: JSON = {
        "description": op.description,
        "operationId": op.operation_id,
        "responses": {
            **{
                code: {
                    "description": _STATUS_TEXT[code],
                    "content": {media: {"schema": _v3_ref(name)} for media in op.produces},
                }
                for code, name in op.responses
            },
            "401": {"description": "Unauthorized"},
        },
        "tags": [op.tag],
    }
    if op.params:
        out["parameters"] = [_v3_param(p) for p in op.params]
    if op.body:
        body: JSON = {"content": {media: {"schema": _v3_ref(op.body)} for media in op.consumes}}
        if op.body_required:
            body["required"] = True
        out["requestBody"] = body
    if op.action:
        out["x-kubernetes-action"] = op.action
    if op.gvk:
        out["x-kubernetes-group-version-kind"] = dict(op.gvk)
    return out


def _v2_paths(items: Iterable[PathItem]) -> JSON:
    paths: JSON = {}
    for item in items:
        entry: JSON = {op.method: _v2_operation(op) for op in item.operations}
        if item.params:
            entry["parameters"] = [_v2_param(p) for p in item.params]
        paths[item.path] = entry
    return paths


def _v3_paths(items: Iterable[PathItem]) -> JSON:
    paths: JSON = {}
    for item in items:
        entry: JSON = {op.method: _v3_operation(op) for op in item.operations}
        if item.params:
            entry["parameters"] = [_v3_param(p) for p in item.params]
        paths[item.path] = entry
    return paths


def _refs(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                yield item.rsplit("/", 1)[-1]
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _closure(roots: Iterable[str], definitions: dict[str, JSON]) -> dict[str, JSON]:
    """The definitions reachable from `roots`, sorted by name."""
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(_refs(definitions[name]))
    return {name: definitions[name] for name in sorted(seen)}


def to_v3_schema(schema: Any) -> Any:
    """A Swagger 2.0 schema as OpenAPI 3.0 wants it: refs point into components, and a ref with
    sibling keys (which 3.0 ignores) is wrapped in allOf, as kube-openapi's builder3 does."""
    if isinstance(schema, list):
        return [to_v3_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: to_v3_schema(value) for key, value in schema.items() if key != "$ref"}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = ref.replace("#/definitions/", "#/components/schemas/")
        if out:
            return {"allOf": [{"$ref": target}], **out}
        return {"$ref": target}
    return out


def _v3_document(items: list[PathItem], definitions: dict[str, JSON]) -> JSON:
    paths = _v3_paths(items)
    schemas = _closure(_refs(_v2_paths(items)), definitions)
    return {
        "openapi": "3.0.0",
        "info": {"title": "coreio", "version": "unversioned"},
        "paths": paths,
        "components": {
            "schemas": {name: to_v3_schema(schema) for name, schema in schemas.items()},
            "securitySchemes": {"BearerToken": dict(_SECURITY_SCHEME)},
        },
        "security": [{"BearerToken": []}],
    }


def build_documents(kinds: Sequence[ResourceKind]) -> Documents:
    """Every OpenAPI document of the served kinds."""
    builder = SchemaBuilder()

    # Shared types, each tagged with the group-versions it is served in.
    def shared_gvks(kind_name: str) -> list[JSON]:
        gvs = sorted({(k.group, k.version) for k in kinds})
        return [_gvk("", "v1", kind_name)] + [_gvk(g, v, kind_name) for g, v in gvs]

    for model, gvks in (
        (Status, [_gvk("", "v1", "Status")]),
        (DeleteOptions, shared_gvks("DeleteOptions")),
        (WatchEvent, shared_gvks("WatchEvent")),
        (Patch, []),
        (APIGroupList, [_gvk("", "v1", "APIGroupList")]),
        (APIGroup, [_gvk("", "v1", "APIGroup")]),
        (APIResourceList, [_gvk("", "v1", "APIResourceList")]),
    ):
        extensions = {"x-kubernetes-group-version-kind": gvks} if gvks else None
        builder.add(model, META_PREFIX, extensions)

    per_gv: dict[tuple[str, str], list[PathItem]] = {}
    for kind in kinds:
        prefix = kind_prefix(kind)
        object_name = builder.add(
            kind.model,
            prefix,
            {"x-kubernetes-group-version-kind": [_gvk(kind.group, kind.version, kind.kind)]},
        )
        if object_name != prefix + kind.kind:
            raise ValueError(f"the model of {kind.kind} must be named {kind.kind}")
        list_name = builder.add_list(kind)
        items = per_gv.setdefault((kind.group, kind.version), [])
        if not items:
            items.append(
                _discovery_path(
                    f"/apis/{kind.group}/{kind.version}/",
                    operation_id("get", "APIResources", kind.group, kind.version),
                    "get available resources",
                    "APIResourceList",
                    tag(kind.group, kind.version),
                )
            )
        items.extend(resource_paths(kind, object_name, list_name))

    definitions = builder.definitions
    v3: dict[str, list[PathItem]] = {
        "apis": [
            _discovery_path("/apis/", "getAPIVersions", "get available API versions", "APIGroupList", "apis")
        ]
    }
    for group in sorted({kind.group for kind in kinds}):
        v3[f"apis/{group}"] = [
            _discovery_path(
                f"/apis/{group}/",
                operation_id("get", "APIGroup", group),
                "get information of a group",
                "APIGroup",
                tag(group),
            )
        ]
    for (group, version), items in sorted(per_gv.items()):
        v3[f"apis/{group}/{version}"] = items

    all_items = [item for items in v3.values() for item in items]
    v2_paths = _v2_paths(all_items)
    v2: JSON = {
        "swagger": "2.0",
        "info": {"title": "coreio", "version": f"v{__version__}"},
        "paths": v2_paths,
        "definitions": _closure(definitions, definitions),
        "securityDefinitions": {"BearerToken": dict(_SECURITY_SCHEME)},
        "security": [{"BearerToken": []}],
    }
    return Documents(v2=v2, v3={path: _v3_document(items, definitions) for path, items in v3.items()})


# ----------------------------------------------------------------------------- serving


@dataclass(frozen=True)
class Served:
    """A document as served: its bytes and the content hash upstream uses as ETag and `?hash=`."""

    body: bytes
    hash: str

    @classmethod
    def of(cls, document: JSON) -> Served:
        body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        return cls(body, hashlib.sha512(body).hexdigest().upper())

    @property
    def etag(self) -> str:
        return f'"{self.hash}"'


def _etag_matches(header: str, etag: str) -> bool:
    """If-None-Match uses the weak comparison."""
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == etag:
            return True
    return False


def _not_modified(request: web.Request, etag: str, modified: datetime) -> bool:
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        return _etag_matches(if_none_match, etag)
    since = request.headers.get("If-Modified-Since")
    if since:
        try:
            return parsedate_to_datetime(since) >= modified
        except (TypeError, ValueError):
            return False
    return False


def _accepts_json(accept: str) -> None:
    """Raises 406 unless the client takes JSON; protobuf, which upstream also offers, is not encoded
    here, so a client listing it first and JSON after gets JSON."""
    for media in codec.parse_accept(accept or "*/*"):
        if media.type in (JSON_TYPE, "application/*", "*/*", "*"):
            return
    raise errors.not_acceptable([JSON_TYPE])


def _one_year_from(moment: datetime) -> datetime:
    try:
        return moment.replace(year=moment.year + 1)
    except ValueError:  # 29 February
        return moment + timedelta(days=365)


class OpenAPIService:
    """The handlers of /openapi/v2, /openapi/v3 and /openapi/v3/<path>."""

    def __init__(self, kinds: Sequence[ResourceKind]) -> None:
        documents = build_documents(kinds)
        self.documents = documents
        self.modified = datetime.now(UTC).replace(microsecond=0)
        self.v2 = Served.of(documents.v2)
        self.v3 = {path: Served.of(document) for path, document in documents.v3.items()}
        self.index = Served.of(
            {"paths": {path: {"serverRelativeURL": self.url_of(path)} for path in sorted(self.v3)}}
        )

    def url_of(self, path: str) -> str:
        return f"/openapi/v3/{path}?hash={self.v3[path].hash}"

    def _respond(self, request: web.Request, served: Served, headers: dict[str, str]) -> web.Response:
        headers = {
            "Cache-Control": NO_CACHE,
            **headers,
            "ETag": served.etag,
            "Last-Modified": format_datetime(self.modified, usegmt=True),
            "Vary": "Accept",
        }
        if _not_modified(request, served.etag, self.modified):
            return web.Response(status=304, headers=headers)
        response = web.Response(body=served.body, content_type=JSON_TYPE, headers=headers)
        if "gzip" in request.headers.get("Accept-Encoding", "").lower():
            response.enable_compression(web.ContentCoding.gzip)  # as upstream's gzip handler
        return response

    async def serve_v2(self, request: web.Request) -> web.Response:
        _accepts_json(request.headers.get("Accept", ""))
        return self._respond(request, self.v2, {})

    async def serve_v3_index(self, request: web.Request) -> web.Response:
        return self._respond(request, self.index, {})

    async def serve_v3(self, request: web.Request) -> web.Response:
        _accepts_json(request.headers.get("Accept", ""))
        path = request.match_info.get("path", "").strip("/")
        served = self.v3.get(path)
        if served is None:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        headers: dict[str, str] = {}
        asked = request.query.get("hash")
        if asked:
            if asked != served.hash:
                # A stale link: send the client to the current document.
                return web.Response(
                    status=301, headers={"Location": self.url_of(path), "Cache-Control": NO_CACHE}
                )
            headers["Cache-Control"] = IMMUTABLE
            headers["Expires"] = format_datetime(_one_year_from(datetime.now(UTC)), usegmt=True)
        return self._respond(request, served, headers)
