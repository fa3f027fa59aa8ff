"""Calls the cost evaluator does not implement itself, made through cel-expr-python.

A call `a0.f(a1)` is compiled once as an expression over dynamically typed variables and evaluated
over the already evaluated operands: the function's semantics (the strings extension, conversions,
timestamps' fields, Kubernetes' libraries) are then exactly those Program.evaluate has, for about
3 µs a call. Operands cel-expr-python cannot take as Python values are written into the source:
a uint as `uint(a0)`, a timestamp as `timestamp(a0)` over its RFC 3339 text, a duration as
`duration(a0)` over its seconds; a timestamp or duration result comes back as text, to keep its
nanoseconds.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Sequence
from typing import Any

from apiserver.cel.cost.values import (
    NANOS,
    AccumulatedList,
    CelError,
    CelType,
    Duration,
    Optional,
    Timestamp,
    UInt,
    Unsupported,
)
from apiserver.cel.environment import compile_checked
from apiserver.cel.errors import evaluation_message

_WRAPPERS = {UInt: "uint", Timestamp: "timestamp", Duration: "duration"}
_VARIABLES = tuple(f"a{n}" for n in range(6))


@functools.cache
def _compiled(function: str, member: bool, wrappers: tuple[str, ...], result: str) -> Any:
    operands = [f"{wrap}(a{n})" if wrap else f"a{n}" for n, wrap in enumerate(wrappers)]
    call = (
        f"{operands[0]}.{function}({', '.join(operands[1:])})"
        if member
        else f"{function}({', '.join(operands)})"
    )
    source = f"string({call})" if result else call
    try:
        return compile_checked(source, _VARIABLES)[1]
    except RuntimeError as exc:
        raise Unsupported(f"cannot bridge {source}: {exc}") from None


def _operand(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is UInt:
        return "uint", int(value)
    if kind is Timestamp:
        return "timestamp", format_timestamp(value)
    if kind is Duration:
        return "duration", format_duration(value)
    if kind is Optional or kind is CelType:
        raise Unsupported("an optional or type operand to a bridged call")
    if kind is AccumulatedList:
        return "", list(value)
    if (kind is list or kind is dict) and not _plain_container(value):
        raise Unsupported("a container of uints, timestamps or durations to a bridged call")
    return "", value


def _plain_container(value: Any) -> bool:
    items = value.values() if isinstance(value, dict) else value
    for item in items:
        kind = type(item)
        if kind in _WRAPPERS or kind is Optional or kind is CelType:
            return False
        if (kind is list or kind is dict) and not _plain_container(item):
            return False
    return True


def call(function: str, member: bool, args: Sequence[Any], result_type: str = "") -> Any:
    """`function` applied to `args` (the receiver first when `member`) by cel-expr-python;
    `result_type` is "timestamp" or "duration" when the call returns one."""
    wrappers, data = [], {}
    for n, arg in enumerate(args):
        wrap, value = _operand(arg)
        wrappers.append(wrap)
        data[f"a{n}"] = value
    expression = _compiled(function, member, tuple(wrappers), result_type)
    try:
        value = expression.eval(data=data)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise CelError(evaluation_message(str(exc))) from None
    return _result(value, result_type)


def _result(value: Any, result_type: str) -> Any:
    name = value.type().name()
    if name == "ERROR":
        raise CelError(evaluation_message(str(value.plain_value())))
    if result_type == "timestamp":
        return parse_timestamp(value.plain_value())
    if result_type == "duration":
        return parse_duration(value.plain_value())
    if name in ("TIMESTAMP", "DURATION", "TYPE") or name.startswith("OPTIONAL"):
        raise Unsupported(f"a bridged call returning {name}")
    plain = value.plain_value()
    if name == "UINT":
        return UInt(plain)
    if name == "BYTES" and isinstance(plain, bytearray):
        return bytes(plain)
    return plain


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def format_timestamp(value: Timestamp) -> str:
    """RFC 3339 text with every nanosecond, as timestamp() reads it back."""
    seconds, nanos = divmod(value.nanos, NANOS)
    moment = _EPOCH + datetime.timedelta(seconds=seconds)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{nanos:09d}Z"


def parse_timestamp(text: str) -> Timestamp:
    """A timestamp from the text string(timestamp) writes (UTC, `Z`, up to nine decimals)."""
    head, _, fraction = text.rstrip("Z").partition(".")
    moment = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)
    seconds = (moment - _EPOCH) // datetime.timedelta(seconds=1)
    return Timestamp(seconds * NANOS + int((fraction or "0").ljust(9, "0")[:9]))


def format_duration(value: Duration) -> str:
    sign = "-" if value.nanos < 0 else ""
    seconds, nanos = divmod(abs(value.nanos), NANOS)
    return f"{sign}{seconds}.{nanos:09d}s"


def parse_duration(text: str) -> Duration:
    """A duration from the text string(duration) writes (`1.5s`, `-3s`)."""
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").rstrip("s").partition(".")
    nanos = int(whole) * NANOS + int((fraction or "0").ljust(9, "0")[:9])
    return Duration(-nanos if negative else nanos)
