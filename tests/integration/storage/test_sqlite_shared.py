"""SQLite shared by several processes (a server's workers): each sees the others' writes at once in
reads, in revision order in watches, and conflicts and compaction as if there were one writer.

Two stores on one file stand for two workers: each has its own connection and database thread, as
a process would; nothing else is shared between them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apiserver.storage.interface import (
    CompactedError,
    EventType,
    KeyExistsError,
    RevisionConflictError,
    WatchEvent,
)
from apiserver.storage.sqlite.backend import SQLiteStorage

PREFIX = "/registry/events.core.io/events/"


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[tuple[SQLiteStorage, SQLiteStorage]]:
    path = str(tmp_path / "shared.db")
    stores = [SQLiteStorage(path, shared=True, progress_interval=0.2) for _ in range(2)]
    for store in stores:
        await store.start()
    yield stores[0], stores[1]
    for store in stores:
        await store.close()


async def collect(store: SQLiteStorage, after: int, count: int) -> list[WatchEvent]:
    seen: list[WatchEvent] = []
    async with asyncio.timeout(10), contextlib.aclosing(store.watch(PREFIX, after_revision=after)) as events:
        async for event in events:
            seen.append(event)
            if len(seen) == count:
                return seen
    return seen


async def test_each_worker_watches_every_write_of_both_in_revision_order(
    workers: tuple[SQLiteStorage, SQLiteStorage],
) -> None:
    first, second = workers
    start = await first.current_revision()
    watching = [asyncio.create_task(collect(store, start, 400)) for store in workers]

    async def write(store: SQLiteStorage, who: str) -> list[int]:
        return [(await store.create(f"{PREFIX}ns/{who}-{i}", b"{}")).mod_revision for i in range(200)]

    written = await asyncio.gather(write(first, "a"), write(second, "b"))
    revisions = sorted(written[0] + written[1])
    assert len(set(revisions)) == 400, "two workers handed out the same revision"
    for seen in await asyncio.gather(*watching):
        assert [e.revision for e in seen] == revisions
        assert {e.key for e in seen} == {f"{PREFIX}ns/{w}-{i}" for w in "ab" for i in range(200)}


async def test_a_write_through_one_worker_is_read_at_once_through_the_other(
    workers: tuple[SQLiteStorage, SQLiteStorage],
) -> None:
    first, second = workers
    created = await first.create(f"{PREFIX}ns/one", b'{"n":1}')
    assert await second.current_revision() == created.mod_revision
    listed = await second.list(PREFIX)
    assert [(kv.key, kv.mod_revision) for kv in listed.items] == [(created.key, created.mod_revision)]
    assert listed.revision == created.mod_revision
    got = await second.get(created.key)
    assert got is not None and got.value == b'{"n":1}'


async def test_writers_on_two_workers_conflict_as_on_one(
    workers: tuple[SQLiteStorage, SQLiteStorage],
) -> None:
    first, second = workers
    created = await first.create(f"{PREFIX}ns/x", b"1")
    with pytest.raises(KeyExistsError):
        await second.create(f"{PREFIX}ns/x", b"2")
    await first.update(created.key, b"3", expected_revision=created.mod_revision)
    with pytest.raises(RevisionConflictError):
        await second.update(created.key, b"4", expected_revision=created.mod_revision)


async def test_a_compaction_by_one_worker_ends_the_old_history_on_the_other(
    workers: tuple[SQLiteStorage, SQLiteStorage],
) -> None:
    first, second = workers
    old = await first.create(f"{PREFIX}ns/y", b"1")
    newer = await first.update(old.key, b"2", expected_revision=old.mod_revision)
    await first.compact(newer.mod_revision)
    assert await second.compacted_revision() == newer.mod_revision
    with pytest.raises(CompactedError):
        await second.list(PREFIX, revision=old.mod_revision)
    with pytest.raises(CompactedError):
        await collect(second, old.mod_revision - 1, 1)
    deleted = await second.delete(old.key)
    seen = await collect(first, newer.mod_revision, 1)
    assert [(e.type, e.revision) for e in seen] == [(EventType.DELETE, deleted.mod_revision)]
