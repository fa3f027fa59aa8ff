"""The nodes of a checked expression, as cel.expr's Expr, Reference and Type hold them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# A constant's kind, as cel.expr.Constant names its cases (uint and int are both Python ints).
ConstKind = str


@dataclass(frozen=True, slots=True)
class Const:
    id: int
    kind: ConstKind  # "null", "bool", "int", "uint", "double", "string" or "bytes"
    value: Any


@dataclass(frozen=True, slots=True)
class Ident:
    id: int
    name: str


@dataclass(frozen=True, slots=True)
class Select:
    id: int
    operand: Node
    field: str
    test_only: bool  # `has(operand.field)`


@dataclass(frozen=True, slots=True)
class Call:
    id: int
    function: str
    target: Node | None  # the receiver of a member call (`target.function(args)`)
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class CreateList:
    id: int
    elements: tuple[Node, ...]
    optional_indices: tuple[int, ...]  # `[?x]`: elements left out when absent


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    key: Node | str  # a map's key expression, or a message's field name
    value: Node
    optional: bool  # `{?k: v}`


@dataclass(frozen=True, slots=True)
class CreateStruct:
    id: int
    message_name: str  # empty for a map literal
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class Comprehension:
    id: int
    iter_var: str
    iter_range: Node
    accu_var: str
    accu_init: Node
    loop_condition: Node
    loop_step: Node
    result: Node
    iter_var2: str = ""


Node = Const | Ident | Select | Call | CreateList | CreateStruct | Comprehension


def walk(node: Node) -> Iterator[Node]:
    """`node` and every node under it."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(_children(current))


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Select):
        return (node.operand,)
    if isinstance(node, Call):
        return (*((node.target,) if node.target is not None else ()), *node.args)
    if isinstance(node, CreateList):
        return node.elements
    if isinstance(node, CreateStruct):
        keys = tuple(entry.key for entry in node.entries if not isinstance(entry.key, str))
        return (*keys, *(entry.value for entry in node.entries))
    if isinstance(node, Comprehension):
        parts = (node.iter_range, node.accu_init, node.loop_condition, node.loop_step, node.result)
        return parts
    return ()


@dataclass(frozen=True, slots=True)
class TypeRef:
    """A checked type, named as cel-go names it: `kind` is `int`, `string`, `list`, `map`, `dyn`,
    `null_type`, `google.protobuf.Timestamp`, a message's or abstract type's name, `type`..."""

    kind: str
    params: tuple[TypeRef, ...] = ()

    def __str__(self) -> str:
        if not self.params:
            return self.kind
        return f"{self.kind}({', '.join(str(param) for param in self.params)})"


@dataclass(frozen=True, slots=True)
class Reference:
    """What the checker resolved a node to: an identifier's name, a call's overloads, or an enum's
    constant value."""

    name: str
    overload_ids: tuple[str, ...] = ()
    value: Const | None = None


@dataclass(frozen=True, slots=True)
class Checked:
    expr: Node
    references: dict[int, Reference] = field(default_factory=dict)
    types: dict[int, TypeRef] = field(default_factory=dict)

    def type_of(self, node: Node) -> TypeRef:
        return self.types.get(node.id, DYN)

    def overloads(self, node: Node) -> tuple[str, ...]:
        reference = self.references.get(node.id)
        return reference.overload_ids if reference else ()


DYN = TypeRef("dyn")
