"""A third kind, Gadget (gadgets.example.com/v1alpha1), declared in this one module as any served
kind is: model, validation, strategy, printer columns, a selectable field, a patch schema, a TTL
with its flag, and the verbs the aggregated view and edit roles grant on it.

Run as a program it is a coreio-apiserver serving the usual kinds plus this one
(`python -m tests.support.thirdkind --data-dir ... --gadget-ttl 86400`), which is how the tests
prove that adding a kind needs nothing but its module and its place in the list of served kinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field

from apiserver import cli
from apiserver.machinery import formats
from apiserver.machinery.errors import FieldError, invalid, not_supported
from apiserver.machinery.metav1 import (
    API_VERSION_DESCRIPTION,
    KIND_DESCRIPTION,
    METADATA_DESCRIPTION,
    ObjectMeta,
    object_meta_fields,
    validate_object_meta,
    validate_object_meta_update,
)
from apiserver.machinery.printing import TableColumn, field_description, since
from apiserver.machinery.schema import INT32, Decoded, Go, decode_object
from apiserver.machinery.types import JSON
from apiserver.patch.schema import OBJECT_META_PATCH_SCHEMA, PatchSchema, PatchStrategy
from apiserver.resources import KINDS
from apiserver.resources.base import EDIT_ROLE, READ_VERBS, VIEW_ROLE, WRITE_VERBS, Expiry, ResourceKind

GROUP = "gadgets.example.com"
VERSION = "v1alpha1"
COLORS = ["blue", "green", "red"]
_OPTIONAL = Go(omitempty=True)


class GadgetSpec(BaseModel):
    """What a gadget looks like."""

    color: Annotated[str, Go()] = Field(description="The gadget's color: blue, green or red.")
    size: Annotated[int, Go(omitempty=True, format=INT32)] = Field(
        default=0, description="The gadget's size in centimetres, at least 0."
    )
    tags: Annotated[list[str], _OPTIONAL] = Field(
        default_factory=list,
        description="Free-form tags; a strategic merge patch adds to them.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class Gadget(BaseModel):
    """A gadget: the third kind of the tests."""

    kind: Annotated[str, _OPTIONAL] = Field(default="", description=KIND_DESCRIPTION)
    apiVersion: Annotated[str, _OPTIONAL] = Field(default="", description=API_VERSION_DESCRIPTION)
    metadata: Annotated[ObjectMeta, _OPTIONAL] = Field(
        default_factory=ObjectMeta, description=METADATA_DESCRIPTION
    )
    spec: Annotated[GadgetSpec, Go()] = Field(description="The gadget's description.")


def _spec(obj: JSON) -> JSON:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _meta(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def validate_spec(obj: JSON) -> list[FieldError]:
    spec = _spec(obj)
    errs: list[FieldError] = []
    if spec.get("color") not in COLORS:
        errs.append(not_supported("spec.color", spec.get("color", ""), COLORS))
    size = spec.get("size", 0)
    if isinstance(size, int) and size < 0:
        errs.append(invalid("spec.size", size, "must be greater than or equal to 0"))
    return errs


TABLE_COLUMNS = (
    TableColumn("Name", "string", field_description(ObjectMeta, "name"), format="name"),
    TableColumn("Color", "string", field_description(GadgetSpec, "color")),
    TableColumn("Size", "integer", field_description(GadgetSpec, "size")),
    TableColumn("Age", "string", field_description(ObjectMeta, "creationTimestamp")),
)


class GadgetKind(ResourceKind):
    group: ClassVar[str] = GROUP
    version: ClassVar[str] = VERSION
    kind: ClassVar[str] = "Gadget"
    list_kind: ClassVar[str] = "GadgetList"
    plural: ClassVar[str] = "gadgets"
    singular: ClassVar[str] = "gadget"
    short_names: ClassVar[tuple[str, ...]] = ("gdg",)
    model: ClassVar[type[BaseModel]] = Gadget
    patch_schema: ClassVar[PatchSchema] = OBJECT_META_PATCH_SCHEMA.extend(
        {"spec.tags": PatchStrategy("merge")}
    )
    field_label_conversion: ClassVar[Mapping[str, str] | None] = {
        label: label for label in ("metadata.name", "metadata.namespace", "spec.color")
    }
    table_columns: ClassVar[tuple[TableColumn, ...]] = TABLE_COLUMNS
    go_type: ClassVar[str] = "gadgets.Gadget"
    expiry: ClassVar[Expiry | None] = Expiry("--gadget-ttl", 7 * 24 * 3600, "seconds a Gadget lives")
    role_verbs: ClassVar[Mapping[str, tuple[str, ...]]] = {VIEW_ROLE: READ_VERBS, EDIT_ROLE: WRITE_VERBS}

    def decode(self, data: JSON, *, unstructured: bool = False) -> Decoded:
        return decode_object(Gadget, data, kind=self.kind, version=self.version, unstructured=unstructured)

    def prepare_for_create(self, obj: JSON) -> None:
        """Nothing beyond the generic metadata handling."""

    def prepare_for_update(self, obj: JSON, old: JSON) -> None:
        """Nothing beyond the generic metadata handling."""

    def validate(self, obj: JSON) -> list[FieldError]:
        return validate_object_meta(_meta(obj), formats.name_is_dns_subdomain) + validate_spec(obj)

    def validate_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        return validate_object_meta_update(_meta(obj), _meta(old)) + validate_spec(obj)

    def selectable_fields(self, obj: JSON) -> dict[str, str]:
        color = _spec(obj).get("color")
        return object_meta_fields(obj) | {"spec.color": color if isinstance(color, str) else ""}

    def table_row(self, obj: JSON, now: datetime) -> list[Any]:
        spec = _spec(obj)
        meta = _meta(obj)
        return [
            meta.get("name") or "",
            spec.get("color") or "",
            spec.get("size") or 0,
            since(meta.get("creationTimestamp"), now),
        ]


SERVED = (*KINDS, GadgetKind())


if __name__ == "__main__":
    cli.main(kinds=SERVED)
