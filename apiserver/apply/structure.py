"""The structural schema of a kind as server-side apply sees it, and the walks over objects it drives.

This is what sigs.k8s.io/structured-merge-diff's `schema` and `typed` packages do for
kube-apiserver, over plain JSON values: a kind's schema says which maps are granular (merged key
by key) and which are atomic (owned and replaced whole: structs marked
`x-kubernetes-map-type: atomic`, such as RoleRef, Subject, ObjectReference, OwnerReference), and
which lists are atomic (`x-kubernetes-list-type: atomic`, or no list type: RoleBinding.subjects,
metadata.managedFields), sets (`set`: metadata.finalizers, items named `v:<value>`) or keyed maps
(`map` with `x-kubernetes-list-map-keys`: metadata.ownerReferences by uid, items named
`k:{"uid":...}`). The schema is read from the pydantic models through `schema.fields_of`, so it
is the same one OpenAPI publishes.

The walks: `validate` (a partially specified object against the schema, upstream's error texts),
`to_field_set` (the fields a value sets), `compare` (added, modified and removed fields between
two values), `merge` (a partial object over a live one: maps merged, atomic values replaced,
associative lists merged item by item in upstream's order) and `remove_items`.

`MISSING` stands for an absent value, as distinct from an explicit null.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from pydantic import BaseModel

from apiserver.apply.fieldpath import FieldSet, Path, PathElement, values_equal
from apiserver.machinery import gofmt
from apiserver.machinery.schema import (
    FieldSpec,
    FreeForm,
    ListOf,
    MapOf,
    Scalar,
    Struct,
    Timestamp,
    fields_of,
)

LIST_TYPE = "x-kubernetes-list-type"
LIST_MAP_KEYS = "x-kubernetes-list-map-keys"
MAP_TYPE = "x-kubernetes-map-type"
PATCH_STRATEGY = "x-kubernetes-patch-strategy"
PATCH_MERGE_KEY = "x-kubernetes-patch-merge-key"


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()


class StructureError(ValueError):
    """A value that does not fit its schema where a walk cannot go on."""


# ----------------------------------------------------------------------------- schema


@dataclass(eq=False)
class ScalarNode:
    type: str  # "string", "numeric", "boolean"


@dataclass(eq=False)
class AnyNode:
    """A value of any shape, owned and replaced whole (metav1.FieldsV1)."""


@dataclass(eq=False)
class MapNode:
    fields: dict[str, Node] = field(default_factory=dict)
    element: Node | None = None  # the value type of a map[string]T
    atomic: bool = False


@dataclass(eq=False)
class ListNode:
    element: Node
    atomic: bool = True
    keys: tuple[str, ...] = ()  # associative lists: keyed by these fields, or (none) a set


Node = ScalarNode | AnyNode | MapNode | ListNode


def _node_of_spec(spec: FieldSpec) -> Node:
    return _node_of_type(spec.type, spec.extensions)


def _node_of_type(t: Any, extensions: dict[str, Any]) -> Node:
    if isinstance(t, Scalar):
        return ScalarNode({"string": "string", "bool": "boolean"}.get(t.name, "numeric"))
    if isinstance(t, Timestamp):
        return ScalarNode("string")
    if isinstance(t, Struct):
        node = structure_of(t.model)
        if extensions.get(MAP_TYPE) == "atomic" and not node.atomic:
            node = MapNode(node.fields, node.element, atomic=True)
        return node
    if isinstance(t, MapOf):
        return MapNode(element=_node_of_type(t.value, {}), atomic=extensions.get(MAP_TYPE) == "atomic")
    if isinstance(t, ListOf):
        element = _node_of_type(t.item, {})
        list_type = extensions.get(LIST_TYPE)
        if list_type == "set":
            return ListNode(element, atomic=False)
        if list_type == "map":
            return ListNode(element, atomic=False, keys=tuple(extensions.get(LIST_MAP_KEYS) or ()))
        if (
            list_type is None
            and extensions.get(PATCH_STRATEGY) == "merge"
            and extensions.get(PATCH_MERGE_KEY)
        ):
            # Without a list type, upstream's schema conversion reads the patch strategy.
            return ListNode(element, atomic=False, keys=(str(extensions[PATCH_MERGE_KEY]),))
        return ListNode(element, atomic=True)
    if isinstance(t, FreeForm):
        return AnyNode()
    raise TypeError(f"no structure for {t!r}")


@cache
def structure_of(model: type[BaseModel]) -> MapNode:
    """The structural schema of a model (a struct)."""
    extra = model.model_config.get("json_schema_extra")
    atomic = isinstance(extra, dict) and extra.get(MAP_TYPE) == "atomic"
    return MapNode({spec.name: _node_of_spec(spec) for spec in fields_of(model)}, None, atomic)


def _child(node: MapNode, name: str) -> Node | None:
    return node.fields.get(name) or node.element


# ----------------------------------------------------------------------------- Go renderings


def _shown(value: Any) -> str:
    """How upstream prints a value.Value with %v (a pointer to a struct)."""
    return "&{" + gofmt.go_v(value) + "}"


# ----------------------------------------------------------------------------- list items


def list_item_element(node: ListNode, item: Any) -> PathElement:
    """The path element naming an item of an associative list."""
    if node.keys:
        if item is None:
            raise StructureError("associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise StructureError("associative list with keys may not have non-map elements")
        fields = {key: item[key] for key in node.keys if key in item}
        if not fields:
            keys = "[" + " ".join(f'"{key}"' for key in node.keys) + "]"
            raise StructureError(
                f"associative list with keys has an element that omits all key fields {keys} "
                "(and doesn't have default values for any key fields)"
            )
        return PathElement.keyed(fields)
    if isinstance(item, dict):
        raise StructureError("associative list without keys has an element that's a map type")
    if isinstance(item, list):
        raise StructureError("not supported: associative list with lists as elements")
    if item is None:
        raise StructureError("associative list without keys has an element that's an explicit null")
    return PathElement.of_value(item)


def _item_element(node: ListNode, item: Any) -> PathElement | None:
    try:
        return list_item_element(node, item)
    except StructureError:
        return None


# ----------------------------------------------------------------------------- validation


def validate(node: Node, value: Any) -> list[str]:
    """Upstream's errors for a value that does not fit the schema: `<path>: <message>`."""
    return [f"{path}: {message}" if path else message for path, message in _validate(node, value)]


