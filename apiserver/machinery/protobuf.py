"""Reading Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for the few kinds a
client sends only that way: kubectl's `auth can-i` and `auth whoami` post their reviews as protobuf
(client-go's typed clients for built-in kinds do, and never fall back to JSON).

The envelope is the magic `k8s\\x00` and a runtime.Unknown {1 typeMeta {1 apiVersion, 2 kind},
2 raw, 3 contentEncoding, 4 contentType}, `raw` being the object. An object is read by a schema:
field number -> (JSON name, what it holds). Written by hand: the protobuf runtime reads a message
only through its generated classes, and generating k8s.io/api's for three kinds is not worth it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """Not a Kubernetes protobuf object (the words upstream's decoder would use, where it has any)."""


@dataclass(frozen=True)
class Field:
    """One field of a schema: its JSON name, what it holds ("string", "bool", "int", or a nested
    schema), and whether it repeats."""

    name: str
    holds: str | Schema
    repeated: bool = False


Schema = Mapping[int, Field]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(number, wire type, value) of each field of a message: an int, or the bytes of a
    length-delimited one."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, at = _varint(data, at)
        elif wire == _BYTES:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ProtobufError("truncated field")
            value, at = data[at : at + size], at + size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            value, at = int.from_bytes(data[at : at + width], "little"), at + width
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def decode(data: bytes, schema: Schema) -> dict[str, Any]:
    """The message as JSON by `schema`; fields the schema does not name are skipped, and empty
    values are left out (as Go's omitempty leaves them out of JSON)."""
    obj: dict[str, Any] = {}
    for number, wire, value in fields(data):
        field = schema.get(number)
        if field is None:
            continue
        read = _read(field, wire, value)
        if field.repeated:
            obj.setdefault(field.name, []).append(read)
        elif read not in ("", False, 0, {}):
            obj[field.name] = read
    return obj


def _read(field: Field, wire: int, value: Any) -> Any:
    if isinstance(field.holds, Mapping):
        if wire != _BYTES:
            raise ProtobufError(f"{field.name}: expected a message")
        return decode(value, field.holds)
    if field.holds == "string":
        if wire != _BYTES:
            raise ProtobufError(f"{field.name}: expected a string")
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            raise ProtobufError(f"{field.name}: invalid UTF-8") from None
    if wire != _VARINT:
        raise ProtobufError(f"{field.name}: expected a number")
    return bool(value) if field.holds == "bool" else value


_TYPE_META: Schema = {1: Field("apiVersion", "string"), 2: Field("kind", "string")}
_UNKNOWN: Schema = {
    1: Field("typeMeta", _TYPE_META),
    3: Field("contentEncoding", "string"),
    4: Field("contentType", "string"),
}


def unwrap(body: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, the object's bytes) of an enveloped object."""
    if not body.startswith(MAGIC):
        raise ProtobufError(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    payload = body[len(MAGIC) :]
    envelope = decode(payload, _UNKNOWN)
    if envelope.get("contentEncoding"):
        raise ProtobufError(f"unsupported content encoding {envelope['contentEncoding']!r}")
    # A field given twice counts as its last value, as protobuf reads it.
    raw = b""
    for number, wire, value in fields(payload):
        if number == 2 and wire == _BYTES:
            raw = bytes(value)
    meta = envelope.get("typeMeta", {})
    return str(meta.get("apiVersion", "")), str(meta.get("kind", "")), raw
