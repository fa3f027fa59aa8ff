"""The functions the cost evaluator implements itself, by name and arity (the receiver of a member
call counts as the first operand); every other function is bridged to cel-expr-python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.functions import arithmetic, optionals, relations, strings

NULLARY: dict[str, Callable[[], Any]] = dict(optionals.NULLARY)
UNARY: dict[str, Callable[[Any], Any]] = {
    **arithmetic.UNARY,
    **relations.UNARY,
    **optionals.UNARY,
    **strings.UNARY,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    **arithmetic.BINARY,
    **relations.BINARY,
    **optionals.BINARY,
    **strings.BINARY,
}

__all__ = ["BINARY", "NULLARY", "UNARY"]
