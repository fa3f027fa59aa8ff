"""The two failures of CEL, and cel-expr-python's messages reworded as cel-go words them.

Admission answers quote these messages to users (a policy's failure, a webhook's matchCondition
error), and kube-apiserver's answers come from cel-go: the same failing expression should read the
same on both servers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from apiserver.machinery.regexp import regexp_error


class CompileError(Exception):
    """An expression that does not parse or type-check; the message is the compiler's report."""


class EvaluationError(Exception):
    """An expression that failed while evaluated; the message is worded as cel-go's. `cost` is
    what the evaluation had spent when it failed, when the cost-tracking evaluator counted it."""

    def __init__(self, message: str, cost: int = 0) -> None:
        super().__init__(message)
        self.cost = cost


# cel-expr-python prefixes each message with an absl status code and may end it with the code again.
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]$", re.MULTILINE)

COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"


def _strip_status(message: str) -> str:
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message, count=1))


def compile_message(raw: str) -> str:
    """The checker's report without the status codes: cel-go's `ERROR: <input>:1:3: ...` lines."""
    return _strip_status(raw).rstrip()


def _no_such_key(match: re.Match[str]) -> str:
    return f"no such key: {match.group(1)}"


def _index_out_of_bounds(match: re.Match[str]) -> str:
    return f"index out of bounds: {match.group(1)}"


def _regex(match: re.Match[str]) -> str:
    return regexp_error(match.group(1))


_CONVERSION_TYPES = {"int": "int", "uint": "uint", "double": "double", "bool": "bool"}


def _conversion(match: re.Match[str]) -> str:
    source, target = match.group(1), match.group(2)
    return f"type conversion error from '{source}' to '{_CONVERSION_TYPES.get(target, target)}'"


def _string_to(target: str) -> Callable[[re.Match[str]], str]:
    return lambda _match: f"type conversion error from 'string' to '{target}'"


_REWORDINGS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = tuple(
    (re.compile(pattern), reword)
    for pattern, reword in (
        (r'^Key not found in map : "?(.*?)"?$', _no_such_key),
        (r"^No matching overloads found", lambda _m: "no such overload"),
        (r"^divide by zero$", lambda _m: "division by zero"),
        (r"^Index error: index=(-?\d+) size=\d+$", _index_out_of_bounds),
        (r"^double out of int64 range$", lambda _m: "integer overflow"),
        (r"^(?:double|int64) out of uint64 range$", lambda _m: "unsigned integer overflow"),
        (r"^uint64 out of int64 range$", lambda _m: "integer overflow"),
        (r"^cannot convert (string|bytes|double|int|uint|bool) to (int|uint|double|bool)$", _conversion),
        (r"^malformed UTF-8 bytes$", lambda _m: "invalid UTF-8 in bytes, cannot convert to string"),
        (r"^String to Timestamp conversion failed$", _string_to("google.protobuf.Timestamp")),
        (r"^String to Duration conversion failed$", _string_to("google.protobuf.Duration")),
        (r"^invalid regular expression: (.*)$", _regex),
        (r"^Iteration budget exceeded$", lambda _m: COST_LIMIT_EXCEEDED),
        (r'^No value with name "(.*)" found in Activation$', lambda m: f"no such attribute(s): {m.group(1)}"),
    )
)


def evaluation_message(raw: str) -> str:
    """cel-go's wording of the failure cel-expr-python reports as `raw`; its own words where
    no rewording is known (the messages cel-go shares, e.g. `modulus by zero`, pass as they are)."""
    message = _strip_status(raw).strip()
    for pattern, reword in _REWORDINGS:
        found = pattern.search(message)
        if found:
            return reword(found)
    return message
