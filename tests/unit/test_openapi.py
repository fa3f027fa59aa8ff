"""The OpenAPI v2 and v3 documents: generated from the models, shaped as kube-apiserver publishes them,
valid, and served with upstream's caching and negotiation (ETag, 304, immutable `?hash=` links, v2
in JSON or gnostic's protobuf, 406 for what neither is)."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, ClassVar

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pydantic import BaseModel, Field

from apiserver.http.middleware import status_errors
from apiserver.http.openapi import OpenAPIService
from apiserver.machinery.errors import FieldError
from apiserver.machinery.metav1 import ObjectMeta, ObjectReference
from apiserver.machinery.schema import (
    INT32,
    INT64,
    Decoded,
    FieldSpec,
    FreeForm,
    Go,
    ListOf,
    MapOf,
    Scalar,
    Struct,
    Timestamp,
    fields_of,
)
from apiserver.machinery.types import JSON
from apiserver.openapi import build_documents
from apiserver.openapi.builder import kind_prefix
from apiserver.openapi.documents import to_v3_schema
from apiserver.openapi.models import META_PREFIX
from apiserver.openapi.openapiv2 import message_class
from apiserver.openapi.paths import operation_id
from apiserver.resources import KINDS, EventKind, ResourceKind, RoleBindingKind

RB = RoleBindingKind()
PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
PROTOBUF_ASKED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
EV = EventKind()
DOCS = build_documents(KINDS)
RB_GV = "apis/rbac.authorization.core.io/v1"
EV_GV = "apis/events.core.io/v1"
RB_NAME = "io.core.rbac.authorization.v1.RoleBinding"
EV_NAME = "io.core.events.v1.Event"
METHODS = ("get", "put", "post", "delete", "patch")


def v3(gv: str) -> JSON:
    return DOCS.v3[gv]


def schemas(gv: str) -> JSON:
    return dict(v3(gv)["components"]["schemas"])


def resolve(doc: JSON, ref: str) -> JSON:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    assert isinstance(node, dict)
    return node


def target(doc: JSON, prop: JSON) -> JSON:
    """The schema a property refers to (through allOf in v3), or the property itself."""
    if "allOf" in prop:
        return resolve(doc, prop["allOf"][0]["$ref"])
    if "$ref" in prop:
        return resolve(doc, prop["$ref"])
    return prop


def refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref":
                yield item
            else:
                yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


def operations(doc: JSON) -> Iterator[tuple[str, str, JSON]]:
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def operation(doc: JSON, path: str, method: str) -> JSON:
    op = doc["paths"][path][method]
    assert isinstance(op, dict)
    return op


def param_names(doc: JSON, path: str, method: str) -> set[str]:
    """Query parameters an operation takes, its own and its path's."""
    item = doc["paths"][path]
    params = [*item.get("parameters", []), *item[method].get("parameters", [])]
    return {p["name"] for p in params if p["in"] == "query"}


def own_query_params(op: JSON) -> dict[str, JSON]:
    return {p["name"]: p for p in op.get("parameters", []) if p["in"] == "query"}


def collect_models(model: type[BaseModel], seen: dict[type[BaseModel], None]) -> None:
    if model in seen:
        return
    seen[model] = None
    for spec in fields_of(model):
        t = spec.type
        while isinstance(t, ListOf | MapOf):
            t = t.item if isinstance(t, ListOf) else t.value
        if isinstance(t, Struct):
            collect_models(t.model, seen)


def models_of(kind: ResourceKind) -> list[type[BaseModel]]:
    seen: dict[type[BaseModel], None] = {}
    collect_models(kind.model, seen)
    return list(seen)


def schema_name(kind: ResourceKind, model: type[BaseModel]) -> str:
    if model is ObjectReference:
        return "io.k8s.api.core.v1.ObjectReference"
    if model.__module__ == "apiserver.machinery.metav1":
        return META_PREFIX + model.__name__
    return kind_prefix(kind) + model.__name__


