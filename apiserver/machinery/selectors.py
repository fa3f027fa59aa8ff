"""Label and field selectors, parsed and matched as k8s.io/apimachinery does.

Label selectors follow `labels.Parse` (pkg/labels/selector.go): its lexer and recursive-descent
parser, the `NewRequirement` validation and the messages both produce. Field selectors follow
`fields.ParseSelector` (pkg/fields/selector.go) and then the apiserver's field label conversion,
which rejects fields a kind does not support.

kube-apiserver answers a selector it cannot parse or convert with 400 BadRequest carrying the
error text unchanged (handlers/get.go wraps both with `errors.NewBadRequest(err.Error())`), so
every error here is `errors.bad_request(<upstream text>)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

from apiserver.machinery import errors, formats


class Operator(StrEnum):
    """selection.Operator; the values are upstream's spellings."""

    DOES_NOT_EXIST = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    IN = "in"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    EXISTS = "exists"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


# The order upstream lists them in "expected: ..." messages.
_BINARY_OPERATORS = (
    Operator.IN,
    Operator.NOT_IN,
    Operator.EQUALS,
    Operator.DOUBLE_EQUALS,
    Operator.NOT_EQUALS,
    Operator.GREATER_THAN,
    Operator.LESS_THAN,
)

# Label keys and values are validated as everywhere else (apiserver.machinery.formats, upstream's
# IsQualifiedName and IsValidLabelValue).
label_key_errors = formats.is_qualified_name
label_value_errors = formats.is_valid_label_value


def _field_invalid(path: str, value: str, detail: str) -> str:
    # field.Invalid(path, value, detail).Error(); a nil *field.Path prints as "<nil>".
    return f"{path}: Invalid value: {errors.go_quote(value)}: {detail}"


# ---------------------------------------------------------------------------------------------
# Go integer parsing, for the `gt` and `lt` operators (strconv.ParseInt(s, 10, 64)).

_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _parse_int64(text: str) -> int | None:
    if not _INT_RE.match(text):
        return None
    number = int(text)
    if not _INT64_MIN <= number <= _INT64_MAX:
        return None
    return number


# ---------------------------------------------------------------------------------------------
# Label selectors.


