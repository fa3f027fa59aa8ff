"""The SQLite backend: a kine-style append-only revision log in a single table.

Every create, update and delete appends one row to `kv`; the row's id is the revision of that change.
A key's state at revision R is its row with the greatest id <= R unless that row is a deletion.
Compaction removes the rows no revision >= the compaction point can see.

sqlite3 connections belong to the thread that made them, so the one connection lives on a dedicated
single-thread executor: every statement runs there (never on the event loop) and writes are
serialized by construction. Watches are fanned out in-process, straight from the commit path.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from apiserver.storage.interface import (
    CompactedError,
    EventType,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    RevisionConflictError,
    StorageError,
    StorageUnavailableError,
    WatchEvent,
    WatchOverflowError,
)

__all__ = ["SQLiteStorage", "WatchOverflowError"]

log = logging.getLogger(__name__)

T = TypeVar("T")
# Spelled out here: inside the class, `list` names the Storage method.
Events = list[WatchEvent]
Rows = list[tuple[Any, ...]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    created INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    value BLOB,
    old_value BLOB,
    expires_at REAL
);
CREATE INDEX IF NOT EXISTS kv_name_id ON kv (name, id);
CREATE INDEX IF NOT EXISTS kv_expires_at ON kv (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

# Columns a watch event is built from, in this order.
_EVENT_COLUMNS = "id, name, created, deleted, create_revision, value, old_value"
_LOG_BATCH = 500


def key_range(prefix: str) -> tuple[str, str | None]:
    """The half-open range [low, high) of keys starting with `prefix` (high None: unbounded).

    SQLite compares TEXT as UTF-8 bytes, which orders like code points, so bumping the last code
    point that can be bumped yields the first string past every key with the prefix.
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            bumped = last + 1
            if 0xD800 <= bumped <= 0xDFFF:  # surrogates cannot be encoded; skip past them
                bumped = 0xE000
            return prefix, "".join(chars) + chr(bumped)
    return prefix, None


def _event(row: tuple[Any, ...]) -> WatchEvent:
    revision, name, created, deleted, create_revision, value, old_value = row
    if deleted:
        return WatchEvent(EventType.DELETE, name, revision, None, old_value, create_revision)
    return WatchEvent(EventType.PUT, name, revision, value, None if created else old_value, create_revision)


class _Subscriber:
    """One watch's bounded inbox; the publisher never blocks on a slow consumer."""

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


