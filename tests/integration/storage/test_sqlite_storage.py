"""What only the SQLite backend promises: durability across restarts and bounded watch buffers."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from apiserver.storage.interface import EventType, WatchOverflowError
from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.integration.storage.helpers import next_event, take


@pytest.fixture
async def sqlite_path(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


async def open_store(path: str, **options: float) -> SQLiteStorage:
    store = SQLiteStorage(path, sweep_interval=0.1, progress_interval=0.2, **options)  # type: ignore[arg-type]
    await store.start()
    return store


async def test_data_and_revisions_survive_a_restart(sqlite_path: str) -> None:
    store = await open_store(sqlite_path)
    a = await store.create("/s/a", b"1")
    await store.update("/s/a", b"2", expected_revision=a.mod_revision)
    b = await store.create("/s/b", b"1")
    await store.delete("/s/b")
    await store.compact(b.mod_revision)
    last = await store.current_revision()
    await store.close()

    store = await open_store(sqlite_path)
    try:
        assert await store.current_revision() == last
        assert await store.compacted_revision() == b.mod_revision
        assert [(i.key, i.value) for i in (await store.list("/s/")).items] == [("/s/a", b"2")]
        c = await store.create("/s/c", b"1")
        assert c.mod_revision == last + 1
        async with contextlib.aclosing(store.watch("/s/", after_revision=b.mod_revision)) as events:
            replayed = await take(events, 2)
        assert [(e.type, e.key) for e in replayed] == [(EventType.DELETE, "/s/b"), (EventType.PUT, "/s/c")]
    finally:
        await store.close()


async def test_a_key_expiring_while_the_server_is_down_is_deleted_after_restart(sqlite_path: str) -> None:
    store = await open_store(sqlite_path)
    created = await store.create("/s/short", b"x", ttl=1)
    await store.close()
    await asyncio.sleep(1.1)

    store = await open_store(sqlite_path)
    try:
        async with contextlib.aclosing(store.watch("/s/", after_revision=created.mod_revision)) as events:
            deleted = (await take(events, 1))[0]
        assert (deleted.type, deleted.key, deleted.prev_value) == (EventType.DELETE, "/s/short", b"x")
        assert await store.get("/s/short") is None
    finally:
        await store.close()


async def test_a_watch_that_falls_behind_fails_instead_of_buffering_forever(sqlite_path: str) -> None:
    store = await open_store(sqlite_path, watch_buffer=5)
    try:
        first = await store.create("/s/0", b"x")
        events = store.watch("/s/", after_revision=0)
        assert (await next_event(events)).revision == first.mod_revision  # now subscribed and live
        for i in range(1, 10):
            await store.create(f"/s/{i}", b"x")
        with pytest.raises(WatchOverflowError):
            await next_event(events)
        assert store.active_watches == 0
        # A fresh watch from the last revision seen picks up everything.
        async with contextlib.aclosing(store.watch("/s/", after_revision=first.mod_revision)) as fresh:
            assert len(await take(fresh, 9)) == 9
    finally:
        await store.close()


async def test_closing_the_store_ends_open_watches(sqlite_path: str) -> None:
    store = await open_store(sqlite_path)
    events = store.watch("/s/", after_revision=0)
    pending = asyncio.ensure_future(next_event(events))
    await asyncio.sleep(0.05)
    await store.close()
    with pytest.raises(Exception, match="closed"):
        await pending
