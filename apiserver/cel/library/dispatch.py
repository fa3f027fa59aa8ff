"""Functions whose declaration to the checker cel-expr-python cannot run as it stands, declared again
for the engine (cel/environment.py keeps the two apart).

cel-expr-python picks a Python function by the kinds of its arguments, and a type parameter or `dyn`
matches no kind: a generic overload (upstream's `list(A).indexOf(A)`, the two-variable
comprehensions' `cel.@mapInsert`, which cel-expr-python declares but does not implement) is
declared here once for every kind its arguments can have at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import product
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library.types import QUANTITY

T = cel.Type

# One type of every kind a value can have (QUANTITY stands for every message type).
VALUE_KINDS = (
    T.BOOL,
    T.INT,
    T.UINT,
    T.DOUBLE,
    T.STRING,
    T.BYTES,
    T.NULL,
    T.DURATION,
    T.TIMESTAMP,
    T.List(T.DYN),
    T.Map(T.DYN, T.DYN),
    QUANTITY,
)
KEY_KINDS = (T.BOOL, T.INT, T.UINT, T.STRING)
_MAP = T.Map(T.DYN, T.DYN)


def cel_equal(left: Any, right: Any) -> bool:
    """CEL's equality of plain values: numbers equal across int, uint and double, a bool only to a
    bool, lists and maps element by element."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(cel_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return len(left) == len(right) and all(
            key in right and cel_equal(value, right[key]) for key, value in left.items()
        )
    return type(left) is type(right) and bool(left == right)


def index_of(items: Sequence[Any], item: Any) -> int:
    return next((n for n, each in enumerate(items) if cel_equal(each, item)), -1)


def last_index_of(items: Sequence[Any], item: Any) -> int:
    return next((n for n in range(len(items) - 1, -1, -1) if cel_equal(items[n], item)), -1)


def go_value(key: Any) -> str:
    """A key as Go's %v writes it."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def map_insert(target: Mapping[Any, Any], key: Any, value: Any) -> dict[Any, Any]:
    if any(cel_equal(key, existing) for existing in target):
        raise ValueError(f"insert failed: key {go_value(key)} already exists")
    return {**target, key: value}


def map_merge(target: Mapping[Any, Any], update: Mapping[Any, Any]) -> dict[Any, Any]:
    merged = dict(target)
    for key, value in update.items():
        merged = map_insert(merged, key, value)
    return merged


def _overloads(
    overload: str, returns: Any, params: Iterable[Sequence[Any]], impl: Callable[..., Any], *, member: bool
) -> list[Any]:
    """One overload for each kinds of arguments; the first keeps upstream's overload id, which the
    checked expression names."""
    return [
        cel.Overload(f"{overload}_{n}" if n else overload, returns, list(kinds), is_member=member, impl=impl)
        for n, kinds in enumerate(params)
    ]


def _list_search(name: str, overload: str, impl: Callable[..., Any]) -> Any:
    kinds = ((T.List(T.DYN), kind) for kind in VALUE_KINDS)
    return cel.FunctionDecl(name, _overloads(overload, T.INT, kinds, impl, member=True))


# What the checker sees of the lists library's indexOf and lastIndexOf: (list(A), A) -> int.
_A = T("~A")
CHECKED_LIST_SEARCHES = tuple(
    cel.FunctionDecl(name, [cel.Overload(overload, T.INT, [T.List(_A), _A], is_member=True)])
    for name, overload in (("indexOf", "list_a_index_of_int"), ("lastIndexOf", "list_a_last_index_of_int"))
)
LIST_SEARCHES = (
    _list_search("indexOf", "list_a_index_of_int", index_of),
    _list_search("lastIndexOf", "list_a_last_index_of_int", last_index_of),
)
_INSERTS = ((_MAP, key, value) for key, value in product(KEY_KINDS, VALUE_KINDS))
MAP_INSERT = cel.FunctionDecl(
    "cel.@mapInsert",
    [
        *_overloads("@mapInsert_map_key_value", _MAP, _INSERTS, map_insert, member=False),
        cel.Overload("@mapInsert_map_map", _MAP, [_MAP, _MAP], impl=map_merge),
    ],
)
