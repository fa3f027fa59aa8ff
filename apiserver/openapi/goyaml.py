"""JSON values written as YAML the way Go's gopkg.in/yaml.v3 writes a parsed document's nodes back
(gnostic keeps extension values, defaults and enums of an OpenAPI v2 document as that text).

yaml.v3 has its own layout (indents of four, sequence items indented, `- ` lined up with nested
mappings), quoting (a string is plain unless it would read back as another type, then double-quoted;
with a line break, a literal block) and escapes, which PyYAML's emitter does not produce, so the
subset a JSON value needs is written here: block mappings and sequences, `{}` and `[]` for empty
ones, and scalars plain, single-quoted, double-quoted or literal as yaml.v3's emitter chooses.
"""

from __future__ import annotations

import calendar
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

BEST_INDENT = 4
# Longest simple key in bytes; longer ones are written as `? key`.
_MAX_SIMPLE_KEY = 128
_BREAKS = "\r\n\x85\u2028\u2029"
_BLANKZ = " \t\x00" + _BREAKS

PLAIN, SINGLE, DOUBLE, LITERAL = "plain", "single", "double", "literal"


@dataclass(frozen=True)
class Number:
    """A JSON number as written (yaml.v3 keeps a scalar's text as it read it)."""

    text: str


# ----------------------------------------------------------------------------- resolving


# Plain scalars yaml.v3 reads as null, booleans or special floats. (It knows "<<" too, but never
# looks it up: only a first character among "+-.0-9yYnNtTfFoO~" sends it to that table.)
_RESOLVED = frozenset(
    {
        *("true", "True", "TRUE", "false", "False", "FALSE"),
        *("", "~", "null", "Null", "NULL"),
        *(".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF"),
        *("+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"),
    }
)
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_DATE = r"([0-9]{4})-([0-9][0-9]?)-([0-9][0-9]?)"
_CLOCK = r"([0-9][0-9]?):([0-9][0-9]?):([0-9][0-9]?)(?:[.,][0-9]+)?"
_TIMESTAMPS = (
    re.compile(rf"{_DATE}[Tt]{_CLOCK}(?:Z|[+-]([0-9][0-9]):([0-9][0-9]))"),
    re.compile(rf"{_DATE} {_CLOCK}"),
    re.compile(_DATE),
)
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_PREFIXES = {"b": 2, "o": 8, "x": 16}


def _go_uint(text: str, base: int) -> int | None:
    """Go's strconv.ParseUint(text, base, 64) (base 0: the prefix decides), or None."""
    if not text:
        return None
    if base == 0:
        base = 10
        if text[0] == "0":
            prefix = text[1:2].lower()
            if len(text) >= 3 and prefix in _PREFIXES:
                base, text = _PREFIXES[prefix], text[2:]
            else:
                base, text = 8, text[1:]
    value = 0
    for ch in text:
        digit = _DIGITS.find(ch.lower()) if len(ch.lower()) == 1 else -1
        if not 0 <= digit < base:
            return None
        value = value * base + digit
    return value if value < 1 << 64 else None


def _go_int(text: str, base: int) -> int | None:
    """Go's strconv.ParseInt(text, base, 64), or None."""
    negative = text[:1] == "-"
    value = _go_uint(text[1:] if text[:1] in "+-" and text else text, base)
    if value is None or value > (1 << 63) - (0 if negative else 1):
        return None
    return -value if negative else value


def _go_float(text: str) -> bool:
    """Whether Go's strconv.ParseFloat accepts the decimal `text` (it refuses an overflow)."""
    return float(text) not in (float("inf"), float("-inf"))


