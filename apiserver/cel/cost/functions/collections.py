"""The sets extension (sets.contains, sets.equivalent, sets.intersects), the lists library's indexOf
and lastIndexOf over lists, and the two-variable comprehensions' cel.@mapInsert, in Python: the
sets are priced by their operands' sizes, and cel.@mapInsert is not one cel-expr-python runs alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost import bridge
from apiserver.cel.cost.functions.arithmetic import NO_OVERLOAD
from apiserver.cel.cost.functions.equality import equal, find, missing
from apiserver.cel.cost.values import AccumulatedList, CelError, UInt
from apiserver.cel.library.dispatch import go_value

_LISTS = (list, AccumulatedList)


def _lists(left: Any, right: Any) -> None:
    if type(left) not in _LISTS or type(right) not in _LISTS:
        raise CelError(NO_OVERLOAD)


def _contains_all(left: Any, right: Any) -> bool:
    return all(any(equal(item, other) for item in left) for other in right)


def _sets_contains(left: Any, right: Any) -> bool:
    _lists(left, right)
    return _contains_all(left, right)


def _sets_equivalent(left: Any, right: Any) -> bool:
    _lists(left, right)
    return _contains_all(left, right) and _contains_all(right, left)


def _sets_intersects(left: Any, right: Any) -> bool:
    _lists(left, right)
    return any(equal(item, other) for item in left for other in right)


def _list_search(name: str, last: bool) -> Callable[[Any, Any], Any]:
    def search(items: Any, item: Any) -> Any:
        if type(items) is str:
            # The strings extension's indexOf: cel-expr-python's answer.
            return bridge.call(name, True, [items, item])
        if type(items) not in _LISTS:
            raise CelError(NO_OVERLOAD)
        order = range(len(items) - 1, -1, -1) if last else range(len(items))
        return next((n for n in order if equal(items[n], item)), -1)

    return search


def _insert(target: Any, key: Any, value: Any) -> dict[Any, Any]:
    if type(target) is not dict:
        raise CelError(NO_OVERLOAD)
    if not missing(find(target, key)):
        shown = int(key) if type(key) is UInt else key
        raise CelError(f"insert failed: key {go_value(shown)} already exists")
    return {**target, key: value}


def _merge(target: Any, update: Any) -> dict[Any, Any]:
    if type(target) is not dict or type(update) is not dict:
        raise CelError(NO_OVERLOAD)
    merged = target
    for key, value in update.items():
        merged = _insert(merged, key, value)
    return merged


BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "sets.contains": _sets_contains,
    "sets.equivalent": _sets_equivalent,
    "sets.intersects": _sets_intersects,
    "cel.@mapInsert": _merge,
    "indexOf": _list_search("indexOf", last=False),
    "lastIndexOf": _list_search("lastIndexOf", last=True),
}
TERNARY: dict[str, Callable[[Any, Any, Any], Any]] = {"cel.@mapInsert": _insert}
