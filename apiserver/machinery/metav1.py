"""The shapes shared by the kinds (ObjectMeta, OwnerReference, ManagedFieldsEntry, ObjectReference) and
upstream's validation of object metadata (k8s.io/apimachinery/pkg/api/validation/objectmeta.go plus
the finalizer check that pkg/apis/core/validation adds for built-in kinds).

Validators work on canonical JSON dicts (the output of schema.decode_object) and return FieldErrors
whose `field` is the JSON path.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from apiserver.machinery import formats
from apiserver.machinery.errors import FieldError, GoRepr, forbidden, go_quote, invalid, required, too_long
from apiserver.machinery.formats import NameValidator
from apiserver.machinery.schema import INT64, TIME, Go, parse_rfc3339
from apiserver.machinery.types import JSON

FIELD_IMMUTABLE = "field is immutable"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
FIELD_MANAGER_MAX_LENGTH = 128
MAX_SUBRESOURCE_NAME_LENGTH = 256
FINALIZER_ORPHAN_DEPENDENTS = "orphan"
FINALIZER_DELETE_DEPENDENTS = "foregroundDeletion"
STANDARD_FINALIZERS = frozenset({"kubernetes", FINALIZER_ORPHAN_DEPENDENTS, FINALIZER_DELETE_DEPENDENTS})

_OPTIONAL = Go(omitempty=True)
# UIDs are types.UID upstream, which decoding errors name.
_UID = "types.UID"
_OPTIONAL_UID = Go(omitempty=True, type_name=_UID)

# ----------------------------------------------------------------------------- models


class OwnerReference(BaseModel):
    """Enough information to identify an owning object. The owner must be in the same namespace as the
    dependent, or be cluster-scoped, so there is no namespace field."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    apiVersion: Annotated[str, Go()] = Field(description="API version of the referent.")
    kind: Annotated[str, Go()] = Field(description="Kind of the referent.")
    name: Annotated[str, Go()] = Field(description="Name of the referent.")
    uid: Annotated[str, Go(type_name=_UID)] = Field(description="UID of the referent.")
    controller: Annotated[bool | None, Go(omitempty=True, pointer=True)] = Field(
        default=None, description="If true, this reference points to the managing controller."
    )
    blockOwnerDeletion: Annotated[bool | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description=(
            'If true, and if the owner has the "foregroundDeletion" finalizer, the owner cannot be deleted '
            "from the key-value store until this reference is removed. Defaults to false."
        ),
    )


class ManagedFieldsEntry(BaseModel):
    """A workflow-id, a FieldSet and the group version of the resource that the fieldset applies to."""

    manager: Annotated[str, _OPTIONAL] = Field(
        default="", description="An identifier of the workflow managing these fields."
    )
    operation: Annotated[str, Go(omitempty=True, type_name="v1.ManagedFieldsOperationType")] = Field(
        default="",
        description=(
            "The type of operation which lead to this ManagedFieldsEntry being created. "
            "The only valid values for this field are 'Apply' and 'Update'."
        ),
    )
    apiVersion: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            'The version of this resource that this field set applies to, "group/version" like the '
            "top-level apiVersion field."
        ),
    )
    time: Annotated[str | None, Go(omitempty=True, pointer=True, format=TIME)] = Field(
        default=None, description="The timestamp of when the ManagedFields entry was added or last changed."
    )
    fieldsType: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "The discriminator for the different fields format and version. "
            'There is currently only one possible value: "FieldsV1".'
        ),
    )
    fieldsV1: Annotated[dict[str, Any] | None, Go(omitempty=True, pointer=True)] = Field(
        default=None,
        description='The first JSON version format of a set of fields, as described in the "FieldsV1" type.',
    )
    subresource: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "The name of the subresource used to update that object, or empty string if the object was "
            "updated through the main resource."
        ),
    )


