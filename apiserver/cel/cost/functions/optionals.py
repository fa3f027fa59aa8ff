"""The optional library (cel-go's OptionalTypes): optional.of/none/ofNonZeroValue and an optional's
hasValue, value, orValue and or; and type() and dyn(), which only look at a value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.functions.arithmetic import NO_OVERLOAD
from apiserver.cel.cost.values import NONE, CelError, CelType, Duration, Optional, Timestamp, type_name


def _optional(value: Any) -> Optional:
    if type(value) is not Optional:
        raise CelError(NO_OVERLOAD)
    return value


def _zero(value: Any) -> bool:
    if type(value) in (Timestamp, Duration):
        return bool(value.nanos == 0)
    if value is None:
        return True
    try:
        return not value
    except TypeError:
        return False


def _of_non_zero(value: Any) -> Optional:
    return NONE if _zero(value) else Optional(value)


def _value(optional: Any) -> Any:
    if not _optional(optional).present:
        raise CelError("optional.none() dereference")
    return optional.value


def _or_value(optional: Any, default: Any) -> Any:
    return optional.value if _optional(optional).present else default


def _or(optional: Any, other: Any) -> Any:
    if _optional(optional).present:
        return optional
    return _optional(other)


UNARY: dict[str, Callable[[Any], Any]] = {
    "optional.of": Optional,
    "optional.ofNonZeroValue": _of_non_zero,
    "hasValue": lambda optional: _optional(optional).present,
    "value": _value,
    "type": lambda value: CelType(type_name(value)),
    "dyn": lambda value: value,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {"orValue": _or_value, "or": _or}
NULLARY: dict[str, Callable[[], Any]] = {"optional.none": lambda: NONE}
