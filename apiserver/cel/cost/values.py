"""CEL values as the cost evaluator holds them.

Most are plain Python values (int, float, str, bytes, bool, None, list, dict, the library's protobuf
messages), so that JSON input needs no conversion and cel-expr-python takes them back when a call is
bridged. The kinds Python has no value for get a class of their own: uint (an int that must not be
mistaken for one), timestamps and durations (to the nanosecond, as CEL holds them), optionals,
types, and errors (which CEL passes along as values: `false && error` is false).
"""

from __future__ import annotations

import datetime
from typing import Any

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
NANOS = 1_000_000_000


class Unsupported(Exception):
    """A construct the cost evaluator does not implement: the caller evaluates with the C++ engine."""


class UInt(int):
    """A CEL uint: arithmetic on it must stay unsigned and its type must stay apart from int's."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class Timestamp:
    """A point in time, nanoseconds since the Unix epoch (CEL's range: years 1 to 9999)."""

    __slots__ = ("nanos",)

    def __init__(self, nanos: int) -> None:
        self.nanos = nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timestamp) and other.nanos == self.nanos

    def __hash__(self) -> int:
        return hash(("timestamp", self.nanos))

    def __repr__(self) -> str:
        return f"Timestamp({self.nanos})"


class Duration:
    """A signed span of time in nanoseconds (CEL's range: about +-10,000 years)."""

    __slots__ = ("nanos",)

    def __init__(self, nanos: int) -> None:
        self.nanos = nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.nanos == self.nanos

    def __hash__(self) -> int:
        return hash(("duration", self.nanos))

    def __repr__(self) -> str:
        return f"Duration({self.nanos})"


class Optional:
    """`optional.of(value)`, or `optional.none()` when `present` is false."""

    __slots__ = ("present", "value")

    def __init__(self, value: Any = None, *, present: bool = True) -> None:
        self.value = value
        self.present = present

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = Optional(present=False)


class CelType:
    """A type as a value (`type(x)`, `int`), named as cel-go names it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("type", self.name))

    def __repr__(self) -> str:
        return self.name


class Err:
    """An evaluation error, carried as a value until something absorbs it or it is the result."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"Err({self.message!r})"


class CelError(Exception):
    """Raised by a function's implementation; the call turns it into an Err value."""


class AccumulatedList(list[Any]):
    """The list a `map` or `filter` builds: appended to in place, as cel-go's mutable accumulator,
    so that building n elements is linear rather than quadratic."""

    __slots__ = ()


_TYPE_NAMES: dict[type, str] = {
    bool: "bool",
    int: "int",
    UInt: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null_type",
    list: "list",
    AccumulatedList: "list",
    dict: "map",
    Timestamp: "google.protobuf.Timestamp",
    Duration: "google.protobuf.Duration",
    Optional: "optional_type",
    CelType: "type",
}


def type_name(value: Any) -> str:
    """The CEL type of `value`, as `type(value)` names it."""
    name = _TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    descriptor = getattr(value, "DESCRIPTOR", None)
    if descriptor is not None:
        return str(descriptor.full_name)
    raise Unsupported(f"a value of Python type {type(value).__name__}")


def plain(value: Any) -> Any:
    """`value` as Program.evaluate returns it: ints for uints, datetime and timedelta for timestamps
    and durations (to the microsecond, as cel-expr-python gives them), plain lists and dicts."""
    kind = type(value)
    if kind is UInt:
        return int(value)
    if kind is list or kind is AccumulatedList:
        return [plain(item) for item in value]
    if kind is dict:
        return {plain(key): plain(item) for key, item in value.items()}
    if kind is Timestamp:
        return _EPOCH + datetime.timedelta(microseconds=value.nanos // 1000)
    if kind is Duration:
        return datetime.timedelta(microseconds=_truncated_micros(value.nanos))
    if kind is Optional or kind is CelType:
        raise Unsupported(f"a result of type {type_name(value)}")
    return value


def _truncated_micros(nanos: int) -> int:
    return nanos // 1000 if nanos >= 0 else -((-nanos) // 1000)
