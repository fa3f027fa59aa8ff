"""Calls as cel-go plans and prices them: `&&` and `||` (free, absorbing errors), `==` and `!=`,
`@not_strictly_false`, `in` over a constant list (a free set lookup), and every other function,
strict in its operands, priced by tracker.call_cost after it returns."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from apiserver.cel.checked import Call, TypeRef
from apiserver.cel.cost import bridge, functions
from apiserver.cel.cost.functions.equality import equal
from apiserver.cel.cost.functions.relations import contained
from apiserver.cel.cost.meter import Meter, Step
from apiserver.cel.cost.overloads import go_overload
from apiserver.cel.cost.tracker import STRING_TRAVERSAL, call_cost, equality_cost
from apiserver.cel.cost.values import CelError, Err, Optional, UInt, Unsupported

if TYPE_CHECKING:
    from apiserver.cel.cost.plan import Planned

Impl = Callable[..., Any]
_PRIMITIVES = (bool, int, UInt, float, str)
_RESULT_TYPES = {"google.protobuf.Timestamp": "timestamp", "google.protobuf.Duration": "duration"}
# The strings extension's format (not in cel-expr-python's).
_UNSUPPORTED = frozenset(["format"])


def implementation(function: str, member: bool, arity: int, result: TypeRef) -> Impl:
    """The function's Python implementation for `arity` operands, or a bridge to cel-expr-python."""
    tables: dict[int, dict[str, Any]] = {
        0: functions.NULLARY,
        1: functions.UNARY,
        2: functions.BINARY,
        3: functions.TERNARY,
    }
    table = tables.get(arity, {})
    if function in table:
        impl: Impl = table[function]
        return impl
    if function in _UNSUPPORTED:
        raise Unsupported(f"the function {function}")
    result_type = _RESULT_TYPES.get(result.kind, "")
    return lambda *args: bridge.call(function, member, args, result_type)


def fold(function: str, constant: Any) -> Any:
    """A type conversion of a constant, computed once when planned (free when evaluated)."""
    impl = implementation(function, False, 1, _conversion_type(function))
    try:
        return impl(constant)
    except CelError as exc:
        return Err(str(exc))


def _conversion_type(function: str) -> TypeRef:
    return TypeRef(
        {"timestamp": "google.protobuf.Timestamp", "duration": "google.protobuf.Duration"}.get(
            function, function
        )
    )


def plan_call(node: Call, planned: list[Planned], types: Sequence[TypeRef], result: TypeRef) -> Planned:
    from apiserver.cel.cost.plan import Planned

    function = node.function
    member = node.target is not None
    if function in ("_&&_", "_||_"):
        return Planned(build=lambda: _logic(function == "_&&_", planned[0].compile(), planned[1].compile()))
    if function in ("_==_", "_!=_"):
        return Planned(build=lambda: _equality(function, planned[0], planned[1]))
    if function == "@not_strictly_false":
        return Planned(build=lambda: _not_strictly_false(planned[0].compile()))
    if function in ("or", "orValue") and member and len(planned) == 2:
        return Planned(
            build=lambda: _optional_or(function == "orValue", planned[0].compile(), planned[1].compile())
        )
    overload = go_overload(function, member, types)
    if overload == "in_list" and planned[1].is_constant:
        membership = _membership(planned)
        if membership is not None:
            return membership
    impl = implementation(function, member, len(planned), result)
    return Planned(build=lambda: strict_call(function, overload, impl, [p.compile() for p in planned]))


def _membership(planned: list[Planned]) -> Planned | None:
    """`x in [constants]`: cel-go's set lookup, free (and `x in []` a constant false)."""
    from apiserver.cel.cost.plan import Planned

    items = planned[1].constant
    if not items:
        return Planned(constant=False)
    if not all(type(item) in _PRIMITIVES for item in items):
        return None

    def build() -> Step:
        operand = planned[0].compile()

        def member(act: dict[str, Any], m: Meter) -> Any:
            value = operand(act, m)
            return value if type(value) is Err else contained(value, items)

        return member

    return Planned(build=build)


