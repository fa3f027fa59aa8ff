"""Field paths, field sets and their FieldsV1 wire form, as sigs.k8s.io/structured-merge-diff defines
them (its `fieldpath` package).

A `PathElement` is one step into an object: a field name (`f:name`), the key fields of an item of a
keyed list (`k:{"uid":"..."}`), the value of an item of a set list (`v:"value"`) or a list index
(`i:0`). A `FieldSet` is a tree of them: its members are the paths it holds, its children the
subtrees under a step. In FieldsV1 a member that also has children is written as the child with a
`".": {}` entry ("the item itself").

Path elements are totally ordered as upstream orders them (field names before keys before values
before indexes; names and strings byte-wise, numbers numerically), which is the order FieldsV1 is
written in, so that encoding is deterministic and equal to upstream's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from apiserver.machinery.gofmt import go_json
from apiserver.machinery.types import JSON

_FIELD, _KEY, _VALUE, _INDEX = 0, 1, 2, 3


class FieldsV1Error(ValueError):
    """A FieldsV1 document that cannot be read."""


def value_order(value: Any) -> tuple[Any, ...]:
    """A sort key giving JSON values upstream's total order: numbers (ints and floats compared as
    numbers), then strings, booleans, lists, maps, and null last."""
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, int | float):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, list):
        return (3, tuple(value_order(item) for item in value))
    if isinstance(value, dict):
        return (4, tuple((key, value_order(value[key])) for key in sorted(value)))
    return (5,)


def values_equal(a: Any, b: Any) -> bool:
    """Upstream's value equality: ints and floats compare as numbers, booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _go_to_string(value: Any) -> str:
    """value.ToString: how a key or set value is shown in a path."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_go_to_string(item) for item in value) + "]"
    if isinstance(value, dict):
        return "".join(f"{key}={_go_to_string(item)}" for key, item in value.items())
    return str(value)


class PathElement:
    """One step of a path. Equality, hashing and order follow upstream's `PathElement.Compare`."""

    __slots__ = ("_order", "index", "key", "name", "value")

    def __init__(
        self,
        *,
        name: str | None = None,
        key: tuple[tuple[str, Any], ...] | None = None,
        value: Any = None,
        is_value: bool = False,
        index: int | None = None,
    ) -> None:
        self.name = name
        self.key = key
        self.value = value
        self.index = index
        if name is not None:
            self._order: tuple[Any, ...] = (_FIELD, name)
        elif key is not None:
            self._order = (_KEY, tuple((k, value_order(v)) for k, v in key))
        elif is_value:
            self._order = (_VALUE, value_order(value))
        elif index is not None:
            self._order = (_INDEX, index)
        else:
            raise ValueError("a path element needs a name, a key, a value or an index")

    @classmethod
    def field(cls, name: str) -> PathElement:
        return cls(name=name)

    @classmethod
    def keyed(cls, fields: dict[str, Any]) -> PathElement:
        return cls(key=tuple(sorted(fields.items(), key=lambda item: item[0])))

    @classmethod
    def of_value(cls, value: Any) -> PathElement:
        return cls(value=value, is_value=True)

    @classmethod
    def at(cls, index: int) -> PathElement:
        return cls(index=index)

    @property
    def is_field(self) -> bool:
        return bool(self._order[0] == _FIELD)

    @property
    def is_key(self) -> bool:
        return bool(self._order[0] == _KEY)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PathElement) and self._order == other._order

    def __hash__(self) -> int:
        return hash(self._order)

    def __lt__(self, other: PathElement) -> bool:
        return self._order < other._order

    def __repr__(self) -> str:
        return f"PathElement({self.serialize()})"

    def __str__(self) -> str:
        """As upstream prints it in conflicts and errors: `.name`, `[uid="x"]`, `[="v"]`, `[0]`."""
        kind = self._order[0]
        if kind == _FIELD:
            return f".{self.name}"
        if kind == _KEY:
            assert self.key is not None
            return "[" + ",".join(f"{k}={_go_to_string(v)}" for k, v in self.key) + "]"
        if kind == _VALUE:
            return f"[={_go_to_string(self.value)}]"
        return f"[{self.index}]"

    def serialize(self) -> str:
        """The FieldsV1 key of this element."""
        kind = self._order[0]
        if kind == _FIELD:
            return f"f:{self.name}"
        if kind == _KEY:
            assert self.key is not None
            return "k:{" + ",".join(f"{go_json(k)}:{go_json(v)}" for k, v in self.key) + "}"
        if kind == _VALUE:
            return "v:" + go_json(self.value)
        return f"i:{self.index}"

    @classmethod
    def deserialize(cls, text: str) -> PathElement | None:
        """The element a FieldsV1 key names; None for a kind of element this version does not know
        (upstream drops those); FieldsV1Error if malformed."""
        if len(text) < 2:
            raise FieldsV1Error("key must be 2 characters long:")
        if text[1] != ":":
            raise FieldsV1Error(f"missing colon: {text}")
        kind, body = text[0], text[2:]
        if kind == "f":
            return cls.field(body)
        if kind == "v":
            return cls.of_value(_parse_json(body))
        if kind == "k":
            fields = _parse_json(body)
            if not isinstance(fields, dict):
                raise FieldsV1Error(f"expected an object in {text}")
            return cls.keyed(fields)
        if kind == "i":
            try:
                return cls.at(int(body, 10))
            except ValueError:
                raise FieldsV1Error(f'strconv.Atoi: parsing "{body}": invalid syntax') from None
        return None


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise FieldsV1Error(str(exc)) from None


