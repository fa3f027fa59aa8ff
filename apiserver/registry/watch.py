"""List and watch of one kind: selectors, limit/continue with a consistent snapshot, and what a
resourceVersion means to each (resourceVersionMatch, too large, too old), as upstream's cacher and
etcd3 store answer them. Objects come out typed and with their revision as resourceVersion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from apiserver.machinery import continue_token, errors, objectmeta
from apiserver.machinery.errors import GroupResource
from apiserver.machinery.options import MATCH_EXACT, MATCH_NOT_OLDER_THAN, ListOptions
from apiserver.machinery.types import JSON
from apiserver.registry.decoded import DecodedObjects, ObjectList
from apiserver.registry.shared_events import RecentChanges, WatchEventOut
from apiserver.registry.storage_errors import MAX_CORRUPT_IN_LIST, interpreted, status_error, store_read_error
from apiserver.registry.stored import CorruptObjectError, StoredObjects
from apiserver.resources.base import ResourceKind
from apiserver.storage.interface import (
    EventType,
    FutureRevisionError,
    KeyValue,
    ListResult,
    StorageError,
    WatchEvent,
)

INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"
Events = list[WatchEventOut]
_MAX_UINT64 = 2**64 - 1


def parse_revision(text: str) -> int:
    """A resourceVersion as upstream's versioner parses it (an unsigned 64-bit decimal)."""
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()):
        reason = "invalid syntax"
    elif int(text) > _MAX_UINT64:
        reason = "value out of range"
    else:
        return int(text)
    raise errors.bad_request(
        f'invalid resource version: resourceVersion: Invalid value: "{text}": '
        f'strconv.ParseUint: parsing "{text}": {reason}'
    )


def matches(kind: ResourceKind, obj: JSON, opts: ListOptions) -> bool:
    """Whether the label and field selectors of `opts` select `obj`."""
    if opts.label_selector is not None and not opts.label_selector.empty:
        labels = objectmeta.metadata(obj).get("labels") or {}
        if not opts.label_selector.matches(labels):
            return False
    if opts.field_selector is not None and not opts.field_selector.empty:
        return opts.field_selector.matches(kind.selectable_fields(obj))
    return True


def _list_position(prefix: str, opts: ListOptions) -> tuple[int, str | None]:
    """The revision to read at (0 = latest) and the key to start from."""
    if opts.continue_token:
        try:
            token = continue_token.decode(opts.continue_token, prefix)
        except continue_token.InvalidContinueError as exc:
            raise errors.bad_request(f"invalid continue token: {exc}") from exc
        if opts.resource_version not in ("", "0"):
            raise errors.bad_request("specifying resource version is not allowed when using continue")
        return (token.revision if token.revision > 0 else 0), token.start_key
    if not opts.resource_version:
        return 0, None
    requested = parse_revision(opts.resource_version)
    match = opts.resource_version_match
    if match == MATCH_EXACT or (not match and opts.limit > 0 and requested > 0):
        return requested, None
    return 0, None


def _min_revision(opts: ListOptions) -> int:
    """The revision a list must be at least as new as (0: any)."""
    if opts.continue_token or not opts.resource_version:
        return 0
    if opts.resource_version_match in ("", MATCH_NOT_OLDER_THAN):
        return parse_revision(opts.resource_version)
    return 0


@dataclass
class _Listed:
    """A list being read: the items so far, the revision read at, where the next page starts."""

    revision: int
    # The stored objects selected, decoded when they are written (each was checked to decode).
    items: list[KeyValue] = field(default_factory=list)
    next_start: str | None = None
    remaining: int = 0
    # Objects met that do not decode (at most MAX_CORRUPT_IN_LIST; `truncated` if there were more),
    # and how many items were listed before the first of them.
    corrupt: list[CorruptObjectError] = field(default_factory=list)
    truncated: bool = False
    before_corrupt: int = 0

    def add_corrupt(self, error: CorruptObjectError) -> bool:
        """Notes an undecodable object; True once too many are noted to read on."""
        if len(self.corrupt) >= MAX_CORRUPT_IN_LIST:
            self.truncated = True
            return True
        if not self.corrupt:
            self.before_corrupt = len(self.items)
        self.corrupt.append(error)
        return False