def validation_message(errors: list[str]) -> str:
    """ValidationErrors.Error()."""
    if len(errors) == 1:
        return errors[0]
    return "\n".join(["errors:", *(f"  {error}" for error in errors)])


def _validate(node: Node, value: Any) -> list[tuple[str, str]]:
    if isinstance(node, AnyNode) or value is None:
        return []
    if isinstance(node, ScalarNode):
        return _scalar_errors(node, value)
    if isinstance(node, ListNode):
        if not isinstance(value, list):
            return [("", f"expected list, got {_shown(value)}")]
        errs: list[tuple[str, str]] = []
        seen: set[PathElement] = set()
        for index, item in enumerate(value):
            if node.atomic:
                pe = PathElement.at(index)
            else:
                try:
                    pe = list_item_element(node, item)
                except StructureError as exc:
                    errs.append(("", f"element {index}: {exc}"))
                    return errs
                if pe in seen:
                    errs.append(("", f"duplicate entries for key {pe}"))
                seen.add(pe)
            errs += [(str(pe) + path, message) for path, message in _validate(node.element, item)]
        return errs
    if not isinstance(value, dict):
        return [("", f"expected map, got {_shown(value)}")]
    errs = []
    for key, item in value.items():
        child = _child(node, key)
        if child is None:
            errs.append((f".{key}", "field not declared in schema"))
            break
        errs += [(f".{key}{path}", message) for path, message in _validate(child, item)]
    return errs


def _scalar_errors(node: ScalarNode, value: Any) -> list[tuple[str, str]]:
    if node.type == "string" and not isinstance(value, str):
        return [("", f"expected string, got &value.valueUnstructured{{Value:{gofmt.go_sharp_v(value)}}}")]
    if node.type == "numeric" and (isinstance(value, bool) or not isinstance(value, int | float)):
        return [("", f"expected numeric (int or float), got {gofmt.go_type(value)}")]
    if node.type == "boolean" and not isinstance(value, bool):
        return [("", f"expected boolean, got {_shown(value)}")]
    return []


# ----------------------------------------------------------------------------- field sets


def to_field_set(node: Node, value: Any) -> FieldSet:
    """The fields `value` sets: its leaves, atomic values whole, the items of associative lists."""
    out = FieldSet()
    _to_field_set(node, value, (), out)
    return out


def _to_field_set(node: Node | None, value: Any, path: Path, out: FieldSet) -> None:
    if node is None or isinstance(node, ScalarNode | AnyNode):
        out.insert(path)
        return
    if isinstance(node, ListNode):
        if node.atomic:
            out.insert(path)
            return
        if not isinstance(value, list):
            return
        seen: set[PathElement] = set()
        duplicates: set[PathElement] = set()
        elements = [_item_element(node, item) for item in value]
        for pe in elements:
            if pe is None:
                continue
            if pe in seen:
                if pe not in duplicates:
                    out.insert((*path, pe))
                    duplicates.add(pe)
            else:
                seen.add(pe)
        for pe, item in zip(elements, value, strict=True):
            if pe is None or pe in duplicates:
                continue
            _to_field_set(node.element, item, (*path, pe), out)
            out.insert((*path, pe))
        return
    if node.atomic:
        out.insert(path)
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        child_path = (*path, PathElement.field(key))
        _to_field_set(_child(node, key), item, child_path, out)
        if item is None or (isinstance(item, dict) and not item) or key not in node.fields:
            out.insert(child_path)


