"""JSON patch (RFC 6902, `application/json-patch+json`) with gopkg.in/evanphx/json-patch.v4's
`Patch.Apply` semantics, which are looser than RFC 6902 and which clients depend on: `replace` of an
absent object member adds it, negative array indexes count from the end, `copy` from an absent member
copies null. The `jsonpatch` package is RFC-strict (and words its errors differently), so the
operations are applied here."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from apiserver.machinery import errors, jsonvalue
from apiserver.machinery.gofmt import json_kind
from apiserver.machinery.types import JSON
from apiserver.patch.decoding import STRICT_VALIDATIONS, not_an_object, same, unprocessable

MAX_JSON_PATCH_OPERATIONS = 10000
"""handlers/patch.go maxJSONPatchOperations; more operations answer 413."""

MAX_JSON_PATCH_COPY_BYTES = 3 * 1024 * 1024
"""The apiserver's JSONPatchMaxCopyBytes default: how much `copy` operations may add in total."""


def _json_equal(a: Any, b: Any) -> bool:
    """Structural equality of JSON values that, like json-patch, tells 1 from 1.0 and true from 1."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return same(a, b)


class _OperationError(Exception):
    """A JSON patch operation that does not apply; the text is json-patch v4's."""


_MISSING_VALUE = "missing value"
_INVALID_INDEX = "invalid index referenced"
_ATOI_RE = re.compile(r"^[+-]?[0-9]+$")


def _atoi(text: str) -> int:
    if not _ATOI_RE.match(text):
        raise _OperationError(f"strconv.Atoi: parsing {errors.go_quote(text)}: invalid syntax")
    number = int(text)
    if not -(2**63) <= number < 2**63:
        raise _OperationError(f"strconv.Atoi: parsing {errors.go_quote(text)}: value out of range")
    return number


def _invalid_index(index: int) -> _OperationError:
    return _OperationError(f"Unable to access invalid index: {index}: {_INVALID_INDEX}")


def _get(container: JSON | list[Any], key: str) -> Any:
    if isinstance(container, dict):
        return container.get(key)
    index = _atoi(key)
    if index < 0:
        if index < -len(container):
            raise _invalid_index(index)
        index += len(container)
    if index >= len(container):
        raise _invalid_index(index)
    return container[index]


