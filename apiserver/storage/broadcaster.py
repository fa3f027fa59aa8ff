"""Fan-out of committed changes to the watches open in this process (the SQLite log's, the watch
cache's).

Each watch subscribes with a key prefix and gets a bounded inbox: publishing never waits for a slow
consumer; one that falls too far behind is failed (WatchOverflowError) and must start over from the
last revision it saw. Everything here runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable

from apiserver.storage.interface import EventType, StorageError, WatchEvent, WatchOverflowError


class Subscriber:
    """One watch's bounded inbox."""

    def __init__(self, prefix: str, capacity: int) -> None:
        self.prefix = prefix
        self.capacity = capacity
        self.events: deque[WatchEvent] = deque()
        self.wakeup = asyncio.Event()
        self.failure: StorageError | None = None

    def push(self, event: WatchEvent) -> bool:
        """Queues the event; False when the inbox overflowed and the watch is now failed."""
        if len(self.events) >= self.capacity:
            self.events.clear()
            self.fail(
                WatchOverflowError(f"watch on {self.prefix!r} fell more than {self.capacity} events behind")
            )
            return False
        self.events.append(event)
        self.wakeup.set()
        return True

    def fail(self, error: StorageError) -> None:
        self.failure = error
        self.wakeup.set()


class Broadcaster:
    """The subscribers, and the latest revision handed to them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.published = 0
        self._subscribers: set[Subscriber] = set()

    def __len__(self) -> int:
        return len(self._subscribers)

    def newest(self) -> int:
        """The latest revision handed to the subscribers."""
        return self.published

    def subscribe(self, prefix: str) -> Subscriber:
        subscriber = Subscriber(prefix, self.capacity)
        self._subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    def publish(self, events: list[WatchEvent]) -> None:
        """Hands committed changes, in revision order, to every subscriber of their keys."""
        for event in events:
            self.published = event.revision
            for subscriber in list(self._subscribers):
                if event.key.startswith(subscriber.prefix) and not subscriber.push(event):
                    self._subscribers.discard(subscriber)

    def fail_all(self, error: StorageError) -> None:
        """Ends every watch with `error` (the store is closing)."""
        for subscriber in self._subscribers:
            subscriber.fail(error)
        self._subscribers.clear()


async def follow(
    subscriber: Subscriber, last: int, progress: float | None, published: Callable[[], int]
) -> AsyncGenerator[WatchEvent, None]:
    """The subscriber's changes after revision `last`; with `progress` (seconds), a PROGRESS event
    whenever the watch has been idle that long, at the newest revision `published` has handed out
    (everything up to it has been yielded: the inbox is empty)."""
    while True:
        while subscriber.events:
            event = subscriber.events.popleft()
            if event.revision > last:
                yield event
                last = event.revision
        if subscriber.failure is not None:
            raise subscriber.failure
        subscriber.wakeup.clear()
        if progress is None:
            await subscriber.wakeup.wait()
            continue
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation that
        # lands as the wakeup comes, and the watch would outlive its deadline.
        try:
            async with asyncio.timeout(progress):
                await subscriber.wakeup.wait()
        except TimeoutError:
            yield WatchEvent(EventType.PROGRESS, "", max(last, published()))
