"""A sound upper bound on what cel-go's runtime cost tracker counts for one evaluation, and on the
comprehension iterations it runs, computed from the checked tree and the sizes of the request's
values without evaluating anything.

It is cel-go's static estimate (checker/cost.go) with two changes: sizes are those of the actual
input (the length of `object.subjects`, the longest name among its elements) where the estimator
has only declared types, and each node is charged as the runtime tracker charges it
(interpreter/runtimecost.go: one a qualifier of a select or index, nothing for `&&`, `||` and `?:`,
has() free as in Kubernetes). Where the bound is at most what remains of the budget, upstream
would not have cancelled the evaluation, so a faster engine may run it; where it is UNBOUNDED (an
unmodelled function, a size no input bounds) only an exact count can tell.

    summary = SizeSummary.of(activation)  # once per request
    bound = cost_bound(checked, summary)  # per expression
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.cel.checked import (
    Call,
    Checked,
    Comprehension,
    Const,
    CreateList,
    CreateStruct,
    Entry,
    Ident,
    Node,
    Select,
)
from apiserver.cel.cost.charges import charge
from apiserver.cel.cost.sizes import (
    SCALAR,
    TOP,
    UNBOUNDED,
    Shape,
    Sized,
    SizeSummary,
    union,
    union_all,
)

# cel-go's base costs of building a list, a map and a message.
LIST_COST = 10
MAP_COST = 30
MESSAGE_COST = 40

# (cost, iterations, shape of the value) of one node.
Estimate = tuple[int, int, Shape]

_INDEXES = frozenset(("_[_]", "_[?_]", "_?._"))


@dataclass(frozen=True, slots=True)
class Bound:
    """At least what upstream counts: `cost` in its units, `iterations` of comprehensions in all."""

    cost: int
    iterations: int

    @property
    def bounded(self) -> bool:
        return self.cost < UNBOUNDED and self.iterations < UNBOUNDED


def cost_bound(checked: Checked, activation: SizeSummary | Mapping[str, Any]) -> Bound:
    """The bound of evaluating `checked` over `activation` (the variables' values, or their
    SizeSummary shared by the expressions of one request)."""
    summary = activation if isinstance(activation, SizeSummary) else SizeSummary(activation)
    cost, iterations, _ = _Walk(checked, summary).node(checked.expr)
    return Bound(min(cost, UNBOUNDED), min(iterations, UNBOUNDED))


def _is_attribute(node: Node) -> bool:
    """Whether cel-go plans `node` as an attribute, which a select or index extends with one more
    qualifier; anything else it wraps in a relative attribute first, charged 1."""
    if isinstance(node, Ident):
        return True
    if isinstance(node, Select):
        return not node.test_only
    return isinstance(node, Call) and node.function in _INDEXES


def _constant(node: Node) -> bool:
    """Whether cel-go's optimizer folds `node` to a constant (a literal, a list or map of them)."""
    if isinstance(node, Const):
        return True
    if isinstance(node, CreateList):
        return not node.optional_indices and all(_constant(element) for element in node.elements)
    if isinstance(node, CreateStruct) and not node.message_name:
        return all(_constant_entry(entry) for entry in node.entries)
    return False


def _constant_entry(entry: Entry) -> bool:
    if entry.optional or isinstance(entry.key, str):
        return False
    return _constant(entry.key) and _constant(entry.value)


def _literal(node: Const) -> Shape:
    if isinstance(node.value, str | bytes):
        return _text(len(node.value))
    return SCALAR


@functools.lru_cache(maxsize=256)
def _text(length: int) -> Shape:
    return Sized(length)


