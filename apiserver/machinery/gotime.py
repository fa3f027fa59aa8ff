"""Go's time.Parse for the two layouts metav1 decodes timestamps with, and its errors.

metav1.Time parses with time.RFC3339 (`2006-01-02T15:04:05Z07:00`: any fraction of a second is
taken after the seconds, a single-digit hour too), metav1.MicroTime with
`2006-01-02T15:04:05.000000Z07:00` (exactly six fraction digits). A value either layout refuses
fails as Go words it: `parsing time "x" as "<layout>": cannot parse "x" as "2006"`, or
`parsing time "x": month out of range`. Values are worked on as UTF-8 bytes, as Go slices them.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"
MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"

# Each layout as Go's parser walks it: (literal text before the element, the element).
_ELEMENTS = (("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"))
_CHUNKS = {
    TIME_LAYOUT: (*_ELEMENTS, ("", "Z07:00")),
    MICRO_TIME_LAYOUT: (*_ELEMENTS, ("", ".000000"), ("", "Z07:00")),
}
_DIGITS = b"0123456789"
# The two-digit elements: the field each sets and its range.
_NUMBERS = {
    "01": ("month", 1, 12),
    "02": ("day", 1, 31),
    "15": ("hour", 0, 23),
    "04": ("minute", 0, 59),
    "05": ("second", 0, 59),
}


class TimeParseError(ValueError):
    """time.ParseError, with Go's message."""


class _Bad(Exception):
    """The element does not parse (Go's errBad)."""


class _OutOfRange(Exception):
    """The element parses to a value out of its range (Go's rangeErrString)."""


def _quote(value: bytes) -> str:
    """The time package's own quoting: bytes outside printable ASCII as \\x escapes."""
    out = []
    for byte in value:
        if byte < 0x20 or byte >= 0x80:
            out.append(f"\\x{byte:02x}")
        else:
            char = chr(byte)
            out.append("\\" + char if char in '"\\' else char)
    return '"' + "".join(out) + '"'


def _is_digit(value: bytes, index: int) -> bool:
    return index < len(value) and value[index] in _DIGITS


def _getnum(value: bytes, fixed: bool) -> tuple[int, bytes]:
    """One or two digits (two when `fixed`), and the rest."""
    if not _is_digit(value, 0):
        raise _Bad
    if not _is_digit(value, 1):
        if fixed:
            raise _Bad
        return value[0] - 48, value[1:]
    return (value[0] - 48) * 10 + value[1] - 48, value[2:]


def _atoi(value: bytes) -> int:
    """Go's time.atoi: an optional sign, then nothing but digits (none at all is 0)."""
    negative = value[:1] == b"-"
    digits = value[1:] if value[:1] in (b"-", b"+") else value
    if any(byte not in _DIGITS for byte in digits):
        raise _Bad
    number = int(digits) if digits else 0
    return -number if negative else number


def _nanoseconds(value: bytes, size: int) -> int:
    """parseNanoseconds: a comma or period and what follows, up to nine digits, in nanoseconds."""
    if value[:1] not in (b".", b","):
        raise _Bad
    size = min(size, 10)
    number = _atoi(value[1:size])
    if number < 0:
        raise _OutOfRange("fractional second")
    return number * int(10 ** (10 - size))


@dataclass
class _Fields:
    year: int = 0
    month: int = 1
    day: int = 1
    hour: int = 0
    minute: int = 0
    second: int = 0
    nanosecond: int = 0
    offset: int = 0  # seconds east of UTC


# The length of each layout's own form in UTC (`2026-11-22T02:16:41Z`, with `.123456` for micro).
_CANONICAL_LENGTH = {TIME_LAYOUT: 20, MICRO_TIME_LAYOUT: 27}
_DIGIT_BYTES = frozenset(b"0123456789")


def _canonical(layout: str, text: str) -> datetime | None:
    """`text` read directly when it is the layout's own form in UTC, as clients write it (what
    Go reads it as is then plain); None for anything else, which the full parser reads."""
    if len(text) != _CANONICAL_LENGTH[layout] or text[-1] != "Z":
        return None
    raw = text.encode()
    if raw[4] != 45 or raw[7] != 45 or raw[10] != 84 or raw[13] != 58 or raw[16] != 58:  # - - T : :
        return None
    digits = raw[0:4] + raw[5:7] + raw[8:10] + raw[11:13] + raw[14:16] + raw[17:19]
    fraction = raw[20:26] if layout == MICRO_TIME_LAYOUT else b""
    if fraction and raw[19] != 46:  # .
        return None
    if not _DIGIT_BYTES.issuperset(digits + fraction):
        return None
    year, month, day = int(raw[0:4]), int(raw[5:7]), int(raw[8:10])
    hour, minute, second = int(raw[11:13]), int(raw[14:16]), int(raw[17:19])
    if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= _days_in(month, year)):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    return datetime(year, month, day, hour, minute, second, int(fraction or b"0"), tzinfo=UTC)