def _logic(conjunction: bool, left: Step, right: Step) -> Step:
    decisive = not conjunction

    def logic(act: dict[str, Any], m: Meter) -> Any:
        first = left(act, m)
        if first is decisive:
            return decisive
        second = right(act, m)
        if second is decisive:
            return decisive
        for value in (first, second):
            if type(value) is not bool:
                return value if type(value) is Err else Err("no such overload")
        return conjunction

    return logic


def _equality(function: str, left_planned: Planned, right_planned: Planned) -> Step:
    negate = function == "_!=_"
    left = left_planned.compile()
    if right_planned.is_constant and type(right_planned.constant) is str:
        return _equality_to_string(function, left, right_planned.constant)
    right = right_planned.compile()

    def equality(act: dict[str, Any], m: Meter) -> Any:
        lhs, rhs = left(act, m), right(act, m)
        if type(lhs) is Err:
            result: Any = lhs
        elif type(rhs) is Err:
            result = rhs
        else:
            result = equal(lhs, rhs) is not negate
        m.cost += equality_cost(function, lhs, rhs, result)
        return result

    return equality


def _equality_to_string(function: str, left: Step, constant: str) -> Step:
    """`x == 'literal'`, the commonest comparison, without a step for the literal."""
    negate = function == "_!=_"

    def equality(act: dict[str, Any], m: Meter) -> Any:
        lhs = left(act, m)
        if type(lhs) is str:
            m.cost += math.ceil(min(len(lhs), len(constant)) * STRING_TRAVERSAL)
            return (lhs == constant) is not negate
        result = lhs if type(lhs) is Err else equal(lhs, constant) is not negate
        m.cost += equality_cost(function, lhs, constant, result)
        return result

    return equality


def _optional_or(unwrap: bool, left: Step, right: Step) -> Step:
    """`or` and `orValue`, which cel-go plans as free, evaluating the alternative only when needed
    (and passing a left operand that is not an optional through as it is)."""

    def optional_or(act: dict[str, Any], m: Meter) -> Any:
        value = left(act, m)
        if type(value) is not Optional:
            return value
        if value.present:
            return value.value if unwrap else value
        return right(act, m)

    return optional_or


def _not_strictly_false(operand: Step) -> Step:
    def not_strictly_false(act: dict[str, Any], m: Meter) -> Any:
        value = operand(act, m)
        m.cost += 1
        return value if type(value) is bool else True

    return not_strictly_false


def _apply(impl: Impl, args: Sequence[Any]) -> Any:
    for arg in args:
        if type(arg) is Err:
            return arg
    try:
        return impl(*args)
    except CelError as exc:
        return Err(str(exc))


def strict_call(function: str, overload: str, impl: Impl, operands: list[Step]) -> Step:
    """A call strict in its operands; with three or more, cel-go stops at the first error and then
    prices nothing (the tracker cannot find the operands it did not evaluate)."""
    if len(operands) <= 2:
        return _short_call(function, overload, impl, operands)

    def long_call(act: dict[str, Any], m: Meter) -> Any:
        args: list[Any] = []
        for operand in operands:
            value = operand(act, m)
            if type(value) is Err and len(args) < len(operands) - 1:
                return value
            args.append(value)
        result = _apply(impl, args)
        m.cost += call_cost(function, overload, args, result)
        m.check()
        return result

    return long_call


def _short_call(function: str, overload: str, impl: Impl, operands: list[Step]) -> Step:
    if len(operands) == 1:
        (only,) = operands

        def unary(act: dict[str, Any], m: Meter) -> Any:
            args = (only(act, m),)
            result = _apply(impl, args)
            m.cost += call_cost(function, overload, args, result)
            m.check()
            return result

        return unary

    def call(act: dict[str, Any], m: Meter) -> Any:
        args = tuple(operand(act, m) for operand in operands)
        result = _apply(impl, args)
        m.cost += call_cost(function, overload, args, result)
        m.check()
        return result

    return call
