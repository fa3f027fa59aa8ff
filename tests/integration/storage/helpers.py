"""Small helpers shared by the storage contract tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from apiserver.storage.interface import EventType, WatchEvent


async def take(events: AsyncIterator[WatchEvent], count: int, *, within: float = 5.0) -> list[WatchEvent]:
    """The next `count` change events (PROGRESS skipped), failing if they do not come in time."""

    async def collect() -> list[WatchEvent]:
        taken: list[WatchEvent] = []
        while len(taken) < count:
            event = await anext(events)
            if event.type is not EventType.PROGRESS:
                taken.append(event)
        return taken

    return await asyncio.wait_for(collect(), within)


async def next_event(events: AsyncIterator[WatchEvent], *, within: float = 5.0) -> WatchEvent:
    """The next event of any type, PROGRESS included."""
    return await asyncio.wait_for(anext(events), within)


def summary(events: list[WatchEvent]) -> list[tuple[str, str, int]]:
    return [(event.type.value, event.key, event.revision) for event in events]