def ensure_named_fields_are_members(fields: FieldSet, node: Node | None) -> FieldSet:
    """`fields` with every struct field that has something under it also counted as a member."""
    out = FieldSet()
    out.members = set(fields.members)
    for pe, child in fields.children.items():
        child_node: Node | None = None
        if pe.is_field and isinstance(node, MapNode):
            assert pe.name is not None
            if pe.name in node.fields:
                out.members.add(pe)
            child_node = _child(node, pe.name)
        elif pe.is_key and isinstance(node, ListNode):
            child_node = node.element
        out.children[pe] = ensure_named_fields_are_members(child, child_node)
    return out


# ----------------------------------------------------------------------------- comparison


@dataclass
class Comparison:
    removed: FieldSet = field(default_factory=FieldSet)
    modified: FieldSet = field(default_factory=FieldSet)
    added: FieldSet = field(default_factory=FieldSet)

    def is_same(self) -> bool:
        return self.removed.empty() and self.modified.empty() and self.added.empty()


def compare(node: Node, lhs: Any, rhs: Any) -> Comparison:
    """The fields `rhs` adds, modifies and removes relative to `lhs`."""
    out = Comparison()
    _compare(node, lhs, rhs, (), out)
    return out


def _compare(node: Node | None, lhs: Any, rhs: Any, path: Path, out: Comparison) -> None:
    leaf = False
    if node is None or isinstance(node, ScalarNode | AnyNode):
        leaf = True
    elif isinstance(node, ListNode):
        left = lhs if isinstance(lhs, list) else None
        right = rhs if isinstance(rhs, list) else None
        if node.atomic or (not left and not right):
            leaf = True
        elif left is not None or right is not None:
            _compare_list_items(node, left or [], right or [], path, out)
    else:
        left_map = lhs if isinstance(lhs, dict) else None
        right_map = rhs if isinstance(rhs, dict) else None
        if node.atomic or (not left_map and not right_map):
            leaf = True
        elif left_map is not None or right_map is not None:
            left_map, right_map = left_map or {}, right_map or {}
            for key in [*left_map, *(k for k in right_map if k not in left_map)]:
                _compare(
                    _child(node, key),
                    left_map.get(key, MISSING),
                    right_map.get(key, MISSING),
                    (*path, PathElement.field(key)),
                    out,
                )
    if leaf:
        if lhs is MISSING:
            out.added.insert(path)
        elif rhs is MISSING:
            out.removed.insert(path)
        elif not values_equal(lhs, rhs):
            out.modified.insert(path)
        return
    if lhs is MISSING:
        out.added.insert(path)
    elif rhs is MISSING:
        out.removed.insert(path)


def _compare_list_items(node: ListNode, lhs: list[Any], rhs: list[Any], path: Path, out: Comparison) -> None:
    order: list[PathElement] = []
    left: dict[PathElement, list[Any]] = {}
    right: dict[PathElement, list[Any]] = {}
    for item in lhs:
        pe = _item_element(node, item)
        if pe is None:
            continue
        if pe not in left:
            order.append(pe)
        left.setdefault(pe, []).append(item)
    for item in rhs:
        pe = _item_element(node, item)
        if pe is None:
            continue
        if pe not in right and pe not in left:
            order.append(pe)
        right.setdefault(pe, []).append(item)
    for pe in order:
        lefts, rights = left.get(pe, []), right.get(pe, [])
        item_path = (*path, pe)
        if len(lefts) <= 1 and len(rights) <= 1:
            _compare(
                node.element,
                lefts[0] if lefts else MISSING,
                rights[0] if rights else MISSING,
                item_path,
                out,
            )
        elif len(lefts) >= 2 and len(rights) >= 2:
            if not values_equal(lefts, rights):
                out.modified.insert(item_path)
        elif len(lefts) >= 2:
            if rights:
                _compare(node.element, MISSING, rights[0], item_path, out)
            out.removed.insert(item_path)
        else:
            if lefts:
                _compare(node.element, lefts[0], MISSING, item_path, out)
            out.added.insert(item_path)


# ----------------------------------------------------------------------------- merge


def merge(node: Node, lhs: Any, rhs: Any) -> Any:
    """`rhs` (a partially specified object) merged over `lhs`: leaves and atomic values from `rhs`
    where it sets them, granular maps merged key by key, associative lists item by item (in
    `rhs`'s order where it names items, `lhs`'s order elsewhere). StructureError on an invalid
    associative list."""
    return _merge(node, lhs, rhs)


