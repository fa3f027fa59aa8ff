"""A watch of a prefix over its gRPC streams (upstream: etcd3/watcher.go): one stream at a time,
reopened from the next undelivered revision on the next member when its member is lost, as etcd's
clientv3 does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator

from apiserver.storage.etcd.client import Client
from apiserver.storage.etcd.keys import Keys
from apiserver.storage.etcd.progress import Progress
from apiserver.storage.etcd.stream import watch_on
from apiserver.storage.interface import StorageUnavailableError, WatchEvent

log = logging.getLogger(__name__)


class Watcher:
    """The watches of one storage client, and how many are open (`active`)."""

    def __init__(self, client: Client, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self.active = 0

    async def watch(
        self, prefix: str, after_revision: int, progress: float | None
    ) -> AsyncGenerator[WatchEvent, None]:
        """Changes under `prefix` after `after_revision`; PROGRESS events every `progress` seconds
        of quiet (None: none). Only when no member takes a lost stream up within the request
        timeout does the watch end as unavailable."""
        # One gRPC stream at a time per watch: closing the stream is what cancels it on the server.
        if self.client.refused is not None:
            raise self.client.refused
        tracker = Progress(after_revision, progress)
        retry = Rewatch(self.client.request_timeout, len(self.client.connections))
        self.active += 1
        try:
            while True:
                connection = self.client.active
                try:
                    async with contextlib.aclosing(
                        watch_on(connection, self.keys, prefix, tracker)
                    ) as events:
                        async for event in events:
                            yield event
                except StorageUnavailableError as error:
                    if tracker.created:  # the lost stream had been taken up: a fresh loss
                        retry.answered()
                    await retry.after(error)  # raises it once the retries are spent
                    self.client.failover(connection)
                    log.warning(
                        "etcd watch of %r on %s lost (%s); resuming from revision %d on %s",
                        prefix,
                        connection.target,
                        error,
                        tracker.last + 1,
                        self.client.active.target,
                    )
                    tracker.reopened()
                    continue
                return
        finally:
            self.active -= 1


class Rewatch:
    """How long a lost watch stream is retried: on other endpoints (never with just one) until
    `budget` seconds have passed since it was lost without any member taking the watch up."""

    def __init__(self, budget: float, endpoints: int) -> None:
        self.budget = budget
        self.endpoints = endpoints
        self.deadline: float | None = None  # None: the watch is not being retried
        self.attempts = 0

    def answered(self) -> None:
        self.deadline, self.attempts = None, 0

    async def after(self, error: StorageUnavailableError) -> None:
        """Waits before the next attempt; raises `error` when no attempt is left."""
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.budget
        if self.endpoints < 2 or now >= self.deadline:
            raise error
        self.attempts += 1
        if self.attempts >= self.endpoints:  # every endpoint tried once: back off a little
            await asyncio.sleep(min(0.1 * 2 ** (self.attempts - self.endpoints), 1.0, self.deadline - now))
