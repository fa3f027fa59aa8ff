"""Go's net/netip.ParseAddr as a check: whether an address parses and, if not, Go's words for why.

net/url (Go 1.24.8 on, and 1.25.2 on) holds a bracketed host to this parser, so a URL's error
about a bad IPv6 literal quotes it. Only the verdict matters there (is it IPv4, or does it fail),
so no address value is built.
"""

from __future__ import annotations

from apiserver.cel.library.gostrings import go_quote

_HEX = "0123456789abcdefABCDEF"


class AddrError(ValueError):
    """An address netip refuses; the message is Go's."""

    def __init__(self, given: str, reason: str, at: str = "") -> None:
        where = f" (at {go_quote(at)})" if at else ""
        super().__init__(f"ParseAddr({go_quote(given)}): {reason}{where}")


def is_ipv4(text: str) -> bool:
    """Whether `text` (an octet string) is an IPv4 address (True) or an IPv6 one (False), as
    ParseAddr decides by the first '.', ':' or '%'; AddrError when it is neither."""
    for char in text:
        if char == ".":
            _check_ipv4(text, 0, len(text))
            return True
        if char == ":":
            _check_ipv6(text)
            return False
        if char == "%":
            raise AddrError(text, "missing IPv6 address")
    raise AddrError(text, "unable to parse IP")


def _check_ipv4(given: str, start: int, end: int) -> None:
    """The four dotted decimal fields of given[start:end]: no leading zeros, none above 255."""
    text, value, digits, fields = given[start:end], 0, 0, 0
    for index, char in enumerate(text):
        if "0" <= char <= "9":
            if digits == 1 and value == 0:
                raise AddrError(given, "IPv4 field has octet with leading zero")
            value, digits = value * 10 + ord(char) - ord("0"), digits + 1
            if value > 255:
                raise AddrError(given, "IPv4 field has value >255")
        elif char == ".":
            if index == 0 or index == len(text) - 1 or text[index - 1] == ".":
                raise AddrError(given, "IPv4 field must have at least one digit", text[index:])
            if fields == 3:
                raise AddrError(given, "IPv4 address too long")
            fields, value, digits = fields + 1, 0, 0
        else:
            raise AddrError(given, "unexpected character", text[index:])
    if fields < 3:
        raise AddrError(given, "IPv4 address too short")


def _hex_group(given: str, rest: str) -> int:
    """How many hex digits open `rest` (at most 4, the group's value below 2^16)."""
    count = 0
    while count < len(rest) and rest[count] in _HEX:
        if count > 3:
            raise AddrError(given, "each group must have 4 or less digits", rest)
        count += 1
    if count == 0:
        raise AddrError(given, "each colon-separated field must have at least one digit", rest)
    return count


def _check_ipv6(given: str) -> None:
    rest, _, zone = given.partition("%")
    if "%" in given and not zone:
        raise AddrError(given, "zone must be a non-empty string")
    ellipsis, filled = -1, 0
    if rest.startswith("::"):
        ellipsis, rest = 0, rest[2:]
        if not rest:
            return
    while filled < 16:
        digits = _hex_group(given, rest)
        if digits < len(rest) and rest[digits] == ".":
            _embedded_ipv4(given, rest, zone, filled, ellipsis)
            rest, filled = "", filled + 4
            break
        filled, rest = filled + 2, rest[digits:]
        if not rest:
            break
        if rest[0] != ":":
            raise AddrError(given, "unexpected character, want colon", rest)
        if len(rest) == 1:
            raise AddrError(given, "colon must be followed by more characters", rest)
        rest = rest[1:]
        if rest[0] == ":":
            if ellipsis >= 0:
                raise AddrError(given, "multiple :: in address", rest)
            ellipsis, rest = filled, rest[1:]
            if not rest:
                break
    _check_length(given, rest, filled, ellipsis)


def _embedded_ipv4(given: str, rest: str, zone: str, filled: int, ellipsis: int) -> None:
    if ellipsis < 0 and filled != 12:
        raise AddrError(given, "embedded IPv4 address must replace the final 2 fields of the address", rest)
    if filled + 4 > 16:
        raise AddrError(given, "too many hex fields to fit an embedded IPv4 at the end of the address", rest)
    end = len(given) - (len(zone) + 1 if zone else 0)
    _check_ipv4(given, end - len(rest), end)


def _check_length(given: str, rest: str, filled: int, ellipsis: int) -> None:
    if rest:
        raise AddrError(given, "trailing garbage after address", rest)
    if filled < 16 and ellipsis < 0:
        raise AddrError(given, "address string too short")
    if filled == 16 and ellipsis >= 0:
        raise AddrError(given, "the :: must expand to at least one field of zeros")