class SQLiteStorage:
    """The Storage protocol over one SQLite file (WAL, synchronous=FULL: acknowledged is durable).

    `compaction_interval` > 0 compacts every that many seconds to the revision seen one interval
    earlier (kube-apiserver's scheme, 300 s there); 0 keeps all history. `sweep_interval` is how often
    expired keys are deleted, `progress_interval` how long an idle watch waits before a PROGRESS
    event, `watch_buffer` how many undelivered events a watch may hold before it fails.
    """

    def __init__(
        self,
        path: str,
        *,
        compaction_interval: float = 0.0,
        sweep_interval: float = 1.0,
        progress_interval: float = 5.0,
        watch_buffer: int = 1000,
    ) -> None:
        self.path = path
        self.compaction_interval = compaction_interval
        self.sweep_interval = sweep_interval
        self.progress_interval = progress_interval
        self.watch_buffer = watch_buffer
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._subscribers: set[_Subscriber] = set()
        # Owned by the database thread:
        self._conn: sqlite3.Connection | None = None
        self._next_rev = 0  # the last revision handed out, possibly not yet committed
        # Written by the database thread once committed, read anywhere:
        self._committed_rev = 0
        self._compact_rev = 0
        # Owned by the event loop: the latest revision handed to subscribers.
        self._published_rev = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coreio-sqlite")
        await self._run(self._open)
        self._published_rev = self._committed_rev
        self._tasks.append(asyncio.create_task(self._sweep_loop(), name="sqlite-ttl-sweeper"))
        if self.compaction_interval > 0:
            self._tasks.append(asyncio.create_task(self._compaction_loop(), name="sqlite-compactor"))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for subscriber in self._subscribers:
            subscriber.fail(StorageUnavailableError("storage closed"))
        self._subscribers.clear()
        if self._executor is not None:
            await self._run(self._close_connection)
            self._executor.shutdown(wait=False)
            self._executor = None

    @property
    def active_watches(self) -> int:
        """How many watches are currently subscribed (an observable for tests and metrics)."""
        return len(self._subscribers)

    # -- the protocol ------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        return await self._run(self._get, key)

    async def list(
        self,
        prefix: str,
        *,
        start: str | None = None,
        limit: int = 0,
        revision: int = 0,
    ) -> ListResult:
        return await self._run(self._list, prefix, start, limit, revision)

    async def create(self, key: str, value: bytes, *, ttl: int = 0) -> KeyValue:
        return await self._run(self._transact, functools.partial(self._create, key, value, _expiry(ttl)))

    async def update(self, key: str, value: bytes, *, expected_revision: int, ttl: int = 0) -> KeyValue:
        body = functools.partial(self._update, key, value, expected_revision, _expiry(ttl))
        return await self._run(self._transact, body)

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        return await self._run(self._transact, functools.partial(self._delete, key, expected_revision))

    async def current_revision(self) -> int:
        return self._committed_rev

    async def compacted_revision(self) -> int:
        return self._compact_rev

    async def compact(self, revision: int) -> None:
        await self._run(self._compact, revision)

    def watch(self, prefix: str, *, after_revision: int, progress: bool = False) -> AsyncIterator[WatchEvent]:
        return self._watch(prefix, after_revision, progress)

    # -- event loop side ---------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None or self._loop is None:
            raise StorageUnavailableError("sqlite storage is not open")
        try:
            return await self._loop.run_in_executor(self._executor, functools.partial(fn, *args))
        except sqlite3.Error as error:
            raise StorageError(f"sqlite: {error}") from error

    def _publish(self, events: Events) -> None:
        for event in events:
            self._published_rev = event.revision
            for subscriber in list(self._subscribers):
                if event.key.startswith(subscriber.prefix) and not subscriber.push(event):
                    self._subscribers.discard(subscriber)

    async def _watch(
        self, prefix: str, after_revision: int, progress: bool
    ) -> AsyncGenerator[WatchEvent, None]:
        # Subscribe before reading the log: every change is then in the log read, in the inbox, or
        # both; the revision check below drops the doubles.
        subscriber = _Subscriber(prefix, self.watch_buffer)
        self._subscribers.add(subscriber)
        try:
            last = after_revision
            while True:
                replay = await self._run(self._read_log, prefix, last, after_revision)
                for event in replay:
                    yield event
                    last = event.revision
                if len(replay) < _LOG_BATCH:
                    break
            while True:
                while subscriber.events:
                    event = subscriber.events.popleft()
                    if event.revision > last:
                        yield event
                        last = event.revision
                if subscriber.failure is not None:
                    raise subscriber.failure
                subscriber.wakeup.clear()
                if not progress:
                    await subscriber.wakeup.wait()
                    continue
                try:
                    await asyncio.wait_for(subscriber.wakeup.wait(), self.progress_interval)
                except TimeoutError:
                    # The inbox is empty, so everything published so far has been yielded.
                    yield WatchEvent(EventType.PROGRESS, "", max(last, self._published_rev))
        finally:
            self._subscribers.discard(subscriber)

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                await self._run(self._transact, functools.partial(self._expire, time.time()))
            except StorageError:
                log.exception("expiring keys failed")

    async def _compaction_loop(self) -> None:
        seen = self._committed_rev
        while True:
            await asyncio.sleep(self.compaction_interval)
            try:
                if seen:
                    await self.compact(seen)
            except StorageError:
                log.exception("compaction to revision %d failed", seen)
            seen = self._committed_rev

    # -- database thread side ----------------------------------------------------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageUnavailableError("sqlite storage is closed")
        return self._conn

    def _open(self) -> None:
        # isolation_level=None: transactions are begun and ended explicitly below.
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.executescript(_SCHEMA)
        # AUTOINCREMENT's high-water mark survives deleting the newest rows during compaction.
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'kv'").fetchone()
        if row is None:
            # A new store is at revision 1, as a new etcd is: "0" means "any version" to clients,
            # so a list of an empty store must not answer resourceVersion "0".
            conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('kv', 1)")
            row = (1,)
        self._next_rev = self._committed_rev = row[0]
        row = conn.execute("SELECT value FROM meta WHERE name = 'compact_revision'").fetchone()
        self._compact_rev = row[0] if row else 0
        self._conn = conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _transact(self, body: Callable[[], tuple[T, Events]]) -> T:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            result, events = body()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._next_rev = self._committed_rev
            raise
        self._committed_rev = self._next_rev
        if events and self._loop is not None:
            # Queued from this one thread, so subscribers see events in commit order, and before
            # the writer's own await returns.
            self._loop.call_soon_threadsafe(self._publish, events)
        return result

    def _latest(self, key: str) -> tuple[int, int, int, bytes] | None:
        """(id, deleted, create_revision, value) of the key's newest row."""
        row: tuple[int, int, int, bytes] | None = self._db.execute(
            "SELECT id, deleted, create_revision, value FROM kv WHERE name = ? ORDER BY id DESC LIMIT 1",
            (key,),
        ).fetchone()
        return row

    def _append(
        self,
        key: str,
        *,
        created: bool,
        deleted: bool,
        create_revision: int,
        prev_revision: int,
        value: bytes | None,
        old_value: bytes | None,
        expires_at: float | None,
    ) -> int:
        revision = self._next_rev + 1
        db = self._db
        db.execute(
            "INSERT INTO kv (id, name, created, deleted, create_revision, prev_revision, value, old_value,"
            " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                revision,
                key,
                created,
                deleted,
                create_revision or revision,
                prev_revision,
                value,
                old_value,
                expires_at,
            ),
        )
        if prev_revision:
            # Only a key's newest row may expire; keeps the sweeper's index to live keys.
            db.execute(
                "UPDATE kv SET expires_at = NULL WHERE id = ? AND expires_at IS NOT NULL", (prev_revision,)
            )
        self._next_rev = revision
        return revision

    def _get(self, key: str) -> KeyValue | None:
        latest = self._latest(key)
        if latest is None or latest[1]:
            return None
        revision, _, create_revision, value = latest
        return KeyValue(key, value, revision, create_revision)

    def _current(self, key: str) -> tuple[int, int, bytes]:
        """(mod_revision, create_revision, value) of a present key, else KeyNotFoundError."""
        latest = self._latest(key)
        if latest is None or latest[1]:
            raise KeyNotFoundError(key)
        return latest[0], latest[2], latest[3]

    def _create(self, key: str, value: bytes, expires_at: float | None) -> tuple[KeyValue, Events]:
        latest = self._latest(key)
        if latest is not None and not latest[1]:
            raise KeyExistsError(key)
        revision = self._append(
            key,
            created=True,
            deleted=False,
            create_revision=0,
            prev_revision=latest[0] if latest else 0,
            value=value,
            old_value=None,
            expires_at=expires_at,
        )
        return KeyValue(key, value, revision, revision), [
            WatchEvent(EventType.PUT, key, revision, value, None, revision)
        ]

    def _update(
        self, key: str, value: bytes, expected: int, expires_at: float | None
    ) -> tuple[KeyValue, Events]:
        mod_revision, create_revision, old = self._current(key)
        if mod_revision != expected:
            raise RevisionConflictError(key, KeyValue(key, old, mod_revision, create_revision))
        revision = self._append(
            key,
            created=False,
            deleted=False,
            create_revision=create_revision,
            prev_revision=mod_revision,
            value=value,
            old_value=old,
            expires_at=expires_at,
        )
        return KeyValue(key, value, revision, create_revision), [
            WatchEvent(EventType.PUT, key, revision, value, old, create_revision)
        ]

    def _delete(self, key: str, expected: int) -> tuple[KeyValue, Events]:
        mod_revision, create_revision, old = self._current(key)
        if expected and mod_revision != expected:
            raise RevisionConflictError(key, KeyValue(key, old, mod_revision, create_revision))
        revision = self._append(
            key,
            created=False,
            deleted=True,
            create_revision=create_revision,
            prev_revision=mod_revision,
            value=None,
            old_value=old,
            expires_at=None,
        )
        return KeyValue(key, old, revision, create_revision), [
            WatchEvent(EventType.DELETE, key, revision, None, old, create_revision)
        ]

    def _expire(self, now: float) -> tuple[int, Events]:
        due = self._db.execute(
            "SELECT name, id FROM kv WHERE expires_at <= ? AND deleted = 0 ORDER BY id", (now,)
        ).fetchall()
        events: Events = []
        for name, revision in due:
            events += self._delete(name, revision)[1]
        return len(events), events

    def _check_revision(self, revision: int) -> None:
        if revision > self._committed_rev:
            raise FutureRevisionError(revision, self._committed_rev)
        if revision < self._compact_rev:
            raise CompactedError(revision, self._compact_rev)

    def _list(self, prefix: str, start: str | None, limit: int, revision: int) -> ListResult:
        if revision:
            self._check_revision(revision)
        at = revision or self._committed_rev
        low, high = key_range(prefix)
        if start is not None and start > low:
            low = start
        rows = self._live_rows(
            low, high, at, ">=", "SELECT kv.name, kv.value, kv.id, kv.create_revision", limit
        )
        items = [KeyValue(*row) for row in rows]
        more = 0 < limit < len(items)
        remaining = 0
        if more:
            del items[limit:]
            counted = self._live_rows(items[-1].key, high, at, ">", "SELECT COUNT(*)", 0)
            remaining = counted[0][0]
        return ListResult(items, at, more, remaining)

    def _live_rows(self, low: str, high: str | None, at: int, low_op: str, select: str, limit: int) -> Rows:
        """Runs `select` over the keys in the range that exist at revision `at`, by key.
        With a limit, fetches one row more so the caller can tell whether more remain."""
        where = f"name {low_op} ? AND id <= ?"
        params: list[Any] = [low, at]
        if high is not None:
            where += " AND name < ?"
            params.append(high)
        sql = (
            f"{select} FROM kv JOIN (SELECT MAX(id) AS id FROM kv WHERE {where} GROUP BY name) AS newest"
            " USING (id) WHERE kv.deleted = 0"
        )
        if not select.startswith("SELECT COUNT"):
            sql += " ORDER BY kv.name"
        if limit:
            sql += " LIMIT ?"
            params.append(limit + 1)
        return self._db.execute(sql, params).fetchall()

    def _read_log(self, prefix: str, after: int, watched_from: int) -> Events:
        if after < self._compact_rev - 1:
            raise CompactedError(watched_from, self._compact_rev)
        low, high = key_range(prefix)
        sql = f"SELECT {_EVENT_COLUMNS} FROM kv WHERE id > ? AND name >= ?"
        params: list[Any] = [after, low]
        if high is not None:
            sql += " AND name < ?"
            params.append(high)
        sql += " ORDER BY id LIMIT ?"
        params.append(_LOG_BATCH)
        return [_event(row) for row in self._db.execute(sql, params)]

    def _compact(self, revision: int) -> None:
        if revision > self._committed_rev:
            raise FutureRevisionError(revision, self._committed_rev)
        if revision <= self._compact_rev:
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            # Keep every row from `revision` on, and below it only the newest row of each key that
            # still exists at `revision`: that is what lists at >= `revision` and watches from it read.
            db.execute(
                "DELETE FROM kv WHERE id < :rev AND (deleted = 1 OR id < (SELECT MAX(later.id)"
                " FROM kv AS later WHERE later.name = kv.name AND later.id <= :rev))",
                {"rev": revision},
            )
            db.execute(
                "INSERT INTO meta (name, value) VALUES ('compact_revision', ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (revision,),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._compact_rev = revision


def _expiry(ttl: int) -> float | None:
    return time.time() + ttl if ttl > 0 else None
