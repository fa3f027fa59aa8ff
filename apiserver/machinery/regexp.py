"""Regular expressions as Go's regexp takes them: RE2's syntax and linear-time matching, and a bad
pattern worded as Go's regexp/syntax words it. google-re2 is RE2 itself; what it cannot give is
Go's wording, added here."""

from __future__ import annotations

from typing import Any

import re2


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the caller's error, not a line on stderr
    return options


_OPTIONS = _options()


def compile_go(pattern: str) -> Any:
    """`pattern` compiled by RE2; ValueError worded as Go's regexp.Compile error."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode() if isinstance(exc.args[0], bytes) else str(exc.args[0])
        raise ValueError(regexp_error(detail)) from None


def regexp_error(detail: str) -> str:
    """RE2's report of a bad pattern (`missing ): (a`) as Go's regexp words it: `error parsing
    regexp: missing closing ): `(a``."""
    for words, go in _REGEX_WORDS:
        detail = detail.replace(words, go, 1)
    text, _, pattern = detail.rpartition(": ")
    return f"error parsing regexp: {text}: `{pattern}`" if text else f"error parsing regexp: {detail}"


# RE2's words for a bad pattern, as Go's regexp/syntax says them.
_REGEX_WORDS = (
    ("missing ]", "missing closing ]"),
    ("missing )", "missing closing )"),
    ("unexpected )", "unexpected )"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid repetition size", "invalid repeat count"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
)
