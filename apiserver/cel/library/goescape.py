"""Go net/url's percent-escaping: which bytes each part of a URL must escape, and decoding with
Go's refusals (a bad escape anywhere; in a host, an ASCII byte that is not allowed there).

Strings are octet strings (see gostrings). The rules follow RFC 3986 loosely, as Go does: a path
keeps '/', ';' and ',' (it is handled whole), a host keeps the sub-delimiters and ':[]<>"', a
fragment keeps '!()*'.
"""

from __future__ import annotations

import string

from apiserver.cel.library.gostrings import go_quote

PATH, PATH_SEGMENT, HOST, ZONE, USER_PASSWORD, QUERY_COMPONENT, FRAGMENT = range(1, 8)

_ALPHANUMERIC = frozenset(string.ascii_letters + string.digits)
_HOST_KEEPS = frozenset("!$&'()*+,;=:[]<>\"")
_RESERVED = frozenset("$&+,/:;=?@")
_RESERVED_ESCAPED = {PATH: "?", PATH_SEGMENT: "/;,?", USER_PASSWORD: "@/?:"}
_SUB_DELIMITERS = frozenset("!$&'()*+,;=:@[]%")
_HEX = "0123456789abcdefABCDEF"


class URLError(ValueError):
    """A URL, or a piece of one, that Go's net/url refuses; the message is Go's."""


def should_escape(char: str, mode: int) -> bool:
    """Whether the byte `char` is written %XX in the part of a URL that `mode` names."""
    if char in _ALPHANUMERIC or char in "-_.~":
        return False
    if mode in (HOST, ZONE) and char in _HOST_KEEPS:
        return False
    if char in _RESERVED:
        if mode in _RESERVED_ESCAPED:
            return char in _RESERVED_ESCAPED[mode]
        if mode == QUERY_COMPONENT:
            return True
        if mode == FRAGMENT:
            return False
    return not (mode == FRAGMENT and char in "!()*")


def escape(text: str, mode: int) -> str:
    """`text` with each byte `mode` does not allow written %XX (a query's space as '+')."""
    out = []
    for char in text:
        if char == " " and mode == QUERY_COMPONENT:
            out.append("+")
        elif should_escape(char, mode):
            out.append(f"%{ord(char):02X}")
        else:
            out.append(char)
    return "".join(out)


def _check_escape(text: str, index: int, mode: int) -> None:
    """The escape at text[index] ('%'): two hex digits; in a host only a non-ASCII byte or
    %25; in a zone only a byte a host may hold, a space or %25."""
    if index + 2 >= len(text) or text[index + 1] not in _HEX or text[index + 2] not in _HEX:
        raise URLError(f"invalid URL escape {go_quote(text[index : index + 3])}")
    escaped = text[index : index + 3]
    if mode == HOST and int(text[index + 1], 16) < 8 and escaped != "%25":
        raise URLError(f"invalid URL escape {go_quote(escaped)}")
    if mode == ZONE:
        byte = chr(int(escaped[1:], 16))
        if escaped != "%25" and byte != " " and should_escape(byte, HOST):
            raise URLError(f"invalid URL escape {go_quote(escaped)}")


def unescape(text: str, mode: int) -> str:
    """`text` with its %XX escapes decoded (and, in a query, '+' as a space); URLError as Go
    refuses it."""
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char == "%":
            _check_escape(text, index, mode)
            out.append(chr(int(text[index + 1 : index + 3], 16)))
            index += 3
            continue
        if mode in (HOST, ZONE) and char < "\x80" and should_escape(char, mode):
            raise URLError(f"invalid character {go_quote(char)} in host name")
        out.append(" " if char == "+" and mode == QUERY_COMPONENT else char)
        index += 1
    return "".join(out)


def valid_encoded(text: str, mode: int) -> bool:
    """Whether `text` holds no byte that escaping for `mode` would change (escapes allowed)."""
    return all(char in _SUB_DELIMITERS or not should_escape(char, mode) for char in text)
