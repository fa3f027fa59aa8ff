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
    if node is None or isinstance(node, ScalarNode | AnyNode) or node.atomic:
        out.insert(path)
    elif isinstance(node, ListNode):
        if isinstance(value, list):
            _list_to_field_set(node, value, path, out)
    elif isinstance(value, dict):
        for key, item in value.items():
            child_path = (*path, PathElement.field(key))
            _to_field_set(_child(node, key), item, child_path, out)
            if item is None or (isinstance(item, dict) and not item) or key not in node.fields:
                out.insert(child_path)


def _list_to_field_set(node: ListNode, value: list[Any], path: Path, out: FieldSet) -> None:
    """The items of an associative list: an item named twice is set whole, once, and nothing below."""
    elements = [_item_element(node, item) for item in value]
    seen: set[PathElement] = set()
    duplicates: set[PathElement] = set()
    for pe in elements:
        if pe is None:
            continue
        if pe not in seen:
            seen.add(pe)
        elif pe not in duplicates:
            out.insert((*path, pe))
            duplicates.add(pe)
    for pe, item in zip(elements, value, strict=True):
        if pe is None or pe in duplicates:
            continue
        _to_field_set(node.element, item, (*path, pe), out)
        out.insert((*path, pe))


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
    if node is None or isinstance(node, ScalarNode | AnyNode):
        leaf = True
    elif isinstance(node, ListNode):
        leaf = _compare_list(node, lhs, rhs, path, out)
    else:
        leaf = _compare_map(node, lhs, rhs, path, out)
    if leaf and lhs is not MISSING and rhs is not MISSING:
        if not values_equal(lhs, rhs):
            out.modified.insert(path)
    elif lhs is MISSING:
        out.added.insert(path)
    elif rhs is MISSING:
        out.removed.insert(path)


def _compare_list(node: ListNode, lhs: Any, rhs: Any, path: Path, out: Comparison) -> bool:
    """Compares two lists item by item; True where they compare as one value instead."""
    left = lhs if isinstance(lhs, list) else None
    right = rhs if isinstance(rhs, list) else None
    if node.atomic or (not left and not right):
        return True
    _compare_list_items(node, left or [], right or [], path, out)
    return False


def _compare_map(node: MapNode, lhs: Any, rhs: Any, path: Path, out: Comparison) -> bool:
    """Compares two maps key by key; True where they compare as one value instead."""
    left = lhs if isinstance(lhs, dict) else None
    right = rhs if isinstance(rhs, dict) else None
    if node.atomic or (not left and not right):
        return True
    left, right = left or {}, right or {}
    for key in [*left, *(k for k in right if k not in left)]:
        child_path = (*path, PathElement.field(key))
        _compare(_child(node, key), left.get(key, MISSING), right.get(key, MISSING), child_path, out)
    return False


def _compare_list_items(node: ListNode, lhs: list[Any], rhs: list[Any], path: Path, out: Comparison) -> None:
    order: list[PathElement] = []
    left: dict[PathElement, list[Any]] = {}
    right: dict[PathElement, list[Any]] = {}
    for items, named, other in ((lhs, left, None), (rhs, right, left)):
        for item in items:
            pe = _item_element(node, item)
            if pe is None:
                continue
            if pe not in named and (other is None or pe not in other):
                order.append(pe)
            named.setdefault(pe, []).append(item)
    for pe in order:
        _compare_item(node, left.get(pe, []), right.get(pe, []), (*path, pe), out)


def _compare_item(node: ListNode, lefts: list[Any], rights: list[Any], path: Path, out: Comparison) -> None:
    """One item of an associative list, which either side may name more than once."""
    if len(lefts) <= 1 and len(rights) <= 1:
        left = lefts[0] if lefts else MISSING
        _compare(node.element, left, rights[0] if rights else MISSING, path, out)
    elif len(lefts) >= 2 and len(rights) >= 2:
        if not values_equal(lefts, rights):
            out.modified.insert(path)
    elif len(lefts) >= 2:
        if rights:
            _compare(node.element, MISSING, rights[0], path, out)
        out.removed.insert(path)
    else:
        if lefts:
            _compare(node.element, lefts[0], MISSING, path, out)
        out.added.insert(path)


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
    return _ListItemsMerge(node, lhs, rhs).run()


class _ListItemsMerge:
    """The items of two associative lists merged in upstream's order: one walk over both lists at
    once, `li` and `ri` the positions reached in each."""

    def __init__(self, node: ListNode, lhs: list[Any], rhs: list[Any]) -> None:
        self.node = node
        self.lhs = lhs
        self.rhs_elements, self.observed_rhs, errs = _index_items(node, rhs, allow_duplicates=False)
        self.lhs_elements, self.observed_lhs, lhs_errs = _index_items(node, lhs, allow_duplicates=True)
        if errs or lhs_errs:
            raise StructureError(validation_message(errs + lhs_errs))
        # The items both sides name, in rhs's order: each is placed where rhs places it.
        self.shared = [pe for pe in self.rhs_elements if pe in self.observed_lhs]
        self.next_shared = self._pop_shared()
        self.merged_rhs: set[PathElement] = set()
        self.out: list[Any] = []
        self.li = self.ri = 0

    def run(self) -> list[Any]:
        while self.li < len(self.lhs_elements) or self.ri < len(self.rhs_elements):
            if self.li < len(self.lhs_elements) and self.ri < len(self.rhs_elements) and self._both():
                continue
            if self.li < len(self.lhs_elements) and self._lhs_only():
                continue
            if self.ri < len(self.rhs_elements):
                self._rhs()
        return self.out

    def _pop_shared(self) -> PathElement | None:
        return self.shared.pop(0) if self.shared else None

    def _add(self, value: Any) -> None:
        if value is not MISSING:
            self.out.append(value)

    def _both(self) -> bool:
        """Both lists have items left: True once this step is done."""
        pe = self.lhs_elements[self.li]
        if pe == self.rhs_elements[self.ri]:
            self.merged_rhs.add(pe)
            self._add(_merge(self.node.element, self.observed_lhs[pe], self.observed_rhs[pe]))
            self.li += 1
            self.ri += 1
            self.next_shared = self._pop_shared()
            return True
        if pe in self.observed_rhs and self.next_shared is not None and self.next_shared != pe:
            # rhs places this item later: it is merged there.
            self.li += 1
            return True
        return False

    def _lhs_only(self) -> bool:
        """An item of lhs that rhs does not name stays where it is: True once it is added."""
        pe = self.lhs_elements[self.li]
        if pe not in self.observed_rhs:
            self._add(_merge(self.node.element, self.lhs[self.li], MISSING))
            self.li += 1
            return True
        if pe in self.merged_rhs:
            self.li += 1
        return False

    def _rhs(self) -> None:
        pe = self.rhs_elements[self.ri]
        self.merged_rhs.add(pe)
        self._add(_merge(self.node.element, self.observed_lhs.get(pe, MISSING), self.observed_rhs[pe]))
        self.ri += 1
        if self.next_shared is not None and self.next_shared == pe:
            self.next_shared = self._pop_shared()


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