def _is_timestamp(text: str) -> bool:
    """Whether yaml.v3 reads the plain `text` as a timestamp (the layouts it tries with time.Parse)."""
    for layout in _TIMESTAMPS:
        match = layout.fullmatch(text)
        if match is None:
            continue
        year, month, day, *clock = (int(part) if part else 0 for part in match.groups())
        # Go's calendar has a year 0, a leap year as 2000 is (Python's starts at 1).
        if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year or 2000, month)[1]:
            return False
        hour, minute, second, zone_hour, zone_minute = (*clock, 0, 0, 0, 0, 0)[:5]
        return hour < 24 and minute < 60 and second < 60 and zone_hour <= 24 and zone_minute <= 60
    return False


def _is_number(plain: str) -> bool:
    """Whether yaml.v3 reads `plain` (underscores removed) as an int or a float."""
    if _go_int(plain, 0) is not None or _go_uint(plain, 0) is not None:
        return True
    if _YAML_FLOAT.fullmatch(plain) and _go_float(plain):
        return True
    for prefix, base in (("0b", 2), ("0o", 8)):
        if plain.startswith(prefix):
            rest = plain[2:]
            return _go_int(rest, base) is not None or _go_uint(rest, base) is not None
        if plain.startswith("-" + prefix):
            return _go_int("-" + plain[3:], base) is not None
    return False


def reads_as_string(text: str) -> bool:
    """Whether yaml.v3 reads `text`, written plain, back as a string (its `resolve`)."""
    if text in _RESOLVED:
        return False
    if text[0] == ".":
        return not (_GO_DOT_FLOAT.fullmatch(text) and _go_float(text))
    if text[0] in "+-0123456789":
        return not (_is_timestamp(text) or _is_number(text.replace("_", "")))
    return True


# ----------------------------------------------------------------------------- scalar analysis


def _printable(ch: str) -> bool:
    code = ord(ch)
    return (
        code == 0x0A
        or 0x20 <= code <= 0x7E
        or 0xA0 <= code <= 0xD7FF
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
    )


@dataclass(frozen=True)
class Analysis:
    """What yaml.v3's emitter may do with a scalar (yaml_emitter_analyze_scalar)."""

    multiline: bool
    plain_allowed: bool  # in block context
    single_quoted_allowed: bool
    block_allowed: bool


def _indicators(text: str) -> bool:
    """Whether `text` holds an indicator that forbids it as a plain scalar in block context."""
    if text.startswith(("---", "...")):
        return True
    preceded_by_whitespace = True
    for i, ch in enumerate(text):
        followed_by_whitespace = i + 1 >= len(text) or text[i + 1] in " \t"
        if i == 0 and (ch in "#,[]{}&*!|>'\"%@`" or (ch in "?:-" and followed_by_whitespace)):
            return True
        if i > 0 and ((ch == ":" and followed_by_whitespace) or (ch == "#" and preceded_by_whitespace)):
            return True
        preceded_by_whitespace = ch in _BLANKZ
    return False


def analyze(text: str) -> Analysis:
    if not text:
        return Analysis(multiline=False, plain_allowed=True, single_quoted_allowed=True, block_allowed=False)
    line_breaks = any(ch in _BREAKS for ch in text)
    special = any(ch != "\t" and not _printable(ch) for ch in text)
    tabs = "\t" in text
    space_break = any(a == " " and b in _BREAKS for a, b in itertools.pairwise(text))
    break_space = any(a in _BREAKS and b == " " for a, b in itertools.pairwise(text))
    edges = text[0] == " " or text[0] in _BREAKS or text[-1] == " " or text[-1] in _BREAKS
    return Analysis(
        multiline=line_breaks,
        plain_allowed=not (edges or break_space or space_break or tabs or special or line_breaks)
        and not _indicators(text),
        single_quoted_allowed=not (break_space or space_break or tabs or special),
        block_allowed=not (text[-1] == " " or space_break or special),
    )


