"""The patch types kube-apiserver accepts for built-in kinds, applied to plain JSON objects.

- JSON merge patch (`application/merge-patch+json`) as gopkg.in/evanphx/json-patch.v4 `MergePatch`.
- JSON patch (`application/json-patch+json`) with v4's `Patch.Apply` semantics, which are looser
  than RFC 6902 and which clients depend on: `replace` of an absent object member adds it,
  negative array indexes count from the end, `copy` from an absent member copies null. The
  `jsonpatch` package is RFC-strict (and words its errors differently), so the operations are
  applied here.
- Strategic merge patch (`application/strategic-merge-patch+json`) as current
  k8s.io/apimachinery/pkg/util/strategicpatch `StrategicMergeMapPatch` (directives and nulls
  dropped from values taken whole, deletion lists that never add), driven by a `PatchSchema`
  that stands in for the Go struct tags (`patchStrategy`, `patchMergeKey`).

Errors are the ones kube-apiserver answers (handlers/patch.go): an undecodable patch is 400
BadRequest; a JSON patch operation that does not apply is 422 with upstream's generic message;
a patched document that does not decode into the object (no object at all, a value of the wrong
type, under fieldValidation=Strict an unknown or repeated field) is 422 Invalid on the field
`patch`, quoting the patched JSON as json-patch writes it: objects it decoded with their keys
sorted, everything else as it came (`Patcher` and the registry do that decoding). Where upstream
lets a client's malformed strategic merge patch surface as a 500, this answers 400 with the same
text: a client mistake is never a server error here.

Upstream applies server-side apply (`application/apply-patch+yaml`) through the field manager;
so does this server, in `managedfields` (over `structure` and `fieldpath`), not in this module.
"""

from __future__ import annotations

import copy
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal

from apiserver.machinery import errors, gofmt, jsonvalue
from apiserver.machinery.types import JSON

MAX_JSON_PATCH_OPERATIONS = 10000
"""handlers/patch.go maxJSONPatchOperations; more operations answer 413."""

MAX_JSON_PATCH_COPY_BYTES = 3 * 1024 * 1024
"""The apiserver's JSONPatchMaxCopyBytes default: how much `copy` operations may add in total."""

STRICT_VALIDATIONS = ("Strict", "Warn")
"""fieldValidation values for which upstream decodes patches strictly (Warn is the default)."""


# ---------------------------------------------------------------------------------------------
# Go formatting, for messages that quote values the way upstream's fmt does.


def _json_kind(value: Any) -> str:
    """How encoding/json names a JSON value in an UnmarshalTypeError."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


def _same(a: Any, b: Any) -> bool:
    """Go's == on two decoded JSON scalars held in interface{}: same type and same value."""
    return type(a) is type(b) and a == b


