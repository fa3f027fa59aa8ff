"""CEL's arithmetic as cel-go computes it: 64-bit integers that fail on overflow, Go's truncated
division, IEEE doubles, concatenation, and timestamps and durations within CEL's ranges."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.values import AccumulatedList, CelError, Duration, Timestamp, UInt

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
UINT_MAX = 2**64 - 1
# CEL's timestamps run from 0001-01-01 to 9999-12-31T23:59:59.999999999Z.
_TS_MIN, _TS_MAX = -62135596800 * 10**9, 253402300799 * 10**9 + 999_999_999

NO_OVERLOAD = "no such overload"


def checked_int(value: int) -> int:
    if value < INT_MIN or value > INT_MAX:
        raise CelError("integer overflow")
    return value


def checked_uint(value: int) -> UInt:
    if value < 0 or value > UINT_MAX:
        raise CelError("unsigned integer overflow")
    return UInt(value)


def _timestamp(nanos: int) -> Timestamp:
    if nanos < _TS_MIN or nanos > _TS_MAX:
        raise CelError("timestamp overflow")
    return Timestamp(nanos)


def _duration(nanos: int) -> Duration:
    if nanos < INT_MIN or nanos > INT_MAX:
        raise CelError("integer overflow")
    return Duration(nanos)


def add(left: Any, right: Any) -> Any:
    kind = type(left)
    if kind is not type(right):
        return _add_mixed(left, right)
    if kind is int:
        return checked_int(left + right)
    if kind is str or kind is float or kind is bytes:
        return left + right
    if kind is list:
        return [*left, *right]
    if kind is UInt:
        return checked_uint(left + right)
    if kind is Duration:
        return _duration(left.nanos + right.nanos)
    raise CelError(NO_OVERLOAD)


def _add_mixed(left: Any, right: Any) -> Any:
    kind, other = type(left), type(right)
    if kind is AccumulatedList and other in (list, AccumulatedList):
        left.extend(right)  # the accumulator of a map or filter, which nothing else sees
        return left
    if kind is list and other is AccumulatedList:
        return [*left, *right]
    if kind is Timestamp and other is Duration:
        return _timestamp(left.nanos + right.nanos)
    if kind is Duration and other is Timestamp:
        return _timestamp(left.nanos + right.nanos)
    raise CelError(NO_OVERLOAD)


def subtract(left: Any, right: Any) -> Any:
    kind, other = type(left), type(right)
    if kind is int and other is int:
        return checked_int(left - right)
    if kind is float and other is float:
        return left - right
    if kind is UInt and other is UInt:
        return checked_uint(left - right)
    if kind is Timestamp and other is Timestamp:
        return _duration(left.nanos - right.nanos)
    if kind is Timestamp and other is Duration:
        return _timestamp(left.nanos - right.nanos)
    if kind is Duration and other is Duration:
        return _duration(left.nanos - right.nanos)
    raise CelError(NO_OVERLOAD)


def multiply(left: Any, right: Any) -> Any:
    kind = type(left)
    if kind is not type(right):
        raise CelError(NO_OVERLOAD)
    if kind is int:
        return checked_int(left * right)
    if kind is float:
        return left * right
    if kind is UInt:
        return checked_uint(left * right)
    raise CelError(NO_OVERLOAD)


def _truncated(left: int, right: int) -> int:
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def divide(left: Any, right: Any) -> Any:
    kind = type(left)
    if kind is not type(right) or kind not in (int, UInt, float):
        raise CelError(NO_OVERLOAD)
    if kind is float:
        return _float_divide(left, right)
    if right == 0:
        raise CelError("division by zero")
    return checked_int(_truncated(left, right)) if kind is int else UInt(left // right)


def _float_divide(left: float, right: float) -> float:
    if right == 0:
        if left == 0 or left != left:
            return float("nan")
        return float("inf") if (left > 0) == (str(right)[0] != "-") else float("-inf")
    return left / right


def modulo(left: Any, right: Any) -> Any:
    kind = type(left)
    if kind is not type(right) or kind not in (int, UInt):
        raise CelError(NO_OVERLOAD)
    if right == 0:
        raise CelError("modulus by zero")
    if kind is UInt:
        return UInt(left % right)
    return left - _truncated(left, right) * right


def negate(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        return checked_int(-value)
    if kind is float:
        return -value
    if kind is Duration:
        return _duration(-value.nanos)
    raise CelError(NO_OVERLOAD)


def logical_not(value: Any) -> Any:
    if type(value) is bool:
        return not value
    raise CelError(NO_OVERLOAD)


BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "_+_": add,
    "_-_": subtract,
    "_*_": multiply,
    "_/_": divide,
    "_%_": modulo,
}
UNARY: dict[str, Callable[[Any], Any]] = {"-_": negate, "!_": logical_not}
