"""CEL's heterogeneous equality and map lookup, as cel-go's types.Equal: numbers equal across int,
uint and double, lists and maps element by element, values of different types simply unequal."""

from __future__ import annotations

from typing import Any

from apiserver.cel.cost.values import AccumulatedList, Optional, UInt

NUMBERS = (int, UInt, float)
_SCALARS = (str, int, bytes, type(None))
_LISTS = (list, AccumulatedList)
_MISSING = object()


def equal(left: Any, right: Any) -> bool:
    kind, other = type(left), type(right)
    if kind is other and kind in _SCALARS:
        return bool(left == right)
    if kind in NUMBERS and other in NUMBERS:
        return bool(left == right)
    if kind in _LISTS and other in _LISTS:
        return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right, strict=True))
    if kind is dict and other is dict:
        return _maps_equal(left, right)
    if kind is Optional and other is Optional:
        return left.present == right.present and (not left.present or equal(left.value, right.value))
    return kind is other and kind not in _LISTS and bool(left == right)


def _maps_equal(left: dict[Any, Any], right: dict[Any, Any]) -> bool:
    if len(left) != len(right):
        return False
    for key, value in left.items():
        found = find(right, key)
        if found is _MISSING or not equal(value, found):
            return False
    return True


def find(mapping: dict[Any, Any], key: Any) -> Any:
    """The value at `key`, found as CEL finds it (1, 1u and 1.0 are one key; true is not 1), or
    the MISSING marker."""
    kind = type(key)
    if kind is str:
        return mapping.get(key, _MISSING)
    if kind is float and not key.is_integer():
        return _MISSING
    value = mapping.get(key, _MISSING)
    if value is _MISSING:
        return value
    # Python hashes True as 1: make sure the key found is of the same family as the one asked.
    for stored in mapping:
        if equal(stored, key) and (type(stored) is bool) == (kind is bool):
            return mapping[stored]
    return _MISSING


def missing(value: Any) -> bool:
    return value is _MISSING