def _json_equal(a: Any, b: Any) -> bool:
    """Structural equality of JSON values that, like json-patch, tells 1 from 1.0 and true from 1."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return _same(a, b)


# ---------------------------------------------------------------------------------------------
# Errors.


def _unprocessable(cause: str) -> errors.StatusError:
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


def _not_an_object(result: Any) -> errors.StatusError:
    """The patched document is no object, so not even its apiVersion and kind decode."""
    return invalid_patch(
        jsonvalue.compact(result), _version_kind_error(f"Go value of type {_FIND_KIND_TYPE}", result)
    )


def _version_kind_error(target: str, value: Any) -> str:
    cannot = f"json: cannot unmarshal {_json_kind(value)} into {target}"
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


# ---------------------------------------------------------------------------------------------
# JSON merge patch.


def _prune_nulls(value: Any) -> Any:
    """json-patch v4's pruneNulls: null members of objects go, at any depth (null elements of arrays
    stay). It decodes every object it walks, so each marshals as a Go map: keys sorted."""
    if isinstance(value, dict):
        return {k: _prune_nulls(value[k]) for k in sorted(value) if value[k] is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


def _merge_documents(doc: JSON, patch: JSON) -> JSON:
    """mergeDocs of a patch into a document json-patch has decoded: the result marshals sorted,
    while a value the patch sets as it is keeps its own member order."""
    merged = dict(doc)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif not isinstance(merged.get(key), dict):
            # Absent, null or not an object: the value goes in with its nulls pruned.
            merged[key] = _prune_nulls(value)
        elif not isinstance(value, dict):
            # json-patch v4 keeps a non-object replacing an object as it is, nulls included.
            merged[key] = value
        else:
            merged[key] = _merge_documents(merged[key], value)
    return {key: merged[key] for key in sorted(merged)}


def apply_merge_patch(original: JSON, patch: Any, *, field_validation: str = "Warn") -> JSON:
    """Applies a JSON merge patch (RFC 7386) as kube-apiserver does; `original` is not changed.

    A null member deletes; objects merge recursively; anything else replaces (with the nulls
    inside pruned, as json-patch v4 does). A patch that is not an object is rejected: with 400
    when it cannot be decoded as one, with 422 when (fieldValidation=Ignore) an array replaces
    the whole object.
    """
    if not isinstance(patch, dict):
        if patch is not None and field_validation in STRICT_VALIDATIONS:
            raise errors.bad_request(
                f"error decoding patch: json: cannot unmarshal {_json_kind(patch)} "
                "into Go value of type map[string]interface {}"
            )
        if isinstance(patch, list):
            raise _not_an_object(_prune_nulls(patch))
        raise errors.bad_request("Invalid JSON Patch")
    return _merge_documents(copy.deepcopy(original), copy.deepcopy(patch))


# ---------------------------------------------------------------------------------------------
# JSON patch.


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
        raise _OperationError(f"json: cannot unmarshal {_json_kind(value)} into Go value of type string")
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
                f"{prefix} {_json_kind(patch)} into Go value of type []handlers.jsonPatchOp"
            )
        for operation in patch:
            if operation is None:
                continue
            if not isinstance(operation, dict):
                raise errors.bad_request(
                    f"{prefix} {_json_kind(operation)} into Go value of type handlers.jsonPatchOp"
                )
            for name, value in operation.items():
                if name in ("op", "path", "from") and value is not None and not isinstance(value, str):
                    raise errors.bad_request(
                        f"{prefix} {_json_kind(value)} into Go struct field jsonPatchOp.{name} of type string"
                    )
    if not isinstance(patch, list):
        raise errors.bad_request(
            f"json: cannot unmarshal {_json_kind(patch)} into Go value of type jsonpatch.Patch"
        )
    for operation in patch:
        if operation is not None and not isinstance(operation, dict):
            raise errors.bad_request(
                f"json: cannot unmarshal {_json_kind(operation)} into Go value of type jsonpatch.Operation"
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
            raise _unprocessable(str(exc)) from exc
    result = patcher.written(patcher.root)
    if not isinstance(result, dict):
        raise _not_an_object(result)
    return result


# ---------------------------------------------------------------------------------------------
# Strategic merge patch.


class PatchStrategy:
    """The `patchStrategy`/`patchMergeKey` tags of one field.

    `merge` on a list of objects merges elements by `merge_key`; `merge` without a key makes a
    list of scalars a set (union, `$deleteFromPrimitiveList`); `replace` replaces the field whole.
    A list with no strategy is replaced whole (atomic) and an object with none is merged.
    """

    __slots__ = ("merge_key", "strategy")

    def __init__(self, strategy: Literal["merge", "replace"], merge_key: str = "") -> None:
        self.strategy = strategy
        self.merge_key = merge_key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PatchStrategy):
            return NotImplemented
        return (self.strategy, self.merge_key) == (other.strategy, other.merge_key)

    def __hash__(self) -> int:
        return hash((self.strategy, self.merge_key))

    def __repr__(self) -> str:
        key = f", merge_key={self.merge_key!r}" if self.merge_key else ""
        return f"PatchStrategy({self.strategy!r}{key})"


class PatchSchema:
    """Patch strategies by field path: dotted JSON field names from the object's root, with list
    elements transparent (`metadata.ownerReferences`, `spec.containers.ports`)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, PatchStrategy] | None = None) -> None:
        self._fields: dict[str, PatchStrategy] = dict(fields or {})

    @property
    def fields(self) -> Mapping[str, PatchStrategy]:
        return dict(self._fields)

    def strategy(self, path: Iterable[str]) -> PatchStrategy | None:
        return self._fields.get(".".join(path))

    def extend(self, fields: Mapping[str, PatchStrategy]) -> PatchSchema:
        """A schema with these fields added (or overridden), e.g. a kind's on top of ObjectMeta's."""
        return PatchSchema({**self._fields, **fields})

    def __repr__(self) -> str:
        return f"PatchSchema({self._fields!r})"


