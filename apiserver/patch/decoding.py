"""What the patch types share: how upstream decodes a patch's result, and the errors it answers.

Errors are the ones kube-apiserver answers (handlers/patch.go): an undecodable patch is 400
BadRequest; a JSON patch operation that does not apply is 422 with upstream's generic message;
a patched document that does not decode into the object (no object at all, a value of the wrong
type, under fieldValidation=Strict an unknown or repeated field) is 422 Invalid on the field
`patch`, quoting the patched JSON as json-patch writes it: objects it decoded with their keys
sorted, everything else as it came (`Patcher` and the registry do that decoding).
"""

from __future__ import annotations

from typing import Any

from apiserver.machinery import errors, jsonvalue
from apiserver.machinery.gofmt import json_kind
from apiserver.machinery.types import JSON

STRICT_VALIDATIONS = ("Strict", "Warn")
"""fieldValidation values for which upstream decodes patches strictly (Warn is the default)."""


def same(a: Any, b: Any) -> bool:
    """Go's == on two decoded JSON scalars held in interface{}: same type and same value."""
    return type(a) is type(b) and a == b


def unprocessable(cause: str) -> errors.StatusError:
    """errors.NewGenericServerResponse(422, ...): upstream's answer hides the cause."""
    err = errors.StatusError(422, "Invalid", "the server rejected our request due to an error in our request")
    err.__cause__ = ValueError(cause)
    return err


_FIND_KIND_TYPE = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
)

PATCH_SCHEME = "pkg/runtime/scheme.go:110"
"""The name of the scheme kube-apiserver decodes a patched object with, which its errors quote."""


def invalid_patch(quoted: str, detail: str) -> errors.StatusError:
    """How upstream answers a patch whose result does not decode into the object:
    NewInvalid(GroupKind{}, "", [field.Invalid(patch, <quoted>, <decode error>)]), where `quoted`
    is the patched JSON (or, for a strategic merge patch, the patch as Go prints a map)."""
    body = f"Invalid value: {errors.go_quote(quoted)}: {detail}"
    cause = {"reason": "FieldValueInvalid", "message": body, "field": "patch"}
    return errors.StatusError(422, "Invalid", f' "" is invalid: patch: {body}', {"causes": [cause]})


def not_an_object(result: Any) -> errors.StatusError:
    """The patched document is no object, so not even its apiVersion and kind decode."""
    return invalid_patch(
        jsonvalue.compact(result), _version_kind_error(f"Go value of type {_FIND_KIND_TYPE}", result)
    )


def _version_kind_error(target: str, value: Any) -> str:
    cannot = f"json: cannot unmarshal {json_kind(value)} into {target}"
    return f"couldn't get version/kind; json parse error: {cannot}"


def check_type_meta(patched: JSON, api_version: str, kind: str) -> None:
    """What decoding a merge or JSON patch's result checks before the object's fields: that its
    apiVersion and kind are strings (the document is sorted: apiVersion is met first) naming this
    very kind. An empty or absent kind means the object's own; so does an absent apiVersion here,
    though upstream then decodes into no registered type and refuses every field."""
    for name in ("apiVersion", "kind"):
        value = patched.get(name)
        if value is not None and not isinstance(value, str):
            field = f"Go struct field .{name} of type string"
            raise invalid_patch(jsonvalue.compact(patched), _version_kind_error(field, value))
    got_version = patched.get("apiVersion") or api_version
    got_kind = patched.get("kind") or kind
    if (got_version, got_kind) != (api_version, kind):
        detail = f'no kind "{got_kind}" is registered for version "{got_version}" in scheme "{PATCH_SCHEME}"'
        raise invalid_patch(jsonvalue.compact(patched), detail)
