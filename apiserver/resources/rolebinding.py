"""RoleBinding (rbac.authorization.core.io/v1): schema, defaults, validation and strategy, as upstream's
rbac.authorization.k8s.io/v1 RoleBinding with the group renamed (pkg/apis/rbac/v1/defaults.go,
pkg/apis/rbac/validation/validation.go, pkg/registry/rbac/rolebinding/strategy.go)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from apiserver.machinery import formats
from apiserver.machinery.errors import FieldError, invalid, not_supported, required
from apiserver.machinery.metav1 import (
    API_VERSION_DESCRIPTION,
    KIND_DESCRIPTION,
    METADATA_DESCRIPTION,
    ObjectMeta,
    go_struct,
    object_meta_fields,
    validate_object_meta,
    validate_object_meta_update,
)
from apiserver.machinery.printing import TableColumn, field_description, since
from apiserver.machinery.schema import Decoded, Go, decode_object
from apiserver.machinery.types import JSON
from apiserver.patch.schema import OBJECT_META_PATCH_SCHEMA, PatchSchema
from apiserver.resources.base import (
    ADMIN_ROLE,
    READ_VERBS,
    WRITE_VERBS,
    Admission,
    ResourceKind,
    ServerChecks,
)

GROUP = "rbac.authorization.core.io"
SERVICE_ACCOUNT_KIND = "ServiceAccount"
USER_KIND = "User"
GROUP_KIND = "Group"
# The access reviews served beside RoleBindings (apiserver.rbac.accessreviews), as (plural, kind):
# create-only and namespaced; what `kubectl coreio` asks. Everyone may create them (the ClusterRole
# ACCESS_REVIEWER, bound to system:authenticated); each answers only what its caller may list.
ACCESS_REVIEWS = (
    ("resourceaccessreviews", "ResourceAccessReview"),
    ("accessexplanations", "AccessExplanation"),
    ("rolebindingreviews", "RoleBindingReview"),
)
ACCESS_REVIEWER = "coreio:access-reviewer"

_OPTIONAL = Go(omitempty=True)
_SUBJECT_ORDER = ("kind", "apiGroup", "name", "namespace")
_ATOMIC_STRUCT = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})


class Subject(BaseModel):
    """A reference to the object or user identity a role binding applies to: either a direct API object
    reference, or a value for non-objects such as user and group names."""

    model_config = _ATOMIC_STRUCT

    kind: Annotated[str, Go()] = Field(
        description=(
            'Kind of object being referenced. Values defined by this API group are "User", "Group", and '
            '"ServiceAccount". If the Authorizer does not recognize the kind value, the Authorizer should '
            "report an error."
        )
    )
    apiGroup: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            'APIGroup holds the API group of the referenced subject. Defaults to "" for ServiceAccount '
            f'subjects. Defaults to "{GROUP}" for User and Group subjects.'
        ),
    )
    name: Annotated[str, Go()] = Field(description="Name of the object being referenced.")
    namespace: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            'Namespace of the referenced object. If the object kind is non-namespaced, such as "User" or '
            '"Group", and this value is not empty the Authorizer should report an error.'
        ),
    )


class RoleRef(BaseModel):
    """Information that points to the role being used."""

    model_config = _ATOMIC_STRUCT

    apiGroup: Annotated[str, Go()] = Field(
        description="APIGroup is the group for the resource being referenced"
    )
    kind: Annotated[str, Go()] = Field(description="Kind is the type of resource being referenced")
    name: Annotated[str, Go()] = Field(description="Name is the name of resource being referenced")


class RoleBinding(BaseModel):
    """RoleBinding references a role, but does not contain it. It can reference a Role in the same
    namespace or a ClusterRole in the global namespace. It adds who information via Subjects and
    namespace information by which namespace it exists in. RoleBindings in a given namespace only have
    effect in that namespace."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    metadata: Annotated[ObjectMeta, _OPTIONAL] = Field(
        default_factory=ObjectMeta, description=METADATA_DESCRIPTION
    )
    subjects: Annotated[list[Subject], _OPTIONAL] = Field(
        default_factory=list,
        description="Subjects holds references to the objects the role applies to.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    roleRef: Annotated[RoleRef, Go()] = Field(
        description=(
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
            "namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. "
            "This field is immutable."
        )
    )


