"""The SQLite backend: the Storage protocol over a kine-style revision log in one SQLite file.

The log (`log.RevisionLog`, over the statements of `dialect`) lives on a dedicated single-thread
executor: every statement runs there, never on the event loop, and writes are serialized by
construction. Committed changes go to the watches through the `broadcaster`, straight from the
commit path; a watch first replays the log from its revision, then follows the broadcast.

Shared by several processes (a server's workers), the file is the only common ground: writers take
turns on SQLite's write lock, and each process learns of the others' changes as kine does, by polling
the log, so that all of them publish every change in revision order.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from apiserver.machinery.tasks import BackgroundTasks
from apiserver.storage.broadcaster import Broadcaster, follow
from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import (
    CompactedError,
    EventType,
    KeyValue,
    ListResult,
    StorageError,
    StorageUnavailableError,
    WatchEvent,
    WatchOverflowError,
)
from apiserver.storage.sqlite.doorbell import Doorbell
from apiserver.storage.sqlite.log import CHANGES_BATCH, RevisionLog, Write, expiry

__all__ = ["SQLiteStorage", "WatchOverflowError"]

log = logging.getLogger(__name__)

T = TypeVar("T")
# Most writes committed in one transaction.
WRITE_BATCH = 256
# Seconds between reads of the log for the other workers' changes when they ring after each commit:
# a ring missed (a bug) costs a late event, never a lost one.
RUNG_POLL_INTERVAL = 1.0
# Spelled out here: inside the class, `list` names the read method.
Outcomes = list[Any]
Waiting = list[asyncio.Future[Any]]


class SQLiteStorage:
    """The Storage protocol over one SQLite file (WAL, synchronous=FULL: acknowledged is durable).

    `compaction_interval` > 0 compacts every that many seconds to the revision seen one interval
    earlier (kube-apiserver's scheme, 300 s there); 0 keeps all history. `sweep_interval` is how often
    expired keys are deleted, `progress_interval` how long an idle watch waits before a PROGRESS
    event, `watch_buffer` how many undelivered events a watch may hold before it fails. `shared`:
    other processes write to the file too; their changes are polled every `poll_interval` seconds
    (this process's own at once), and at once when they ring `doorbell` (the server's other
    workers), then polled only every RUNG_POLL_INTERVAL.
    """

    def __init__(
        self,
        path: str,
        *,
        compaction_interval: float = 0.0,
        sweep_interval: float = 1.0,
        progress_interval: float = 5.0,
        watch_buffer: int = 1000,
        shared: bool = False,
        poll_interval: float = 0.02,
        hold: HistoryHold | None = None,
        doorbell: Doorbell | None = None,
    ) -> None:
        self.path = path
        self.hold = hold or HistoryHold()
        self.compaction_interval = compaction_interval
        self.sweep_interval = sweep_interval
        self.progress_interval = progress_interval
        self.watch_buffer = watch_buffer
        self.doorbell = doorbell if shared else None
        self.poll_interval = poll_interval if self.doorbell is None else RUNG_POLL_INTERVAL
        self._log = RevisionLog(path, shared=shared)
        # Writes waiting for the next batch, and the batch being committed.
        self._queued: list[tuple[Write[Any], asyncio.Future[Any]]] = []
        self._batch: asyncio.Future[Outcomes] | None = None
        self._polled = asyncio.Event()
        self._broadcaster = Broadcaster(watch_buffer)
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks = BackgroundTasks()  # the TTL sweeper, the log poller, the compactor
        self.compaction_listeners: list[Callable[[int], None]] = []

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coreio-sqlite")
        await self._run(self._log.open)
        self._broadcaster.published = self._log.committed
        self._tasks.start(self._sweep_loop(), name="sqlite-ttl-sweeper")
        if self._log.shared:
            if self.doorbell is not None:
                self.doorbell.listen(self._loop, self._polled.set)
            self._tasks.start(self._poll_loop(), name="sqlite-log-poller")
        if self.compaction_interval > 0:
            self._tasks.start(self._compaction_loop(), name="sqlite-compactor")

    async def close(self) -> None:
        if self.doorbell is not None and self._loop is not None:
            self.doorbell.stop(self._loop)
        await self._tasks.stop()
        self._broadcaster.fail_all(StorageUnavailableError("storage closed"))
        if self._executor is not None:
            await self._run(self._log.close)
            self._executor.shutdown(wait=False)
            self._executor = None

    @property
    def active_watches(self) -> int:
        """How many watches are currently subscribed (an observable for tests and metrics)."""
        return len(self._broadcaster)

    # -- the protocol ------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        return await self._run(self._log.get, key)

    async def list(
        self,
        prefix: str,
        *,
        start: str | None = None,
        limit: int = 0,
        revision: int = 0,
        counted: bool = True,
        end: str | None = None,
    ) -> ListResult:
        return await self._run(self._log.list, prefix, start, limit, revision, counted, end)

    async def create(self, key: str, value: bytes, *, ttl: int = 0) -> KeyValue:
        return await self._write(functools.partial(self._log.create, key, value, expiry(ttl)))

    async def update(self, key: str, value: bytes, *, expected_revision: int, ttl: int = 0) -> KeyValue:
        return await self._write(
            functools.partial(self._log.update, key, value, expected_revision, expiry(ttl))
        )

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        return await self._write(functools.partial(self._log.delete, key, expected_revision))

    async def current_revision(self) -> int:
        return await self._run(self._log.latest) if self._log.shared else self._log.committed

    async def compacted_revision(self) -> int:
        return await self._run(self._log.compaction_point) if self._log.shared else self._log.compacted

    async def compact(self, revision: int) -> None:
        await self._run(self._log.compact, revision)
        for listener in self.compaction_listeners:
            listener(revision)

    def watch(
        self, prefix: str, *, after_revision: int, progress: bool = False, progress_every: float = 0.0
    ) -> AsyncGenerator[WatchEvent, None]:
        interval = (progress_every or self.progress_interval) if progress else None
        return self._watch(prefix, after_revision, interval)

    # -- running on the database thread ------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None or self._loop is None:
            raise StorageUnavailableError("sqlite storage is not open")
        try:
            return await self._loop.run_in_executor(self._executor, functools.partial(fn, *args))
        except sqlite3.Error as error:
            raise StorageError(f"sqlite: {error}") from error

    async def _write(self, body: Write[T]) -> T:
        """Queues the write for the next batch (one transaction, one sync for all the writes that
        came while the last batch was committing); its result once that batch is committed."""
        if self._executor is None or self._loop is None:
            raise StorageUnavailableError("sqlite storage is not open")
        done: asyncio.Future[T] = self._loop.create_future()
        self._queued.append((body, done))
        if self._batch is None:
            self._commit_next()
        return await done

    def _commit_next(self) -> None:
        """On the loop: hands the queued writes (up to WRITE_BATCH) to the database thread."""
        batch, self._queued = self._queued[:WRITE_BATCH], self._queued[WRITE_BATCH:]
        if self._loop is None or self._executor is None:  # closed meanwhile
            for _, done in batch:
                if not done.done():
                    done.set_exception(StorageUnavailableError("sqlite storage closed"))
            return
        bodies = [body for body, _ in batch]
        self._batch = self._loop.run_in_executor(self._executor, self._commit, bodies)
        self._batch.add_done_callback(functools.partial(self._committed, [done for _, done in batch]))

    def _committed(self, waiting: Waiting, batch: asyncio.Future[Outcomes]) -> None:
        """On the loop: each write's outcome to its writer, then the next batch."""
        self._batch = None
        failed = None if batch.cancelled() else batch.exception()
        if isinstance(failed, sqlite3.Error):
            failed = StorageError(f"sqlite: {failed}")
        for index, done in enumerate(waiting):
            if done.done():
                continue
            if batch.cancelled() or failed is not None:
                done.set_exception(failed or StorageUnavailableError("sqlite storage closed"))
            elif isinstance(outcome := batch.result()[index], StorageError):
                done.set_exception(outcome)
            else:
                done.set_result(outcome)
        if self._queued:
            self._commit_next()

    def _commit(self, bodies: Sequence[Write[Any]]) -> Outcomes:
        """On the database thread: the writes in one transaction, their changes then broadcast."""
        outcomes, changes = self._log.transact(bodies)
        if changes and self._loop is not None and self._log.shared:
            # The poller publishes, so that the other processes' changes keep their place in line.
            self._loop.call_soon_threadsafe(self._polled.set)
            if self.doorbell is not None:
                self.doorbell.ring()
        elif changes and self._loop is not None:
            # Queued from this one thread, so watchers see changes in commit order, and before
            # the writers' own awaits return.
            self._loop.call_soon_threadsafe(self._broadcaster.publish, changes)
        return outcomes

    # -- watches -----------------------------------------------------------------------------------

    async def _watch(
        self, prefix: str, after_revision: int, progress: float | None
    ) -> AsyncGenerator[WatchEvent, None]:
        # Subscribe before reading the log: every change is then in the log read, in the inbox, or
        # both; the revision checks drop the doubles.
        subscriber = self._broadcaster.subscribe(prefix)
        try:
            last = after_revision
            async with contextlib.aclosing(self._replay(prefix, after_revision)) as replayed:
                async for event in replayed:
                    yield event
                    last = event.revision
            if progress is not None:  # taken up: the start of its progress reports, at once
                yield WatchEvent(EventType.PROGRESS, "", last)
            published = self._broadcaster.newest
            async with contextlib.aclosing(follow(subscriber, last, progress, published)) as followed:
                async for event in followed:
                    yield event
        finally:
            self._broadcaster.unsubscribe(subscriber)

    async def _replay(self, prefix: str, after_revision: int) -> AsyncGenerator[WatchEvent, None]:
        """The logged changes after `after_revision`, read in batches up to the latest."""
        last = after_revision
        while True:
            batch = await self._run(self._log.changes, prefix, last, after_revision)
            for event in batch:
                yield event
                last = event.revision
            if len(batch) < CHANGES_BATCH:
                return

    # -- background work ---------------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                await self._write(functools.partial(self._log.expire, time.time()))
            except StorageError:
                log.exception("expiring keys failed")

    async def _compaction_loop(self) -> None:
        seen = await self.current_revision()
        done = 0
        while True:
            await asyncio.sleep(self.compaction_interval)
            try:
                if target := self.hold.next_compaction(seen, done):
                    await self.compact(target)
                    done = target
                seen = await self.current_revision()
            except StorageError:
                log.exception("compaction to revision %d failed", seen)

    async def _poll_loop(self) -> None:
        """Shared: publishes every change in the log after the last published, in revision order,
        whenever this process wrote or `poll_interval` has passed."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._polled.wait()
            self._polled.clear()
            try:
                await self._publish_new()
            except CompactedError as error:
                # Fell behind a compaction: the watches start over (from a list) where it is now.
                self._broadcaster.fail_all(error)
                self._broadcaster.published = max(self._broadcaster.published, self._log.compacted)
            except StorageError:
                log.exception("polling the log failed; trying again")

    async def _publish_new(self) -> None:
        while True:
            after = self._broadcaster.published
            batch = await self._run(self._log.changes, "", after, after)
            self._broadcaster.publish(batch)
            if len(batch) < CHANGES_BATCH:
                return
