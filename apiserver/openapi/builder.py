"""Schema definitions (Swagger 2.0 style, `#/definitions/` refs) generated from pydantic models.

Schemas come from `schema.fields_of` over the models, with openapi-gen's conventions: refs for
structs and timestamps, `default` for value structs and required scalars, `required` from the
models, `x-kubernetes-*` extensions from the models' `json_schema_extra`.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from apiserver.machinery.metav1 import API_VERSION_DESCRIPTION, KIND_DESCRIPTION
from apiserver.machinery.schema import (
    INT32,
    INT64,
    FieldSpec,
    FreeForm,
    ListOf,
    MapOf,
    Scalar,
    Struct,
    Timestamp,
    TypeSpec,
    fields_of,
)
from apiserver.machinery.types import JSON
from apiserver.openapi.models import FIELDS_V1, META_PREFIX, MICRO_TIME, SHARED_NAMES, TIME, ListMeta
from apiserver.resources.base import ResourceKind

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


def kind_prefix(kind: ResourceKind) -> str:
    """The definition-name prefix of a kind's types: the group's domain reversed (as upstream's Go
    package paths start), then the rest of the group and the version:
    rbac.authorization.core.io/v1 -> io.core.rbac.authorization.v1."""
    labels = kind.group.split(".")
    domain, rest = labels[-2:], labels[:-2]
    return ".".join([*reversed(domain), *rest, kind.version]) + "."


def _doc(model: type[BaseModel]) -> str:
    """A model's docstring as one description: lines joined, paragraphs kept."""
    text = inspect.cleandoc(model.__doc__ or "")
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def gvk(group: str, version: str, kind: str) -> JSON:
    """An `x-kubernetes-group-version-kind` entry."""
    return {"group": group, "kind": kind, "version": version}


def ref(name: str) -> JSON:
    """A Swagger 2.0 reference to the definition `name`."""
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
    names: dict[type[BaseModel], str] = field(default_factory=lambda: dict(SHARED_NAMES))

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
            return ref(name)
        if isinstance(t, Struct):
            return ref(self.add(t.model, prefix))
        if isinstance(t, ListOf):
            return {"type": "array", "items": self.element(t.item, prefix)}
        if isinstance(t, MapOf):
            return {"type": "object", "additionalProperties": self.element(t.value, prefix)}
        self.definitions.setdefault(FIELDS_V1, dict(_SCALAR_DEFINITIONS[FIELDS_V1]))
        return ref(FIELDS_V1)

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
            "x-kubernetes-group-version-kind": [gvk(kind.group, kind.version, kind.list_kind)],
        }
        return name
