"""Validation of Kubernetes manifests as a 1.33 API server would take them, without a cluster.

Built-in kinds are checked against the Kubernetes OpenAPI schemas of kubernetes-validate in strict
mode (an unknown field is an error, as with `kubectl apply --validate=strict`). Custom resources are
checked against their CRD's openAPIV3Schema: the project's CRDs (`charts/*/crds/`) and any CRD among
the objects themselves. Unknown fields are errors there too (where the API server would prune them
silently), except under `x-kubernetes-preserve-unknown-fields`; the CEL rules
(`x-kubernetes-validations`) are not evaluated. Their metadata is checked as ObjectMeta.

    validate_manifests(objs)  # raises ManifestError naming the object, the field and the problem
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import yaml

try:
    import jsonschema  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - kubernetes-validate depends on it; kept for other setups
    jsonschema = None

KUBERNETES_VERSION = "1.33.0"
ROOT = Path(__file__).resolve().parents[2]
CRD_GLOB = "charts/*/crds/*.yaml"
CRD_KIND = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}

Obj = dict[str, Any]
Schema = dict[str, Any]


class ManifestError(AssertionError):
    def __init__(self, obj: Any, message: str) -> None:
        super().__init__(f"{describe(obj)}: {message}")
        self.obj = obj


def describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return repr(obj)[:200]
    meta: Obj = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('apiVersion')} {obj.get('kind')} {where}{meta.get('name')}"


def load_yaml_documents(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@functools.cache
def project_crds() -> tuple[Obj, ...]:
    return tuple(doc for path in sorted(ROOT.glob(CRD_GLOB)) for doc in load_yaml_documents(path.read_text()))


def validate_manifests(
    objs: list[Obj], crds: Iterable[Obj] | None = None, version: str = KUBERNETES_VERSION
) -> None:
    """Raises ManifestError for the first invalid object. `crds` defaults to the project's."""
    known = [*(project_crds() if crds is None else crds), *(o for o in objs if _kind_of(o) == CRD_KIND)]
    schemas = custom_resource_schemas(known)
    for obj in objs:
        validate_manifest(obj, schemas, version)


def validate_manifest(obj: Obj, schemas: Mapping[tuple[str, str], Schema], version: str) -> None:
    if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
        raise ManifestError(obj, "not an object with apiVersion and kind")
    if _kind_of(obj) in schemas:
        _validate_metadata(obj, version)
        _validate_custom(obj, schemas[_kind_of(obj)])
        return
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise ManifestError(obj, f"{_path(exc.path)}: {exc.message}") from None
    except kubernetes_validate.SchemaNotFoundError as exc:
        raise ManifestError(obj, f"{exc.message}, and no CRD defines it") from None


def custom_resource_schemas(crds: Iterable[Obj]) -> dict[tuple[str, str], Schema]:
    """(apiVersion, kind) -> strict schema, for every served version of every CRD."""
    schemas = {}
    for crd in crds:
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served", True):
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                schemas[key] = strict_schema(version["schema"]["openAPIV3Schema"])
    return schemas


def strict_schema(schema: Schema) -> Schema:
    """A CRD's structural schema as JSON Schema that refuses the fields the API server would prune."""
    out = {key: value for key, value in schema.items() if not key.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: strict_schema(sub) for name, sub in out["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = strict_schema(out[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(out.get(key), list):
            out[key] = [strict_schema(sub) for sub in out[key]]
    closed = not schema.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in schema
    if schema.get("type") == "object" and "properties" in schema and closed:
        out["additionalProperties"] = False
    return out


def _validate_metadata(obj: Obj, version: str) -> None:
    name = obj.get("metadata", {}).get("name", "")
    if not (isinstance(name, str) and len(name) <= 253 and DNS_SUBDOMAIN.match(name)):
        raise ManifestError(obj, f"metadata.name: {name!r} is not a DNS subdomain")
    # ObjectMeta's schema, borrowed from a kind that has nothing else.
    holder = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]}
    try:
        kubernetes_validate.validate(holder, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise ManifestError(obj, f"{_path(exc.path)}: {exc.message}") from None


def _validate_custom(obj: Obj, schema: Schema) -> None:
    if jsonschema is None:
        problems = check_by_hand(obj, schema, "")
        if problems:
            raise ManifestError(obj, problems[0])
        return
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    if error is not None:
        raise ManifestError(obj, f"{_path(error.absolute_path)}: {error.message}")


def check_by_hand(value: Any, schema: Schema, path: str) -> list[str]:
    """Without jsonschema: types, enums, required and unknown fields, recursively."""
    expected = schema.get("type")
    if expected in JSON_TYPES and (
        not isinstance(value, JSON_TYPES[expected]) or (expected != "boolean" and isinstance(value, bool))
    ):
        return [f"{path or '.'}: {value!r} is not of type {expected}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path or '.'}: {value!r} is not one of {schema['enum']}"]
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            p for i, item in enumerate(value) for p in check_by_hand(item, schema["items"], f"{path}[{i}]")
        ]
    if isinstance(value, dict):
        return _check_object_by_hand(value, schema, path)
    return []


def _check_object_by_hand(value: Obj, schema: Schema, path: str) -> list[str]:
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    problems = [f"{path}.{name}: required" for name in schema.get("required", []) if name not in value]
    for name, item in value.items():
        sub = properties.get(name, extra if isinstance(extra, dict) else None)
        if sub is None and extra is False:
            problems.append(f"{path}.{name}: unknown field")
        elif sub is not None:
            problems += check_by_hand(item, sub, f"{path}.{name}")
    return problems


def _kind_of(obj: Any) -> tuple[str, str]:
    return (str(obj.get("apiVersion")), str(obj.get("kind"))) if isinstance(obj, dict) else ("", "")


def _path(parts: Iterable[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts) or "."
