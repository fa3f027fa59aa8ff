"""A checked expression rewritten for the engine where a call returns an optional built by Python.

cel-expr-python cannot take an optional from a Python function (it converts a function's result by
its declared type, and has no conversion for optionals). Such a call, `f(args)` checked against
`overload`, is rewritten to `optional.ofNonZeroValue(g(args))`, where `g` is a Python function
returning the optional's value, or the zero value of its type for none. The tree is otherwise kept,
node ids included, so the type checker's answers and error positions are the original's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from google.protobuf import any_pb2

from apiserver.cel.checked.schema import CheckedExpr

_WRAPPER = ("optional.ofNonZeroValue", "optional_ofNonZeroValue")


class Replacement(NamedTuple):
    """The Python function (its name and overload id) a checked overload is rewritten to call."""

    function: str
    overload: str


def rewrite(serialized: bytes, replacements: Mapping[str, Replacement]) -> bytes:
    """`serialized` (cel-expr-python's serialized CheckedExpr) with every call checked against an
    overload of `replacements` rewritten; unchanged when it has none."""
    if not any(overload.encode() in serialized for overload in replacements):
        return serialized
    envelope = any_pb2.Any()
    envelope.ParseFromString(serialized)
    checked = CheckedExpr()
    checked.ParseFromString(envelope.value)
    next_id = _largest_id(checked) + 1
    # Innermost first: rewriting a call copies its operands, already rewritten.
    for expr in reversed(list(_calls(checked.expr))):
        reference = checked.reference_map.get(expr.id)
        overloads = list(reference.overload_id) if reference is not None else []
        if len(overloads) == 1 and overloads[0] in replacements:
            _replace(checked, expr, next_id, replacements[overloads[0]])
            next_id += 1
    envelope.value = checked.SerializeToString()
    return bytes(envelope.SerializeToString())


def _replace(checked: Any, expr: Any, inner_id: int, replacement: Replacement) -> None:
    """`expr` becomes ofNonZeroValue(replacement(target, args...)); the inner call takes `inner_id`."""
    inner = type(expr)()
    inner.id = inner_id
    call = expr.call_expr
    inner.call_expr.function = replacement.function
    if call.HasField("target"):
        inner.call_expr.args.add().CopyFrom(call.target)
    for arg in call.args:
        inner.call_expr.args.add().CopyFrom(arg)
    expr.call_expr.Clear()
    expr.call_expr.function = _WRAPPER[0]
    expr.call_expr.args.add().CopyFrom(inner)
    checked.reference_map[expr.id].Clear()
    checked.reference_map[expr.id].overload_id.append(_WRAPPER[1])
    checked.reference_map[inner_id].overload_id.append(replacement.overload)


def _children(expr: Any) -> Iterator[Any]:
    case = expr.WhichOneof("expr_kind")
    if case == "select_expr":
        yield expr.select_expr.operand
    elif case == "call_expr":
        if expr.call_expr.HasField("target"):
            yield expr.call_expr.target
        yield from expr.call_expr.args
    elif case == "list_expr":
        yield from expr.list_expr.elements
    elif case == "struct_expr":
        for entry in expr.struct_expr.entries:
            if entry.WhichOneof("key_kind") == "map_key":
                yield entry.map_key
            yield entry.value
    elif case == "comprehension_expr":
        loop = expr.comprehension_expr
        yield from (loop.iter_range, loop.accu_init, loop.loop_condition, loop.loop_step, loop.result)


def _walk(expr: Any) -> Iterator[Any]:
    pending = [expr]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(_children(node))


def _calls(expr: Any) -> Iterator[Any]:
    return (node for node in _walk(expr) if node.WhichOneof("expr_kind") == "call_expr")


def _largest_id(checked: Any) -> int:
    largest = max((node.id for node in _walk(checked.expr)), default=0)
    for expr in _walk(checked.expr):
        if expr.WhichOneof("expr_kind") == "struct_expr":
            largest = max([largest, *(entry.id for entry in expr.struct_expr.entries)])
    return int(max([largest, *checked.reference_map.keys(), *checked.type_map.keys()]))
