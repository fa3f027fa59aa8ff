"""What admission is asked about one write: upstream's `admission.Attributes`, as the policies and
webhooks of the cluster see it (operation, resource, names, the object before and after, who asks,
the options, dry run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apiserver.machinery.options import DeleteOptions, WriteOptions
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.resources.base import ResourceKind

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
CONNECT = "CONNECT"
OPERATIONS = (CREATE, UPDATE, DELETE, CONNECT)
# The options kinds upstream hands admission: a patch is an update (or a create, when it creates).
_OPTIONS_KINDS = {CREATE: "CreateOptions", UPDATE: "UpdateOptions", DELETE: "DeleteOptions"}


@dataclass(frozen=True)
class AdmissionRequest:
    kind: ResourceKind
    operation: str
    namespace: str
    name: str
    # The object written (None for a delete) and the one it replaces (None for a create).
    obj: JSON | None
    old: JSON | None
    user: UserInfo | None
    dry_run: bool
    # The request's options object (CreateOptions, UpdateOptions or DeleteOptions), as JSON.
    options: JSON
    subresource: str = ""

    @property
    def group(self) -> str:
        return self.kind.group

    @property
    def version(self) -> str:
        return self.kind.version

    @property
    def resource(self) -> str:
        return self.kind.plural

    def with_object(self, obj: JSON) -> AdmissionRequest:
        """The same request about `obj` (what a mutation made of it)."""
        return AdmissionRequest(
            self.kind,
            self.operation,
            self.namespace,
            self.name,
            obj,
            self.old,
            self.user,
            self.dry_run,
            self.options,
            self.subresource,
        )


def write_options_object(operation: str, opts: WriteOptions) -> JSON:
    """CreateOptions or UpdateOptions as upstream's handlers give admission them (a patch's as
    patchToUpdateOptions/patchToCreateOptions make them): dryRun, fieldManager, fieldValidation."""
    options: dict[str, Any] = {"kind": _OPTIONS_KINDS[operation], "apiVersion": "meta.k8s.io/v1"}
    if opts.dry_run:
        options["dryRun"] = ["All"]
    if opts.field_manager:
        options["fieldManager"] = opts.field_manager
    if opts.requested_field_validation:
        options["fieldValidation"] = opts.requested_field_validation
    return options


def delete_options_object(opts: DeleteOptions) -> JSON:
    """DeleteOptions as the request gave them."""
    options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
    if opts.grace_period_seconds is not None:
        options["gracePeriodSeconds"] = opts.grace_period_seconds
    preconditions = {
        key: value
        for key, value in (
            ("uid", opts.preconditions.uid),
            ("resourceVersion", opts.preconditions.resource_version),
        )
        if value
    }
    if preconditions:
        options["preconditions"] = preconditions
    if opts.orphan_dependents is not None:
        options["orphanDependents"] = opts.orphan_dependents
    if opts.propagation_policy is not None:
        options["propagationPolicy"] = opts.propagation_policy
    if opts.dry_run:
        options["dryRun"] = ["All"]
    return options


def for_write(
    kind: ResourceKind,
    operation: str,
    namespace: str,
    obj: JSON,
    old: JSON | None,
    opts: WriteOptions,
    name: str | None = None,
) -> AdmissionRequest:
    """`name`: the name the request gave, when the object's differs (a name generated since)."""
    if name is None:
        name = str((obj.get("metadata") or {}).get("name") or "")
    options = write_options_object(operation, opts)
    return AdmissionRequest(
        kind, operation, namespace, name, obj, old, opts.user, opts.dry_run, options, opts.subresource
    )


def for_delete(
    kind: ResourceKind, namespace: str, name: str, old: JSON | None, opts: DeleteOptions
) -> AdmissionRequest:
    options = delete_options_object(opts)
    return AdmissionRequest(kind, DELETE, namespace, name, None, old, opts.user, opts.dry_run, options)


def request_object(request: AdmissionRequest, uid: str = "") -> JSON:
    """admission/v1 AdmissionRequest as JSON, without object and oldObject: what CEL's `request`
    is (upstream's CreateAdmissionRequest; uid empty there) and the core of a webhook's review."""
    kind = {"group": request.group, "version": request.version, "kind": request.kind.kind}
    resource = {"group": request.group, "version": request.version, "resource": request.resource}
    body: dict[str, Any] = {"uid": uid, "kind": kind, "resource": resource}
    if request.subresource:
        body["subResource"] = request.subresource
    body["requestKind"] = dict(kind)
    body["requestResource"] = dict(resource)
    if request.subresource:
        body["requestSubResource"] = request.subresource
    if request.name:
        body["name"] = request.name
    if request.namespace:
        body["namespace"] = request.namespace
    body["operation"] = request.operation
    body["userInfo"] = request.user.as_json() if request.user is not None else {}
    body["dryRun"] = request.dry_run
    body["options"] = request.options
    return body


def cel_activation(request: AdmissionRequest, namespace: JSON | None = None) -> dict[str, Any]:
    """The variables admission's CEL expressions read about the request (all but `params` and
    `variables`): the objects, `request`, `namespaceObject`, and the `authorizer` for its user."""
    from apiserver.cel.library import authz  # the engine's: loaded with CEL (apiserver/cel)

    user = request.user.as_json() if request.user is not None else {}
    return {
        "object": request.obj,
        "oldObject": request.old,
        "request": request_object(request),
        "namespaceObject": namespace,
        "authorizer": authz.authorizer_for(user),
        "authorizer.requestResource": authz.request_resource(
            user, request.group, request.resource, request.subresource, request.namespace, request.name
        ),
    }