class ListWatch:
    """Reads of one kind's objects: lists and watches."""

    def __init__(self, objects: StoredObjects, bookmark_interval: float = 60.0) -> None:
        self.objects = objects
        self.kind = objects.kind
        self.gr = GroupResource(self.kind.group, self.kind.plural)
        self.bookmark_interval = bookmark_interval
        # The objects lists and watches met lately, each decoded and encoded once for all of them,
        # and the changes watches met lately, each decoded once for all watchers.
        self.decoded = DecodedObjects(objects)
        self.recent_changes = RecentChanges(self.decoded)

    # ----------------------------------------------------------------- list

    async def list(self, namespace: str | None, opts: ListOptions) -> ObjectList:
        """A list object (kind <Kind>List) honouring selectors, limit/continue and resourceVersion."""
        prefix = self.objects.prefix(namespace)
        revision, start = _list_position(prefix, opts)
        listed = await self._read(prefix, opts, revision, start)
        if listed.corrupt:
            # Upstream (AllowUnsafeMalformedObjectDeletion) reads on past each one, then fails the
            # list naming them all, so that each can be deleted.
            raise store_read_error(self.gr, listed.corrupt, truncated=listed.truncated)
        min_rv = _min_revision(opts)
        if min_rv and listed.revision < min_rv:
            raise status_error(FutureRevisionError(min_rv, listed.revision), self.gr)
        list_meta: JSON = {"resourceVersion": str(listed.revision)}
        if listed.next_start is not None:
            list_meta["continue"] = continue_token.encode(listed.next_start, prefix, listed.revision)
            if not opts.has_selectors:
                list_meta["remainingItemCount"] = listed.remaining
        head = {"kind": self.kind.list_kind, "apiVersion": self.kind.api_version, "metadata": list_meta}
        return ObjectList(head, listed.items, self.decoded)

    async def _read(self, prefix: str, opts: ListOptions, revision: int, start: str | None) -> _Listed:
        """Pages of the range from `start` at `revision` (0: now) until `limit` items matched or the
        range ended: with selectors a page may match fewer than asked, so reading goes on, as
        upstream's etcd3 store does."""
        listed = _Listed(revision)
        limit = max(opts.limit, 0)
        cursor = start
        while True:
            want = limit - len(listed.items) if limit else 0
            page_size = max(want, 1) if limit else 0
            if limit and opts.has_selectors:
                page_size = max(want * 2, 50)
            try:
                page = await self.objects.storage.list(
                    prefix, start=cursor, limit=page_size, revision=listed.revision
                )
            except StorageError as exc:
                continued = opts.continue_token and start is not None
                resume = continue_token.encode(start, prefix, -1) if continued and start else None
                raise status_error(exc, self.gr, listing=True, resume=resume) from exc
            listed.revision = page.revision
            if self._take(page, opts, limit, listed) or not (page.more and page.items):
                return listed
            cursor = page.items[-1].key + "\x00"

    def _take(self, page: ListResult, opts: ListOptions, limit: int, listed: _Listed) -> bool:
        """Adds the page's selected items; True once `limit` of them are listed. Each is checked
        to decode (a list with an undecodable object fails); one read only to be checked is not
        kept decoded when the page holds more objects than are kept."""
        keep = opts.has_selectors or len(page.items) <= self.decoded.capacity
        for index, kv in enumerate(page.items):
            try:
                obj = self._checked(kv, keep)
            except CorruptObjectError as exc:
                if listed.add_corrupt(exc):
                    return True
                continue
            if obj is not None and not matches(self.kind, obj, opts):
                continue
            listed.items.append(kv)
            if limit and len(listed.items) >= limit:
                rest = page.items[index + 1 :]
                if rest or page.more:
                    listed.next_start = kv.key + "\x00"
                    listed.remaining = len(rest) + page.remaining
                return True
        return False

    def _checked(self, kv: KeyValue, keep: bool) -> JSON | None:
        """`kv` decoded when `keep`, else only checked to decode (None)."""
        if keep:
            return self.decoded.get(kv).obj
        self.decoded.check(kv)
        return None

    # ----------------------------------------------------------------- watch

    async def watch(self, namespace: str | None, opts: ListOptions) -> AsyncIterator[WatchEventOut]:
        """Watch events for the namespace (or all), filtered by the selectors.

        Errors that kube-apiserver reports inside the stream (a start that was compacted) come as
        an ERROR event followed by the end of the stream.
        """
        prefix = self.objects.prefix(namespace)
        rv = opts.resource_version
        with interpreted(self.gr):
            if opts.send_initial_events is False and rv in ("", "0"):
                # No initial events asked for, and no revision: changes from now on.
                now = await self.objects.storage.current_revision()
                return self._stream(prefix, opts, now, [], initial_events_end=False)
            initial = opts.send_initial_events if opts.send_initial_events is not None else rv in ("", "0")
            if not initial:
                return self._stream(prefix, opts, parse_revision(rv), [], initial_events_end=False)
            # sendInitialEvents with NotOlderThan N: a snapshot at least as new as N, i.e. now.
            if rv not in ("", "0"):
                requested = parse_revision(rv)
                current = await self.objects.storage.current_revision()
                if requested > current:
                    raise status_error(FutureRevisionError(requested, current), self.gr)
        selectors = ListOptions(label_selector=opts.label_selector, field_selector=opts.field_selector)
        snapshot = await self._read(prefix, selectors, 0, None)
        end = bool(opts.send_initial_events)
        # Each ADDED shares its encodings with every watch that starts from the same object.
        snapshot_objects = map(self.decoded.get, snapshot.items)
        added = [WatchEventOut("ADDED", shared.obj, shared.encodings) for shared in snapshot_objects]
        if snapshot.corrupt:
            # As upstream's etcd3 watch: the objects before the first undecodable one, then an
            # ERROR event that ends the stream.
            added = added[: snapshot.before_corrupt]
            return self._stream(
                prefix, opts, snapshot.revision, added, initial_events_end=False, corrupt=snapshot.corrupt[0]
            )
        return self._stream(prefix, opts, snapshot.revision, added, initial_events_end=end)

    async def _stream(
        self,
        prefix: str,
        opts: ListOptions,
        after: int,
        initial: Events,
        *,
        initial_events_end: bool,
        corrupt: CorruptObjectError | None = None,
    ) -> AsyncIterator[WatchEventOut]:
        for added in initial:
            yield added
        if corrupt is not None:
            yield _corrupt_event(corrupt)
            return
        if initial_events_end:
            yield WatchEventOut("BOOKMARK", self._bookmark(after, initial_events_end=True))
        last_sent = after
        bookmarks = opts.allow_watch_bookmarks
        loop = asyncio.get_running_loop()
        last_bookmark = loop.time()
        events = self.objects.storage.watch(prefix, after_revision=after, progress=bookmarks)
        try:
            async for event in events:
                if event.type is EventType.PROGRESS:
                    if bookmarks and loop.time() - last_bookmark >= self.bookmark_interval:
                        last_sent = max(last_sent, event.revision)
                        last_bookmark = loop.time()
                        yield WatchEventOut("BOOKMARK", self._bookmark(last_sent))
                    continue
                out = self._convert(event, opts)
                last_sent = event.revision
                if out is not None:
                    yield out
        except CorruptObjectError as exc:
            yield _corrupt_event(exc)
        except StorageError as exc:
            yield WatchEventOut("ERROR", status_error(exc, self.gr, seen=last_sent).status)
        finally:
            await events.aclose()

    def _bookmark(self, revision: int, *, initial_events_end: bool = False) -> JSON:
        meta: JSON = {"resourceVersion": str(revision)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END_ANNOTATION: "true"}
        return {"kind": self.kind.kind, "apiVersion": self.kind.api_version, "metadata": meta}

    def _convert(self, event: WatchEvent, opts: ListOptions) -> WatchEventOut | None:
        """The change as the watcher's selectors see it: ADDED or MODIFIED while selected, DELETED
        when gone or no longer selected, nothing while never selected. The event is the one every
        watcher that sees the change so is sent."""
        change = self.recent_changes.get(event)
        current = change.current()
        previous = None
        # As upstream's etcd3 watch, the previous value is decoded only where it decides something:
        # for a deletion, or for a watch with selectors.
        if event.prev_value is not None and (current is None or opts.has_selectors):
            previous = change.previous()
        current_passes = current is not None and matches(self.kind, current, opts)
        if previous is None:
            previous_passes = event.prev_value is not None and current is not None
        else:
            previous_passes = matches(self.kind, previous, opts)
        if current_passes:
            return change.out("MODIFIED" if previous_passes else "ADDED")
        if previous_passes and previous is not None:
            # Gone, or no longer selected: DELETED with the last state at this event's revision.
            return change.out("DELETED")
        return None


def _corrupt_event(error: CorruptObjectError) -> WatchEventOut:
    """The ERROR event that ends a watch meeting an undecodable object: upstream's etcd3 watch
    reports its decoder's error as an internal error."""
    return WatchEventOut("ERROR", errors.internal_error(error.reason).status)
