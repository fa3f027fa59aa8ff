"""Watch events shared by every watcher of a kind, as kube-apiserver's cacher shares them: each
stored change is decoded once, whatever the number of watchers, and each event made of it (ADDED,
MODIFIED or DELETED) is one object whose encodings are made once, by the first watcher that sends
it (upstream's cachingObject). Watchers that send a different shape (a Table) encode their own."""

from __future__ import annotations

from dataclasses import dataclass, field

from apiserver.machinery.types import JSON
from apiserver.registry.decoded import DecodedObjects, SharedObject
from apiserver.storage.interface import KeyValue, WatchEvent

# How many recent changes keep their decoded objects: about a watch's buffer (the watch cache's
# WATCH_BUFFER), so that a watcher still within it finds the change its peers decoded.
SHARED_CHANGES = 1024


@dataclass(frozen=True)
class WatchEventOut:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: JSON
    # An event sent to many watchers carries its encodings, by encoder name, made by the first
    # watcher that sends it unchanged and reused by the others; its object must not be changed.
    # None: the event is this watcher's own.
    encodings: dict[str, bytes] | None = field(default=None, compare=False)


class SharedChange:
    """One stored change as every watcher sees it: its objects decoded when first asked for, and
    one event per type made of them. The object after the change is the one reads of that key and
    revision share, with its encodings."""

    __slots__ = ("_current", "_decoded", "_events", "_previous", "event")

    def __init__(self, event: WatchEvent, decoded: DecodedObjects) -> None:
        self.event = event
        self._decoded = decoded
        self._current: SharedObject | None = None
        # A one-element tuple once decoded (its element None when there is no such object).
        self._previous: tuple[JSON | None] | None = None
        self._events: dict[str, WatchEventOut] = {}

    def current(self) -> JSON | None:
        """The object after the change (None for a deletion), typed, at the change's revision."""
        return None if self.event.value is None else self._current_object().obj

    def _current_object(self) -> SharedObject:
        if self._current is None:
            event = self.event
            assert event.value is not None
            # Not kept when it fails: each watcher meets the CorruptObjectError itself.
            kv = KeyValue(event.key, event.value, event.revision, event.create_revision)
            self._current = self._decoded.get(kv)
        return self._current

    def previous(self) -> JSON | None:
        """The object before the change (None for a create), typed, at the change's revision: a
        deletion reports the last state with the deletion's resourceVersion."""
        if self._previous is None:
            value = self.event.prev_value
            objects = self._decoded.objects
            decoded = None if value is None else objects.decode(value, self.event.revision, self.event.key)
            self._previous = (None if decoded is None else objects.typed(decoded),)
        return self._previous[0]

    def out(self, event_type: str) -> WatchEventOut:
        """The event of `event_type` (DELETED: of the previous object, else of the current one)."""
        found = self._events.get(event_type)
        if found is None:
            if event_type == "DELETED":
                previous = self.previous()
                assert previous is not None
                found = WatchEventOut(event_type, previous, {})
            else:
                current = self._current_object()
                found = WatchEventOut(event_type, current.obj, current.encodings)
            self._events[event_type] = found
        return found


class RecentChanges:
    """The latest SHARED_CHANGES changes met by the watches of one kind, by key and revision."""

    def __init__(self, decoded: DecodedObjects, capacity: int = SHARED_CHANGES) -> None:
        self._decoded = decoded
        self._capacity = capacity
        self._changes: dict[tuple[str, int], SharedChange] = {}

    def __len__(self) -> int:
        return len(self._changes)

    def get(self, event: WatchEvent) -> SharedChange:
        """The shared form of `event`: the one its peers made when they met the same change (the
        watch cache hands them all one object; another storage watch an equal one)."""
        at = (event.key, event.revision)
        change = self._changes.get(at)
        if change is not None and (change.event is event or change.event == event):
            return change
        change = self._changes[at] = SharedChange(event, self._decoded)
        if len(self._changes) > self._capacity:
            del self._changes[next(iter(self._changes))]
        return change
