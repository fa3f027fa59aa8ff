"""Go's strconv.Quote, for messages that quote a URL or a piece of one as Go's `%q` does.

Strings here are "octet strings": each character one byte (0-255) of the UTF-8 text, the way Go
sees a string; bytes that are not UTF-8 are quoted as `\\xNN`, as Go quotes them.
"""

from __future__ import annotations

_NAMED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def octets(text: str) -> str:
    """`text`'s UTF-8 bytes, one character a byte."""
    return text.encode("utf-8").decode("latin-1")


def text_of(octet_string: str) -> str:
    """The text an octet string holds; bytes that are not UTF-8 become U+FFFD, as CEL strings
    must be valid UTF-8."""
    return octet_string.encode("latin-1").decode("utf-8", errors="replace")


def _rune_at(data: bytes, index: int) -> tuple[str | None, int]:
    """The character UTF-8 encodes at `index` and its length; None (length 1) for a bad byte."""
    for size in (1, 2, 3, 4):
        try:
            char = data[index : index + size].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(char) == 1:
            return char, size
    return None, 1


def _quote_rune(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    if char.isprintable():
        return char
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def go_quote(octet_string: str) -> str:
    """strconv.Quote of the Go string whose bytes are `octet_string`'s characters."""
    data = octet_string.encode("latin-1")
    out, index = ['"'], 0
    while index < len(data):
        char, size = _rune_at(data, index)
        out.append(f"\\x{data[index]:02x}" if char is None else _quote_rune(char))
        index += size
    out.append('"')
    return "".join(out)
