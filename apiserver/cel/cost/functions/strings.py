"""The string functions policies call most (startsWith, endsWith, contains, matches, lowerAscii,
upperAscii), in Python: bridged, each call would cost about 5 µs more."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.functions.arithmetic import NO_OVERLOAD
from apiserver.cel.cost.values import CelError
from apiserver.cel.library.regex import _compiled as compiled_pattern

_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}
_UPPER = {code + 32: code for code in range(ord("A"), ord("Z") + 1)}


def _strings(left: Any, right: Any) -> None:
    if type(left) is not str or type(right) is not str:
        raise CelError(NO_OVERLOAD)


def _starts_with(text: Any, prefix: Any) -> bool:
    _strings(text, prefix)
    return bool(text.startswith(prefix))


def _ends_with(text: Any, suffix: Any) -> bool:
    _strings(text, suffix)
    return bool(text.endswith(suffix))


def _contains(text: Any, part: Any) -> bool:
    _strings(text, part)
    return part in text


def _matches(text: Any, pattern: Any) -> bool:
    """Go's regexp.MatchString: RE2, a match anywhere in the text."""
    _strings(text, pattern)
    try:
        regex = compiled_pattern(pattern)
    except ValueError as exc:
        raise CelError(str(exc).removeprefix("Illegal regex: ")) from None
    return regex.search(text) is not None


def _ascii_case(table: dict[int, int]) -> Callable[[Any], str]:
    def convert(text: Any) -> str:
        if type(text) is not str:
            raise CelError(NO_OVERLOAD)
        return text.translate(table)

    return convert


BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "startsWith": _starts_with,
    "endsWith": _ends_with,
    "contains": _contains,
    "matches": _matches,
}
UNARY: dict[str, Callable[[Any], Any]] = {
    "lowerAscii": _ascii_case(_LOWER),
    "upperAscii": _ascii_case(_UPPER),
}