# ----------------------------------------------------------------------------- generated from models


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
class TestSchemasFollowTheModels:
    def test_every_field_with_its_description(self, kind: ResourceKind) -> None:
        gv = f"apis/{kind.group}/{kind.version}"
        doc, found = v3(gv), schemas(gv)
        for model in models_of(kind):
            schema = found[schema_name(kind, model)]
            assert list(schema["properties"]) == [spec.name for spec in fields_of(model)]
            for spec in fields_of(model):
                prop = schema["properties"][spec.name]
                assert prop["description"] == spec.description, (model.__name__, spec.name)
                assert spec.description, (model.__name__, spec.name)
                self.check_type(doc, spec, prop)

    @staticmethod
    def check_type(doc: JSON, spec: FieldSpec, prop: JSON) -> None:
        t = spec.type
        if isinstance(t, Scalar):
            expected = {
                "string": {"type": "string"},
                "bool": {"type": "boolean"},
                INT32: {"type": "integer", "format": "int32"},
                INT64: {"type": "integer", "format": "int64"},
            }[t.name]
            assert {k: prop[k] for k in expected} == expected
        elif isinstance(t, Timestamp):
            assert prop["allOf"][0]["$ref"].endswith("MicroTime" if t.micro else ".Time")
        elif isinstance(t, Struct):
            assert prop["allOf"][0]["$ref"].endswith("." + t.model.__name__)
        elif isinstance(t, ListOf):
            assert prop["type"] == "array"
        elif isinstance(t, MapOf):
            assert prop["type"] == "object"
            assert prop["additionalProperties"]["type"] == "string"
        else:
            assert isinstance(t, FreeForm)
            assert prop["allOf"][0]["$ref"] == "#/components/schemas/" + META_PREFIX + "FieldsV1"

    def test_required_lists(self, kind: ResourceKind) -> None:
        found = schemas(f"apis/{kind.group}/{kind.version}")
        for model in models_of(kind):
            schema = found[schema_name(kind, model)]
            required = [spec.name for spec in fields_of(model) if spec.required]
            assert schema.get("required", []) == required, model.__name__

    def test_kind_and_list_carry_their_group_version_kind(self, kind: ResourceKind) -> None:
        found = schemas(f"apis/{kind.group}/{kind.version}")
        prefix = kind_prefix(kind)
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        assert found[prefix + kind.kind]["x-kubernetes-group-version-kind"] == [gvk]
        listed = found[prefix + kind.list_kind]
        assert listed["x-kubernetes-group-version-kind"] == [{**gvk, "kind": kind.list_kind}]
        assert listed["required"] == ["items"]
        assert listed["properties"]["items"]["items"] == {
            "$ref": "#/components/schemas/" + prefix + kind.kind
        }
        assert listed["properties"]["metadata"]["allOf"] == [
            {"$ref": "#/components/schemas/" + META_PREFIX + "ListMeta"}
        ]

    def test_field_extensions_from_the_models(self, kind: ResourceKind) -> None:
        found = schemas(f"apis/{kind.group}/{kind.version}")
        for model in models_of(kind):
            schema = found[schema_name(kind, model)]
            extra = model.model_config.get("json_schema_extra") or {}
            assert isinstance(extra, dict)
            for key, value in extra.items():
                assert schema[key] == value
            for spec in fields_of(model):
                for key, value in spec.extensions.items():
                    assert schema["properties"][spec.name][key] == value


def test_names_are_reverse_domain_and_upstream_for_shared_types() -> None:
    assert kind_prefix(RB) == "io.core.rbac.authorization.v1."
    assert kind_prefix(EV) == "io.core.events.v1."
    assert {RB_NAME, RB_NAME + "List", "io.core.rbac.authorization.v1.RoleRef"} <= set(schemas(RB_GV))
    assert {
        EV_NAME,
        EV_NAME + "List",
        "io.core.events.v1.EventSeries",
        "io.core.events.v1.EventSource",
    } <= set(schemas(EV_GV))
    shared = {
        META_PREFIX + name
        for name in (
            "ObjectMeta",
            "ListMeta",
            "Time",
            "OwnerReference",
            "ManagedFieldsEntry",
            "FieldsV1",
            "Status",
            "StatusDetails",
            "StatusCause",
            "DeleteOptions",
            "Preconditions",
            "WatchEvent",
            "Patch",
        )
    }
    assert shared <= set(schemas(RB_GV))
    assert shared | {META_PREFIX + "MicroTime", "io.k8s.api.core.v1.ObjectReference"} <= set(schemas(EV_GV))