def scalar_style(requested: str, analysis: Analysis, text: str, *, simple_key: bool) -> str:
    """The style yaml.v3's emitter writes a scalar in (block context), given the requested one."""
    style = requested
    if simple_key and analysis.multiline:
        style = DOUBLE
    if style == PLAIN and (not analysis.plain_allowed or (not text and simple_key)):
        style = SINGLE
    if style == SINGLE and not analysis.single_quoted_allowed:
        style = DOUBLE
    if style == LITERAL and (not analysis.block_allowed or simple_key):
        style = DOUBLE
    return style


def _scalar(value: Any) -> tuple[str, str]:
    """A JSON scalar's text and the style yaml.v3's encoder asks for it (its `node`): strings plain
    unless they would read back as another type (then double-quoted), literal with a line feed."""
    if isinstance(value, str):
        if "\n" in value:
            return value, LITERAL
        return value, PLAIN if reads_as_string(value) else DOUBLE
    if isinstance(value, Number):
        return value.text, PLAIN
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value), PLAIN
    raise TypeError(f"not a JSON value: {value!r}")


# ----------------------------------------------------------------------------- writing


_ESCAPES = {
    0x00: "0",
    0x07: "a",
    0x08: "b",
    0x09: "t",
    0x0A: "n",
    0x0B: "v",
    0x0C: "f",
    0x0D: "r",
    0x1B: "e",
    0x22: '"',
    0x5C: "\\",
    0x85: "N",
    0xA0: "_",
    0x2028: "L",
    0x2029: "P",
}


def _escape(ch: str) -> str:
    code = ord(ch)
    if code in _ESCAPES:
        return "\\" + _ESCAPES[code]
    if code <= 0xFF:
        return f"\\x{code:02X}"
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


