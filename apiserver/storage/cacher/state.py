"""What a watch cache holds in memory: the objects of one resource at its revision, sorted by key,
and the window of its most recent changes.

The keys are a `sortedcontainers.SortedList`: a page, an insert or a removal is O(log n). A plain
sorted list's insert is a memmove of the keys after it: 14 µs at 130,000 keys and growing with them,
paid by every worker for every change its watch cache takes in. The values are kept packed
(packing.py) once the cache's packer has a codec.
"""

from __future__ import annotations

from collections import deque

from sortedcontainers import SortedList

from apiserver.storage.cacher.packing import SAMPLES, Packer
from apiserver.storage.interface import EventType, KeyValue, ListResult, WatchEvent


def prefix_end(prefix: str) -> str:
    """The smallest string after every string starting with `prefix` (etcd's range end)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else "\U0010ffff"


class SortedState:
    """The latest value of every key, in key order, packed by `packer`."""

    def __init__(self, packer: Packer | None = None) -> None:
        self.packer = packer or Packer()
        self._values: dict[str, KeyValue] = {}
        self._keys: SortedList[str] = SortedList()
        self._taken: list[str] = []  # the first fill's keys, until `sort`

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str) -> KeyValue | None:
        return self._values.get(key)

    def put(self, kv: KeyValue) -> None:
        if kv.key not in self._values:
            self._keys.add(kv.key)
        self._values[kv.key] = self.packer.pack(kv)

    def take(self, kv: KeyValue) -> None:
        """A value of the first fill, whose pages may come in any order: its key is put in order
        by `sort`, once the last page is taken (a key comes once in a list at one revision)."""
        self._taken.append(kv.key)
        self._values[kv.key] = self.packer.pack(kv)

    def sort(self) -> None:
        """The keys the fill took put in order (sorted at once, not inserted one at a time)."""
        self._keys.update(self._taken)
        self._taken = []

    def remove(self, key: str) -> None:
        if self._values.pop(key, None) is not None:
            self._keys.remove(key)

    def all_keys(self) -> list[str]:
        return list(self._keys)

    def samples(self) -> list[bytes]:
        """Values spread over the keys, to train a codec on."""
        step = max(1, len(self._keys) // SAMPLES)
        return [self._values[key].value for key in self._keys[::step][:SAMPLES]]

    def repack(self, keys: list[str]) -> None:
        """Packs the values of `keys` still held with the packer's current codec."""
        for key in keys:
            kv = self._values.get(key)
            if kv is not None:
                self._values[key] = self.packer.repack(kv)

    def apply(self, event: WatchEvent) -> None:
        if event.type is EventType.PUT and event.value is not None:
            self.put(KeyValue(event.key, event.value, event.revision, event.create_revision))
        elif event.type is EventType.DELETE:
            self.remove(event.key)

    def page(self, prefix: str, start: str | None, limit: int, revision: int) -> ListResult:
        """Keys under `prefix` from `start` (inclusive), at most `limit` (0: all), as a list read
        at `revision` returns them."""
        low = self._keys.bisect_left(prefix if start is None else max(prefix, start))
        high = max(low, self._keys.bisect_left(prefix_end(prefix)))
        stop = min(high, low + limit) if limit > 0 else high
        items = [self._values[key] for key in self._keys.islice(low, stop)]
        return ListResult(items, revision, stop < high, high - stop)


class Window:
    """The most recent changes, oldest first, at most `capacity` of them. `start` is the revision
    every later change is held from: a watch from it or later can be served, an older one cannot."""

    def __init__(self, capacity: int) -> None:
        self.events: deque[WatchEvent] = deque()
        self.capacity = capacity
        self.start = 0

    def reset(self, revision: int) -> None:
        self.events.clear()
        self.start = revision

    def add(self, event: WatchEvent) -> None:
        if len(self.events) >= self.capacity:
            self.start = self.events.popleft().revision
        self.events.append(event)

    def trim(self, revision: int) -> None:
        """Drops the changes before `revision` (compacted away)."""
        while self.events and self.events[0].revision < revision:
            self.start = self.events.popleft().revision
        self.start = max(self.start, revision - 1)

    def after(self, revision: int, prefix: str) -> list[WatchEvent]:
        """The held changes under `prefix` after `revision` (which must be >= `start`), read from
        the newest back: a watch resuming near the present costs what it is sent, not the window."""
        newer: list[WatchEvent] = []
        for event in reversed(self.events):
            if event.revision <= revision:
                break
            if event.key.startswith(prefix):
                newer.append(event)
        newer.reverse()
        return newer