class _Walk:
    """One walk of a checked tree over one request's shapes."""

    __slots__ = ("checked", "locals", "summary")

    def __init__(self, checked: Checked, summary: SizeSummary) -> None:
        self.checked = checked
        self.summary = summary
        self.locals: dict[str, list[Shape]] = {}

    def node(self, node: Node) -> Estimate:
        return _KINDS[type(node)](self, node)

    def const(self, node: Const) -> Estimate:
        return 0, 0, _literal(node)

    def ident(self, node: Ident) -> Estimate:
        scoped = self.locals.get(node.name)
        if scoped:
            return 1, 0, scoped[-1]
        return 1, 0, self.summary.variable(node.name)

    def select(self, node: Select) -> Estimate:
        cost, iterations, shape = self.node(node.operand)
        if not _is_attribute(node.operand):
            cost += 1
        if node.test_only:
            return cost, iterations, SCALAR
        return cost + 1, iterations, shape.field(node.field)

    def create_list(self, node: CreateList) -> Estimate:
        estimates = [self.node(element) for element in node.elements]
        cost = 0 if _constant(node) else LIST_COST
        items = union_all([shape for _, _, shape in estimates])
        return _sum(estimates, cost), _iterations(estimates), Sized(len(node.elements), items)

    def create_struct(self, node: CreateStruct) -> Estimate:
        estimates: list[Estimate] = []
        keys: list[Shape] = []
        values: list[Shape] = []
        fields: dict[str, Shape] = {}
        for entry in node.entries:
            value = self.node(entry.value)
            estimates.append(value)
            values.append(value[2])
            if isinstance(entry.key, str):
                fields[entry.key] = value[2]
                continue
            key = self.node(entry.key)
            estimates.append(key)
            keys.append(key[2])
            if isinstance(entry.key, Const) and isinstance(entry.key.value, str):
                fields[entry.key.value] = value[2]
        if node.message_name:
            return _sum(estimates, MESSAGE_COST), _iterations(estimates), Sized(1, value=TOP, fields=fields)
        shape = Sized(len(node.entries), union_all(keys), union_all(values), fields=fields)
        return _sum(estimates, 0 if _constant(node) else MAP_COST), _iterations(estimates), shape

    def call(self, node: Call) -> Estimate:
        special = _SPECIAL.get(node.function)
        if special is not None:
            return special(self, node)
        operands = (node.target, *node.args) if node.target is not None else node.args
        cost = iterations = 0
        shapes = []
        for operand in operands:
            estimate = _KINDS[type(operand)](self, operand)
            cost += estimate[0]
            iterations += estimate[1]
            shapes.append(estimate[2])
        own, shape = charge(node.function, self.checked.overloads(node), shapes)
        return cost + own, iterations, shape

    def logical(self, node: Call) -> Estimate:
        estimates = [self.node(arg) for arg in node.args]
        return _sum(estimates, 0), _iterations(estimates), SCALAR

    def conditional(self, node: Call) -> Estimate:
        condition, truthy, falsy = (self.node(arg) for arg in node.args)
        cost = condition[0] + max(truthy[0], falsy[0])
        # Only one branch runs in cel-go; the iterations of both are counted in case an engine
        # evaluates both.
        return cost, _iterations((condition, truthy, falsy)), union(truthy[2], falsy[2])

    def index(self, node: Call) -> Estimate:
        operand, key = node.args[0], node.args[1]
        estimates = (self.node(operand), self.node(key))
        cost = _sum(estimates, 1 if _is_attribute(operand) else 2)
        shape = estimates[0][2]
        if isinstance(key, Const) and isinstance(key.value, str):
            return cost, _iterations(estimates), shape.field(key.value)
        return cost, _iterations(estimates), shape.values()

    def comprehension(self, node: Comprehension) -> Estimate:
        over, init = self.node(node.iter_range), self.node(node.accu_init)
        if _is_bind(node):
            # cel.bind and optMap: no iteration, the accumulator evaluated once.
            result = self.scoped({node.accu_var: init[2]}, node.result)
            return over[0] + init[0] + result[0], over[1] + init[1] + result[1], result[2]
        count = over[2].size()
        names = self._iteration_variables(node, over[2])
        names[node.accu_var] = self._accumulator(node, init[2], count, names)
        condition = self.scoped(names, node.loop_condition)
        step = self.scoped(names, node.loop_step)
        result = self.scoped({node.accu_var: names[node.accu_var]}, node.result)
        cost = over[0] + init[0] + count * (condition[0] + step[0]) + result[0]
        iterations = over[1] + init[1] + count * (1 + condition[1] + step[1]) + result[1]
        return cost, iterations, result[2]

    @staticmethod
    def _iteration_variables(node: Comprehension, over: Shape) -> dict[str, Shape]:
        if not node.iter_var2:
            return {node.iter_var: over.items()}
        # Two variables: a list's index and element, or a map's key and value.
        return {node.iter_var: union(SCALAR, over.items()), node.iter_var2: over.values()}

    def _accumulator(self, node: Comprehension, init: Shape, count: int, names: dict[str, Shape]) -> Shape:
        """What the accumulator may hold: a scalar for all, exists and exists_one; for map and filter
        a list growing by the appended elements each iteration; else anything."""
        inserted = _inserted(node.loop_step, node.accu_var)
        if inserted:
            scope = {**names, node.accu_var: TOP}
            added = [self.scoped(scope, arg)[2] for arg in inserted]
            return _grown_map(init, count, added)
        appended = _appended(node.loop_step, node.accu_var)
        if appended is not None:
            scope = {**names, node.accu_var: TOP}
            elements = [self.scoped(scope, element)[2] for element in appended.elements]
            return Sized(init.size() + count * len(elements), union(init.items(), union_all(elements)))
        if isinstance(node.accu_init, Const):
            return init
        return TOP

    def scoped(self, names: Mapping[str, Shape], node: Node) -> Estimate:
        """`node` walked with local variables bound to `names`."""
        for name, shape in names.items():
            self.locals.setdefault(name, []).append(shape)
        try:
            return self.node(node)
        finally:
            for name in names:
                self.locals[name].pop()


