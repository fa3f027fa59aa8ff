"""Objects that reads meet (lists, and the changes watches send), decoded once per key and
revision and shared by the reads that meet them again, with the encodings made of them (as
kube-apiserver's watch cache keeps decoded objects and its cachingObject their serializations).
Shared objects are read, never changed."""

from __future__ import annotations

from collections.abc import Iterator

from apiserver.machinery.types import JSON
from apiserver.registry.stored import StoredObjects
from apiserver.storage.interface import KeyValue

# How many objects of a kind stay decoded, the least recently read dropped first: a typical Event
# decoded and encoded takes about 7 KB, so about 15 MB a kind at most.
DECODED_OBJECTS = 2_000


class SharedObject:
    """One stored object at one revision: typed, and its encodings by encoder name; `source` is the
    pair it was decoded from, `value` that pair's value."""

    __slots__ = ("encodings", "obj", "source", "value")

    def __init__(self, obj: JSON, source: KeyValue, value: bytes) -> None:
        self.obj = obj
        self.source = source
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

    @property
    def capacity(self) -> int:
        return self._capacity

    def get(self, kv: KeyValue) -> SharedObject:
        """`kv` decoded and typed; CorruptObjectError when it does not decode. The value is
        compared as well: what is shared is exactly what was stored."""
        at = (kv.key, kv.mod_revision)
        # Taken out and put back: the least recently read come first, to be dropped first.
        found = self._decoded.pop(at, None)
        # The same pair again (a watch cache's) has the same value: no need to read it, which for a
        # packed pair means unpacking it.
        if found is None or not (found.source is kv or found.value == kv.value):
            value = kv.value
            obj = self.objects.typed(self.objects.decode(value, kv.mod_revision, kv.key))
            found = SharedObject(obj, kv, value)
            kv.mark_decodes()
        elif found.source is not kv:
            # The same value in a new pair (packed again, say): the next read of it is no unpacking.
            found.source = kv
        self._decoded[at] = found
        if len(self._decoded) > self._capacity:
            del self._decoded[next(iter(self._decoded))]
        return found

    def check(self, kv: KeyValue) -> None:
        """CorruptObjectError unless `kv` decodes, without keeping it decoded: for reads of more
        objects than are kept, which would only push out the ones kept."""
        if not kv.decodes:
            self.objects.from_kv(kv)
            kv.mark_decodes()


class ObjectList:
    """A list object whose items are read only when it is written: `head` is the list without its
    items, `entries` the stored objects listed, each decoded (and encoded) as it is written, so
    that a list of many objects never holds them all decoded at once."""

    def __init__(self, head: JSON, entries: list[KeyValue], decoded: DecodedObjects) -> None:
        self.head = head
        self.entries = entries
        self._decoded = decoded

    def __len__(self) -> int:
        return len(self.entries)

    def shared(self) -> Iterator[SharedObject]:
        """The items, in order, decoded and typed; each one's encodings are kept with it."""
        for kv in self.entries:
            yield self._decoded.get(kv)

    def smaller_than(self, size: int) -> bool:
        """Whether the items take fewer than `size` bytes encoded (about their stored size), read
        no further than it takes to tell."""
        total = 0
        for kv in self.entries:
            total += kv.size
            if total >= size:
                return False
        return True

    def body(self) -> JSON:
        """The whole list object, every item decoded (shared objects: read them, never change
        them)."""
        return {**self.head, "items": [shared.obj for shared in self.shared()]}
