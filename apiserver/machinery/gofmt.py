"""How Go's fmt and encoding/json print decoded JSON values, for error messages that quote values
exactly as upstream does (%v, %s, %#v, reflect type names, compact JSON)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any


def go_float(value: float) -> str:
    """fmt's %v of a float64: shortest digits, exponent form below 1e-4 and from 1e6."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits)
    point = len(digits) + int(digits_tuple.exponent)
    exp = point - 1
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def go_v(value: Any) -> str:
    """fmt's %v of a decoded JSON value (maps print with sorted keys, strings unquoted)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(go_v(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_v(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def json_kind(value: Any) -> str:
    """How encoding/json names a decoded JSON value in an UnmarshalTypeError ("cannot unmarshal
    <kind> into ...")."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


def go_type(value: Any) -> str:
    """The Go type a decoded JSON value has (reflect.TypeOf(...).String())."""
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "%!s(<nil>)"


def go_s(value: Any) -> str:
    """fmt's %s of a decoded JSON value: strings as they are, anything else flagged as Go does."""
    if isinstance(value, str):
        return value
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, list):
        return "[" + " ".join(go_s(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_s(value[k])}" for k in sorted(value)) + "]"
    return f"%!s({go_type(value)}={go_v(value)})"


def go_sharp_v(value: Any) -> str:
    """fmt's %#v of a decoded JSON value held in an interface{}."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_sharp_v(v) for v in value) + "}"
    if isinstance(value, dict):
        shown = ", ".join(f"{go_sharp_v(k)}:{go_sharp_v(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + shown + "}"
    return str(value)


def go_json(value: Any, *, struct: bool = False) -> str:
    """encoding/json's compact output (HTML-safe escapes): keys sorted as a map's are, or in the
    order given with `struct` (a struct's fields)."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=not struct, ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _go_quote(value: str) -> str:
    # %q of a string; errors.go_quote is the same, but errors sits above this module.
    return json.dumps(value, ensure_ascii=False)


_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_COMPONENT = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]*)")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration (`30s`, `1m0s`, `1.5h`, `-2ms`), with time.ParseDuration's errors."""
    quoted = _go_quote(text)
    rest = text
    sign = 1.0
    if rest[:1] in ("-", "+"):
        sign = -1.0 if rest[0] == "-" else 1.0
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"time: invalid duration {quoted}")
    total = 0.0
    while rest:
        match = _COMPONENT.match(rest)
        assert match is not None  # both groups may be empty
        number, unit = match.groups()
        if number in ("", "."):
            raise ValueError(f"time: invalid duration {quoted}")
        if not unit:
            raise ValueError(f"time: missing unit in duration {quoted}")
        if unit not in _UNITS:
            raise ValueError(f"time: unknown unit {_go_quote(unit)} in duration {quoted}")
        total += float(number) * _UNITS[unit]
        rest = rest[match.end() :]
    if total > 9223372036.854775807:
        raise ValueError(f"time: invalid duration {quoted}")
    return sign * total