Path = tuple[PathElement, ...]


def path_string(path: Path) -> str:
    return "".join(str(pe) for pe in path)


class FieldSet:
    """A set of field paths, held as a tree. Empty subtrees are never kept."""

    __slots__ = ("children", "members")

    def __init__(self, paths: Iterator[Path] | list[Path] | tuple[Path, ...] = ()) -> None:
        self.members: set[PathElement] = set()
        self.children: dict[PathElement, FieldSet] = {}
        for path in paths:
            self.insert(path)

    # ------------------------------------------------------------------ building and reading

    def insert(self, path: Path) -> None:
        if not path:
            return
        node = self
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = FieldSet()
            node = child
        node.members.add(path[-1])

    def has(self, path: Path) -> bool:
        if not path:
            return False
        node: FieldSet | None = self
        for pe in path[:-1]:
            assert node is not None
            node = node.children.get(pe)
            if node is None:
                return False
        assert node is not None
        return path[-1] in node.members

    def with_prefix(self, pe: PathElement) -> FieldSet:
        """The subtree under `pe` (empty when there is none)."""
        return self.children.get(pe) or FieldSet()

    def empty(self) -> bool:
        return not self.members and not self.children

    def copy(self) -> FieldSet:
        out = FieldSet()
        out.members = set(self.members)
        out.children = {pe: child.copy() for pe, child in self.children.items()}
        return out

    def paths(self, prefix: Path = ()) -> Iterator[Path]:
        """Every path, in upstream's iteration order: this level's members, then each child's."""
        for pe in sorted(self.members):
            yield (*prefix, pe)
        for pe in sorted(self.children):
            yield from self.children[pe].paths((*prefix, pe))

    def __iter__(self) -> Iterator[Path]:
        return self.paths()

    def __len__(self) -> int:
        return len(self.members) + sum(len(child) for child in self.children.values())

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FieldSet) and self.members == other.members and self.children == other.children
        )

    def __repr__(self) -> str:
        return f"FieldSet({[path_string(p) for p in self]})"

    # ------------------------------------------------------------------ set algebra

    def union(self, other: FieldSet) -> FieldSet:
        out = FieldSet()
        out.members = self.members | other.members
        for pe in self.children.keys() | other.children.keys():
            mine, theirs = self.children.get(pe), other.children.get(pe)
            if mine is not None and theirs is not None:
                out.children[pe] = mine.union(theirs)
            else:
                out.children[pe] = (mine or theirs or FieldSet()).copy()
        return out

    def intersection(self, other: FieldSet) -> FieldSet:
        out = FieldSet()
        out.members = self.members & other.members
        for pe in self.children.keys() & other.children.keys():
            both = self.children[pe].intersection(other.children[pe])
            if not both.empty():
                out.children[pe] = both
        return out

    def difference(self, other: FieldSet) -> FieldSet:
        """The paths of this set that `other` does not hold (a member of `other` does not remove
        the paths below it)."""
        out = FieldSet()
        out.members = self.members - other.members
        for pe, child in self.children.items():
            theirs = other.children.get(pe)
            rest = child.copy() if theirs is None else child.difference(theirs)
            if not rest.empty():
                out.children[pe] = rest
        return out

    # ------------------------------------------------------------------ FieldsV1

    def to_fields_v1(self) -> JSON:
        """The FieldsV1 document of this set, keys in upstream's order."""
        return self._emit(include_self=False)

    def _emit(self, *, include_self: bool) -> JSON:
        out: JSON = {}
        if include_self and not self.empty():
            out["."] = {}
        for pe in sorted(self.members | self.children.keys()):
            child = self.children.get(pe)
            if child is None:
                out[pe.serialize()] = {}
            else:
                out[pe.serialize()] = child._emit(include_self=pe in self.members)
        return out

    @classmethod
    def from_fields_v1(cls, document: Any) -> FieldSet:
        """Reads a FieldsV1 document; FieldsV1Error if it is not one."""
        if not isinstance(document, dict):
            raise FieldsV1Error("FieldsV1 must be a JSON object")
        children, _ = cls._read(document)
        return children if children is not None else FieldSet()

    @classmethod
    def _read(cls, document: JSON) -> tuple[FieldSet | None, bool]:
        children: FieldSet | None = None
        is_member = False
        for key, value in document.items():
            if key == ".":
                is_member = True
                continue
            pe = PathElement.deserialize(key)
            if pe is None:
                continue
            if not isinstance(value, dict):
                raise FieldsV1Error(f"expected an object under {key!r}")
            grandchildren, child_is_member = cls._read(value)
            if children is None:
                children = FieldSet()
            if child_is_member:
                children.members.add(pe)
            if grandchildren is not None and not grandchildren.empty():
                existing = children.children.get(pe)
                children.children[pe] = grandchildren if existing is None else existing.union(grandchildren)
        if children is None:
            is_member = True
        return children, is_member
