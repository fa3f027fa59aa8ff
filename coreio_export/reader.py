"""The watch side of an export: Events from a revision on, in revision order, into a bounded queue,
so that a slow sink stops the reading (the server keeps the history, this process holds at most one
batch more than it sends). When the history from the position is gone (410 Gone at the start of a
watch), the Events still stored after it are listed, sent in revision order, and the gap reported.

The reader keeps its own cursor, the last revision it queued: a watch that ends or breaks, and a
relist, go on from there, never from before it (which would queue again what is queued).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from urllib.parse import quote

from apiserver.machinery.types import JSON
from coreio_export.connection import (
    BACKOFF,
    GONE,
    QUICK_END,
    WATCH_SECONDS,
    Api,
    ApiError,
    ExportError,
    transient,
)
from coreio_export.selection import Selection

EVENTS = "/apis/events.core.io/v1"
LIST_PAGE = 500
log = logging.getLogger("coreio_export")


@dataclass
class Item:
    """One revision read: a change to export (`change` and `event`), or only a position reached
    (`event` None: a bookmark, or an Event the export does not select)."""

    revision: int
    change: str = ""
    event: JSON | None = None
    received: float = 0.0


@dataclass
class Gap:
    """The history between two revisions was gone before it was read: what was listed instead."""

    after: int
    listed_at: int


class HistoryGone(Exception):
    """410 at the start of a watch: the history after the cursor was compacted."""


class Reader:
    def __init__(self, api: Api, selection: Selection, queue: asyncio.Queue[Item | Gap]) -> None:
        self.api = api
        self.selection = selection
        self.queue = queue
        self.cursor = 0  # the last revision queued
        namespace = selection.watched_namespace
        self.collection = f"{EVENTS}/namespaces/{namespace}/events" if namespace else f"{EVENTS}/events"

    async def current_revision(self) -> int:
        listed = await self.api.get(f"{self.collection}?limit=1")
        return _revision(listed)

    async def run(self, after: int) -> None:
        """Reads from revision `after` (exclusive) on, for ever; a server or network failure is
        retried after a growing pause, any other ApiError ends the reading."""
        self.cursor = after
        failures, gone = 0, False
        while True:
            began = time.monotonic()
            try:
                shown = await (self._relisted() if gone else self._watch())
                gone = False
            except HistoryGone:
                shown = gone = True  # the next turn lists
            except ExportError as exc:
                if not transient(exc):
                    raise
                log.warning("%s; reading again from revision %d", exc, self.cursor)
                shown = False
            failures = 0 if shown else failures + 1
            if not shown and time.monotonic() - began < QUICK_END:
                await asyncio.sleep(BACKOFF[min(failures, len(BACKOFF)) - 1])

    async def _watch(self) -> bool:
        """One watch from the cursor; whether it showed anything."""
        path = (
            f"{self.collection}?watch=1&allowWatchBookmarks=true&resourceVersion={self.cursor}"
            f"&timeoutSeconds={WATCH_SECONDS}"
        )
        shown = False
        try:
            async with contextlib.aclosing(self.api.watch(path)) as changes:
                async for change in changes:
                    kind, obj = change.get("type", ""), change.get("object") or {}
                    if kind == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), obj)
                    shown = True
                    await self._queue(kind, obj)
        except ApiError as exc:
            if exc.status != GONE:
                raise
            if not shown:
                raise HistoryGone from None
            # Fell behind mid-watch: the next watch goes on from the cursor.
        return shown

    async def _queue(self, kind: str, obj: JSON) -> None:
        revision = _revision(obj)
        if kind != "BOOKMARK" and self.selection.wants(kind, obj):
            await self.queue.put(Item(revision, kind, obj, time.monotonic()))
        else:
            await self.queue.put(Item(revision))
        self.cursor = revision

    async def _relisted(self) -> bool:
        """The Events stored now whose revision is past the cursor, queued in revision order, then
        the gap; the next watch starts at the list's revision."""
        items, listed_at = await self._list_after(self.cursor)
        log.warning(
            "the history after revision %d is gone; %d Events still stored after it are sent",
            self.cursor,
            len(items),
        )
        for obj in sorted(items, key=_revision):
            obj.setdefault("apiVersion", "events.core.io/v1")
            obj.setdefault("kind", "Event")
            if self.selection.wants("ADDED", obj):
                await self.queue.put(Item(_revision(obj), "ADDED", obj, time.monotonic()))
        await self.queue.put(Gap(self.cursor, listed_at))
        self.cursor = listed_at
        return True

    async def _list_after(self, after: int) -> tuple[list[JSON], int]:
        """The stored Events of the export's namespaces changed after `after`, and the list's
        revision (one consistent list, in pages)."""
        items: list[JSON] = []
        token, listed_at = "", 0
        while True:
            more = f"&continue={quote(token, safe='')}" if token else ""
            page = await self.api.get(f"{self.collection}?limit={LIST_PAGE}{more}")
            listed_at = listed_at or _revision(page)
            items += [i for i in page.get("items") or [] if _revision(i) > after and self._kept(i)]
            token = (page.get("metadata") or {}).get("continue", "")
            if not token:
                return items, listed_at

    def _kept(self, obj: JSON) -> bool:
        spaces = self.selection.namespaces
        return spaces is None or (obj.get("metadata") or {}).get("namespace") in spaces


def _revision(obj: JSON) -> int:
    """The resourceVersion of an object or list; ExportError when it is not a revision."""
    text = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None
    try:
        return int(str(text))
    except ValueError:
        raise ExportError(f"the server's answer carries no resourceVersion: {str(obj)[:200]}") from None
