"""The format library (format.dns1123Label() and the other named formats, format.named, validate),
over the library's own checks (cel/library/formats.py); the optionals cel-expr-python's engine
builds through a rewrite are plain Optional values here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.functions.arithmetic import NO_OVERLOAD
from apiserver.cel.cost.values import NONE, CelError, Optional
from apiserver.cel.library import formats
from apiserver.cel.library.types import NamedFormat


def _named(name: Any) -> Optional:
    if type(name) is not str:
        raise CelError(NO_OVERLOAD)
    return Optional(NamedFormat(value=name)) if name in formats.FORMATS else NONE


def _validate(named: Any, text: Any) -> Optional:
    known = formats.format_of(named) if type(named) is NamedFormat else None
    if known is None or type(text) is not str:
        raise CelError(NO_OVERLOAD)
    messages = known.validate(text)
    return Optional(messages) if messages else NONE


def _constant(name: str) -> Callable[[], Any]:
    return lambda: NamedFormat(value=name)


NULLARY: dict[str, Callable[[], Any]] = {f"format.{name}": _constant(name) for name in formats.FORMATS}
UNARY: dict[str, Callable[[Any], Any]] = {"format.named": _named}
BINARY: dict[str, Callable[[Any, Any], Any]] = {"validate": _validate}
