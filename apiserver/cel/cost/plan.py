"""The checked tree planned as cel-go v0.23.2's planner plans it (interpreter/planner.go), with
Kubernetes' options (OptOptimize, cost tracking), then compiled into closures.

What the plan decides is what costs: selections and indexes folded into attributes (attributes.py),
`&&`, `||` and `?:` free, `==` and `!=` priced by their operands, list and map literals of constants
built once (free), a type conversion of a constant computed once (free), `x in [constants]` a set
lookup (free, where a list costs its length).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.checked import (
    Call,
    Checked,
    Const,
    CreateList,
    CreateStruct,
    Ident,
    Node,
    Select,
)
from apiserver.cel.cost import calls, literals
from apiserver.cel.cost.attributes import Attribute, Qual
from apiserver.cel.cost.meter import Step
from apiserver.cel.cost.values import CelType, UInt, Unsupported

NOT_CONSTANT = object()
CONVERSIONS = frozenset(
    ("bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint")
)
_INDEXES = {"_[_]": False, "_[?_]": True, "_?._": True}


class Planned:
    """One planned node: an attribute, a constant, or a step built when compiled."""

    __slots__ = ("attr", "build", "constant")

    def __init__(
        self,
        *,
        attr: Attribute | None = None,
        constant: Any = NOT_CONSTANT,
        build: Callable[[], Step] | None = None,
    ) -> None:
        self.attr = attr
        self.constant = constant
        self.build = build

    @property
    def is_constant(self) -> bool:
        return self.constant is not NOT_CONSTANT

    def compile(self) -> Step:
        if self.attr is not None:
            return self.attr.compile()
        if self.build is not None:
            return self.build()
        value = self.constant
        return lambda _act, _m: value


def _literal(node: Const) -> Any:
    if node.kind == "uint":
        return UInt(node.value)
    if node.kind == "bytes":
        return bytes(node.value)
    return node.value


class Planner:
    """Plans one checked expression; `plan(checked.expr).compile()` is its evaluation."""

    def __init__(self, checked: Checked) -> None:
        self.checked = checked

    def plan(self, node: Node) -> Planned:
        if isinstance(node, Const):
            return Planned(constant=_literal(node))
        if isinstance(node, Ident):
            return self._ident(node.id, node.name)
        if isinstance(node, Select):
            return self._select(node)
        if isinstance(node, Call):
            return self._call(node)
        if isinstance(node, CreateList):
            return literals.plan_list(self, node)
        if isinstance(node, CreateStruct):
            return literals.plan_map(self, node)
        return literals.plan_comprehension(self, node)

    def _ident(self, node_id: int, name: str) -> Planned:
        reference = self.checked.references.get(node_id)
        if reference is not None and reference.value is not None:
            return Planned(constant=_literal(reference.value))
        if self.checked.types.get(node_id) is not None and self.checked.types[node_id].kind == "type":
            return Planned(constant=CelType(reference.name if reference else name))
        return Planned(attr=Attribute(reference.name if reference else name))

    def _select(self, node: Select) -> Planned:
        if node.id in self.checked.references:
            return self._ident(node.id, self.checked.references[node.id].name)
        attr = self.attribute_of(self.plan(node.operand))
        qual = Qual(node.field)
        if node.test_only:
            qual.test_only = True
            attr.own, attr.test_only = 0, True
        attr.add(qual)
        return Planned(attr=attr)

    def attribute_of(self, planned: Planned) -> Attribute:
        """The planned node as an attribute to qualify: itself, or one relative to its value."""
        return planned.attr if planned.attr is not None else Attribute(planned)

    def _call(self, node: Call) -> Planned:
        function = node.function
        operands = [*([node.target] if node.target is not None else []), *node.args]
        planned = [self.plan(operand) for operand in operands]
        if function in _INDEXES:
            return self._index(planned, optional=_INDEXES[function])
        if function == "_?_:_":
            return self._conditional(planned)
        if function in CONVERSIONS and node.target is None and len(planned) == 1 and planned[0].is_constant:
            return Planned(constant=calls.fold(function, planned[0].constant))
        types = [self.checked.type_of(operand) for operand in operands]
        return calls.plan_call(node, planned, types, self.checked.type_of(node))

    def _index(self, planned: list[Planned], *, optional: bool) -> Planned:
        operand, index = planned
        attr = self.attribute_of(operand)
        if index.is_constant:
            attr.add(Qual(index.constant, optional=optional))
        else:
            attr.add(Qual(None, index=self.attribute_of(index), optional=optional))
        return Planned(attr=attr)

    def _conditional(self, planned: list[Planned]) -> Planned:
        condition, truthy, falsy = planned
        branches = (self.attribute_of(truthy), self.attribute_of(falsy))
        return Planned(attr=Attribute((condition, *branches), own=0))


def plan(checked: Checked) -> Step:
    """The compiled evaluation of `checked`."""
    try:
        return Planner(checked).plan(checked.expr).compile()
    except RecursionError:
        raise Unsupported("an expression nested too deeply") from None