def parse(layout: str, text: str) -> datetime:
    """The instant `text` names in `layout` (one of the two above), in UTC and truncated to
    microseconds; TimeParseError with Go's message if Go refuses it."""
    direct = _canonical(layout, text)
    return direct if direct is not None else parse_fully(layout, text)


def parse_fully(layout: str, text: str) -> datetime:
    """`parse` by Go's whole algorithm, for every form (parse reads clients' own forms directly)."""
    chunks = _CHUNKS[layout]
    value = text.encode()
    fields = _Fields()

    def error(layout_elem: str, value_elem: bytes, message: str = "") -> TimeParseError:
        if message:
            return TimeParseError(f"parsing time {_quote(text.encode())}{message}")
        where = f"cannot parse {_quote(value_elem)} as {_quote(layout_elem.encode())}"
        return TimeParseError(f"parsing time {_quote(text.encode())} as {_quote(layout.encode())}: {where}")

    for index, (prefix, element) in enumerate(chunks):
        if not value.startswith(prefix.encode()):
            raise error(prefix, value)
        value = value[len(prefix) :]
        following = chunks[index + 1][1] if index + 1 < len(chunks) else ""
        try:
            value = _element(element, value, fields, following)
        except _OutOfRange as exc:
            raise error(element, value, f": {exc} out of range") from None
        except _Bad:
            raise error(element, value) from None
    if value:
        raise error("", value, f": extra text: {_quote(value)}")
    if not 1 <= fields.day <= _days_in(fields.month, fields.year):
        raise error("", value, ": day out of range")
    return _instant(fields, text)


def _element(element: str, value: bytes, fields: _Fields, following: str) -> bytes:
    """One layout element read from `value` into `fields`; the rest of `value`."""
    if element == "2006":
        if len(value) < 4 or not _is_digit(value, 0):
            raise _Bad
        fields.year = _atoi(value[:4])
        return value[4:]
    if element == "Z07:00":
        return _zone(value, fields)
    if element == ".000000":
        if len(value) < 7:
            raise _Bad
        fields.nanosecond = _nanoseconds(value, 7)
        return value[7:]
    number, rest = _getnum(value, fixed=element != "15")
    name, low, high = _NUMBERS[element]
    # The day is checked against its month once everything is read.
    if name != "day" and not low <= number <= high:
        raise _OutOfRange(name)
    setattr(fields, name, number)
    if element == "05" and following != ".000000":
        return _fraction(rest, fields)
    return rest


def _fraction(value: bytes, fields: _Fields) -> bytes:
    """A fraction of a second the layout does not name, which Go takes after the seconds."""
    if len(value) < 2 or value[:1] not in (b".", b",") or not _is_digit(value, 1):
        return value
    size = 2
    while _is_digit(value, size):
        size += 1
    fields.nanosecond = _nanoseconds(value, size)
    return value[size:]


def _zone(value: bytes, fields: _Fields) -> bytes:
    """`Z`, or an offset `±hh:mm` (Go lets hours reach 24 and minutes 60)."""
    if value[:1] == b"Z":
        return value[1:]
    if len(value) < 6 or value[3:4] != b":":
        raise _Bad
    sign, rest = value[:1], value[6:]
    # As Go: the minutes are read only if the hours were, and ranges are checked before the rest.
    hours, parsed = _two_digits(value[1:3])
    minutes, parsed = _two_digits(value[4:6]) if parsed else (0, False)
    if hours > 24:
        raise _OutOfRange("time zone offset hour")
    if minutes > 60:
        raise _OutOfRange("time zone offset minute")
    if not parsed or sign not in (b"+", b"-"):
        raise _Bad
    fields.offset = (hours * 60 + minutes) * 60 * (-1 if sign == b"-" else 1)
    return rest


def _two_digits(value: bytes) -> tuple[int, bool]:
    """Two digits as a number, or 0 and False."""
    try:
        return _getnum(value, fixed=True)[0], True
    except _Bad:
        return 0, False


def _days_in(month: int, year: int) -> int:
    if month == 2 and calendar.isleap(year):
        return 29
    return (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]


def _instant(fields: _Fields, text: str) -> datetime:
    try:
        local = datetime(
            fields.year, fields.month, fields.day, fields.hour, fields.minute, fields.second, tzinfo=UTC
        )
        moment = local - timedelta(seconds=fields.offset)
    except (ValueError, OverflowError):
        # Go takes years 0 to 9999 and any instant an offset moves them to; Python only 1 to 9999.
        raise TimeParseError(f"parsing time {_quote(text.encode())}: year out of range") from None
    return moment + timedelta(microseconds=fields.nanosecond // 1000)
