"""Kubernetes' regex library: `<string>.find(<regex>)` and `<string>.findAll(<regex>[, <limit>])`.

Patterns are RE2's (Go's regexp is RE2's syntax and leftmost-first semantics, and neither
backtracks), matched as Go's FindString and FindAllString match: an empty match right after the
previous match is skipped. A bad pattern fails when the call runs, worded as upstream's does when the
pattern is not a literal (upstream refuses a literal one when the program is built).
"""

from __future__ import annotations

import functools
from typing import Any

from cel_expr_python import cel

from apiserver.machinery.regexp import compile_go

T = cel.Type
# Distinct patterns kept compiled; policies use few, and each is compiled once here.
_CACHED_PATTERNS = 256


@functools.lru_cache(maxsize=_CACHED_PATTERNS)
def _compiled(pattern: str) -> Any:
    try:
        return compile_go(pattern)
    except ValueError as exc:
        raise ValueError(f"Illegal regex: {exc}") from None


def _find(text: str, pattern: str) -> str:
    found = _compiled(pattern).search(text)
    return "" if found is None else str(found.group())


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's FindAllString: at most `limit` matches (all when negative), leftmost first, an empty
    match that abuts the previous match left out."""
    compiled, found = _compiled(pattern), list[str]()
    position, previous_end = 0, -1
    while (limit < 0 or len(found) < limit) and position <= len(text):
        match = compiled.search(text, position)
        if match is None:
            break
        start, end = match.span()
        if end == position:
            accepted = start != previous_end
            position += 1  # one code point on, as Go moves one rune on
        else:
            accepted, position = True, end
        previous_end = end
        if accepted:
            found.append(text[start:end])
    return found


FUNCTIONS = (
    cel.FunctionDecl(
        "find",
        [cel.Overload("string_find_string", T.STRING, [T.STRING, T.STRING], is_member=True, impl=_find)],
    ),
    cel.FunctionDecl(
        "findAll",
        [
            cel.Overload(
                "string_find_all_string",
                T.List(T.STRING),
                [T.STRING, T.STRING],
                is_member=True,
                impl=find_all,
            ),
            cel.Overload(
                "string_find_all_string_int",
                T.List(T.STRING),
                [T.STRING, T.STRING, T.INT],
                is_member=True,
                impl=find_all,
            ),
        ],
    ),
)
