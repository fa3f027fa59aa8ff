"""Compaction (upstream: etcd3/compact.go): the periodic compactor kube-apiserver runs, and the
compacted revision, which etcd does not report."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import StorageError

log = logging.getLogger(__name__)


class _Compactable(Protocol):
    async def current_revision(self) -> int: ...

    async def compact(self, revision: int) -> None: ...


async def compact_every(storage: _Compactable, interval: float, hold: HistoryHold) -> None:
    """Every `interval` seconds, compacts to the revision seen one interval earlier, or to the
    revision `hold` keeps the history after, if older."""
    seen = done = 0
    while True:
        try:
            if target := hold.next_compaction(seen, done):
                await storage.compact(target)
                done = target
            seen = await storage.current_revision()
        except StorageError:
            log.exception("periodic etcd compaction failed")
        await asyncio.sleep(interval)


class CompactedRevision:
    """etcd does not report its compaction point, but a read below it fails: the oldest readable
    revision is searched for, starting from the last one known (`hint`; usually two reads)."""

    def __init__(self, readable: Callable[[int], Awaitable[bool]]) -> None:
        self._readable = readable
        self.hint = 0

    def compacted(self, revision: int) -> None:
        """A compaction to `revision` succeeded (or was found done)."""
        self.hint = max(self.hint, revision)

    async def find(self, current: int) -> int:
        """The compacted revision (0 when nothing is), `current` being the latest."""
        hint = min(max(self.hint, 1), current)
        if await self._readable(hint):
            if hint == 1 or not await self._readable(hint - 1):
                oldest = hint
            else:
                oldest = await self._oldest_readable(1, hint - 1)
        else:
            oldest = await self._oldest_readable(hint + 1, current)
        self.hint = oldest
        return oldest if oldest > 1 else 0

    async def _oldest_readable(self, low: int, high: int) -> int:
        """The smallest readable revision in [low, high], `high` being readable."""
        while low < high:
            middle = (low + high) // 2
            if await self._readable(middle):
                high = middle
            else:
                low = middle + 1
        return high