OBJECT_META_PATCH_SCHEMA = PatchSchema(
    {
        # metav1.ObjectMeta: `patchStrategy:"merge" patchMergeKey:"uid"`.
        "metadata.ownerReferences": PatchStrategy("merge", "uid"),
        # metav1.ObjectMeta: `patchStrategy:"merge"`, a set of strings.
        "metadata.finalizers": PatchStrategy("merge"),
        # metadata.managedFields has no strategy: replaced whole.
    }
)
"""The strategies of the list fields of ObjectMeta, shared by every kind."""

ROLE_BINDING_PATCH_SCHEMA = OBJECT_META_PATCH_SCHEMA
"""RoleBinding: `subjects` carries no strategy (+listType=atomic), so it is replaced whole."""

EVENT_PATCH_SCHEMA = OBJECT_META_PATCH_SCHEMA
"""events/v1 Event has no list fields of its own."""


_DIRECTIVE = "$patch"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_RETAIN_KEYS = "$retainKeys"
_SET_ELEMENT_ORDER = "$setElementOrder"
_MAP_TYPE = "map[string]interface {}"
_LIST_TYPE = "[]interface {}"

# mergepatch's sentinel errors.
_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_BAD_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
_NO_LIST_OF_LISTS = "lists of lists are not supported"

_Path = tuple[str, ...]


class _PatchError(Exception):
    """A strategic merge patch that cannot be applied; `unprocessable` marks upstream's 422s."""

    def __init__(self, message: str, unprocessable: bool = False) -> None:
        super().__init__(message)
        self.unprocessable = unprocessable


def _bad_arg_type(expected: str, actual: Any) -> _PatchError:
    return _PatchError(f"expected a {expected}, but received a {gofmt.go_type(actual)}")


def _no_merge_key(item: JSON, merge_key: str) -> _PatchError:
    return _PatchError(f"map: {gofmt.go_v(item)} does not contain declared merge key: {merge_key}")


def _hashable(value: Any) -> tuple[type, Any]:
    """A key that, like Go's interface{} map keys, tells values of different types apart."""
    if isinstance(value, dict | list):
        raise _PatchError(f"runtime error: hash of unhashable type {gofmt.go_type(value)}")
    return type(value), value


