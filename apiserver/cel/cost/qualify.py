"""One step of field selection or indexing on a value, as cel-go's qualifiers take it: a map's key,
a list's index, and the errors (`no such key: x`, `index out of bounds: 3`) when absent."""

from __future__ import annotations

from typing import Any

from apiserver.cel.cost.functions.equality import find, missing
from apiserver.cel.cost.values import AccumulatedList, Err, UInt, type_name

# What a presence test finds when the field or index is not there.
ABSENT = object()


def go_format(key: Any) -> str:
    """A key as Go's %v writes a CEL value."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return _go_float(key)
    return str(key)


def _go_float(value: float) -> str:
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    if not exponent:
        return text
    sign = exponent[0] if exponent[0] in "+-" else "+"
    return f"{mantissa}e{sign}{exponent.lstrip('+-').rjust(2, '0')}"


def _list_index(key: Any) -> int | Err:
    kind = type(key)
    if kind is int or kind is UInt:
        return int(key)
    if kind is float:
        if key.is_integer():
            return int(key)
        return Err(f"unsupported index value {go_format(key)} in list")
    return Err(f"unsupported index type '{type_name(key)}' in list")


def qualify(obj: Any, key: Any, presence: bool) -> Any:
    """`obj[key]` (or `obj.key`); with `presence`, ABSENT where it is not there instead of an
    error."""
    kind = type(obj)
    if kind is dict:
        found = obj.get(key, ABSENT) if type(key) is str else find(obj, key)
        if found is not ABSENT and not missing(found):
            return found
        return ABSENT if presence else Err(f"no such key: {go_format(key)}")
    if kind is list or kind is AccumulatedList:
        index = _list_index(key)
        if isinstance(index, Err):
            return index
        if 0 <= index < len(obj):
            return obj[index]
        return ABSENT if presence else Err(f"index out of bounds: {go_format(key)}")
    if kind is Err:
        return obj
    return ABSENT if presence else Err(f"no such key: {go_format(key)}")