@dataclass(frozen=True)
class Requirement:
    """One requirement of a label selector: `key <operator> values`."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            have = _parse_int64(labels[self.key])
            want = _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op is Operator.GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op is Operator.IN:
            return f"{self.key} in ({values})"
        if op is Operator.NOT_IN:
            return f"{self.key} notin ({values})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{values}"


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector: the AND of its requirements, kept sorted by key like upstream."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (it matches every object)."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def requires_exact_match(self, key: str) -> str | None:
        """The single value `key` must have (`k=v`, `k==v`, `k in (v)`), as RequiresExactMatch."""
        for r in self.requirements:
            if r.key == key:
                exact = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
                if r.operator in exact and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def format_label_selector(selector: LabelSelector) -> str:
    """The canonical string of a selector (upstream `Selector.String()`)."""
    return str(selector)


class _Token(Enum):
    ERROR = 0
    END = 1
    CLOSED_PAR = 2
    COMMA = 3
    DOES_NOT_EXIST = 4
    DOUBLE_EQUALS = 5
    EQUALS = 6
    GREATER_THAN = 7
    IDENTIFIER = 8
    IN = 9
    LESS_THAN = 10
    NOT_EQUALS = 11
    NOT_IN = 12
    OPEN_PAR = 13


_LITERAL_TOKENS = {
    ")": _Token.CLOSED_PAR,
    ",": _Token.COMMA,
    "!": _Token.DOES_NOT_EXIST,
    "==": _Token.DOUBLE_EQUALS,
    "=": _Token.EQUALS,
    ">": _Token.GREATER_THAN,
    "in": _Token.IN,
    "<": _Token.LESS_THAN,
    "!=": _Token.NOT_EQUALS,
    "notin": _Token.NOT_IN,
    "(": _Token.OPEN_PAR,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
# Upstream's lexer reads bytes and uses 0 as its end-of-input sentinel.
_EOF = "\x00"


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def read(self) -> str:
        if self.pos < len(self.text):
            ch = self.text[self.pos]
            self.pos += 1
            return ch
        return _EOF

    def unread(self) -> None:
        self.pos -= 1

    def lex(self) -> tuple[_Token, str]:
        ch = self.read()
        while ch in _WHITESPACE:
            ch = self.read()
        if ch == _EOF:
            return _Token.END, ""
        self.unread()
        if ch in _SPECIAL:
            return self._special()
        return self._identifier_or_keyword()

    def _identifier_or_keyword(self) -> tuple[_Token, str]:
        chars: list[str] = []
        while True:
            ch = self.read()
            if ch == _EOF:
                break
            if ch in _SPECIAL or ch in _WHITESPACE:
                self.unread()
                break
            chars.append(ch)
        word = "".join(chars)
        return _LITERAL_TOKENS.get(word, _Token.IDENTIFIER), word

    def _special(self) -> tuple[_Token, str]:
        buffer = ""
        last: tuple[_Token, str] | None = None
        while True:
            ch = self.read()
            if ch == _EOF:
                break
            if ch in _SPECIAL:
                buffer += ch
                if buffer in _LITERAL_TOKENS:
                    last = (_LITERAL_TOKENS[buffer], buffer)
                elif last is not None:
                    self.unread()
                    break
            else:
                self.unread()
                break
        if last is None:
            return _Token.ERROR, f"error expected: keyword found '{buffer}'"
        return last


class _ParseError(Exception):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        lexer = _Lexer(text)
        self.items: list[tuple[_Token, str]] = []
        while True:
            item = lexer.lex()
            self.items.append(item)
            if item[0] is _Token.END:
                break
        self.position = 0

    def _item(self, index: int, values_context: bool) -> tuple[_Token, str]:
        # Past the end upstream would index out of range; the end token is sticky here.
        tok, lit = self.items[min(index, len(self.items) - 1)]
        if values_context and tok in (_Token.IN, _Token.NOT_IN):
            tok = _Token.IDENTIFIER
        return tok, lit

    def lookahead(self, values_context: bool = True) -> tuple[_Token, str]:
        return self._item(self.position, values_context)

    def consume(self, values_context: bool = True) -> tuple[_Token, str]:
        self.position += 1
        return self._item(self.position - 1, values_context)

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                try:
                    requirements.append(self._requirement())
                except _ParseError as exc:
                    raise _ParseError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.consume()
                if tok is _Token.END:
                    return requirements
                if tok is _Token.COMMA:
                    tok2, lit2 = self.lookahead()
                    if tok2 not in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                        raise _ParseError(f"found '{lit2}', expected: identifier after ','")
                else:
                    raise _ParseError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok is _Token.END:
                return requirements
            else:
                raise _ParseError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        key, operator = self._key_and_inferred_operator()
        if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            return _new_requirement(key, operator, [])
        operator = self._operator()
        values = self._values() if operator in (Operator.IN, Operator.NOT_IN) else self._exact_value()
        return _new_requirement(key, operator, sorted(values))

    def _key_and_inferred_operator(self) -> tuple[str, Operator | None]:
        operator: Operator | None = None
        tok, literal = self.consume()
        if tok is _Token.DOES_NOT_EXIST:
            operator = Operator.DOES_NOT_EXIST
            tok, literal = self.consume()
        if tok is not _Token.IDENTIFIER:
            raise _ParseError(f"found '{literal}', expected: identifier")
        key_errors = label_key_errors(literal)
        if key_errors:
            raise _ParseError(_field_invalid("<nil>", literal, "; ".join(key_errors)))
        if self.lookahead()[0] in (_Token.END, _Token.COMMA) and operator is None:
            operator = Operator.EXISTS
        return literal, operator

    def _operator(self) -> Operator:
        tok, lit = self.consume(values_context=False)
        operators = {
            _Token.IN: Operator.IN,
            _Token.EQUALS: Operator.EQUALS,
            _Token.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
            _Token.GREATER_THAN: Operator.GREATER_THAN,
            _Token.LESS_THAN: Operator.LESS_THAN,
            _Token.NOT_IN: Operator.NOT_IN,
            _Token.NOT_EQUALS: Operator.NOT_EQUALS,
        }
        if tok not in operators:
            expected = ", ".join(op.value for op in _BINARY_OPERATORS)
            raise _ParseError(f"found '{lit}', expected: {expected}")
        return operators[tok]

    def _values(self) -> set[str]:
        tok, lit = self.consume()
        if tok is not _Token.OPEN_PAR:
            raise _ParseError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_Token.IDENTIFIER, _Token.COMMA):
            values = self._identifiers()
            if self.consume()[0] is not _Token.CLOSED_PAR:
                raise _ParseError(f"found '{lit}', expected: ')'")
            return values
        if tok is _Token.CLOSED_PAR:
            self.consume()
            return {""}
        raise _ParseError(f"found '{lit}', expected: ',', ')' or identifier")

    def _identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok is _Token.IDENTIFIER:
                values.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 is _Token.COMMA:
                    continue
                if tok2 is _Token.CLOSED_PAR:
                    return values
                raise _ParseError(f"found '{lit2}', expected: ',' or ')'")
            if tok is _Token.COMMA:
                if not values:
                    values.add("")  # "(,"
                tok2, _ = self.lookahead()
                if tok2 in (_Token.CLOSED_PAR, _Token.COMMA):
                    values.add("")  # ",)" and ",,"
                if tok2 is _Token.CLOSED_PAR:
                    return values
                continue
            raise _ParseError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        if self.lookahead()[0] in (_Token.END, _Token.COMMA):
            return {""}
        tok, lit = self.consume()
        if tok is _Token.IDENTIFIER:
            return {lit}
        raise _ParseError(f"found '{lit}', expected: identifier")


def _new_requirement(key: str, operator: Operator, values: list[str]) -> Requirement:
    """labels.NewRequirement's checks for what the parser can produce, aggregated like upstream."""
    problems: list[str] = []
    key_errors = label_key_errors(key)
    if key_errors:
        problems.append(_field_invalid("key", key, "; ".join(key_errors)))
    if operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
        for i, value in enumerate(values):
            if _parse_int64(value) is None:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                problems.append(_field_invalid(f"values[{i}]", value, detail))
    for i, value in enumerate(values):
        value_errors = label_value_errors(value)
        if value_errors:
            problems.append(_field_invalid(f"values[{i}][{key}]", value, "; ".join(value_errors)))
    if problems:
        raise _ParseError(errors.aggregate_message(problems))
    return Requirement(key, operator, tuple(values))


