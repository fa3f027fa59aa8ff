"""Kubernetes' format library: `format.dns1123Label()` and the other named formats,
`format.named(name)`, and a format's `validate(text)`, with the messages of Kubernetes 1.33 (the
API's name checks; kube-openapi's strfmt for the CRD formats; Go's url.ParseRequestURI for `uri`).

`validate` and `format.named` return optionals, which a Python function cannot hand cel-expr-python:
the checker declares them as upstream does (DECLARATIONS), and the engine runs a rewritten tree
(cel/rewrite.py) that calls ERRORS and LOOKUP, whose results optional.ofNonZeroValue wraps.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library import neturl
from apiserver.cel.library.goescape import URLError
from apiserver.cel.library.gostrings import octets, text_of
from apiserver.cel.library.types import NAMED_FORMAT_TYPE, NamedFormat
from apiserver.machinery import formats

T = cel.Type

# govalidator's estimates of its base64 and URL regular expressions' lengths.
_BASE64_LENGTH = 84
_URL_LENGTH = 1103
_UUID_PATTERN = re.compile(
    r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.ASCII | re.IGNORECASE
)
_UUID_PATTERN_LENGTH = len("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})")
_DATE = re.compile(r"([+-][0-9]{3}|[0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))", re.DOTALL)
_DATE_TIME_PATTERN_LENGTH = len(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True)
class Format:
    """One named format: upstream's name for it, its check, and the regex length its cost assumes."""

    name: str
    validate: Callable[[str], list[str]]
    max_regex_size: int


def _is_date(text: str) -> bool:
    """time.Parse("2006-01-02", text): a signed or four-digit year, a month of 1 to 12, a day of
    that month (February 29 in leap years)."""
    matched = _DATE.fullmatch(text)
    if matched is None:
        return False
    year, month, day = (int(part) for part in matched.groups())
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= day <= _DAYS[month - 1] + (1 if month == 2 and leap else 0)


def _is_date_time(text: str) -> bool:
    """strfmt.IsDateTime: a date, a 't', and a time it reads with its own pattern."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    matched = _TIME.fullmatch(parts[1])
    if matched is None:
        return False
    hours, minutes, seconds = matched.group(1, 2, 3)
    return hours <= "23" and minutes <= "59" and seconds <= "59"


def _uri(text: str) -> list[str]:
    try:
        neturl.parse_request_uri(octets(text))
    except URLError as failure:
        return [text_of(str(failure))]
    return []


def _check(valid: Callable[[str], bool], message: str) -> Callable[[str], list[str]]:
    return lambda text: [] if valid(text) else [message]


def _name(check: Callable[[str, bool], list[str]], prefix: bool) -> Callable[[str], list[str]]:
    return lambda text: check(text, prefix)


FORMATS: dict[str, Format] = {
    "dns1123Label": Format("DNS1123Label", _name(formats.name_is_dns_label, False), 30),
    "dns1123Subdomain": Format("DNS1123Subdomain", _name(formats.name_is_dns_subdomain, False), 60),
    "dns1035Label": Format("DNS1035Label", _name(formats.name_is_dns1035_label, False), 30),
    "qualifiedName": Format("QualifiedName", formats.is_qualified_name, 60),
    "dns1123LabelPrefix": Format("DNS1123LabelPrefix", _name(formats.name_is_dns_label, True), 30),
    "dns1123SubdomainPrefix": Format(
        "DNS1123SubdomainPrefix", _name(formats.name_is_dns_subdomain, True), 60
    ),
    "dns1035LabelPrefix": Format("DNS1035LabelPrefix", _name(formats.name_is_dns1035_label, True), 30),
    "labelValue": Format("LabelValue", formats.is_valid_label_value, 40),
    "uri": Format("URI", _uri, _URL_LENGTH),
    "uuid": Format(
        "uuid",
        _check(lambda text: _UUID_PATTERN.fullmatch(text) is not None, "does not match the UUID format"),
        _UUID_PATTERN_LENGTH,
    ),
    "byte": Format(
        "byte", _check(lambda text: _BASE64.fullmatch(text) is not None, "invalid base64"), _BASE64_LENGTH
    ),
    "date": Format("date", _check(_is_date, "invalid date"), _DATE_TIME_PATTERN_LENGTH),
    "datetime": Format("datetime", _check(_is_date_time, "invalid datetime"), _DATE_TIME_PATTERN_LENGTH),
}
# The longest regex any format's cost assumes (a bound when the format is not known).
LONGEST_REGEX = max(known.max_regex_size for known in FORMATS.values())


def format_of(value: Any) -> Format | None:
    """The format a NamedFormat value names."""
    return FORMATS.get(getattr(value, "value", ""))


def errors(named: Any, text: str) -> list[str]:
    """What `named.validate(text)` holds: the format's messages for `text`, empty when valid."""
    known = format_of(named)
    if known is None:
        raise ValueError("no such overload")
    return known.validate(text)


def lookup(name: str) -> Any:
    """The format `name` names, or the empty NamedFormat (which ofNonZeroValue makes none)."""
    return NamedFormat(value=name if name in FORMATS else "")


def _constant(name: str) -> Any:
    return cel.FunctionDecl(
        f"format.{name}",
        [cel.Overload(f"format.{name}", NAMED_FORMAT_TYPE, [], impl=lambda: NamedFormat(value=name))],
    )


# The names the rewritten tree calls (not declared to the checker, so no expression can).
ERRORS = "kubernetes.format.errors"
LOOKUP = "kubernetes.format.lookup"

FUNCTIONS = tuple(_constant(name) for name in FORMATS)
RUNTIME_FUNCTIONS = (
    cel.FunctionDecl(
        ERRORS,
        [
            cel.Overload(
                "kubernetes_format_errors", T.List(T.STRING), [NAMED_FORMAT_TYPE, T.STRING], impl=errors
            )
        ],
    ),
    cel.FunctionDecl(
        LOOKUP, [cel.Overload("kubernetes_format_lookup", NAMED_FORMAT_TYPE, [T.STRING], impl=lookup)]
    ),
)

# validate and format.named as upstream declares them, for the checker (optional results).
DECLARATIONS = """
  - name: validate
    overloads:
      - id: format-validate
        target:
          type_name: kubernetes.NamedFormat
        args:
          - type_name: string
        return:
          type_name: optional_type
          params:
            - type_name: list
              params:
                - type_name: string
  - name: format.named
    overloads:
      - id: format-named
        args:
          - type_name: string
        return:
          type_name: optional_type
          params:
            - type_name: kubernetes.NamedFormat
"""
