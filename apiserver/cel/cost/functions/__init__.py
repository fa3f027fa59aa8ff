"""The functions the cost evaluator implements itself, by name and arity (the receiver of a member
call counts as the first operand); every other function is bridged to cel-expr-python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.functions import (
    arithmetic,
    authz,
    collections,
    formats,
    optionals,
    relations,
    strings,
)

NULLARY: dict[str, Callable[[], Any]] = {**optionals.NULLARY, **formats.NULLARY}
UNARY: dict[str, Callable[[Any], Any]] = {
    **arithmetic.UNARY,
    **relations.UNARY,
    **optionals.UNARY,
    **strings.UNARY,
    **formats.UNARY,
    **authz.UNARY,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    **arithmetic.BINARY,
    **relations.BINARY,
    **optionals.BINARY,
    **strings.BINARY,
    **collections.BINARY,
    **formats.BINARY,
    **authz.BINARY,
}
TERNARY: dict[str, Callable[[Any, Any, Any], Any]] = {**collections.TERNARY, **authz.TERNARY}

__all__ = ["BINARY", "NULLARY", "TERNARY", "UNARY"]