def _extract_key(key: str, prefix: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise _PatchError(
            _BAD_PRIMITIVE_LIST if prefix == _DELETE_FROM_PRIMITIVE_LIST else _BAD_SET_ELEMENT_ORDER
        )
    return rest


_ABSENT: Any = object()


def _discard_nulls(value: Any) -> Any:
    """discardNullValuesFromPatch: drops null members of objects, at any depth."""
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for item in value.values():
            _discard_nulls(item)
    elif isinstance(value, list):
        for item in value:
            _discard_nulls(item)
    return value


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """removeDirectives: a patch value taken as it is loses the objects that carry `$patch`;
    the second item says whether the value itself is kept."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        for key in list(value):
            kept, keep = _remove_directives(value[key])
            if keep:
                value[key] = kept
            else:
                del value[key]
        return value, True
    if isinstance(value, list):
        items = []
        for item in value:
            kept, keep = _remove_directives(item)
            if keep:
                items.append(kept)
        return items, True
    return value, True


class _StrategicMerge:
    def __init__(self, schema: PatchSchema) -> None:
        self.schema = schema

    def merge_map(self, original: JSON | None, patch: JSON, path: _Path) -> JSON:
        if _DIRECTIVE in patch:
            directive = patch[_DIRECTIVE]
            if directive == "replace":
                del patch[_DIRECTIVE]
                return patch
            if directive == "delete":
                return {}
            raise _PatchError(f"unknown patch type: {gofmt.go_s(directive)} in map: {gofmt.go_v(patch)}")
        if original is None:
            original = {}
        self._retain_keys(original, patch)
        self._set_element_orders(original, patch, path)
        # Upstream walks the patch in Go's random map order; here deletion lists come after the
        # lists they delete from, which is also the order kubectl's patches are meant for.
        keys = sorted(patch, key=lambda k: k.startswith(_DELETE_FROM_PRIMITIVE_LIST))
        for patch_key in keys:
            value = patch[patch_key]
            key, is_delete_list = patch_key, False
            if patch_key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
                key, is_delete_list = _extract_key(patch_key, _DELETE_FROM_PRIMITIVE_LIST), True
            if value is None:
                original.pop(key, None)
                continue
            current = original.get(key, _ABSENT)
            if current is _ABSENT or type(current) is not type(value):
                # Taken as it is, less its nulls and its directives; a deletion list has nothing
                # to delete from here.
                if not is_delete_list:
                    kept, keep = _remove_directives(_discard_nulls(value))
                    if keep:
                        original[key] = kept
                    else:
                        original.pop(key, None)
                continue
            child = (*path, key)
            strategy = self.schema.strategy(child)
            if isinstance(current, dict):
                replace = strategy is not None and strategy.strategy == "replace"
                original[key] = value if replace else self.merge_map(current, value, child)
            elif isinstance(current, list):
                original[key] = self._merge_list(current, value, strategy, is_delete_list, child)
            else:
                original[key] = value
        return original

    @staticmethod
    def _retain_keys(original: JSON, patch: JSON) -> None:
        if _RETAIN_KEYS not in patch:
            return
        retained = patch.pop(_RETAIN_KEYS)
        if not isinstance(retained, list):
            raise _PatchError(_BAD_RETAIN_KEYS)
        try:
            keep = {_hashable(v) for v in retained}
        except _PatchError:
            raise _PatchError(_BAD_RETAIN_KEYS) from None
        for key, value in patch.items():
            if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER)):
                continue
            if (str, key) not in keep:
                raise _PatchError(_BAD_RETAIN_KEYS)
        for key in [k for k in original if (str, k) not in keep]:
            del original[key]

    def _set_element_orders(self, original: JSON, patch: JSON, path: _Path) -> None:
        for order_key in [k for k in patch if k.startswith(_SET_ELEMENT_ORDER)]:
            order = patch.pop(order_key)
            if not isinstance(order, list):
                raise _bad_arg_type(_LIST_TYPE, order)
            key = _extract_key(order_key, _SET_ELEMENT_ORDER)
            in_original, in_patch = key in original, key in patch
            original_list: list[Any] = original[key] if in_original else []
            patch_list: list[Any] = patch[key] if in_patch else []
            for value in (original_list, patch_list):
                if not isinstance(value, list):
                    raise _bad_arg_type(_LIST_TYPE, value)
            child = (*path, key)
            strategy = self.schema.strategy(child)
            merge_key = strategy.merge_key if strategy else ""
            _check_order(patch_list, order, merge_key)
            if in_original and in_patch:
                merged = self._merge_list(original_list, patch_list, strategy, False, child)
            elif in_original:
                merged = original_list
            elif in_patch:
                merged = _remove_directives(patch_list)[0]
            else:
                continue
            if merge_key:
                in_order, server_only = _partition_maps(merged, order, merge_key)
            else:
                in_order, server_only = _partition_scalars(merged, order)
            kind = _element_kind(original_list, patch_list)
            original[key] = _normalize_order(in_order, server_only, order, original_list, merge_key, kind)
            patch.pop(key, None)

    def _merge_list(
        self,
        original: list[Any],
        patch: list[Any],
        strategy: PatchStrategy | None,
        is_delete_list: bool,
        path: _Path,
    ) -> list[Any]:
        # A deletion list deletes whatever the list's strategy, as current upstream does.
        merging = strategy is not None and strategy.strategy == "merge"
        if not merging and not is_delete_list:
            return patch
        merge_key = strategy.merge_key if strategy is not None else ""
        original, patch = list(original), list(patch)
        if not original and not patch:
            return original
        kind = _element_kind(original, patch)
        if kind != "map":
            if is_delete_list:
                deleted = {_hashable(v) for v in patch}
                return [v for v in original if _hashable(v) not in deleted]
            merged = _deduplicate(original + patch)
        else:
            if not merge_key:
                # Upstream names the Go kind of the list's elements: in our kinds a list merged
                # without a key holds strings, and a list without a strategy holds structs.
                element = "string" if merging else "struct"
                raise _PatchError(f"cannot merge lists without merge key for {element}")
            original, patch = _apply_list_directives(original, patch, merge_key)
            server_order = list(original)
            merged = original
            for item in patch:
                if merge_key not in item:
                    raise _no_merge_key(item, merge_key)
                found = _find_by_key(merged, merge_key, item[merge_key])
                if found is None:
                    merged.append(item)
                else:
                    merged[found] = self.merge_map(merged[found], item, path)
            original = server_order
        if merge_key:
            in_patch, server_only = _partition_maps(merged, patch, merge_key)
        else:
            in_patch, server_only = _partition_scalars(merged, patch)
        return _normalize_order(in_patch, server_only, patch, original, merge_key, kind)


def _check_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """validatePatchWithSetOrderList: the patch's items must appear in $setElementOrder, in order."""
    if not order or not patch_list:
        return
    items = _split_deletions(patch_list)[0] if merge_key else patch_list
    i = j = 0
    while i < len(items) and j < len(order):
        if isinstance(items[i], dict) and _DIRECTIVE in items[i]:
            i += 1
            continue
        if _merge_key_equal(items[i], order[j], merge_key):
            i += 1
        j += 1
    if i < len(items) and j >= len(order):
        raise _PatchError(
            f"The order in patch list:\n{gofmt.go_v(patch_list)}\n doesn't match "
            f"{_SET_ELEMENT_ORDER} list:\n{gofmt.go_v(order)}\n"
        )


def _merge_key_equal(left: Any, right: Any, merge_key: str) -> bool:
    if not merge_key:
        if isinstance(left, dict | list) or isinstance(right, dict | list):
            raise _PatchError(f"runtime error: comparing uncomparable type {gofmt.go_type(left)}")
        return _same(left, right)
    for item in (left, right):
        if not isinstance(item, dict):
            raise _bad_arg_type(_MAP_TYPE, item)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
    return _same(left[merge_key], right[merge_key])


def _element_kind(*lists: list[Any]) -> str:
    """sliceElementType: every element of every list must have one type, and not be a list."""
    first: type | None = None
    for items in lists:
        for item in items:
            if first is None:
                if isinstance(item, list):
                    raise _PatchError(_NO_LIST_OF_LISTS, unprocessable=True)
                first = type(item)
            elif type(item) is not first:
                raise _PatchError(f"list element types are not identical: {gofmt.go_v(list(lists))}")
    if first is None:
        raise _PatchError("no elements in any of the given slices")
    return "map" if first is dict else "scalar"


def _deduplicate(items: list[Any]) -> list[Any]:
    """deduplicateScalars, whose order (a duplicate's place goes to the last element) matters."""
    items = list(items)
    last = len(items) - 1
    i = 0
    while i < last:
        j = i + 1
        while j <= last:
            if _same(items[i], items[j]):
                items[j] = items[last]
                items.pop()
                last -= 1
                j -= 1
            j += 1
        i += 1
    return items


def _find_by_key(items: list[Any], merge_key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _PatchError(f"value for key {index} is not a map.")
        if merge_key in item and _same(item[merge_key], value):
            return index
    return None


def _apply_list_directives(
    original: list[Any], patch: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    """mergeSliceWithSpecialElements: `$patch: delete|replace` elements of a list of objects."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        if _DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            while (found := _find_by_key(original, merge_key, item[merge_key])) is not None:
                del original[found]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise _PatchError(f"unknown patch type: {gofmt.go_s(directive)} in map: {gofmt.go_v(item)}")
    if replace:
        return plain, []
    return original, plain


def _split_deletions(items: list[Any]) -> tuple[list[Any], list[Any]]:
    keep: list[Any] = []
    delete: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad_arg_type(_MAP_TYPE, item)
        (delete if item.get(_DIRECTIVE) == "delete" else keep).append(item)
    return keep, delete


def _partition_scalars(items: list[Any], by: list[Any]) -> tuple[list[Any], list[Any]]:
    present = {_hashable(v) for v in by}
    inside = [v for v in items if _hashable(v) in present]
    outside = [v for v in items if _hashable(v) not in present]
    return inside, outside


def _partition_maps(items: list[Any], by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    inside: list[Any] = []
    outside: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad_arg_type(_MAP_TYPE, item)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        (inside if _find_by_key(by, merge_key, item[merge_key]) is not None else outside).append(item)
    return inside, outside


class _Order:
    """Positions in a list, looked up as upstream's `index` does: by merge key for objects, by
    value for scalars, first occurrence winning, values of other types never equal."""

    def __init__(self, items: list[Any], merge_key: str, kind: str) -> None:
        self.merge_key = merge_key
        self.kind = kind
        self.positions: dict[tuple[type, Any], int] = {}
        for position, item in enumerate(items):
            key = self._key(item)
            if key is not None:
                self.positions.setdefault(key, position)

    def _key(self, item: Any) -> tuple[type, Any] | None:
        if self.kind == "map":
            item = item.get(self.merge_key) if isinstance(item, dict) else None
        if isinstance(item, dict | list):
            return None
        return type(item), item

    def index(self, item: Any) -> int:
        key = self._key(item)
        return -1 if key is None else self.positions.get(key, -1)


def _go_stable_sort(items: list[Any], less: Callable[[int, int], bool]) -> list[int]:
    """The permutation Go's sort.SliceStable produces for `less` over positions 0..n-1.

    Insertion sort of blocks of 20, then SymMerge (Kim & Kutzner) of ever larger runs, exactly as
    Go does it, so that a comparator that is not a strict order (upstream's is not) sorts alike.
    """
    data = list(range(len(items)))

    def lt(i: int, j: int) -> bool:
        return less(data[i], data[j])

    def swap(i: int, j: int) -> None:
        data[i], data[j] = data[j], data[i]

    def insertion_sort(a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and lt(j, j - 1):
                swap(j, j - 1)
                j -= 1

    def swap_range(a: int, b: int, n: int) -> None:
        for i in range(n):
            swap(a + i, b + i)

    def rotate(a: int, m: int, b: int) -> None:
        i, j = m - a, b - m
        while i != j:
            if i > j:
                swap_range(m - i, m, j)
                i -= j
            else:
                swap_range(m - i, m + j - i, i)
                j -= i
        swap_range(m - i, m, i)

    def sym_merge(a: int, m: int, b: int) -> None:
        if m - a == 1:
            i, j = m, b
            while i < j:
                h = (i + j) // 2
                if lt(h, a):
                    i = h + 1
                else:
                    j = h
            for k in range(a, i - 1):
                swap(k, k + 1)
            return
        if b - m == 1:
            i, j = a, m
            while i < j:
                h = (i + j) // 2
                if not lt(m, h):
                    i = h + 1
                else:
                    j = h
            for k in range(m, i, -1):
                swap(k, k - 1)
            return
        mid = (a + b) // 2
        n = mid + m
        if m > mid:
            start, r = n - b, mid
        else:
            start, r = a, m
        p = n - 1
        while start < r:
            c = (start + r) // 2
            if not lt(p - c, c):
                start = c + 1
            else:
                r = c
        end = n - start
        if start < m < end:
            rotate(start, m, end)
        if a < start < mid:
            sym_merge(a, start, mid)
        if mid < end < b:
            sym_merge(mid, end, b)

    n = len(items)
    block = 20
    a, b = 0, block
    while b <= n:
        insertion_sort(a, b)
        a, b = b, b + block
    insertion_sort(a, n)
    while block < n:
        a, b = 0, 2 * block
        while b <= n:
            sym_merge(a, a + block, b)
            a, b = b, b + 2 * block
        if a + block < n:
            sym_merge(a, a + block, n)
        block *= 2
    return data


def _sort_by_order(items: list[Any], order: _Order) -> list[Any]:
    """normalizeSliceOrder's sort: by position in `order`; upstream's comparator also calls an
    item absent from `order` smaller than anything, which Go's stable sort then resolves."""
    positions = [order.index(item) for item in items]

    def less(i: int, j: int) -> bool:
        if positions[i] >= 0 and positions[j] >= 0:
            return positions[i] < positions[j]
        return True

    return [items[i] for i in _go_stable_sort(items, less)]


def _normalize_slice(items: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    deletions: list[Any] = []
    if kind == "map":
        for listed in (items, order):
            for item in listed:
                if not isinstance(item, dict):
                    raise _bad_arg_type(_MAP_TYPE, item)
                if merge_key not in item:
                    raise _no_merge_key(item, merge_key)
        items, deletions = _split_deletions(items)
    return _sort_by_order(items, _Order(order, merge_key, kind)) + deletions


def _normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    """normalizeElementOrder: each part sorted by its own order, then interleaved, a server-only
    item going first only where the server's order puts it before the patch item at hand."""
    right = _normalize_slice(patch_items, patch_order, merge_key, kind)
    left = _normalize_slice(server_only, server_order, merge_key, kind)
    order = _Order(server_order, merge_key, kind)
    left_at = [order.index(item) for item in left]
    right_at = [order.index(item) for item in right]
    merged: list[Any] = []
    i = j = 0
    while i < len(left) and j < len(right):
        if left_at[i] >= 0 and right_at[j] >= 0 and left_at[i] < right_at[j]:
            merged.append(left[i])
            i += 1
        else:
            merged.append(right[j])
            j += 1
    return merged + left[i:] + right[j:]


def apply_strategic_merge_patch(
    original: JSON, patch: Any, schema: PatchSchema, patch_map: JSON | None = None
) -> JSON:
    """Applies a strategic merge patch as kube-apiserver does; `original` and `patch` are not
    changed. `patch_map`, if given, receives the patch as upstream holds it once merged: decoded
    into Go maps, then trimmed in place by the merge (nulls and directives of values taken whole).

    Objects merge and null deletes a member, as in a merge patch; lists follow `schema`
    (merged by key, merged as sets, or replaced whole); the directives `$patch` (replace, delete;
    merge is refused as upstream refuses it), `$retainKeys`, `$deleteFromPrimitiveList/<list>`
    and `$setElementOrder/<list>` are honoured. A patch that is not an object, or that misuses
    a directive, is 400; a list of lists is 422, as upstream.
    """
    if patch is None:
        return copy.deepcopy(original)
    if not isinstance(patch, dict):
        raise errors.bad_request(
            f"json: cannot unmarshal {_json_kind(patch)} into Go value of type map[string]interface {{}}"
        )
    # Decoded into Go maps first: repeated keys keep their last value.
    decoded: JSON = jsonvalue.plain(patch)
    if patch_map is not None:
        patch_map.update(decoded)
        decoded = patch_map
    try:
        return _StrategicMerge(schema).merge_map(copy.deepcopy(original), decoded, ())
    except _PatchError as exc:
        if exc.unprocessable:
            raise _unprocessable(str(exc)) from exc
        raise errors.bad_request(str(exc)) from exc


# ---------------------------------------------------------------------------------------------
# A PATCH request's patch, as kube-apiserver's patch handler (handlers/patch.go) deals with it.


class Patcher(ABC):
    """The patch of one PATCH request (server-side apply aside): applies itself to the current
    object and says how upstream decodes the result.

    `strict_errors`: what decoding the patch itself finds under fieldValidation Strict or Warn
    (repeated keys; a JSON patch's unknown operation fields), reported before the result's own.
    `unstructured`: the result becomes the typed object through the unstructured converter (a
    strategic merge patch's) rather than by decoding its JSON.
    """

    unstructured: ClassVar[bool] = False

    def __init__(self, patch: Any, field_validation: str) -> None:
        self.patch = patch
        self.field_validation = field_validation
        strict = field_validation in STRICT_VALIDATIONS
        self.strict_errors = self._strict_errors() if strict else []

    @abstractmethod
    def apply(self, current: JSON) -> JSON:
        """The patched object; `current` (the stored object in Go's field order) is not changed."""

    def quoted(self, patched: JSON) -> str:
        """What a 422 about the result quotes: the patched JSON as json-patch wrote it."""
        return jsonvalue.compact(patched)

    def _strict_errors(self) -> list[str]:
        found = jsonvalue.StrictErrors()
        jsonvalue.report_duplicates(self.patch, found)
        return found.messages


class MergePatcher(Patcher):
    def apply(self, current: JSON) -> JSON:
        return apply_merge_patch(current, self.patch, field_validation=self.field_validation)


class JSONPatcher(Patcher):
    def apply(self, current: JSON) -> JSON:
        return apply_json_patch(current, self.patch, field_validation=self.field_validation)

    def _strict_errors(self) -> list[str]:
        """Decoding the operations strictly into []jsonPatchOp; upstream prefixes each error."""
        found = jsonvalue.StrictErrors()
        if isinstance(self.patch, list):
            for index, operation in enumerate(self.patch):
                if isinstance(operation, dict):
                    _operation_strict_errors(operation, f"[{index}]", found)
        return [f"json patch {message}" for message in found.messages]


_OPERATION_FIELDS = ("op", "path", "from", "value")


def _operation_strict_errors(operation: JSON, path: str, found: jsonvalue.StrictErrors) -> None:
    seen: set[str] = set()
    for key, value in jsonvalue.members(operation):
        child = f"{path}.{key}"
        if key not in _OPERATION_FIELDS:
            found.unknown(child)
            continue
        if key in seen:
            found.duplicate(child)
        seen.add(key)
        if key == "value":
            jsonvalue.report_duplicates(value, found, child)


class StrategicMergePatcher(Patcher):
    unstructured = True

    def __init__(self, patch: Any, field_validation: str, schema: PatchSchema) -> None:
        super().__init__(patch, field_validation)
        self.schema = schema
        self.patch_map: JSON = {}

    def apply(self, current: JSON) -> JSON:
        self.patch_map = {}
        return apply_strategic_merge_patch(current, self.patch, self.schema, self.patch_map)

    def quoted(self, patched: JSON) -> str:
        """Upstream quotes the map it decoded the patch into as fmt's %+v prints it, after the
        merge has trimmed it."""
        return gofmt.go_v(self.patch_map)
