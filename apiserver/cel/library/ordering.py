"""isGreaterThan, isLessThan and compareTo, which the quantity and semver libraries both declare.

cel-expr-python takes one declaration a name and chooses a Python function by the kind of its
arguments (a message), not their type: both types' overloads are declared for the checker, and one
function serves them, comparing as the arguments' type compares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library import quantity, semver
from apiserver.cel.library.types import QUANTITY, SEMVER_TYPE, Quantity, Semver

T = cel.Type
_COMPARISONS: dict[type, Callable[[Any, Any], int]] = {
    Quantity: quantity.compare,
    Semver: semver.compare,
}


def _compare(left: Any, right: Any) -> int:
    if type(left) is not type(right) or type(left) not in _COMPARISONS:
        raise ValueError("no such overload")
    return _COMPARISONS[type(left)](left, right)


def _declare(name: str, returns: Any, impl: Callable[[Any, Any], Any]) -> Any:
    overloads = [
        cel.Overload(f"quantity_{name}", returns, [QUANTITY, QUANTITY], is_member=True, impl=impl),
        cel.Overload(f"semver_{name}", returns, [SEMVER_TYPE, SEMVER_TYPE], is_member=True),
    ]
    return cel.FunctionDecl(name, overloads)


FUNCTIONS = (
    _declare("isGreaterThan", T.BOOL, lambda a, b: _compare(a, b) > 0),
    _declare("isLessThan", T.BOOL, lambda a, b: _compare(a, b) < 0),
    _declare("compareTo", T.INT, _compare),
)
