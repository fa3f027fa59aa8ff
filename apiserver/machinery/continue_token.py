"""List continuation tokens, in the exact form k8s.io/apiserver encodes them.

A token is base64url (no padding) of `{"v":"meta.k8s.io/v1","rv":<revision>,"start":"<key>"}` where
`start` is the next key relative to the list's key prefix (the last returned key plus NUL).
`rv` -1 means "continue at the latest revision" (handed out when the snapshot was compacted).
A token that does not decode is refused with the words upstream's DecodeContinue uses, which quote
Go's base64 and encoding/json errors.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from apiserver.machinery import jsonsyntax

TOKEN_VERSION = "meta.k8s.io/v1"
NOT_VALID = "continue key is not valid"

_BASE64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_TOKEN_TYPE = "storage.continueToken"
_FIELDS = {"v": "string", "rv": "int64", "start": "string"}


class InvalidContinueError(ValueError):
    pass


@dataclass(frozen=True)
class ContinueToken:
    revision: int
    start_key: str  # absolute key to start from (inclusive)


def encode(start_key: str, key_prefix: str, revision: int) -> str:
    if not start_key.startswith(key_prefix):
        raise ValueError(f"key {start_key!r} is not under {key_prefix!r}")
    relative = start_key[len(key_prefix) :]
    payload = json.dumps({"v": TOKEN_VERSION, "rv": revision, "start": relative}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode(token: str, key_prefix: str) -> ContinueToken:
    """Parses a token for a list under `key_prefix`; InvalidContinueError says what is wrong."""
    try:
        fields = _unmarshal(_decode_base64(token))
    except ValueError as exc:
        raise InvalidContinueError(f"{NOT_VALID}: {exc}") from None
    version, revision, start = fields.get("v", ""), fields.get("rv", 0), fields.get("start", "")
    if version != TOKEN_VERSION:
        raise InvalidContinueError(f"{NOT_VALID}: server does not recognize this encoded version {version}")
    if revision == 0:
        raise InvalidContinueError(
            f"{NOT_VALID}: incorrect encoded start resourceVersion (version {TOKEN_VERSION})"
        )
    if not start:
        raise InvalidContinueError(f"{NOT_VALID}: encoded start key empty (version {TOKEN_VERSION})")
    # The start key must not climb out of the list's prefix: it must be a clean path already.
    key = start if start.startswith("/") else "/" + start
    cleaned = _clean(key)
    if cleaned != key:
        raise InvalidContinueError(f"{NOT_VALID}: {start}")
    return ContinueToken(revision=revision, start_key=key_prefix + cleaned[1:])


def _decode_base64(token: str) -> bytes:
    """base64.RawURLEncoding.DecodeString: line breaks skipped, anything else outside the alphabet
    (padding included) refused at its byte offset, as is a lone last character."""
    data = token.encode()
    kept = bytearray()
    for offset, byte in enumerate(data):
        if byte in b"\r\n":
            continue
        if byte not in _BASE64URL:
            raise ValueError(f"illegal base64 data at input byte {offset}")
        kept.append(byte)
    if len(kept) % 4 == 1:
        raise ValueError(f"illegal base64 data at input byte {len(data) - 1}")
    return base64.urlsafe_b64decode(bytes(kept) + b"=" * (-len(kept) % 4))


class _Number(str):
    """A JSON number that is no integer, kept as written (Go quotes it so)."""


class _Members(list[tuple[str, Any]]):
    """A JSON object's members in text order, repeats included (Go decodes each)."""


def _unmarshal(raw: bytes) -> dict[str, Any]:
    """json.Unmarshal into upstream's continueToken struct: its fields by name (matched without
    regard to case, as Go does), or Go's error for the first value of the wrong type."""
    syntax = jsonsyntax.syntax_error(raw)
    if syntax is not None:
        raise ValueError(syntax)
    text = raw.decode("utf-8", errors="replace")
    value = json.loads(text, parse_float=_Number, object_pairs_hook=_Members)
    if value is None:
        return {}
    if not isinstance(value, _Members):
        raise ValueError(f"json: cannot unmarshal {_json_kind(value)} into Go value of type {_TOKEN_TYPE}")
    fields: dict[str, Any] = {}
    first_error: str | None = None
    for key, item in value:
        name = key.lower()
        if name not in _FIELDS or item is None:
            continue
        error = _type_error(name, item)
        if error is None:
            fields[name] = item
        elif first_error is None:
            first_error = error
    if first_error is not None:
        raise ValueError(first_error)
    return fields


def _type_error(name: str, value: Any) -> str | None:
    go_type = _FIELDS[name]
    if go_type == "string":
        if isinstance(value, str) and not isinstance(value, _Number):
            return None
        what = _json_kind(value)
    elif isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return None
    else:
        what = _json_kind(value)
        if what == "number":
            what = f"number {value}"
    return f"json: cannot unmarshal {what} into Go struct field continueToken.{name} of type {go_type}"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | _Number):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, _Members) else "array"


def _clean(key: str) -> str:
    """Go's path.Clean of a rooted path: no empty, `.` or `..` elements, no trailing slash."""
    parts: list[str] = []
    for part in key.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)
