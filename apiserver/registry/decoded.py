"""Objects that reads meet (lists, and the changes watches send), decoded once per key and
revision and shared by the reads that meet them again, with the encodings made of them (as
kube-apiserver's watch cache keeps decoded objects and its cachingObject their serializations).
Shared objects are read, never changed."""

from __future__ import annotations

from typing import Any

from apiserver.machinery.types import JSON
from apiserver.registry.stored import StoredObjects
from apiserver.storage.interface import KeyValue

# How many objects of a kind stay decoded, the least recently read dropped first: a typical Event
# decoded and encoded takes about 7 KB, so about 15 MB a kind at most.
DECODED_OBJECTS = 2_000


class SharedObject:
    """One stored object at one revision: typed, and its encodings by encoder name."""

    __slots__ = ("encodings", "obj", "value")

    def __init__(self, obj: JSON, value: bytes) -> None:
        self.obj = obj
        self.value = value
        self.encodings: dict[str, bytes] = {}


class DecodedObjects:
    """The `capacity` objects of one kind that reads met most recently, by key and revision: the
    objects lists read, and the ones changes left (what watchers are sent)."""

    def __init__(self, objects: StoredObjects, capacity: int = DECODED_OBJECTS) -> None:
        self.objects = objects
        self._capacity = capacity
        self._decoded: dict[tuple[str, int], SharedObject] = {}

    def __len__(self) -> int:
        return len(self._decoded)

    def get(self, kv: KeyValue) -> SharedObject:
        """`kv` decoded and typed; CorruptObjectError when it does not decode. The value is
        compared as well: what is shared is exactly what was stored."""
        at = (kv.key, kv.mod_revision)
        # Taken out and put back: the least recently read come first, to be dropped first.
        found = self._decoded.pop(at, None)
        if found is None or not (found.value is kv.value or found.value == kv.value):
            found = SharedObject(self.objects.typed(self.objects.from_kv(kv)), kv.value)
        self._decoded[at] = found
        if len(self._decoded) > self._capacity:
            del self._decoded[next(iter(self._decoded))]
        return found


class ObjectList(dict[str, Any]):
    """A list object whose items are shared objects: `item_encodings` are their encodings, in the
    order of `items`, so that a response may reuse them."""

    def __init__(self, body: JSON, item_encodings: list[dict[str, bytes]]) -> None:
        super().__init__(body)
        self.item_encodings = item_encodings
