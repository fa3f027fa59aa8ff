"""Compact JSON on the hot paths (stored objects read and written, list items, watch lines), by
orjson: the standard library's decoder and encoder took two thirds of a LIST of 10,000 Events
(py-spy). The bytes are the standard library's with `separators=(",", ":"), ensure_ascii=False`
for everything these objects hold; what orjson refuses (integers beyond 64 bits, lone surrogates)
goes through the standard library, as before."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson

# The name of an object's compact JSON among the encodings kept of a shared object.
COMPACT_JSON = "json"


def loads(data: bytes | str) -> Any:
    """The JSON value in `data`; the standard library's errors where it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def kept(value: Any, encodings: dict[str, bytes]) -> bytes:
    """`value`'s compact JSON from `encodings` (a shared object's), made and kept there if absent."""
    encoded = encodings.get(COMPACT_JSON)
    if encoded is None:
        encoded = encodings[COMPACT_JSON] = dumps(value)
    return encoded


def copied(value: Any) -> Any:
    """A deep copy of a JSON value, through orjson (about a sixth of copy.deepcopy's time on an
    Event); what orjson refuses is copied by copy.deepcopy."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        return copy.deepcopy(value)


def dumps(value: Any) -> bytes:
    """`value` as compact JSON, UTF-8, non-ASCII characters as they are."""
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
