"""Strategic merge patch (`application/strategic-merge-patch+json`) as current
k8s.io/apimachinery/pkg/util/strategicpatch `StrategicMergeMapPatch` applies it (directives and nulls
dropped from values taken whole, deletion lists that never add), driven by a `PatchSchema` that
stands in for the Go struct tags (`patchStrategy`, `patchMergeKey`).

Where upstream lets a client's malformed strategic merge patch surface as a 500, this answers 400
with the same text: a client mistake is never a server error here.
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver.machinery import errors, gofmt, jsonvalue
from apiserver.machinery.gofmt import json_kind
from apiserver.machinery.types import JSON
from apiserver.patch.decoding import same, unprocessable
from apiserver.patch.schema import PatchSchema, PatchStrategy
from apiserver.patch.stable_sort import go_stable_sort

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
            self._merge_member(original, patch_key, patch[patch_key], path)
        return original

    def _merge_member(self, original: JSON, patch_key: str, value: Any, path: _Path) -> None:
        """One member of a patch merged into `original`."""
        key, is_delete_list = patch_key, False
        if patch_key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            key, is_delete_list = _extract_key(patch_key, _DELETE_FROM_PRIMITIVE_LIST), True
        if value is None:
            original.pop(key, None)
            return
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
            return
        child = (*path, key)
        strategy = self.schema.strategy(child)
        if isinstance(current, dict):
            replace = strategy is not None and strategy.strategy == "replace"
            original[key] = value if replace else self.merge_map(current, value, child)
        elif isinstance(current, list):
            original[key] = self._merge_list(current, value, strategy, is_delete_list, child)
        else:
            original[key] = value

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
        return same(left, right)
    for item in (left, right):
        if not isinstance(item, dict):
            raise _bad_arg_type(_MAP_TYPE, item)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
    return same(left[merge_key], right[merge_key])


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
            if same(items[i], items[j]):
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
        if merge_key in item and same(item[merge_key], value):
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


def _sort_by_order(items: list[Any], order: _Order) -> list[Any]:
    """normalizeSliceOrder's sort: by position in `order`; upstream's comparator also calls an
    item absent from `order` smaller than anything, which Go's stable sort then resolves."""
    positions = [order.index(item) for item in items]

    def less(i: int, j: int) -> bool:
        if positions[i] >= 0 and positions[j] >= 0:
            return positions[i] < positions[j]
        return True

    return [items[i] for i in go_stable_sort(items, less)]


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
            f"json: cannot unmarshal {json_kind(patch)} into Go value of type map[string]interface {{}}"
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
            raise unprocessable(str(exc)) from exc
        raise errors.bad_request(str(exc)) from exc