# ----------------------------------------------------------------------------- defaults


def set_defaults(obj: JSON) -> None:
    """SetDefaults_RoleBinding and SetDefaults_Subject, on a canonical object (in place)."""
    role_ref = obj.get("roleRef")
    if isinstance(role_ref, dict) and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = GROUP
    for subject in obj.get("subjects") or []:
        defaulted = isinstance(subject, dict) and not subject.get("apiGroup")
        if defaulted and subject.get("kind") in (USER_KIND, GROUP_KIND):
            subject["apiGroup"] = GROUP
            # Keep Go's field order: kind, apiGroup, name, namespace.
            ordered = {key: subject.pop(key) for key in _SUBJECT_ORDER if key in subject}
            subject.update(ordered | subject)


# ----------------------------------------------------------------------------- validation


def _s(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _d(obj: Any, key: str) -> JSON:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def validate_subject(subject: JSON, path: str, *, namespaced: bool = True) -> list[FieldError]:
    """validateRoleBindingSubject."""
    errs: list[FieldError] = []
    name, kind, api_group = _s(subject, "name"), _s(subject, "kind"), _s(subject, "apiGroup")
    if not name:
        errs.append(required(f"{path}.name"))
    if kind == SERVICE_ACCOUNT_KIND:
        if name:
            errs += [invalid(f"{path}.name", name, msg) for msg in formats.name_is_dns_subdomain(name, False)]
        if api_group:
            errs.append(not_supported(f"{path}.apiGroup", api_group, [""]))
        if not namespaced and not _s(subject, "namespace"):
            errs.append(required(f"{path}.namespace"))
    elif kind in (USER_KIND, GROUP_KIND):
        # An empty name is reported once, by the check above: v1.33 puts no other rule on the
        # names of users and groups.
        if api_group != GROUP:
            errs.append(not_supported(f"{path}.apiGroup", api_group, [GROUP]))
    else:
        errs.append(not_supported(f"{path}.kind", kind, [SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND]))
    return errs


def validate_role_binding(obj: JSON) -> list[FieldError]:
    """ValidateRoleBinding."""
    errs = validate_object_meta(_d(obj, "metadata"), formats.name_is_path_segment)
    role_ref = obj.get("roleRef")
    api_group, kind, name = _s(role_ref, "apiGroup"), _s(role_ref, "kind"), _s(role_ref, "name")
    if api_group != GROUP:
        errs.append(not_supported("roleRef.apiGroup", api_group, [GROUP]))
    if kind not in ("Role", "ClusterRole"):
        errs.append(not_supported("roleRef.kind", kind, ["Role", "ClusterRole"]))
    if not name:
        errs.append(required("roleRef.name"))
    else:
        errs += [invalid("roleRef.name", name, msg) for msg in formats.name_is_path_segment(name, False)]
    subjects = obj.get("subjects")
    for i, subject in enumerate(subjects if isinstance(subjects, list) else []):
        errs += validate_subject(subject if isinstance(subject, dict) else {}, f"subjects[{i}]")
    return errs


def _role_ref_tuple(obj: JSON) -> tuple[str, str, str]:
    role_ref = obj.get("roleRef")
    return (_s(role_ref, "apiGroup"), _s(role_ref, "kind"), _s(role_ref, "name"))


def validate_role_binding_update(obj: JSON, old: JSON) -> list[FieldError]:
    """ValidateRoleBindingUpdate (which validates the new object again, as upstream does)."""
    errs = validate_role_binding(obj)
    errs += validate_object_meta_update(_d(obj, "metadata"), _d(old, "metadata"))
    new_ref, old_ref = _role_ref_tuple(obj), _role_ref_tuple(old)
    if new_ref != old_ref:
        shown = go_struct("rbac.RoleRef", list(zip(("APIGroup", "Kind", "Name"), new_ref, strict=True)))
        errs.append(invalid("roleRef", shown, "cannot change roleRef"))
    return errs


# ----------------------------------------------------------------------------- printing

TABLE_COLUMNS = (
    TableColumn("Name", "string", field_description(ObjectMeta, "name"), format="name"),
    TableColumn("Role", "string", field_description(RoleBinding, "roleRef")),
    TableColumn("Age", "string", field_description(ObjectMeta, "creationTimestamp")),
    TableColumn("Users", "string", "Users in the roleBinding", priority=1),
    TableColumn("Groups", "string", "Groups in the roleBinding", priority=1),
    TableColumn("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", priority=1),
)


def subjects_strings(subjects: Any) -> tuple[list[str], list[str], list[str], list[str]]:
    """Users, groups, service accounts (`namespace/name`) and other subjects
    (`kind/namespace/name`), in the binding's order, as rbac.SubjectsStrings sorts them out."""
    users: list[str] = []
    groups: list[str] = []
    service_accounts: list[str] = []
    others: list[str] = []
    for subject in subjects if isinstance(subjects, list) else []:
        kind, name, namespace = _s(subject, "kind"), _s(subject, "name"), _s(subject, "namespace")
        if kind == SERVICE_ACCOUNT_KIND:
            service_accounts.append(f"{namespace}/{name}")
        elif kind == USER_KIND:
            users.append(name)
        elif kind == GROUP_KIND:
            groups.append(name)
        else:
            others.append(f"{kind}/{namespace}/{name}")
    return users, groups, service_accounts, others


def table_row(obj: JSON, now: datetime) -> list[Any]:
    """printRoleBinding, wide: name, `Kind/name` of the role, age, then the subjects."""
    meta, role_ref = _d(obj, "metadata"), _d(obj, "roleRef")
    users, groups, service_accounts, _ = subjects_strings(obj.get("subjects"))
    return [
        _s(meta, "name"),
        f"{_s(role_ref, 'kind')}/{_s(role_ref, 'name')}",
        since(meta.get("creationTimestamp"), now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(service_accounts),
    ]


# ----------------------------------------------------------------------------- patch

# `subjects` carries no strategy (+listType=atomic), so a strategic merge patch replaces it whole.
PATCH_SCHEMA = OBJECT_META_PATCH_SCHEMA


# ----------------------------------------------------------------------------- strategy


class RoleBindingKind(ResourceKind):
    group: ClassVar[str] = GROUP
    version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "RoleBinding"
    list_kind: ClassVar[str] = "RoleBindingList"
    plural: ClassVar[str] = "rolebindings"
    singular: ClassVar[str] = "rolebinding"
    model: ClassVar[type[BaseModel]] = RoleBinding
    patch_schema: ClassVar[PatchSchema] = PATCH_SCHEMA
    table_columns: ClassVar[tuple[TableColumn, ...]] = TABLE_COLUMNS
    go_type: ClassVar[str] = "rbac.RoleBinding"
    # Upstream gives admin every verb on rbac.authorization.k8s.io rolebindings, edit and view
    # none; the renamed ones follow.
    role_verbs: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType(
        {ADMIN_ROLE: READ_VERBS + WRITE_VERBS}
    )

    def admission(self, checks: ServerChecks) -> Admission:
        """Upstream's rolebinding storage: no binding grants what its author does not hold."""
        return checks.escalation_check

    def decode(self, data: JSON, *, unstructured: bool = False) -> Decoded:
        decoded = decode_object(
            RoleBinding, data, kind=self.kind, version=self.version, unstructured=unstructured
        )
        set_defaults(decoded.obj)
        return decoded

    def prepare_for_create(self, obj: JSON) -> None:
        """Nothing beyond the generic metadata handling, as upstream."""

    def prepare_for_update(self, obj: JSON, old: JSON) -> None:
        """Nothing beyond the generic metadata handling, as upstream."""

    def validate(self, obj: JSON) -> list[FieldError]:
        return validate_role_binding(obj)

    def validate_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        # The strategy validates the new object, then ValidateRoleBindingUpdate validates it once more,
        # so kube-apiserver reports each error of the new object twice (the message lists it once).
        return validate_role_binding(obj) + validate_role_binding_update(obj, old)

    def selectable_fields(self, obj: JSON) -> dict[str, str]:
        return object_meta_fields(obj)

    def table_row(self, obj: JSON, now: datetime) -> list[Any]:
        return table_row(obj, now)
