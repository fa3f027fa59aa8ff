"""Kubernetes' quantity library: quantity(), isQuantity() and the arithmetic and comparisons of
resource.Quantity (asInteger, asApproximateFloat, sign, isInteger, add, sub; compareTo,
isGreaterThan and isLessThan are declared in ordering.py, shared with semver)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library import amounts
from apiserver.cel.library.types import QUANTITY, Quantity

T = cel.Type


def _make(value: Fraction) -> Any:
    return Quantity(value=amounts.encode(value))


def _amount(quantity: Any) -> Fraction:
    return amounts.decode(quantity.value)


def _quantity(text: str) -> Any:
    return _make(amounts.parse_quantity(text))


def _is_quantity(text: str) -> bool:
    try:
        amounts.parse_quantity(text)
    except amounts.QuantityError:
        return False
    return True


def _as_integer(quantity: Any) -> int:
    value = _amount(quantity)
    if not _fits_int64(value):
        raise ValueError("cannot convert value to integer")
    return int(value)


def _fits_int64(value: Fraction) -> bool:
    return value.denominator == 1 and -(2**63) <= value <= amounts.MAX_INT64


def compare(left: Any, right: Any) -> int:
    """-1, 0 or 1 as `left` is less than, equal to or greater than `right`."""
    a, b = _amount(left), _amount(right)
    return (a > b) - (a < b)


def _sign(quantity: Any) -> int:
    value = _amount(quantity)
    return (value > 0) - (value < 0)


def _member(name: str, returns: Any, impl: Any, *params: Any) -> Any:
    return cel.FunctionDecl(
        name, [cel.Overload(f"quantity_{name}", returns, [QUANTITY, *params], is_member=True, impl=impl)]
    )


def _arithmetic(name: str, sign: int) -> Any:
    def with_quantity(left: Any, right: Any) -> Any:
        return _make(_amount(left) + sign * _amount(right))

    def with_int(left: Any, right: int) -> Any:
        return _make(_amount(left) + sign * right)

    return cel.FunctionDecl(
        name,
        [
            cel.Overload(
                f"quantity_{name}", QUANTITY, [QUANTITY, QUANTITY], is_member=True, impl=with_quantity
            ),
            cel.Overload(f"quantity_{name}_int", QUANTITY, [QUANTITY, T.INT], is_member=True, impl=with_int),
        ],
    )


FUNCTIONS = (
    cel.FunctionDecl("quantity", [cel.Overload("string_to_quantity", QUANTITY, [T.STRING], impl=_quantity)]),
    cel.FunctionDecl(
        "isQuantity", [cel.Overload("is_quantity_string", T.BOOL, [T.STRING], impl=_is_quantity)]
    ),
    _member("sign", T.INT, _sign),
    _member("asApproximateFloat", T.DOUBLE, lambda q: float(_amount(q))),
    _member("asInteger", T.INT, _as_integer),
    _member("isInteger", T.BOOL, lambda q: _fits_int64(_amount(q))),
    _arithmetic("add", 1),
    _arithmetic("sub", -1),
)
