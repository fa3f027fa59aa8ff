"""The meta.k8s.io and discovery types the documents describe that no served kind models (ListMeta,
Status, DeleteOptions, WatchEvent, APIGroup, ...), and upstream's definition names of the shared types.

They are declared like the kinds' models (Go struct order, Go markers) so one generator serves all.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field
from pydantic.config import JsonDict

from apiserver.machinery.metav1 import (
    API_VERSION_DESCRIPTION,
    KIND_DESCRIPTION,
    ManagedFieldsEntry,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
)
from apiserver.machinery.schema import INT32, INT64, Go

META_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1."
TIME = META_PREFIX + "Time"
MICRO_TIME = META_PREFIX + "MicroTime"
FIELDS_V1 = META_PREFIX + "FieldsV1"

_OPTIONAL = Go(omitempty=True)
_ATOMIC_LIST: JsonDict = {"x-kubernetes-list-type": "atomic"}


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
SHARED_NAMES: dict[type[BaseModel], str] = {
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
