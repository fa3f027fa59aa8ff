"""Decoded JSON as Go's decoders saw its text: repeated keys, the strict-decoding errors they and
unknown fields make, and compact output that keeps a document's member order.

Python's json module keeps one value per key. sigs.k8s.io/json in strict mode sees every
occurrence (it reports a repeated key and decodes each occurrence's value), and json-patch writes an
object it never had to decode back out exactly as it came, repeats included. `JSONObject` keeps
what those need.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apiserver.machinery import gofmt

MAX_STRICT_ERRORS = 100
"""sigs.k8s.io/json stops collecting strict-decoding errors after this many."""


class JSONObject(dict[str, Any]):
    """A decoded JSON object whose text repeated a key.

    As a dict it holds each key once, at its first position with its last value (what json.loads
    gives, and what every decoder here works on); `pairs` keeps every occurrence in text order.
    Nothing changes one in place: a patch that edits an object works on a plain copy.
    """

    def __init__(self, pairs: Iterable[tuple[str, Any]]) -> None:
        self.pairs = list(pairs)
        super().__init__(self.pairs)


def members(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every member of a decoded object in text order, repeats included."""
    return obj.pairs if isinstance(obj, JSONObject) else list(obj.items())


def from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The decoded object of these members: a JSONObject where a key repeats."""
    obj = dict(pairs)
    return JSONObject(pairs) if len(obj) < len(pairs) else obj


def plain(value: Any) -> Any:
    """`value` as Go decodes it into maps and slices: each key once, with its last value."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def join(path: str, key: str) -> str:
    """A strict-decoding error's path of a member (`metadata.labels.a`)."""
    return f"{path}.{key}" if path else key


class StrictErrors:
    """The strict-decoding errors of one decoding: in the order met, each once, at most 100."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def unknown(self, path: str) -> None:
        self._add(f'unknown field "{path}"')

    def duplicate(self, path: str) -> None:
        self._add(f'duplicate field "{path}"')

    def _add(self, message: str) -> None:
        if message not in self.messages and len(self.messages) < MAX_STRICT_ERRORS:
            self.messages.append(message)


def report_duplicates(value: Any, errors: StrictErrors, path: str = "") -> None:
    """The repeated keys of a value decoded into interface{}: in text order, each repeat after what
    the earlier values of its object held (Go decodes every occurrence)."""
    if isinstance(value, dict):
        seen: set[str] = set()
        for key, item in members(value):
            child = join(path, key)
            if key in seen:
                errors.duplicate(child)
            seen.add(key)
            report_duplicates(item, errors, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            report_duplicates(item, errors, f"{path}[{index}]")


def compact(value: Any) -> str:
    """encoding/json's compact, HTML-safe text of a value with each object's members in the order
    it holds them, repeats included (gofmt.go_json sorts them, as Go writes a map)."""
    if isinstance(value, dict):
        inner = ",".join(f"{gofmt.go_json(key)}:{compact(item)}" for key, item in members(value))
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(compact(item) for item in value) + "]"
    return gofmt.go_json(value)