class ObjectMeta(BaseModel):
    """Metadata that all persisted resources must have, which includes all objects users must create."""

    name: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "Name must be unique within a namespace. Is required when creating resources, although some "
            "resources may allow a client to request the generation of an appropriate name automatically. "
            "Cannot be updated."
        ),
    )
    generateName: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "An optional prefix, used by the server, to generate a unique name ONLY IF the name field has "
            "not been provided. The value is combined with a unique suffix and follows the same rules as "
            "the name field. Applied only if name is not specified."
        ),
    )
    namespace: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "The space within which each name must be unique. Must be a DNS_LABEL. Cannot be updated."
        ),
    )
    selfLink: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."
        ),
    )
    uid: Annotated[str, _OPTIONAL_UID] = Field(
        default="",
        description=(
            "The unique in time and space value for this object, generated by the server on successful "
            "creation and not allowed to change on PUT. Populated by the system. Read-only."
        ),
    )
    resourceVersion: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "An opaque value that represents the internal version of this object, used for optimistic "
            "concurrency, change detection and watches. Clients must pass it back unmodified. "
            "Populated by the system. Read-only."
        ),
    )
    generation: Annotated[int, Go(omitempty=True, format=INT64)] = Field(
        default=0,
        description="A sequence number representing a specific generation of the desired state. "
        "Populated by the system. Read-only.",
    )
    creationTimestamp: Annotated[str | None, Go(omitempty=True, format=TIME)] = Field(
        default=None,
        description=(
            "The server time when this object was created, in RFC3339 form and UTC. Clients may not set "
            "this value. Populated by the system. Read-only. Null for lists."
        ),
    )
    deletionTimestamp: Annotated[str | None, Go(omitempty=True, pointer=True, format=TIME)] = Field(
        default=None,
        description=(
            "RFC 3339 date and time at which this resource will be deleted, set by the server when a "
            "graceful deletion is requested. Once set, it may not be unset or moved later. "
            "Populated by the system when a graceful deletion is requested. Read-only."
        ),
    )
    deletionGracePeriodSeconds: Annotated[int | None, Go(omitempty=True, pointer=True, format=INT64)] = Field(
        default=None,
        description=(
            "Number of seconds allowed for this object to gracefully terminate before it will be removed "
            "from the system. Only set when deletionTimestamp is also set. May only be shortened. Read-only."
        ),
    )
    labels: Annotated[dict[str, str], _OPTIONAL] = Field(
        default_factory=dict,
        description=(
            "Map of string keys and values that can be used to organize and categorize (scope and select) "
            "objects."
        ),
    )
    annotations: Annotated[dict[str, str], _OPTIONAL] = Field(
        default_factory=dict,
        description=(
            "An unstructured key value map stored with a resource that may be set by external tools to "
            "store and retrieve arbitrary metadata. Not queryable; preserved when modifying objects."
        ),
    )
    ownerReferences: Annotated[list[OwnerReference], _OPTIONAL] = Field(
        default_factory=list,
        description=(
            "List of objects depended by this object. If ALL objects in the list have been deleted, this "
            "object will be garbage collected. At most one may be the managing controller."
        ),
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"],
            "x-kubernetes-patch-strategy": "merge",
            "x-kubernetes-patch-merge-key": "uid",
        },
    )
    finalizers: Annotated[list[str], _OPTIONAL] = Field(
        default_factory=list,
        description=(
            "Must be empty before the object is deleted from the registry. Each entry is an identifier "
            "for the responsible component that will remove the entry from the list. If deletionTimestamp "
            "is set, entries may only be removed. Processed in no particular order."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
    )
    managedFields: Annotated[list[ManagedFieldsEntry], _OPTIONAL] = Field(
        default_factory=list,
        description=(
            "Maps workflow-id and version to the set of fields that are managed by that workflow. "
            "Mostly for internal housekeeping; users typically shouldn't need to set or understand it."
        ),
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class ObjectReference(BaseModel):
    """A reference to an object."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    kind: Annotated[str, _OPTIONAL] = Field(default="", description="Kind of the referent.")
    namespace: Annotated[str, _OPTIONAL] = Field(default="", description="Namespace of the referent.")
    name: Annotated[str, _OPTIONAL] = Field(default="", description="Name of the referent.")
    uid: Annotated[str, _OPTIONAL_UID] = Field(default="", description="UID of the referent.")
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description="API version of the referent.")
    resourceVersion: Annotated[str, _OPTIONAL] = Field(
        default="", description="Specific resourceVersion to which this reference is made, if any."
    )
    fieldPath: Annotated[str, _OPTIONAL] = Field(
        default="",
        description=(
            "If referring to a piece of an object instead of an entire object, a valid JSON/Go field "
            "access statement, such as desiredState.manifest.containers[2]."
        ),
    )


# Descriptions of the TypeMeta fields every kind inlines.
API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values."
)
KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer "
    "this from the endpoint the client submits requests to. Cannot be updated. In CamelCase."
)
METADATA_DESCRIPTION = "Standard object's metadata."

# ----------------------------------------------------------------------------- Go renderings


def _s(obj: JSON | None, key: str) -> str:
    value = (obj or {}).get(key)
    return value if isinstance(value, str) else ""


def _dict(obj: JSON | None, key: str) -> JSON:
    value = (obj or {}).get(key)
    return value if isinstance(value, dict) else {}


def _int(obj: JSON | None, key: str) -> int:
    value = (obj or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _list(obj: JSON | None, key: str) -> list[Any]:
    value = (obj or {}).get(key)
    return value if isinstance(value, list) else []


def go_time_string(text: str | None) -> str:
    """time.Time.String() of a metav1.Time/MicroTime (None is the zero time), as upstream prints an
    immutable timestamp: `2026-11-22 02:16:41.123456 +0000 UTC`."""
    moment = parse_rfc3339(text) if text else None
    if moment is None:
        return "0001-01-01 00:00:00 +0000 UTC"
    moment = moment.astimezone(UTC)
    out = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if moment.microsecond:
        out += f".{moment.microsecond:06d}".rstrip("0")
    return out + " +0000 UTC"


def go_struct(type_name: str, fields: list[tuple[str, Any]]) -> GoRepr:
    """%#v of a Go struct of strings and ints: `rbac.RoleRef{APIGroup:"x", Kind:"Role", Name:"y"}`."""
    shown = ", ".join(f"{name}:{go_quote(v) if isinstance(v, str) else v}" for name, v in fields)
    return GoRepr(f"{type_name}{{{shown}}}")


def go_string_slice(values: list[str]) -> GoRepr:
    """%#v of a []string."""
    return GoRepr("[]string{" + ", ".join(go_quote(v) for v in values) + "}")


def _go_pointer_bool(value: Any) -> str:
    return "(*bool)(nil)" if value is None else "(*bool)(0xc000010000)"


def _owner_reference_slice(refs: list[Any]) -> GoRepr:
    # %#v of []metav1.OwnerReference; pointer fields print as addresses upstream, here a fixed one.
    shown = []
    for ref in refs:
        ref = ref if isinstance(ref, dict) else {}
        shown.append(
            "v1.OwnerReference{"
            f"APIVersion:{go_quote(_s(ref, 'apiVersion'))}, Kind:{go_quote(_s(ref, 'kind'))}, "
            f"Name:{go_quote(_s(ref, 'name'))}, UID:{go_quote(_s(ref, 'uid'))}, "
            f"Controller:{_go_pointer_bool(ref.get('controller'))}, "
            f"BlockOwnerDeletion:{_go_pointer_bool(ref.get('blockOwnerDeletion'))}}}"
        )
    return GoRepr("[]v1.OwnerReference{" + ", ".join(shown) + "}")


def _owner_reference_string(ref: JSON) -> GoRepr:
    # The protobuf-generated String() of metav1.OwnerReference.
    def ptr(value: Any) -> str:
        return "nil" if value is None else f"*{'true' if value else 'false'}"

    return GoRepr(
        f"&OwnerReference{{Kind:{_s(ref, 'kind')},Name:{_s(ref, 'name')},UID:{_s(ref, 'uid')},"
        f"APIVersion:{_s(ref, 'apiVersion')},Controller:{ptr(ref.get('controller'))},"
        f"BlockOwnerDeletion:{ptr(ref.get('blockOwnerDeletion'))},}}"
    )


def immutable(path: str, new: Any, old: Any, shown: Any) -> list[FieldError]:
    """ValidateImmutableField: `shown` is how upstream prints the new value."""
    return [] if new == old else [invalid(path, shown, FIELD_IMMUTABLE)]


# ----------------------------------------------------------------------------- validation


def validate_labels(labels: JSON, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key, value in labels.items():
        errs += [invalid(path, key, msg) for msg in formats.is_qualified_name(key)]
        text = value if isinstance(value, str) else ""
        errs += [invalid(path, text, msg) for msg in formats.is_valid_label_value(text)]
    return errs


def validate_annotations(annotations: JSON, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        # Annotation keys are qualified names whatever their case.
        errs += [invalid(path, key, msg) for msg in formats.is_qualified_name(key.lower())]
        total += formats.byte_length(key) + formats.byte_length(value if isinstance(value, str) else "")
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long(path, "", TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def _group_version(api_version: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion: (group, version), or None when malformed."""
    if not api_version or api_version == "/":
        return ("", "")
    slashes = api_version.count("/")
    if slashes == 0:
        return ("", api_version)
    if slashes == 1:
        group, version = api_version.split("/")
        return (group, version)
    return None


def validate_owner_references(refs: list[Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    first_controller = ""
    for ref in refs:
        ref = ref if isinstance(ref, dict) else {}
        api_version, kind = _s(ref, "apiVersion"), _s(ref, "kind")
        group, version = _group_version(api_version) or ("", "")
        if not version:
            errs.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        if not kind:
            errs.append(invalid(f"{path}.kind", kind, "must not be empty"))
        if not _s(ref, "name"):
            errs.append(invalid(f"{path}.name", "", "must not be empty"))
        if not _s(ref, "uid"):
            errs.append(invalid(f"{path}.uid", "", "must not be empty"))
        if (group, version, kind) == ("", "v1", "Event"):
            errs.append(
                invalid(
                    path, _owner_reference_string(ref), "/v1, Kind=Event is disallowed from being an owner"
                )
            )
        if ref.get("controller") is True:
            current = f"{kind}/{_s(ref, 'name')}"
            if first_controller:
                errs.append(
                    invalid(
                        path,
                        _owner_reference_slice(refs),
                        'Only one reference can have Controller set to true. Found "true" in references '
                        f"for {first_controller} and {current}",
                    )
                )
            else:
                first_controller = current
    return errs


def validate_finalizers(finalizers: list[Any], path: str) -> list[FieldError]:
    """apimachinery's ValidateFinalizers: qualified names, not both orphan and foregroundDeletion."""
    errs: list[FieldError] = []
    names = [f for f in finalizers if isinstance(f, str)]
    for name in names:
        errs += [invalid(path, name, msg) for msg in formats.is_qualified_name(name)]
    if FINALIZER_ORPHAN_DEPENDENTS in names and FINALIZER_DELETE_DEPENDENTS in names:
        errs.append(
            invalid(
                path,
                go_string_slice(names),
                f"finalizer {FINALIZER_ORPHAN_DEPENDENTS} and {FINALIZER_DELETE_DEPENDENTS} "
                "cannot be both set",
            )
        )
    return errs


def validate_kube_finalizer_names(finalizers: list[Any], path: str) -> list[FieldError]:
    """What pkg/apis/core/validation adds for built-in kinds: a finalizer without a '/' prefix must be
    one of the standard ones."""
    errs: list[FieldError] = []
    for i, name in enumerate(finalizers):
        if isinstance(name, str) and "/" not in name and name not in STANDARD_FINALIZERS:
            errs.append(
                invalid(
                    f"{path}[{i}]",
                    name,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            )
    return errs


def _is_go_printable(char: str) -> bool:
    # unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
    return char == " " or unicodedata.category(char)[0] in "LMNPS"


def validate_field_manager(manager: str, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if formats.byte_length(manager) > FIELD_MANAGER_MAX_LENGTH:
        errs.append(too_long(path, manager, FIELD_MANAGER_MAX_LENGTH))
    position = 0
    for char in manager:
        if not _is_go_printable(char):
            errs.append(
                invalid(path, manager, f"invalid character U+{ord(char):04X} (at position {position})")
            )
        position += formats.byte_length(char)
    return errs


def validate_managed_fields(entries: list[Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, entry in enumerate(entries):
        entry = entry if isinstance(entry, dict) else {}
        at = f"{path}[{i}]"
        operation = _s(entry, "operation")
        if operation not in ("Apply", "Update"):
            errs.append(invalid(f"{at}.operation", operation, "must be `Apply` or `Update`"))
        fields_type = _s(entry, "fieldsType")
        if fields_type and fields_type != "FieldsV1":
            errs.append(invalid(f"{at}.fieldsType", fields_type, "must be `FieldsV1`"))
        errs += validate_field_manager(_s(entry, "manager"), f"{at}.manager")
        subresource = _s(entry, "subresource")
        if formats.byte_length(subresource) > MAX_SUBRESOURCE_NAME_LENGTH:
            errs.append(too_long(f"{at}.subresource", subresource, MAX_SUBRESOURCE_NAME_LENGTH))
    return errs


def _validate_meta_common(meta: JSON, requires_namespace: bool, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    namespace = _s(meta, "namespace")
    if requires_namespace:
        if not namespace:
            errs.append(required(f"{path}.namespace"))
        else:
            errs += [
                invalid(f"{path}.namespace", namespace, msg)
                for msg in formats.name_is_dns_label(namespace, False)
            ]
    elif namespace:
        errs.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errs.append(invalid(f"{path}.generation", generation, "must be greater than or equal to 0"))
    errs += validate_labels(_dict(meta, "labels"), f"{path}.labels")
    errs += validate_annotations(_dict(meta, "annotations"), f"{path}.annotations")
    errs += validate_owner_references(_list(meta, "ownerReferences"), f"{path}.ownerReferences")
    errs += validate_finalizers(_list(meta, "finalizers"), f"{path}.finalizers")
    errs += validate_managed_fields(_list(meta, "managedFields"), f"{path}.managedFields")
    return errs


def validate_generic_object_meta(
    meta: JSON, name_fn: NameValidator, *, requires_namespace: bool = True, path: str = "metadata"
) -> list[FieldError]:
    """apimachinery's ValidateObjectMeta (name, generateName, namespace, labels, annotations, owner
    references, finalizers, managed fields)."""
    errs: list[FieldError] = []
    generate_name = _s(meta, "generateName")
    if generate_name:
        errs += [invalid(f"{path}.generateName", generate_name, msg) for msg in name_fn(generate_name, True)]
    name = _s(meta, "name")
    if not name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    else:
        errs += [invalid(f"{path}.name", name, msg) for msg in name_fn(name, False)]
    return errs + _validate_meta_common(meta, requires_namespace, path)


def validate_object_meta(
    meta: JSON, name_fn: NameValidator, *, requires_namespace: bool = True, path: str = "metadata"
) -> list[FieldError]:
    """ValidateObjectMeta as the built-in kinds call it (pkg/apis/core/validation): the generic checks,
    then the standard-finalizer check of each finalizer."""
    errs = validate_generic_object_meta(meta, name_fn, requires_namespace=requires_namespace, path=path)
    return errs + validate_kube_finalizer_names(_list(meta, "finalizers"), f"{path}.finalizers")


def _time_shown(value: Any) -> GoRepr:
    return GoRepr(go_time_string(value if isinstance(value, str) else None))


def _canonical_time(value: Any) -> Any:
    if not isinstance(value, str):
        return None
    moment = parse_rfc3339(value)
    return moment if moment is not None else value


def validate_generic_object_meta_update(new: JSON, old: JSON, *, path: str = "metadata") -> list[FieldError]:
    """apimachinery's ValidateObjectMetaUpdate."""
    errs: list[FieldError] = []
    old_finalizers = _list(old, "finalizers")
    new_finalizers = _list(new, "finalizers")
    if old.get("deletionTimestamp"):
        extra = sorted(set(new_finalizers) - set(old_finalizers))
        if extra:
            errs.append(
                forbidden(
                    f"{path}.finalizers",
                    "no new finalizers can be added if the object is being deleted, found new finalizers "
                    + go_string_slice(extra).text,
                )
            )
    if not _s(new, "resourceVersion"):
        errs.append(invalid(f"{path}.resourceVersion", "", "must be specified for an update"))
    new_generation, old_generation = _int(new, "generation"), _int(old, "generation")
    if new_generation < old_generation:
        errs.append(invalid(f"{path}.generation", new_generation, "must not be decremented"))
    for key in ("name", "namespace", "uid"):
        errs += immutable(f"{path}.{key}", _s(new, key), _s(old, key), _s(new, key))
    errs += immutable(
        f"{path}.creationTimestamp",
        _canonical_time(new.get("creationTimestamp")),
        _canonical_time(old.get("creationTimestamp")),
        _time_shown(new.get("creationTimestamp")),
    )
    new_deletion, old_deletion = new.get("deletionTimestamp"), old.get("deletionTimestamp")
    errs += immutable(
        f"{path}.deletionTimestamp",
        _canonical_time(new_deletion),
        _canonical_time(old_deletion),
        _time_shown(new_deletion) if new_deletion else None,
    )
    new_grace, old_grace = new.get("deletionGracePeriodSeconds"), old.get("deletionGracePeriodSeconds")
    errs += immutable(f"{path}.deletionGracePeriodSeconds", new_grace, old_grace, new_grace)
    errs += validate_labels(_dict(new, "labels"), f"{path}.labels")
    errs += validate_annotations(_dict(new, "annotations"), f"{path}.annotations")
    errs += validate_owner_references(_list(new, "ownerReferences"), f"{path}.ownerReferences")
    errs += validate_managed_fields(_list(new, "managedFields"), f"{path}.managedFields")
    return errs


def validate_object_meta_update(new: JSON, old: JSON, *, path: str = "metadata") -> list[FieldError]:
    """ValidateObjectMetaUpdate as the built-in kinds call it: the generic checks, then the
    standard-finalizer check of each finalizer."""
    errs = validate_generic_object_meta_update(new, old, path=path)
    return errs + validate_kube_finalizer_names(_list(new, "finalizers"), f"{path}.finalizers")


def validate_common_object_meta(meta: JSON, *, namespaced: bool = True) -> list[FieldError]:
    """What k8s.io/apiserver's rest.BeforeCreate checks for every kind after the kind's own validation
    passed: the generic metadata checks with path-segment names."""
    return validate_generic_object_meta(meta, formats.name_is_path_segment, requires_namespace=namespaced)


def validate_common_object_meta_update(new: JSON, old: JSON, *, namespaced: bool = True) -> list[FieldError]:
    """What rest.BeforeUpdate checks for every kind before the kind's own update validation (its errors
    come first in the Invalid status)."""
    return validate_common_object_meta(new, namespaced=namespaced) + validate_generic_object_meta_update(
        new, old
    )


def object_meta_fields(obj: JSON) -> dict[str, str]:
    """generic.ObjectMetaFieldsSet of a namespaced object."""
    meta = _dict(obj, "metadata")
    return {"metadata.name": _s(meta, "name"), "metadata.namespace": _s(meta, "namespace")}
