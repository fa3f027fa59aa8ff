"""The syntax errors Go's encoding/json reports for malformed JSON text, worded as it words them.

Go checks a document's syntax before decoding anything (its scanner), so for malformed text every
decoder upstream uses (encoding/json, sigs.k8s.io/json, json-patch) fails with the same error:
`unexpected end of JSON input`, or `invalid character 'x' <where>` naming the first byte the
grammar refuses. Python's decoder words its errors otherwise; `syntax_error` gives Go's.
"""

from __future__ import annotations

UNEXPECTED_END = "unexpected end of JSON input"

_SPACE = frozenset(b" \t\r\n")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'bfnrt\\/"')
_OPENINGS = {ord("{"): ord("}"), ord("["): ord("]")}
_NUMBER_STARTS = _DIGITS | {ord("-")}
_EXPONENT = frozenset(b"eE")
_SIGNS = frozenset(b"+-")
_LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
# What Go's scanner steps with at the end of the input: a space, which ends a number and fails
# inside a literal or an escape.
_END = ord(" ")


class _SyntaxError(Exception):
    pass


def syntax_error(data: bytes) -> str | None:
    """Go's error for `data` if it is not one well-formed JSON value, else None."""
    try:
        _Scanner(data).document()
    except _SyntaxError as exc:
        return str(exc)
    return None


def quote_char(byte: int) -> str:
    """How Go's scanner quotes the byte it refuses (a byte of 0x80 or more as the rune it codes)."""
    char = chr(byte)
    if char in "'\"":
        return f"'{char}'" if char == '"' else "'\\''"
    if char == "\\":
        return "'\\\\'"
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    if char in escapes:
        return f"'{escapes[char]}'"
    if byte < 0x20 or byte == 0x7F:
        return f"'\\x{byte:02x}'"
    if not char.isprintable():
        return f"'\\u{byte:04x}'"
    return f"'{char}'"


class _Scanner:
    """A walk over the bytes of a document that stops at the first one Go's scanner refuses. It
    keeps its own stack of open objects and arrays, so no nesting depth exhausts Python's."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.open: list[int] = []  # the `{` or `[` of each object or array being read

    def document(self) -> None:
        self.values()
        while self.open:
            if self.after_value():
                self.values()
        self.skip_space()
        if self.pos < len(self.data):
            raise self.invalid(self.data[self.pos], "after top-level value")

    def values(self) -> None:
        """A value, and the first value inside each object or array it opens."""
        while self.value():
            pass

    def peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def skip_space(self) -> None:
        while self.pos < len(self.data) and self.data[self.pos] in _SPACE:
            self.pos += 1

    def next_byte(self) -> int:
        """The byte at the position, or the space Go's scanner steps with at the end."""
        byte = self.peek()
        return _END if byte is None else byte

    @staticmethod
    def invalid(byte: int, where: str) -> _SyntaxError:
        return _SyntaxError(f"invalid character {quote_char(byte)} {where}")

    def value(self) -> bool:
        """A value; True where it opens an object or array whose first value comes next."""
        self.skip_space()
        byte = self.peek()
        if byte is None:
            raise _SyntaxError(UNEXPECTED_END)
        if byte in _OPENINGS:
            self.pos += 1
            return self.open_container(byte)
        if byte == ord('"'):
            self.string()
        elif byte in _NUMBER_STARTS:
            self.number()
        elif byte in _LITERALS:
            self.literal(_LITERALS[byte])
        else:
            raise self.invalid(byte, "looking for beginning of value")
        return False

    def open_container(self, opening: int) -> bool:
        self.skip_space()
        if self.peek() == _OPENINGS[opening]:
            self.pos += 1  # empty
            return False
        self.open.append(opening)
        if opening == ord("{"):
            self.key()
        return True

    def after_value(self) -> bool:
        """What follows a value inside an object or array: True for a comma (another value comes),
        False for the end of the object or array."""
        self.skip_space()
        byte = self.peek()
        if byte is None:
            raise _SyntaxError(UNEXPECTED_END)
        opening = self.open[-1]
        self.pos += 1
        if byte == ord(","):
            if opening == ord("{"):
                self.key()
            return True
        if byte == _OPENINGS[opening]:
            self.open.pop()
            return False
        where = "after object key:value pair" if opening == ord("{") else "after array element"
        raise self.invalid(byte, where)

    def key(self) -> None:
        """An object's key and its colon."""
        self.skip_space()
        byte = self.peek()
        if byte is None:
            raise _SyntaxError(UNEXPECTED_END)
        if byte != ord('"'):
            raise self.invalid(byte, "looking for beginning of object key string")
        self.string()
        self.skip_space()
        byte = self.peek()
        if byte is None:
            raise _SyntaxError(UNEXPECTED_END)
        if byte != ord(":"):
            raise self.invalid(byte, "after object key")
        self.pos += 1

    def string(self) -> None:
        self.pos += 1  # the opening quote
        while (byte := self.peek()) is not None:
            self.pos += 1
            if byte == ord('"'):
                return
            if byte == ord("\\"):
                self.escape()
            elif byte < 0x20:
                raise self.invalid(byte, "in string literal")
        raise _SyntaxError(UNEXPECTED_END)

    def escape(self) -> None:
        byte = self.next_byte()
        self.pos += 1
        if byte == ord("u"):
            for _ in range(4):
                digit = self.next_byte()
                if digit not in _HEX:
                    raise self.invalid(digit, "in \\u hexadecimal character escape")
                self.pos += 1
        elif byte not in _ESCAPES:
            raise self.invalid(byte, "in string escape code")

    def digits(self) -> None:
        while self.peek() in _DIGITS:
            self.pos += 1

    def number(self) -> None:
        if self.peek() == ord("-"):
            self.pos += 1
            if self.next_byte() not in _DIGITS:
                raise self.invalid(self.next_byte(), "in numeric literal")
        if self.peek() == ord("0"):
            self.pos += 1
        else:
            self.digits()
        if self.peek() == ord("."):
            self.pos += 1
            if self.next_byte() not in _DIGITS:
                raise self.invalid(self.next_byte(), "after decimal point in numeric literal")
            self.digits()
        if self.peek() in _EXPONENT:
            self.pos += 1
            if self.peek() in _SIGNS:
                self.pos += 1
            if self.next_byte() not in _DIGITS:
                raise self.invalid(self.next_byte(), "in exponent of numeric literal")
            self.digits()

    def literal(self, word: bytes) -> None:
        self.pos += 1
        for expected in word[1:]:
            byte = self.next_byte()
            if byte != expected:
                raise self.invalid(byte, f"in literal {word.decode()} (expecting {quote_char(expected)})")
            self.pos += 1