def _keep_rhs(lhs: Any, rhs: Any) -> Any:
    return rhs if rhs is not MISSING else lhs


def _merge(node: Node | None, lhs: Any, rhs: Any) -> Any:
    if node is None or isinstance(node, ScalarNode | AnyNode):
        return _keep_rhs(lhs, rhs)
    if isinstance(node, ListNode):
        left = lhs if isinstance(lhs, list) else None
        right = rhs if isinstance(rhs, list) else None
        if node.atomic or (not left and not right):
            return _keep_rhs(lhs, rhs)
        if left is None and right is None:
            return MISSING
        items = _merge_list_items(node, left or [], right or [])
        return items if items else MISSING
    left_map = lhs if isinstance(lhs, dict) else None
    right_map = rhs if isinstance(rhs, dict) else None
    if node.atomic or (not left_map and not right_map):
        return _keep_rhs(lhs, rhs)
    if left_map is None and right_map is None:
        return MISSING
    left_map, right_map = left_map or {}, right_map or {}
    merged: dict[str, Any] = {}
    for key in [*left_map, *(k for k in right_map if k not in left_map)]:
        value = _merge(_child(node, key), left_map.get(key, MISSING), right_map.get(key, MISSING))
        if value is not MISSING:
            merged[key] = value
    return merged if merged else MISSING


def _index_items(
    node: ListNode, items: list[Any], allow_duplicates: bool
) -> tuple[list[PathElement], dict[PathElement, Any], list[str]]:
    errs: list[str] = []
    observed: dict[PathElement, Any] = {}
    elements: list[PathElement] = []
    for index, item in enumerate(items):
        try:
            pe = list_item_element(node, item)
        except StructureError as exc:
            errs.append(f"element {index}: {exc}")
            continue
        if pe in observed:
            if not allow_duplicates:
                errs.append(f"duplicate entries for key {pe}")
                continue
            observed[pe] = None
        else:
            observed[pe] = item
        elements.append(pe)
    return elements, observed, errs


def _merge_list_items(node: ListNode, lhs: list[Any], rhs: list[Any]) -> list[Any]:
    rhs_elements, observed_rhs, errs = _index_items(node, rhs, allow_duplicates=False)
    lhs_elements, observed_lhs, lhs_errs = _index_items(node, lhs, allow_duplicates=True)
    if errs or lhs_errs:
        raise StructureError(validation_message(errs + lhs_errs))
    # The items both sides name, in rhs's order: each is placed where rhs places it.
    shared = [pe for pe in rhs_elements if pe in observed_lhs]
    next_shared = shared.pop(0) if shared else None
    merged_rhs: set[PathElement] = set()
    out: list[Any] = []

    def add(value: Any) -> None:
        if value is not MISSING:
            out.append(value)

    li = ri = 0
    while li < len(lhs_elements) or ri < len(rhs_elements):
        if li < len(lhs_elements) and ri < len(rhs_elements):
            pe = lhs_elements[li]
            if pe == rhs_elements[ri]:
                merged_rhs.add(pe)
                add(_merge(node.element, observed_lhs[pe], observed_rhs[pe]))
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in observed_rhs and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lhs_elements):
            pe = lhs_elements[li]
            if pe not in observed_rhs:
                add(_merge(node.element, lhs[li], MISSING))
                li += 1
                continue
            if pe in merged_rhs:
                li += 1
        if ri < len(rhs_elements):
            pe = rhs_elements[ri]
            merged_rhs.add(pe)
            add(_merge(node.element, observed_lhs.get(pe, MISSING), observed_rhs[pe]))
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


# ----------------------------------------------------------------------------- removal


def remove_items(node: Node, value: Any, fields: FieldSet) -> Any:
    """`value` without the fields and list items in `fields` (a map or list left empty becomes
    null, as upstream leaves it)."""
    if isinstance(node, ScalarNode | AnyNode):
        return value
    if isinstance(node, ListNode):
        if not isinstance(value, list) or not value or node.atomic:
            return None
        items: list[Any] = []
        for item in value:
            pe = _item_element(node, item)
            if pe is not None:
                if fields.has((pe,)):
                    continue
                below = fields.with_prefix(pe)
                if not below.empty():
                    item = remove_items(node.element, item, below)
            items.append(item)
        return items if items else None
    if not isinstance(value, dict) or not value or node.atomic:
        return None
    kept: dict[str, Any] = {}
    for key, item in value.items():
        pe = PathElement.field(key)
        if fields.has((pe,)):
            continue
        below = fields.with_prefix(pe)
        child = _child(node, key)
        if not below.empty() and child is not None:
            item = remove_items(child, item, below)
        kept[key] = item
    return kept if kept else None
