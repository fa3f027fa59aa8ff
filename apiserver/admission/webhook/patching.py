"""A mutating webhook's JSONPatch applied to the object, as upstream applies it: json-patch v4's
semantics (the project's own patcher), the result decoded through the kind (defaults set, unknown
fields dropped) and compared with what it was. Every failure is a 500 naming the patch's or the
decoder's error, whatever the webhook's failurePolicy."""

from __future__ import annotations

import json
from typing import Any

from apiserver.machinery import errors
from apiserver.machinery.errors import StatusError
from apiserver.machinery.gofmt import json_kind
from apiserver.machinery.schema import DecodeError
from apiserver.machinery.types import JSON
from apiserver.patch.json_patch import apply_json_patch
from apiserver.resources.base import ResourceKind

# Upstream applies a webhook's patch without the request handler's limit on its operations.
UNLIMITED = 1 << 62


def decode_patch(patch: bytes) -> list[Any]:
    """The patch's operations (json-patch's DecodePatch); a 500 when it is not a list of them."""
    try:
        operations = json.loads(patch)
    except ValueError as exc:
        raise errors.internal_error(str(exc)) from None
    if not isinstance(operations, list) or any(not isinstance(op, dict | None) for op in operations):
        value = (
            operations
            if not isinstance(operations, list)
            else next(op for op in operations if not isinstance(op, dict | None))
        )
        into = "jsonpatch.Patch" if not isinstance(operations, list) else "jsonpatch.Operation"
        raise errors.internal_error(f"json: cannot unmarshal {json_kind(value)} into Go value of type {into}")
    return operations


def apply_patch(kind: ResourceKind, obj: JSON, operations: list[Any]) -> JSON:
    """The object patched and decoded through its kind."""
    try:
        patched = apply_json_patch(
            obj, operations, field_validation="Ignore", max_operations=UNLIMITED, max_copy_bytes=UNLIMITED
        )
    except StatusError as exc:
        raise errors.internal_error(str(exc.__cause__ or exc.message)) from None
    try:
        decoded = kind.decode(patched)
    except DecodeError as exc:
        raise errors.internal_error(exc.detail) from None
    body = {key: value for key, value in decoded.obj.items() if key not in ("apiVersion", "kind")}
    return {"kind": kind.kind, "apiVersion": kind.api_version, **body}