def test_upstream_shapes_of_meta_types() -> None:
    found = schemas(EV_GV)
    for name in ("Time", "MicroTime"):
        schema = found[META_PREFIX + name]
        assert (schema["type"], schema["format"]) == ("string", "date-time")
    assert found[META_PREFIX + "FieldsV1"]["type"] == "object"
    assert found[META_PREFIX + "Patch"]["type"] == "object"
    status = found[META_PREFIX + "Status"]
    assert {"group": "", "kind": "Status", "version": "v1"} in status["x-kubernetes-group-version-kind"]
    assert list(status["properties"]) == [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ]
    assert status["properties"]["code"]["format"] == "int32"
    assert list(found[META_PREFIX + "ListMeta"]["properties"]) == [
        "selfLink",
        "resourceVersion",
        "continue",
        "remainingItemCount",
    ]
    watch_event = found[META_PREFIX + "WatchEvent"]
    assert watch_event["required"] == ["type", "object"]
    delete_options = found[META_PREFIX + "DeleteOptions"]
    assert {"group": "events.core.io", "kind": "DeleteOptions", "version": "v1"} in delete_options[
        "x-kubernetes-group-version-kind"
    ]
    assert "dryRun" in delete_options["properties"]


def test_list_types_patch_strategies_and_defaults() -> None:
    rb, ev = schemas(RB_GV), schemas(EV_GV)
    subjects = rb[RB_NAME]["properties"]["subjects"]
    assert subjects["x-kubernetes-list-type"] == "atomic"
    assert subjects["items"] == {"$ref": "#/components/schemas/io.core.rbac.authorization.v1.Subject"}
    assert rb["io.core.rbac.authorization.v1.RoleRef"]["x-kubernetes-map-type"] == "atomic"
    meta = rb[META_PREFIX + "ObjectMeta"]["properties"]
    assert meta["ownerReferences"]["x-kubernetes-patch-strategy"] == "merge"
    assert meta["ownerReferences"]["x-kubernetes-patch-merge-key"] == "uid"
    assert meta["ownerReferences"]["x-kubernetes-list-map-keys"] == ["uid"]
    assert meta["finalizers"]["x-kubernetes-patch-strategy"] == "merge"
    assert meta["finalizers"]["items"] == {"type": "string", "default": ""}
    assert meta["labels"]["additionalProperties"] == {"type": "string", "default": ""}
    # openapi-gen's defaults: zero values of required scalars, {} for value structs...
    assert rb["io.core.rbac.authorization.v1.Subject"]["properties"]["kind"]["default"] == ""
    assert ev["io.core.events.v1.EventSeries"]["properties"]["count"]["default"] == 0
    event = ev[EV_NAME]["properties"]
    assert event["metadata"]["default"] == {}
    assert event["regarding"]["default"] == {}
    assert event["deprecatedSource"]["default"] == {}
    # ... none for pointers and omitempty scalars ...
    for name in ("series", "related", "note", "deprecatedCount"):
        assert "default" not in event[name], name
    # ... and none that would not validate: {} for a Time or for a struct with required fields.
    assert "default" not in event["eventTime"]
    assert "default" not in rb[RB_NAME]["properties"]["roleRef"]


