"""Objects that reads meet (lists, and the changes watches send), decoded once per key and
revision and shared by the reads that meet them again, with the encodings made of them (as
kube-apiserver's watch cache keeps decoded objects and its cachingObject their serializations).
Shared objects are read, never changed.

A list of more objects than are kept decoded would decode and encode each again at every list. An
object's compact JSON is its stored value with the kind and apiVersion first (as stored) and the
resourceVersion added at the end of its metadata, so once one encoding of a pair has been checked
to be exactly that, the pair keeps where the resourceVersion goes (`KeyValue.version_at`) and later
lists write the value with it inserted: 0.3 µs an Event, against 2.8 µs to decode and encode it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from apiserver.machinery import fastjson
from apiserver.machinery.types import JSON
from apiserver.registry.stored import StoredObjects
from apiserver.storage.interface import KeyValue

# How many objects of a kind stay decoded, the least recently read dropped first: a typical Event
# decoded and encoded takes about 7 KB, so about 15 MB a kind at most.
DECODED_OBJECTS = 2_000
_VERSION = b',"resourceVersion":"'


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
        # Ordered by last read. (A plain dict's first key, read after many deletions at its front,
        # is found by a scan over their tombstones: a third of a LIST of 10,000 Events went there.)
        self._decoded: OrderedDict[tuple[str, int], SharedObject] = OrderedDict()

    def __len__(self) -> int:
        return len(self._decoded)

    @property
    def capacity(self) -> int:
        return self._capacity

    def get(self, kv: KeyValue) -> SharedObject:
        """`kv` decoded and typed; CorruptObjectError when it does not decode. The value is
        compared as well: what is shared is exactly what was stored."""
        at = (kv.key, kv.mod_revision)
        found = self._decoded.get(at)
        # The same pair again (a watch cache's) has the same value: no need to read it, which for a
        # packed pair means unpacking it.
        if found is None or not (found.source is kv or found.value == kv.value):
            value = kv.value
            obj = self.objects.typed(self.objects.decode(value, kv.mod_revision, kv.key))
            found = SharedObject(obj, kv, value)
            kv.mark_decodes()
        else:
            # The same value in a new pair (packed again, say): the next read of it is no unpacking.
            found.source = kv
        self._decoded[at] = found
        self._decoded.move_to_end(at)
        if len(self._decoded) > self._capacity:
            self._decoded.popitem(last=False)  # the least recently read
        return found

    def compact(self, kv: KeyValue) -> bytes:
        """`kv`'s object as compact JSON (the encoding `get(kv)` keeps as COMPACT_JSON); from its
        value with the resourceVersion inserted once that is known to give the same bytes, without
        decoding it or keeping it decoded."""
        if kv.version_at >= 0:
            value, at = kv.value, kv.version_at
            return b"".join((value[:at], _VERSION, str(kv.mod_revision).encode(), b'"', value[at:]))
        shared = self.get(kv)
        encoded = fastjson.kept(shared.obj, shared.encodings)
        inserted = _VERSION + str(kv.mod_revision).encode() + b'"'
        at = encoded.find(inserted)
        if at > 0 and encoded == shared.value[:at] + inserted + shared.value[at:]:
            kv.mark_version_at(at)
        return encoded

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

    def compact(self) -> Iterator[bytes]:
        """The items, in order, as compact JSON."""
        compact = self._decoded.compact
        for kv in self.entries:
            yield compact(kv)

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
