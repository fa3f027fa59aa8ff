"""The watch side of an export: Events from a revision on, in revision order, into a bounded queue,
so that a slow sink stops the reading (the server keeps the history, this process holds at most one
batch more than it sends). When the history from the position is gone (410 Gone at the start of a
watch), the Events still stored after it are listed, sent in revision order, and the gap reported.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from coreio_export.connection import Api, ApiError, ExportError
from coreio_export.selection import Selection

JSON = dict[str, Any]
EVENTS = "/apis/events.core.io/v1"
WATCH_SECONDS = 300  # each watch ends after this, and the next one starts where it stopped
LIST_PAGE = 500
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)
GONE = 410
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


class Reader:
    def __init__(self, api: Api, selection: Selection, queue: asyncio.Queue[Item | Gap]) -> None:
        self.api = api
        self.selection = selection
        self.queue = queue
        namespace = selection.watched_namespace
        self.collection = f"{EVENTS}/namespaces/{namespace}/events" if namespace else f"{EVENTS}/events"

    async def current_revision(self) -> int:
        listed = await self.api.get(f"{self.collection}?limit=1")
        return int(listed["metadata"]["resourceVersion"])

    async def run(self, after: int) -> None:
        """Reads from revision `after` (exclusive) on, for ever."""
        failures = 0
        while True:
            try:
                after, shown = await self._watch(after)
                failures = 0 if shown else failures
            except ApiError as exc:
                if exc.status != GONE:
                    raise
                after = await self._relist(after)
            except ExportError as exc:
                delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                log.warning("%s; watching again in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    async def _watch(self, after: int) -> tuple[int, bool]:
        """One watch from `after`; the revision it reached, and whether it showed anything."""
        path = (
            f"{self.collection}?watch=1&allowWatchBookmarks=true&resourceVersion={after}"
            f"&timeoutSeconds={WATCH_SECONDS}"
        )
        shown = False
        async for change in self.api.watch(path):
            kind, obj = change.get("type", ""), change.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == GONE and shown:
                    return after, shown  # fell behind mid-watch: watch again from where it stopped
                raise ApiError(int(obj.get("code") or 500), obj)
            revision = int(obj.get("metadata", {}).get("resourceVersion") or after)
            shown = True
            if kind == "BOOKMARK":
                await self.queue.put(Item(revision))
            elif self.selection.wants(kind, obj):
                await self.queue.put(Item(revision, kind, obj, time.monotonic()))
            else:
                await self.queue.put(Item(revision))
            after = revision
        return after, shown

    async def _relist(self, after: int) -> int:
        """The Events stored now whose revision is past `after`, sent in revision order, then the
        gap; the revision of the list, which the next watch starts from."""
        items: list[JSON] = []
        token, listed_at = "", 0
        while True:
            more = f"&continue={quote(token, safe='')}" if token else ""
            page = await self.api.get(f"{self.collection}?limit={LIST_PAGE}{more}")
            listed_at = listed_at or int(page["metadata"]["resourceVersion"])
            items += [i for i in page.get("items", []) if int(i["metadata"]["resourceVersion"]) > after]
            token = page["metadata"].get("continue", "")
            if not token:
                break
        log.warning(
            "the history after %d is gone; %d Events still stored after it are sent", after, len(items)
        )
        for obj in sorted(items, key=lambda i: int(i["metadata"]["resourceVersion"])):
            obj.setdefault("apiVersion", "events.core.io/v1")
            obj.setdefault("kind", "Event")
            if self.selection.wants("ADDED", obj):
                revision = int(obj["metadata"]["resourceVersion"])
                await self.queue.put(Item(revision, "ADDED", obj, time.monotonic()))
        await self.queue.put(Gap(after, listed_at))
        return listed_at
