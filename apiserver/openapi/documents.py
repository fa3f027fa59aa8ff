"""The documents assembled: one Swagger 2.0 document with every path and definition, and one
OpenAPI 3.0 document per group-version (plus `apis` and one per group) with the definitions its
paths reach, as kube-apiserver publishes them.

kubectl needs two things from the v3 documents: the `fieldValidation` query parameter on every
write operation (else it validates manifests itself, against /openapi/v2), and kind schemas tagged with
`x-kubernetes-group-version-kind` (what `kubectl explain` looks up).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from apiserver import __version__
from apiserver.machinery.types import JSON
from apiserver.openapi.builder import SchemaBuilder, gvk, kind_prefix, ref
from apiserver.openapi.models import (
    META_PREFIX,
    APIGroup,
    APIGroupList,
    APIResourceList,
    DeleteOptions,
    Patch,
    Status,
    WatchEvent,
)
from apiserver.openapi.paths import (
    Operation,
    Param,
    PathItem,
    discovery_path,
    operation_id,
    resource_paths,
    tag,
)
from apiserver.resources.base import ResourceKind

_STATUS_TEXT = {"200": "OK", "201": "Created", "202": "Accepted"}


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
        body: JSON = {"in": "body", "name": "body", "schema": ref(op.body)}
        if op.body_required:
            body["required"] = True
        params.insert(0, body)
    out: JSON = {
        "consumes": list(op.consumes),
        "description": op.description,
        "operationId": op.operation_id,
        "produces": list(op.produces),
        "responses": {
            **{code: {"description": _STATUS_TEXT[code], "schema": ref(name)} for code, name in op.responses},
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


def _define_shared_types(builder: SchemaBuilder, kinds: Sequence[ResourceKind]) -> None:
    """The meta types, each tagged with the group-versions it is served in."""
    gvs = sorted({(k.group, k.version) for k in kinds})

    def served_in_every_group(kind_name: str) -> list[JSON]:
        return [gvk("", "v1", kind_name)] + [gvk(g, v, kind_name) for g, v in gvs]

    for model, gvks in (
        (Status, [gvk("", "v1", "Status")]),
        (DeleteOptions, served_in_every_group("DeleteOptions")),
        (WatchEvent, served_in_every_group("WatchEvent")),
        (Patch, []),
        (APIGroupList, [gvk("", "v1", "APIGroupList")]),
        (APIGroup, [gvk("", "v1", "APIGroup")]),
        (APIResourceList, [gvk("", "v1", "APIResourceList")]),
    ):
        extensions = {"x-kubernetes-group-version-kind": gvks} if gvks else None
        builder.add(model, META_PREFIX, extensions)


def _group_version_paths(
    builder: SchemaBuilder, kinds: Sequence[ResourceKind]
) -> dict[tuple[str, str], list[PathItem]]:
    """Defines each kind and its list; returns the paths of each group-version, discovery first."""
    per_gv: dict[tuple[str, str], list[PathItem]] = {}
    for kind in kinds:
        prefix = kind_prefix(kind)
        object_name = builder.add(
            kind.model,
            prefix,
            {"x-kubernetes-group-version-kind": [gvk(kind.group, kind.version, kind.kind)]},
        )
        if object_name != prefix + kind.kind:
            raise ValueError(f"the model of {kind.kind} must be named {kind.kind}")
        list_name = builder.add_list(kind)
        items = per_gv.setdefault((kind.group, kind.version), [])
        if not items:
            items.append(
                discovery_path(
                    f"/apis/{kind.group}/{kind.version}/",
                    operation_id("get", "APIResources", kind.group, kind.version),
                    "get available resources",
                    "APIResourceList",
                    tag(kind.group, kind.version),
                )
            )
        items.extend(resource_paths(kind, object_name, list_name))
    return per_gv


def _v3_path_items(
    kinds: Sequence[ResourceKind], per_gv: dict[tuple[str, str], list[PathItem]]
) -> dict[str, list[PathItem]]:
    """The path items of each v3 document, keyed by its index path: `apis`, then each group, then
    each group-version."""
    v3: dict[str, list[PathItem]] = {
        "apis": [
            discovery_path("/apis/", "getAPIVersions", "get available API versions", "APIGroupList", "apis")
        ]
    }
    for group in sorted({kind.group for kind in kinds}):
        v3[f"apis/{group}"] = [
            discovery_path(
                f"/apis/{group}/",
                operation_id("get", "APIGroup", group),
                "get information of a group",
                "APIGroup",
                tag(group),
            )
        ]
    for (group, version), items in sorted(per_gv.items()):
        v3[f"apis/{group}/{version}"] = items
    return v3


def _v2_document(items: Iterable[PathItem], definitions: dict[str, JSON]) -> JSON:
    return {
        "swagger": "2.0",
        "info": {"title": "coreio", "version": f"v{__version__}"},
        "paths": _v2_paths(items),
        "definitions": _closure(definitions, definitions),
        "securityDefinitions": {"BearerToken": dict(_SECURITY_SCHEME)},
        "security": [{"BearerToken": []}],
    }


def build_documents(kinds: Sequence[ResourceKind]) -> Documents:
    """Every OpenAPI document of the served kinds."""
    builder = SchemaBuilder()
    _define_shared_types(builder, kinds)
    per_gv = _group_version_paths(builder, kinds)
    v3 = _v3_path_items(kinds, per_gv)
    definitions = builder.definitions
    return Documents(
        v2=_v2_document((item for items in v3.values() for item in items), definitions),
        v3={path: _v3_document(items, definitions) for path, items in v3.items()},
    )
