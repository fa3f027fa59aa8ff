"""Kubernetes' lists library: isSorted, sum, min, max. Not indexOf and lastIndexOf: the strings
extension owns those names, and cel-expr-python refuses a second declaration of a name.

cel-expr-python dispatches on the kind of an argument (a list), not its element type, so one
Python function serves each name; the other overloads are declared for the checker only, which
then refuses, as upstream's, `['a'].sum()` before any request."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from cel_expr_python import cel

T = cel.Type
# Durations and timestamps are left out of sum, min and max: a Python function declared to return
# a dynamic value cannot hand cel-expr-python a timedelta or a datetime.
_SUMMABLE = (T.INT, T.UINT, T.DOUBLE)
_ORDERED = (*_SUMMABLE, T.STRING, T.BYTES, T.BOOL)
_SORTABLE = (*_ORDERED, T.DURATION, T.TIMESTAMP)


def _kind(value: Any) -> type:
    """What CEL orders together: numbers of any kind, but never a bool with a number."""
    return float if isinstance(value, int | float) and not isinstance(value, bool) else type(value)


def _same_kind(left: Any, right: Any) -> bool:
    return _kind(left) is _kind(right)


def _ordered(items: Sequence[Any]) -> Sequence[Any]:
    if any(not _same_kind(items[0], item) for item in items):
        raise ValueError("no such overload")
    return items


def _is_sorted(items: Sequence[Any]) -> bool:
    if items:
        _ordered(items)
    return all(a <= b for a, b in itertools.pairwise(items))


def _sum(items: Sequence[Any]) -> Any:
    return sum(_ordered(items)) if items else 0


def _extreme(name: str, pick: Callable[[Sequence[Any]], Any]) -> Callable[[Sequence[Any]], Any]:
    def extreme(items: Sequence[Any]) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        return pick(_ordered(items))

    return extreme


def _declare(name: str, impl: Any, element_types: Sequence[Any], *, returns_element: bool) -> Any:
    """One overload a type, all list(type), for the checker; the first carries `impl`."""
    overloads = []
    for n, element in enumerate(element_types):
        params = [T.List(element)]
        returns = element if returns_element else T.BOOL
        implemented = {"impl": impl} if n == 0 else {}
        # The implementation's declared result is what its Python value is converted to: dynamic.
        result = T.DYN if n == 0 and returns_element else returns
        overloads.append(
            cel.Overload(
                f"list_{element.name().lower()}_{name}", result, params, is_member=True, **implemented
            )
        )
    return cel.FunctionDecl(name, overloads)


FUNCTIONS = (
    _declare("isSorted", _is_sorted, _SORTABLE, returns_element=False),
    _declare("sum", _sum, _SUMMABLE, returns_element=True),
    _declare("min", _extreme("min", min), _ORDERED, returns_element=True),
    _declare("max", _extreme("max", max), _ORDERED, returns_element=True),
)
