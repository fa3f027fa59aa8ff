"""Ordering (with cel-go's cross-type numeric comparisons, which Kubernetes enables), membership
and size."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.functions.arithmetic import NO_OVERLOAD
from apiserver.cel.cost.functions.equality import NUMBERS, equal, find, missing
from apiserver.cel.cost.values import AccumulatedList, CelError, Duration, Timestamp

_ORDERED_ALIKE = (str, bytes, bool)
_TIMES = (Timestamp, Duration)


def _ordering(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def ordered(left: Any, right: Any) -> bool:
        kind, other = type(left), type(right)
        if kind in NUMBERS and other in NUMBERS:
            return compare(left, right)
        if kind is other and kind in _ORDERED_ALIKE:
            return compare(left, right)
        if kind is other and kind in _TIMES:
            return compare(left.nanos, right.nanos)
        raise CelError(NO_OVERLOAD)

    return ordered


def contained(item: Any, container: Any) -> bool:
    kind = type(container)
    if kind is list or kind is AccumulatedList:
        return any(equal(item, element) for element in container)
    if kind is dict:
        return not missing(find(container, item))
    raise CelError(NO_OVERLOAD)


def size(value: Any) -> int:
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    raise CelError(NO_OVERLOAD)


BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "_<_": _ordering(operator.lt),
    "_<=_": _ordering(operator.le),
    "_>_": _ordering(operator.gt),
    "_>=_": _ordering(operator.ge),
    "@in": contained,
}
UNARY: dict[str, Callable[[Any], Any]] = {"size": size}
