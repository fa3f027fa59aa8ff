"""The append-only revision log behind the SQLite backend, as kine keeps one.

Every create, update and delete appends one row; the row's id is the revision of that change. A
key's state at revision R is its row with the greatest id <= R unless that row is a deletion.
Compaction removes the rows no revision >= the compaction point can see.

Everything here runs on the database thread (sqlite3 connections belong to the thread that made
them), one call at a time, so writes are serialized by construction. A write returns its result and
the changes it made, which the backend hands to the broadcaster once committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
)
from apiserver.storage.sqlite.dialect import Dialect, Row, key_range

T = TypeVar("T")
# Spelled out here: inside the class, `list` names the read method.
Changes = list[WatchEvent]
# A write: run inside a transaction, it returns its result and the changes it made.
Write = Callable[[], tuple[T, Changes]]
# How many changes one read of the log returns at most.
CHANGES_BATCH = 500


def _change(row: tuple[Any, ...]) -> WatchEvent:
    revision, name, created, deleted, create_revision, value, old_value = row
    if deleted:
        return WatchEvent(EventType.DELETE, name, revision, None, old_value, create_revision)
    return WatchEvent(EventType.PUT, name, revision, value, None if created else old_value, create_revision)


def expiry(ttl: int) -> float | None:
    """The wall-clock time a key written now with `ttl` seconds expires at (None: never)."""
    return time.time() + ttl if ttl > 0 else None


class RevisionLog:
    """The log over one SQLite file. `committed` and `compacted` may be read from any thread.

    `shared`: other processes write to the file too (the workers of one server), so the latest
    revision and the compaction point are read from the file where they matter, not remembered.
    """

    def __init__(self, path: str, *, shared: bool = False) -> None:
        self.path = path
        self.shared = shared
        self._sql: Dialect | None = None
        self._next = 0  # the last revision handed out, possibly not yet committed
        self.committed = 0
        self.compacted = 0

    @property
    def _db(self) -> Dialect:
        if self._sql is None:
            raise StorageUnavailableError("sqlite storage is closed")
        return self._sql

    def open(self) -> None:
        sql = Dialect.connect(self.path)
        # A new store is at revision 1, as a new etcd is: "0" means "any version" to clients, so a
        # list of an empty store must not answer resourceVersion "0". Under the write lock: another
        # worker may be starting the same new store.
        sql.begin()
        try:
            self._next = self.committed = sql.sequence(initial=1)
            self.compacted = sql.compact_revision()
            sql.commit()
        except BaseException:
            sql.rollback()
            sql.close()
            raise
        self._sql = sql

    def close(self) -> None:
        if self._sql is not None:
            self._sql.close()
            self._sql = None

    def transact(self, bodies: Sequence[Write[Any]]) -> tuple[list[Any], Changes]:
        """Runs writes in one transaction, committed (and synced) once for all of them: group commit,
        as etcd syncs a batch of entries at once. Each write is a savepoint of its own; one refused
        by the storage (a conflict, a key that exists) is undone alone, and its error is its
        outcome. The revisions they took are committed with them or not at all."""
        db = self._db
        db.begin()
        outcomes: list[Any] = []
        changes: Changes = []
        try:
            if self.shared:
                # Holding the write lock now: whatever the other writers took is committed and counted.
                self._next = self.committed = db.sequence(initial=1)
            for body in bodies:
                outcome, made = self._one(body)
                outcomes.append(outcome)
                changes += made
            db.commit()
        except BaseException:
            db.rollback()
            self._next = self.committed
            raise
        self.committed = self._next
        return outcomes, changes

    def _one(self, body: Write[Any]) -> tuple[Any, Changes]:
        """One write of a batch: (its result, its changes), or (the StorageError refusing it, [])."""
        mark = self._next
        self._db.savepoint()
        try:
            result = body()
        except StorageError as refused:
            self._db.rollback_to_savepoint()
            self._next = mark
            return refused, []
        self._db.release()
        return result

    # -- writes (inside `transact`) ----------------------------------------------------------------

    def _append(self, key: str, **fields: Any) -> int:
        revision = self._next + 1
        if not fields.get("create_revision"):
            fields["create_revision"] = revision
        self._db.insert(Row(id=revision, name=key, **fields))
        self._next = revision
        return revision

    def _current(self, key: str) -> tuple[int, int, bytes]:
        """(mod_revision, create_revision, value) of a present key, else KeyNotFoundError."""
        latest = self._db.latest(key)
        if latest is None or latest[1]:
            raise KeyNotFoundError(key)
        return latest[0], latest[2], latest[3]

    def create(self, key: str, value: bytes, expires_at: float | None) -> tuple[KeyValue, Changes]:
        latest = self._db.latest(key)
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
        change = WatchEvent(EventType.PUT, key, revision, value, None, revision)
        return KeyValue(key, value, revision, revision), [change]

    def update(
        self, key: str, value: bytes, expected: int, expires_at: float | None
    ) -> tuple[KeyValue, Changes]:
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
        change = WatchEvent(EventType.PUT, key, revision, value, old, create_revision)
        return KeyValue(key, value, revision, create_revision), [change]

    def delete(self, key: str, expected: int) -> tuple[KeyValue, Changes]:
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
        change = WatchEvent(EventType.DELETE, key, revision, None, old, create_revision)
        return KeyValue(key, old, revision, create_revision), [change]

    def expire(self, now: float) -> tuple[int, Changes]:
        """Deletes every key whose expiry has passed, each with a DELETE like any delete."""
        changes: Changes = []
        for name, revision in self._db.due(now):
            changes += self.delete(name, revision)[1]
        return len(changes), changes

    # -- reads -------------------------------------------------------------------------------------

    def get(self, key: str) -> KeyValue | None:
        latest = self._db.latest(key)
        if latest is None or latest[1]:
            return None
        revision, _, create_revision, value = latest
        return KeyValue(key, value, revision, create_revision)

    def latest(self) -> int:
        """The latest committed revision (read from the file when other processes write too)."""
        if self.shared:
            self.committed = max(self.committed, self._db.sequence(initial=1))
        return self.committed

    def compaction_point(self) -> int:
        """The revision history was last compacted to (read from the file when shared)."""
        if self.shared:
            self.compacted = max(self.compacted, self._db.compact_revision())
        return self.compacted

    def _check_revision(self, revision: int) -> None:
        self.compaction_point()
        if revision > self.latest():
            raise FutureRevisionError(revision, self.committed)
        if revision < self.compacted:
            raise CompactedError(revision, self.compacted)

    def list(
        self,
        prefix: str,
        start: str | None,
        limit: int,
        revision: int,
        counted: bool = True,
        end: str | None = None,
    ) -> ListResult:
        if revision:
            self._check_revision(revision)
        at = revision or self.latest()
        low, high = key_range(prefix)
        if start is not None and start > low:
            low = start
        if end is not None and (high is None or end < high):
            high = end
        select = "SELECT kv.name, kv.value, kv.id, kv.create_revision"
        rows = self._db.live_rows(select, low, high, at, after_low=False, limit=limit)
        items = [KeyValue(*row) for row in rows]
        more = 0 < limit < len(items)
        remaining = 0
        if more:
            del items[limit:]
            if counted:
                remaining = self._db.count_live(items[-1].key, high, at, after_low=True)
        return ListResult(items, at, more, remaining)

    def changes(self, prefix: str, after: int, watched_from: int) -> Changes:
        """The next batch (at most CHANGES_BATCH) of changes under `prefix` after revision `after`,
        for a watch that started after `watched_from`."""
        if after < self.compaction_point() - 1:
            raise CompactedError(watched_from, self.compacted)
        return [_change(row) for row in self._db.changes(prefix, after, CHANGES_BATCH)]

    # -- compaction --------------------------------------------------------------------------------

    def compact(self, revision: int) -> None:
        if revision > self.latest():
            raise FutureRevisionError(revision, self.committed)
        if revision <= self.compaction_point():
            return
        db = self._db
        db.begin()
        try:
            db.compact(revision)
            db.commit()
        except BaseException:
            db.rollback()
            raise
        self.compacted = revision