class _Emitter:
    """yaml.v3's emitter state (column, indentation, whether the last thing written was
    whitespace or indentation) and the parts of it a JSON value goes through."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.column = 0
        self.whitespace = True
        self.indention = True
        self.indent = -1
        self.indents: list[int] = []

    def put(self, text: str) -> None:
        self.out.append(text)
        self.column += len(text)

    def put_break(self, ch: str = "\n") -> None:
        self.out.append(ch)
        self.column = 0
        self.indention = True

    def write_indent(self) -> None:
        indent = max(self.indent, 0)
        if not self.indention or self.column > indent or (self.column == indent and not self.whitespace):
            self.put_break()
        if self.column < indent:
            self.put(" " * (indent - self.column))
        self.whitespace = True

    def write_indicator(
        self, indicator: str, *, need_whitespace: bool, whitespace: bool, indention: bool
    ) -> None:
        if need_whitespace and not self.whitespace:
            self.put(" ")
        self.put(indicator)
        self.whitespace = whitespace
        self.indention = self.indention and indention

    def increase_indent(self, *, flow: bool, sequence_item: bool) -> None:
        # yaml.v3's own rule: inside a sequence item, just past the "- "; elsewhere, to the next
        # multiple of the indent.
        self.indents.append(self.indent)
        if self.indent < 0:
            self.indent = BEST_INDENT if flow else 0
        elif sequence_item:
            self.indent += 2
        else:
            self.indent = BEST_INDENT * ((self.indent + BEST_INDENT) // BEST_INDENT)

    def node(self, value: Any, *, sequence_item: bool = False) -> None:
        if isinstance(value, dict | list) and not value:
            self.empty("{}" if isinstance(value, dict) else "[]", sequence_item=sequence_item)
        elif isinstance(value, dict):
            self.mapping(value, sequence_item=sequence_item)
        elif isinstance(value, list):
            self.sequence(value, sequence_item=sequence_item)
        else:
            text, requested = _scalar(value)
            self.scalar(text, requested, sequence_item=sequence_item)

    def empty(self, brackets: str, *, sequence_item: bool) -> None:
        self.write_indicator(brackets[0], need_whitespace=True, whitespace=True, indention=False)
        self.write_indicator(brackets[1], need_whitespace=False, whitespace=False, indention=False)

    def sequence(self, items: list[Any], *, sequence_item: bool) -> None:
        self.increase_indent(flow=False, sequence_item=sequence_item)
        for item in items:
            self.write_indent()
            self.write_indicator("-", need_whitespace=True, whitespace=False, indention=True)
            self.node(item, sequence_item=True)
        self.indent = self.indents.pop()

    def mapping(self, mapping: dict[str, Any], *, sequence_item: bool) -> None:
        self.increase_indent(flow=False, sequence_item=sequence_item)
        for key, value in mapping.items():
            self.write_indent()
            text, requested = _scalar(key)
            if not analyze(text).multiline and len(text.encode()) <= _MAX_SIMPLE_KEY:
                self.scalar(text, requested, simple_key=True)
                self.write_indicator(":", need_whitespace=False, whitespace=False, indention=False)
            else:
                self.write_indicator("?", need_whitespace=True, whitespace=False, indention=True)
                self.scalar(text, requested)
                self.write_indent()
                self.write_indicator(":", need_whitespace=True, whitespace=False, indention=True)
            self.node(value)
        self.indent = self.indents.pop()

    def scalar(
        self, text: str, requested: str, *, sequence_item: bool = False, simple_key: bool = False
    ) -> None:
        style = scalar_style(requested, analyze(text), text, simple_key=simple_key)
        self.increase_indent(flow=True, sequence_item=sequence_item)
        if style == PLAIN:
            if text and not self.whitespace:
                self.put(" ")
            self.put(text)
            self.whitespace = self.whitespace and not text
            self.indention = False
        elif style == SINGLE:
            self.single_quoted(text)
        elif style == DOUBLE:
            self.double_quoted(text)
        else:
            self.literal(text)
        self.indent = self.indents.pop()

    def single_quoted(self, text: str) -> None:
        self.write_indicator("'", need_whitespace=True, whitespace=False, indention=False)
        breaks = False
        for ch in text:
            if ch in _BREAKS:
                if not breaks and ch == "\n":
                    self.put_break()
                self.put_break(ch)
                breaks = True
                continue
            if breaks:
                self.write_indent()
            self.put("''" if ch == "'" else ch)
            self.indention = breaks = False
        self.write_indicator("'", need_whitespace=False, whitespace=False, indention=False)
        self.indention = False

    def double_quoted(self, text: str) -> None:
        self.write_indicator('"', need_whitespace=True, whitespace=False, indention=False)
        # yaml.v3 escapes every character of a value that starts with a byte order mark.
        bom = text.startswith("\ufeff")
        for ch in text:
            escaped = bom or not _printable(ch) or ch in _BREAKS or ch in '"\\'
            self.put(_escape(ch) if escaped else ch)
        self.write_indicator('"', need_whitespace=False, whitespace=False, indention=False)
        self.indention = False

    def literal(self, text: str) -> None:
        self.write_indicator("|", need_whitespace=True, whitespace=False, indention=False)
        if text[0] == " " or text[0] in _BREAKS:
            self.write_indicator(str(BEST_INDENT), need_whitespace=False, whitespace=False, indention=False)
        if text[-1] not in _BREAKS:
            self.write_indicator("-", need_whitespace=False, whitespace=False, indention=False)
        elif len(text) == 1 or text[-2] in _BREAKS:
            self.write_indicator("+", need_whitespace=False, whitespace=False, indention=False)
        self.whitespace = True
        breaks = True
        for ch in text:
            if ch in _BREAKS:
                self.put_break(ch)
                breaks = True
                continue
            if breaks:
                self.write_indent()
            self.put(ch)
            self.indention = breaks = False


def dump(value: Any) -> str:
    """`value` (a JSON value: dicts in their order, lists, strings, numbers, booleans, None) as
    yaml.v3's Marshal writes the node it parses from that JSON."""
    emitter = _Emitter()
    emitter.node(value)
    emitter.write_indent()
    return "".join(emitter.out)