class Widget(BaseModel):
    """Widget is a thing made for these tests."""

    kind: Annotated[str, Go(omitempty=True)] = Field(default="", description="The kind.")
    apiVersion: Annotated[str, Go(omitempty=True)] = Field(default="", description="The version.")
    metadata: Annotated[ObjectMeta, Go(omitempty=True)] = Field(
        default_factory=ObjectMeta, description="Standard object's metadata."
    )
    size: Annotated[int, Go(format=INT32)] = Field(description="How big the widget is.")
    parts: Annotated[list[str], Go(omitempty=True)] = Field(
        default_factory=list,
        description="What the widget is made of.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class WidgetKind(ResourceKind):
    group: ClassVar[str] = "widgets.example.com"
    version: ClassVar[str] = "v1alpha1"
    kind: ClassVar[str] = "Widget"
    list_kind: ClassVar[str] = "WidgetList"
    plural: ClassVar[str] = "widgets"
    singular: ClassVar[str] = "widget"
    model: ClassVar[type[BaseModel]] = Widget

    def decode(self, data: JSON, *, unstructured: bool = False) -> Decoded:
        return Decoded(data)

    def prepare_for_create(self, obj: JSON) -> None:
        pass

    def prepare_for_update(self, obj: JSON, old: JSON) -> None:
        pass

    def validate(self, obj: JSON) -> list[FieldError]:
        return []

    def validate_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        return []

    def selectable_fields(self, obj: JSON) -> dict[str, str]:
        return {}


def test_a_new_kind_gets_its_documents_from_its_model_alone() -> None:
    docs = build_documents([WidgetKind()])
    doc = docs.v3["apis/widgets.example.com/v1alpha1"]
    widget = doc["components"]["schemas"]["com.example.widgets.v1alpha1.Widget"]
    assert widget["description"] == "Widget is a thing made for these tests."
    assert widget["required"] == ["size"]
    assert widget["properties"]["size"] == {
        "type": "integer",
        "format": "int32",
        "description": "How big the widget is.",
        "default": 0,
    }
    assert widget["properties"]["parts"]["x-kubernetes-list-type"] == "set"
    create = doc["paths"]["/apis/widgets.example.com/v1alpha1/namespaces/{namespace}/widgets"]["post"]
    assert create["operationId"] == "createWidgetsExampleComV1alpha1NamespacedWidget"
    assert set(docs.v3) == {"apis", "apis/widgets.example.com", "apis/widgets.example.com/v1alpha1"}


# ----------------------------------------------------------------------------- paths and operations

SEED_PARAMETERS: dict[str, set[str]] = {
    "get": {"pretty"},
    "list": {
        "continue",
        "fieldSelector",
        "labelSelector",
        "limit",
        "pretty",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
        # The interface document spells it allowWatcokmarks; clients send allowWatchBookmarks.
        "allowWatcokmarks",
        "allowWatchBookmarks",
    },
    "create": {"dryRun", "fieldManager", "fieldValidation", "pretty"},
    "update": {"dryRun", "fieldManager", "fieldValidation", "pretty"},
    "patch": {"dryRun", "fieldManager", "fieldValidation", "force", "pretty"},
    "delete": {"dryRun", "gracePeriodSeconds", "pretty", "propagationPolicy"},
    "deletecollection": {
        "continue",
        "dryRun",
        "fieldSelector",
        "gracePeriodSeconds",
        "labelSelector",
        "limit",
        "pretty",
        "propagationPolicy",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
    },
}
SEED_TYPES = {
    "allowWatchBookmarks": "boolean",
    "allowWatcokmarks": "boolean",
    "sendInitialEvents": "boolean",
    "watch": "boolean",
    "force": "boolean",
    "ignoreStoreReadErrorWithClusterBreakingPotential": "boolean",
    "orphanDependents": "boolean",
    "limit": "integer",
    "timeoutSeconds": "integer",
    "gracePeriodSeconds": "integer",
}


def kind_paths(kind: ResourceKind) -> tuple[str, str, str]:
    base = f"/apis/{kind.group}/{kind.version}"
    collection = f"{base}/namespaces/{{namespace}}/{kind.plural}"
    return f"{base}/{kind.plural}", collection, collection + "/{name}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
class TestOperations:
    def test_operations_ids_actions_and_kinds(self, kind: ResourceKind) -> None:
        doc = v3(f"apis/{kind.group}/{kind.version}")
        every, collection, named = kind_paths(kind)
        k = kind.kind
        expected = {
            (every, "get"): (f"list{k}ForAllNamespaces", "list"),
            (collection, "get"): (f"listNamespaced{k}", "list"),
            (collection, "post"): (f"createNamespaced{k}", "post"),
            (collection, "delete"): (f"deleteCollectionNamespaced{k}", "deletecollection"),
            (named, "get"): (f"readNamespaced{k}", "get"),
            (named, "put"): (f"replaceNamespaced{k}", "put"),
            (named, "patch"): (f"patchNamespaced{k}", "patch"),
            (named, "delete"): (f"deleteNamespaced{k}", "delete"),
        }
        gvk = {"group": kind.group, "version": kind.version, "kind": k}
        for (path, method), (name, action) in expected.items():
            op = operation(doc, path, method)
            verb = next(
                v for v in ("list", "create", "delete", "read", "replace", "patch") if name.startswith(v)
            )
            assert op["operationId"] == operation_id(verb, name[len(verb) :], kind.group, kind.version)
            assert op["x-kubernetes-action"] == action
            assert op["x-kubernetes-group-version-kind"] == gvk
            assert op["responses"]["401"] == {"description": "Unauthorized"}
        watch = f"/apis/{kind.group}/{kind.version}/watch/namespaces/{{namespace}}/{kind.plural}"
        assert operation(doc, watch, "get")["x-kubernetes-action"] == "watchlist"
        assert operation(doc, watch + "/{name}", "get")["x-kubernetes-action"] == "watch"

    def test_seed_query_parameters(self, kind: ResourceKind) -> None:
        doc = v3(f"apis/{kind.group}/{kind.version}")
        every, collection, named = kind_paths(kind)
        cases = {
            "get": (named, "get"),
            "create": (collection, "post"),
            "update": (named, "put"),
            "patch": (named, "patch"),
            "delete": (named, "delete"),
            "deletecollection": (collection, "delete"),
        }
        for operation_name, (path, method) in cases.items():
            names = param_names(doc, path, method)
            assert SEED_PARAMETERS[operation_name] <= names, operation_name
        for path in (every, collection):
            assert SEED_PARAMETERS["list"] <= param_names(doc, path, "get")
        for path, item in doc["paths"].items():
            for param in [*item.get("parameters", [])] + [
                p for m in METHODS if m in item for p in item[m].get("parameters", [])
            ]:
                assert param["schema"]["type"] == SEED_TYPES.get(param["name"], "string"), (path, param)
                if param["in"] == "path":
                    assert param["required"] is True

    def test_writes_declare_field_validation(self, kind: ResourceKind) -> None:
        """kubectl trusts server-side validation only when every write operation lists it."""
        doc = v3(f"apis/{kind.group}/{kind.version}")
        writes = [(p, m, op) for p, m, op in operations(doc) if m in ("post", "put", "patch")]
        assert len(writes) == 3
        for path, method, op in writes:
            params = own_query_params(op)
            assert "fieldValidation" in params, (path, method)
            assert {"dryRun", "fieldManager"} <= set(params)
        v2_writes = [
            op
            for path, item in DOCS.v2["paths"].items()
            if path.startswith(f"/apis/{kind.group}/")
            for method, op in item.items()
            if method in ("post", "put", "patch")
        ]
        assert len(v2_writes) == 3
        for op in v2_writes:
            assert "fieldValidation" in {p["name"] for p in op["parameters"]}

    def test_request_bodies_and_responses(self, kind: ResourceKind) -> None:
        doc = v3(f"apis/{kind.group}/{kind.version}")
        every, collection, named = kind_paths(kind)
        obj = {"$ref": "#/components/schemas/" + kind_prefix(kind) + kind.kind}
        status = {"$ref": "#/components/schemas/" + META_PREFIX + "Status"}
        patch = operation(doc, named, "patch")
        assert set(patch["requestBody"]["content"]) == {
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        }
        assert patch["requestBody"]["required"] is True
        create = operation(doc, collection, "post")
        assert create["requestBody"]["content"]["*/*"]["schema"] == obj
        assert set(create["responses"]) == {"200", "201", "202", "401"}
        assert create["responses"]["201"]["content"]["application/json"]["schema"] == obj
        assert set(operation(doc, named, "put")["responses"]) == {"200", "201", "401"}
        delete = operation(doc, named, "delete")
        assert "required" not in delete["requestBody"]
        assert delete["responses"]["202"]["content"]["application/json"]["schema"] == status
        listed = operation(doc, every, "get")["responses"]["200"]["content"]
        assert "application/json;stream=watch" in listed
        assert listed["application/json"]["schema"]["$ref"].endswith("." + kind.list_kind)


def test_operation_ids_in_upstream_style() -> None:
    ops = {op["operationId"] for _, _, op in operations(v3(RB_GV))}
    assert {
        "createRbacAuthorizationCoreIoV1NamespacedRoleBinding",
        "readRbacAuthorizationCoreIoV1NamespacedRoleBinding",
        "listRbacAuthorizationCoreIoV1RoleBindingForAllNamespaces",
        "deleteRbacAuthorizationCoreIoV1CollectionNamespacedRoleBinding",
        "watchRbacAuthorizationCoreIoV1NamespacedRoleBindingList",
        "getRbacAuthorizationCoreIoV1APIResources",
    } <= ops
    assert "patchEventsCoreIoV1NamespacedEvent" in {op["operationId"] for _, _, op in operations(v3(EV_GV))}
    assert operation(v3(EV_GV), "/apis/events.core.io/v1/events", "get")["tags"] == ["eventsCoreIo_v1"]
    group = v3("apis/events.core.io")["paths"]["/apis/events.core.io/"]["get"]
    assert group["operationId"] == "getEventsCoreIoAPIGroup"
    assert v3("apis")["paths"]["/apis/"]["get"]["operationId"] == "getAPIVersions"


# ----------------------------------------------------------------------------- documents are whole


@pytest.mark.parametrize("name", sorted(DOCS.v3))
def test_v3_refs_resolve_and_nothing_is_unused(name: str) -> None:
    doc = DOCS.v3[name]
    assert doc["openapi"] == "3.0.0"
    assert doc["info"]["title"]
    used = set()
    for ref in refs(doc):
        assert ref.startswith("#/components/schemas/"), ref
        resolve(doc, ref)
        used.add(ref.rsplit("/", 1)[-1])
    assert used == set(doc["components"]["schemas"])


def test_v2_refs_resolve_and_paths_cover_v3() -> None:
    doc = DOCS.v2
    assert doc["swagger"] == "2.0"
    for ref in refs(doc):
        assert ref.startswith("#/definitions/"), ref
        resolve(doc, ref)
    v3_paths = {path for d in DOCS.v3.values() for path in d["paths"]}
    assert set(doc["paths"]) == v3_paths
    v3_schemas = {name for d in DOCS.v3.values() for name in d["components"]["schemas"]}
    assert set(doc["definitions"]) == v3_schemas
    create = doc["paths"]["/apis/rbac.authorization.core.io/v1/namespaces/{namespace}/rolebindings"]["post"]
    body = next(p for p in create["parameters"] if p["in"] == "body")
    assert body == {
        "in": "body",
        "name": "body",
        "required": True,
        "schema": {"$ref": "#/definitions/" + RB_NAME},
    }
    patch = doc["paths"]["/apis/events.core.io/v1/namespaces/{namespace}/events/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in patch["consumes"]
    # A v2 property keeps its description beside the $ref, as upstream's swagger.json.
    assert doc["definitions"][EV_NAME]["properties"]["regarding"] == {
        "$ref": "#/definitions/io.k8s.api.core.v1.ObjectReference",
        "description": next(s.description for s in fields_of(EV.model) if s.name == "regarding"),
        "default": {},
    }


def test_v3_wraps_refs_with_siblings_in_all_of() -> None:
    schema = {"$ref": "#/definitions/X", "description": "d", "items": {"$ref": "#/definitions/Y"}}
    assert to_v3_schema(schema) == {
        "allOf": [{"$ref": "#/components/schemas/X"}],
        "description": "d",
        "items": {"$ref": "#/components/schemas/Y"},
    }


@pytest.mark.parametrize("name", ["v2", *sorted(DOCS.v3)])
def test_documents_pass_openapi_spec_validator(name: str) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    doc = DOCS.v2 if name == "v2" else DOCS.v3[name]
    validator.validate(json.loads(json.dumps(doc)))


def test_documents_are_json_and_deterministic() -> None:
    again = build_documents(KINDS)
    assert json.dumps(again.v2, sort_keys=True) == json.dumps(DOCS.v2, sort_keys=True)
    assert copy.deepcopy(DOCS.v3) == again.v3


# ----------------------------------------------------------------------------- serving


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    service = OpenAPIService(KINDS)
    app = web.Application(middlewares=[status_errors])
    service.add_routes(app.router)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_v3_index_links_every_document_by_hash(
    client: TestClient[web.Request, web.Application],
) -> None:
    response = await client.get("/openapi/v3")
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Cache-Control"] == "no-cache, private"
    index = await response.json()
    assert set(index["paths"]) == {
        "apis",
        "apis/events.core.io",
        "apis/rbac.authorization.core.io",
        EV_GV,
        RB_GV,
    }
    url = index["paths"][EV_GV]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/events.core.io/v1?hash=")
    document = await client.get(url)
    assert document.status == 200
    assert document.headers["Cache-Control"] == "public, immutable"
    assert "Expires" in document.headers
    assert document.headers["ETag"] == '"' + url.rsplit("=", 1)[1] + '"'
    assert (await document.json())["paths"]


async def test_v3_document_etag_and_304(client: TestClient[web.Request, web.Application]) -> None:
    first = await client.get("/openapi/v3/apis/events.core.io/v1")
    assert first.status == 200
    assert first.headers["Cache-Control"] == "no-cache, private"
    assert "Expires" not in first.headers
    etag = first.headers["ETag"]
    assert etag.startswith('"') and len(etag) == 130
    again = await client.get("/openapi/v3/apis/events.core.io/v1", headers={"If-None-Match": etag})
    assert again.status == 304
    assert await again.read() == b""
    assert again.headers["ETag"] == etag
    changed = await client.get("/openapi/v3/apis/events.core.io/v1", headers={"If-None-Match": '"other"'})
    assert changed.status == 200


async def test_v3_stale_hash_redirects_and_unknown_is_404(
    client: TestClient[web.Request, web.Application],
) -> None:
    stale = await client.get("/openapi/v3/apis/events.core.io/v1?hash=0123", allow_redirects=False)
    assert stale.status == 301
    assert stale.headers["Location"].startswith("/openapi/v3/apis/events.core.io/v1?hash=")
    missing = await client.get("/openapi/v3/apis/nothing.example.com/v1")
    assert missing.status == 404
    assert (await missing.json())["reason"] == "NotFound"


async def test_v2_json_and_protobuf_share_the_etag(
    client: TestClient[web.Request, web.Application],
) -> None:
    response = await client.get("/openapi/v2")
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    document = await response.json()
    assert document["swagger"] == "2.0"
    etag = response.headers["ETag"]
    assert (await client.get("/openapi/v2", headers={"If-None-Match": etag})).status == 304

    # client-go's discovery asks with the older spelling; the answer names the newer one.
    for asked in (PROTOBUF_ASKED, PROTOBUF):
        encoded = await client.get("/openapi/v2", headers={"Accept": asked})
        assert encoded.status == 200
        assert encoded.headers["Content-Type"] == PROTOBUF
        assert encoded.headers["ETag"] == etag  # kube-openapi's: the Vary header tells them apart
        assert encoded.headers.getall("Vary") == ["Accept-Encoding", "Accept"]
        assert encoded.headers["Cache-Control"] == "no-cache, private"
        assert encoded.headers["Last-Modified"] == response.headers["Last-Modified"]
        parsed = message_class("Document")()
        parsed.ParseFromString(await encoded.read())
        assert parsed.swagger == "2.0"  # type: ignore[attr-defined]
        names = [pair.name for pair in parsed.definitions.additional_properties]  # type: ignore[attr-defined]
        assert names == sorted(document["definitions"])
    cached = await client.get("/openapi/v2", headers={"Accept": PROTOBUF_ASKED, "If-None-Match": etag})
    assert cached.status == 304
    zipped = await client.get("/openapi/v2", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert zipped.headers.get("Content-Encoding") == "gzip"


@pytest.mark.parametrize(
    ("accept", "served"),
    [
        ("", "application/json"),
        ("*/*", "application/json"),
        ("application/*", "application/json"),
        (f"{PROTOBUF_ASKED}, application/json", PROTOBUF),
        (f"application/json, {PROTOBUF_ASKED}", "application/json"),
        (f"application/json;q=0.5, {PROTOBUF_ASKED}", PROTOBUF),
        # kube-openapi tries specific types before wildcards of the same quality.
        (f"*/*, {PROTOBUF_ASKED}", PROTOBUF),
        (f"text/html, {PROTOBUF}", PROTOBUF),
    ],
)
async def test_v2_negotiation(
    client: TestClient[web.Request, web.Application], accept: str, served: str
) -> None:
    response = await client.get("/openapi/v2", headers={"Accept": accept} if accept else {})
    assert response.status == 200
    assert response.headers["Content-Type"] == served


async def test_v2_and_v3_refuse_what_they_do_not_encode(
    client: TestClient[web.Request, web.Application],
) -> None:
    refused = await client.get("/openapi/v2", headers={"Accept": "text/html"})
    assert refused.status == 406
    status = await refused.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotAcceptable", 406)
    assert status["message"] == f"only the following media types are accepted: {PROTOBUF}, application/json"
    v3 = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
    assert (await client.get("/openapi/v3/apis", headers={"Accept": v3})).status == 406
    fallback = await client.get("/openapi/v3/apis", headers={"Accept": f"{v3}, application/json"})
    assert fallback.status == 200