def _set(container: JSON | list[Any], key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    index = _atoi(key)
    if index < 0:
        if index < -len(container):
            raise _invalid_index(index)
        index += len(container)
    container[index] = value


def _add(container: JSON | list[Any], key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        index = _atoi(key)
    except _OperationError as exc:
        raise _OperationError(f"value was not a proper array index: '{key}': {exc}") from None
    size = len(container) + 1
    if index >= size:
        raise _invalid_index(index)
    if index < 0:
        if index < -size:
            raise _invalid_index(index)
        index += size
    container.insert(index, value)


def _remove(container: JSON | list[Any], key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise _OperationError(f"Unable to remove nonexistent key: {key}: {_MISSING_VALUE}")
        del container[key]
        return
    index = _atoi(key)
    if index >= len(container):
        raise _invalid_index(index)
    if index < 0:
        if index < -len(container):
            raise _invalid_index(index)
        index += len(container)
    del container[index]


def _decode_pointer_token(token: str) -> str:
    return re.sub("~[01]", lambda m: "/" if m.group() == "~1" else "~", token)


def _find(root: Any, path: str, decoded: dict[int, Any]) -> tuple[JSON | list[Any] | None, str]:
    """json-patch v4 findObject: the container the last token of `path` addresses, and that token.
    Each container it walks into is decoded on the way, which `decoded` records (by id)."""
    tokens = path.split("/")
    if len(tokens) < 2:
        return None, ""
    node = root
    for token in tokens[1:-1]:
        try:
            node = _get(node, _decode_pointer_token(token))
        except _OperationError:
            return None, ""
        if not isinstance(node, dict | list):
            return None, ""
        decoded[id(node)] = node
    return node, _decode_pointer_token(tokens[-1])


def _string_member(operation: JSON, name: str, missing: str) -> str:
    value = operation.get(name)
    if value is None:
        raise _OperationError(missing)
    if not isinstance(value, str):
        raise _OperationError(f"json: cannot unmarshal {json_kind(value)} into Go value of type string")
    return value


def _path(operation: JSON) -> str:
    return _string_member(operation, "path", f"operation missing path field: {_MISSING_VALUE}")


def _from(operation: JSON) -> str:
    return _string_member(operation, "from", f"operation, missing from field: {_MISSING_VALUE}")


def _decode_or(message: str, decode: Callable[[JSON], str], operation: JSON, keep_cause: bool) -> str:
    try:
        return decode(operation)
    except _OperationError as exc:
        raise _OperationError(f"{message}: {exc}" if keep_cause else f"{message}: {_MISSING_VALUE}") from None


class _JSONPatcher:
    """json-patch v4's Patch.Apply. It holds the document lazily: an object is decoded (into a Go
    map, which marshals with its keys sorted) only where an operation walks into it, compares it or
    it is the root; anything else is written back as it came, in its own member order, repeated
    keys included. `decoded` keeps (by id) the objects and arrays decoded so far."""

    def __init__(self, document: JSON, max_copy_bytes: int) -> None:
        self.root: Any = document
        self.decoded: dict[int, Any] = {id(document): document}
        self.copied = 0
        self.max_copy_bytes = max_copy_bytes

    def _find(self, path: str) -> tuple[JSON | list[Any] | None, str]:
        return _find(self.root, path, self.decoded)

    def _decode_all(self, value: Any) -> None:
        """What json-patch's equal leaves behind: every object and array it compared, decoded."""
        if isinstance(value, dict | list):
            self.decoded[id(value)] = value
            for item in value.values() if isinstance(value, dict) else value:
                self._decode_all(item)

    def written(self, value: Any) -> Any:
        """`value` as json-patch would marshal it now: decoded objects sorted, the rest as they came."""
        if isinstance(value, dict):
            if id(value) in self.decoded:
                return {key: self.written(value[key]) for key in sorted(value)}
            return jsonvalue.from_pairs([(key, self.written(item)) for key, item in jsonvalue.members(value)])
        if isinstance(value, list):
            return [self.written(item) for item in value]
        return value

    def apply(self, operation: Any) -> None:
        kind = operation.get("op") if isinstance(operation, dict) else None
        if not isinstance(kind, str):
            kind = "unknown"
        handler = {
            "add": self._add,
            "remove": self._remove,
            "replace": self._replace,
            "move": self._move,
            "test": self._test,
            "copy": self._copy,
        }.get(kind)
        if handler is None or not isinstance(operation, dict):
            raise _OperationError(f"Unexpected kind: {kind}")
        handler(operation)

    def _add(self, op: JSON) -> None:
        path = _decode_or("add operation failed to decode path", _path, op, keep_cause=False)
        container, key = self._find(path)
        if container is None:
            raise _OperationError(
                f'add operation does not apply: doc is missing path: "{path}": {_MISSING_VALUE}'
            )
        try:
            _add(container, key, copy.deepcopy(op.get("value")))
        except _OperationError as exc:
            raise _OperationError(f"error in add for path: '{path}': {exc}") from None

    def _remove(self, op: JSON) -> None:
        path = _decode_or("remove operation failed to decode path", _path, op, keep_cause=False)
        container, key = self._find(path)
        if container is None:
            raise _OperationError(
                f'remove operation does not apply: doc is missing path: "{path}": {_MISSING_VALUE}'
            )
        try:
            _remove(container, key)
        except _OperationError as exc:
            raise _OperationError(f"error in remove for path: '{path}': {exc}") from None

    def _replace(self, op: JSON) -> None:
        path = _decode_or("replace operation failed to decode path", _path, op, keep_cause=True)
        if path == "":
            value = op.get("value")
            if not isinstance(value, dict | list):
                # Upstream wraps a nil error here, which Go prints as %!w(<nil>).
                raise _OperationError("replace operation value must be object or array: %!w(<nil>)")
            self.root = copy.deepcopy(value)
            self.decoded[id(self.root)] = self.root
            return
        container, key = self._find(path)
        if container is None:
            raise _OperationError(
                f"replace operation does not apply: doc is missing path: {path}: {_MISSING_VALUE}"
            )
        try:
            _get(container, key)
        except _OperationError:
            raise _OperationError(
                f"replace operation does not apply: doc is missing key: {path}: {_MISSING_VALUE}"
            ) from None
        try:
            _set(container, key, copy.deepcopy(op.get("value")))
        except _OperationError as exc:  # pragma: no cover - _get has checked the index
            raise _OperationError(f"error in remove for path: '{path}': {exc}") from None

    def _move(self, op: JSON) -> None:
        source = _decode_or("move operation failed to decode from", _from, op, keep_cause=True)
        container, key = self._find(source)
        if container is None:
            raise _OperationError(
                f"move operation does not apply: doc is missing from path: {source}: {_MISSING_VALUE}"
            )
        try:
            value = _get(container, key)
            _remove(container, key)
        except _OperationError as exc:
            raise _OperationError(f"error in move for path: '{key}': {exc}") from None
        path = _decode_or("move operation failed to decode path", _path, op, keep_cause=True)
        container, key = self._find(path)
        if container is None:
            raise _OperationError(
                f"move operation does not apply: doc is missing destination path: {path}: {_MISSING_VALUE}"
            )
        try:
            _add(container, key, value)
        except _OperationError as exc:
            raise _OperationError(f"error in move for path: '{path}': {exc}") from None

    def _test(self, op: JSON) -> None:
        path = _decode_or("test operation failed to decode path", _path, op, keep_cause=True)
        failed = _OperationError(f"testing value {path} failed: test failed")
        if path == "":
            if "value" not in op or not _json_equal(self.root, op["value"]):
                raise failed
            self._decode_all(self.root)
            return
        container, key = self._find(path)
        if container is None:
            raise _OperationError(f"test operation does not apply: is missing path: {path}: {_MISSING_VALUE}")
        try:
            current = _get(container, key)
        except _OperationError as exc:
            raise _OperationError(f"error in test for path: '{path}': {exc}") from None
        if current is None:
            # An absent or null member passes against an absent or null value.
            if op.get("value") is not None:
                raise failed
            return
        if "value" not in op or not _json_equal(current, op["value"]):
            raise failed
        self._decode_all(current)

    def _copy(self, op: JSON) -> None:
        source = _decode_or("copy operation failed to decode from", _from, op, keep_cause=True)
        container, key = self._find(source)
        if container is None:
            raise _OperationError(
                f"copy operation does not apply: doc is missing from path: {source}: {_MISSING_VALUE}"
            )
        try:
            value = _get(container, key)
        except _OperationError as exc:
            raise _OperationError(f"error in copy for from: '{source}': {exc}") from None
        path = _decode_or("copy operation failed to decode path", _path, op, keep_cause=False)
        container, key = self._find(path)
        if container is None:
            raise _OperationError(
                f"copy operation does not apply: doc is missing destination path: {path}: {_MISSING_VALUE}"
            )
        # A copy is a fresh, undecoded value: the source's text as it would be marshalled now.
        value = self.written(value)
        if value is not None:
            self.copied += len(jsonvalue.compact(value).encode())
        if self.max_copy_bytes > 0 and self.copied > self.max_copy_bytes:
            raise _OperationError(
                "Unable to complete the copy, the accumulated size increase of copy is "
                f"{self.copied}, exceeding the limit {self.max_copy_bytes}"
            )
        try:
            _add(container, key, value)
        except _OperationError as exc:
            raise _OperationError(f"error while adding value during copy: {exc}") from None


def _check_json_patch_decodes(patch: Any, field_validation: str) -> None:
    """The decoding upstream does before applying: strictly into []jsonPatchOp (Warn and Strict),
    then into json-patch's Patch. Both fail with 400 and encoding/json's text."""
    if patch is None:
        return
    if field_validation in STRICT_VALIDATIONS:
        prefix = "error decoding patch: json: cannot unmarshal"
        if not isinstance(patch, list):
            raise errors.bad_request(
                f"{prefix} {json_kind(patch)} into Go value of type []handlers.jsonPatchOp"
            )
        for operation in patch:
            if operation is None:
                continue
            if not isinstance(operation, dict):
                raise errors.bad_request(
                    f"{prefix} {json_kind(operation)} into Go value of type handlers.jsonPatchOp"
                )
            for name, value in operation.items():
                if name in ("op", "path", "from") and value is not None and not isinstance(value, str):
                    raise errors.bad_request(
                        f"{prefix} {json_kind(value)} into Go struct field jsonPatchOp.{name} of type string"
                    )
    if not isinstance(patch, list):
        raise errors.bad_request(
            f"json: cannot unmarshal {json_kind(patch)} into Go value of type jsonpatch.Patch"
        )
    for operation in patch:
        if operation is not None and not isinstance(operation, dict):
            raise errors.bad_request(
                f"json: cannot unmarshal {json_kind(operation)} into Go value of type jsonpatch.Operation"
            )


def apply_json_patch(
    original: JSON,
    patch: Any,
    *,
    field_validation: str = "Warn",
    max_operations: int = MAX_JSON_PATCH_OPERATIONS,
    max_copy_bytes: int = MAX_JSON_PATCH_COPY_BYTES,
) -> JSON:
    """Applies a JSON patch as kube-apiserver does; `original` is not changed.

    An undecodable patch is 400; more than `max_operations` operations is 413; an operation that
    does not apply (a failed `test`, a missing path, a bad index) is 422 with upstream's generic
    message, the operation's own error kept as the exception's `__cause__`.
    """
    _check_json_patch_decodes(patch, field_validation)
    operations: list[Any] = patch or []
    if len(operations) > max_operations:
        raise errors.too_large(
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{max_operations}, got {len(operations)}"
        )
    patcher = _JSONPatcher(copy.deepcopy(original), max_copy_bytes)
    for operation in operations:
        try:
            patcher.apply(operation)
        except _OperationError as exc:
            raise unprocessable(str(exc)) from exc
    result = patcher.written(patcher.root)
    if not isinstance(result, dict):
        raise not_an_object(result)
    return result