def _is_bind(node: Comprehension) -> bool:
    over, condition = node.iter_range, node.loop_condition
    empty = isinstance(over, CreateList) and not over.elements
    return empty and isinstance(condition, Const) and condition.value is False


def _appended(step: Node, accumulator: str) -> CreateList | None:
    """The list `step` appends to the accumulator, when it is `accu + [e]` (map) or
    `c ? accu + [e] : accu` (filter, map with a filter)."""
    if isinstance(step, Call) and step.function == "_?_:_" and len(step.args) == 3:
        step = step.args[1]
    if not (isinstance(step, Call) and step.function == "_+_" and len(step.args) == 2):
        return None
    target, added = step.args
    if isinstance(target, Ident) and target.name == accumulator and isinstance(added, CreateList):
        return added
    return None


def _inserted(step: Node, accumulator: str) -> tuple[Node, ...]:
    """The key and value (or the map) `step` inserts into the accumulator, when it is
    `cel.@mapInsert(accu, ...)` or `c ? cel.@mapInsert(accu, ...) : accu` (transformMap,
    transformMapEntry)."""
    if isinstance(step, Call) and step.function == "_?_:_" and len(step.args) == 3:
        step = step.args[1]
    if not (isinstance(step, Call) and step.function == "cel.@mapInsert" and len(step.args) in (2, 3)):
        return ()
    target = step.args[0]
    return step.args[1:] if isinstance(target, Ident) and target.name == accumulator else ()


def _grown_map(init: Shape, count: int, added: list[Shape]) -> Shape:
    """A map grown by one entry an iteration, or by the entries of a map."""
    if len(added) == 2:
        key, value = added
        return Sized(init.size() + count, union(init.items(), key), union(init.values(), value))
    (entries,) = added
    if count and entries.size() >= UNBOUNDED:
        return TOP
    grown = init.size() + count * entries.size()
    return Sized(grown, union(init.items(), entries.items()), union(init.values(), entries.values()))


def _sum(estimates: Iterable[Estimate], own: int) -> int:
    return own + sum(estimate[0] for estimate in estimates)


def _iterations(estimates: Iterable[Estimate]) -> int:
    return sum(estimate[1] for estimate in estimates)


_KINDS: dict[type, Callable[[_Walk, Any], Estimate]] = {
    Const: _Walk.const,
    Ident: _Walk.ident,
    Select: _Walk.select,
    Call: _Walk.call,
    CreateList: _Walk.create_list,
    CreateStruct: _Walk.create_struct,
    Comprehension: _Walk.comprehension,
}
_SPECIAL: dict[str, Callable[[_Walk, Call], Estimate]] = {
    "_&&_": _Walk.logical,
    "_||_": _Walk.logical,
    "_?_:_": _Walk.conditional,
    **dict.fromkeys(_INDEXES, _Walk.index),
}