def parse_label_selector(text: str) -> LabelSelector:
    """Parses a label selector as `labels.Parse`; a bad one raises 400 with upstream's message."""
    try:
        requirements = _Parser(text).parse()
    except _ParseError as exc:
        raise errors.bad_request(str(exc)) from None
    # Stable by key, as upstream's sort of so few requirements is in practice.
    requirements.sort(key=lambda r: r.key)
    return LabelSelector(tuple(requirements))


# ---------------------------------------------------------------------------------------------
# Field selectors.


@dataclass(frozen=True)
class FieldRequirement:
    """One term of a field selector: `field=value` or `field!=value` (`==` parses as `=`)."""

    field: str
    operator: Operator
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        # fields.Set.Get answers "" for an absent field.
        have = fields.get(self.field, "")
        return have == self.value if self.operator is Operator.EQUALS else have != self.value

    def __str__(self) -> str:
        op = "=" if self.operator is Operator.EQUALS else "!="
        return f"{self.field}{op}{escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: the AND of its requirements, in upstream's (sorted) order."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(r.matches(fields) for r in self.requirements)

    def requires_exact_match(self, field: str) -> str | None:
        """The value `field` is pinned to by an `=` term (e.g. metadata.name), as RequiresExactMatch."""
        for r in self.requirements:
            if r.field == field and r.operator is Operator.EQUALS:
                return r.value
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def escape_field_value(value: str) -> str:
    """fields.EscapeValue: backslash-escapes `\\`, `,` and `=`."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_field_value(text: str) -> str:
    """fields.UnescapeValue; raises 400 on an invalid escape or an unescaped `,` or `=`."""
    if not any(c in text for c in "\\,="):
        return text
    out: list[str] = []
    in_slash = False
    for c in text:
        if in_slash:
            if c not in "\\,=":
                raise errors.bad_request(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Upstream formats the rune with %v, which prints its code point.
            raise errors.bad_request(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise errors.bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    if not text:
        return []
    terms = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def field_label_not_supported(label: str) -> str:
    """The message of a kind's own field label conversion func (e.g. Event's) for an unknown field."""
    return f"field label not supported: {label}"


def field_label_not_known(label: str) -> str:
    """runtime.DefaultMetaV1FieldSelectorConversion's message, for kinds without their own func
    (RoleBinding among them)."""
    return f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'


DEFAULT_SELECTABLE_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


def parse_field_selector(
    text: str,
    allowed: Collection[str] | Mapping[str, str],
    *,
    unsupported: Callable[[str], str] = field_label_not_supported,
) -> FieldSelector:
    """Parses a field selector as `fields.ParseSelector`, then converts its fields.

    `allowed` names the fields the kind supports; a mapping also renames them (the way upstream's
    conversion maps events.k8s.io `regarding.kind` to `involvedObject.kind`). A field outside it
    raises 400 with `unsupported(field)`: `field_label_not_supported` (the default, as kinds with
    their own conversion answer) or `field_label_not_known` (the default metav1 conversion).
    """
    requirements: list[FieldRequirement] = []
    for requirement in parse_field_terms(text).requirements:
        field = requirement.field
        if field not in allowed:
            raise errors.bad_request(unsupported(field))
        converted = allowed[field] if isinstance(allowed, Mapping) else field
        requirements.append(FieldRequirement(converted, requirement.operator, requirement.value))
    return FieldSelector(tuple(requirements))


def parse_field_terms(text: str) -> FieldSelector:
    """`fields.ParseSelector` alone: the terms as written, no field checked or converted (what
    upstream's RequestInfoFactory reads a list's `metadata.name` from)."""
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        lhs, op, rhs = split
        operator = Operator.NOT_EQUALS if op == "!=" else Operator.EQUALS
        requirements.append(FieldRequirement(lhs, operator, unescape_field_value(rhs)))
    return FieldSelector(tuple(requirements))


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: matchLabels and matchExpressions all hold; {} matches all."""
    match_labels = selector.get("matchLabels") or {}
    if isinstance(match_labels, dict):
        for key, value in match_labels.items():
            if labels.get(str(key)) != value:
                return False
    for expression in selector.get("matchExpressions") or []:
        if not isinstance(expression, dict):
            return False
        key = str(expression.get("key", ""))
        operator = expression.get("operator")
        values = {str(v) for v in expression.get("values") or []}
        present = key in labels
        if operator == "In":
            ok = present and labels[key] in values
        elif operator == "NotIn":
            ok = not present or labels[key] not in values
        elif operator == "Exists":
            ok = present
        elif operator == "DoesNotExist":
            ok = not present
        else:
            return False
        if not ok:
            return False
    return True
