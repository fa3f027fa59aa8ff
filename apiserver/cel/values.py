"""CEL results as plain Python values: what admission writes into messages and audit annotations."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> Any:
    """`value` with cel-expr-python's containers made plain (bytes for its bytearrays); other
    values (numbers, strings, timestamps, durations, library objects) pass as they are."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    return value
