"""What only the SQLite backend promises: durability across restarts and bounded watch buffers."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from pathlib import Path

import pytest

from apiserver.storage.interface import EventType, KeyExistsError, RevisionConflictError, WatchOverflowError
from apiserver.storage.sqlite.backend import SQLiteStorage
from apiserver.storage.sqlite.dialect import _DUE as DUE
from apiserver.storage.sqlite.dialect import SCHEMA, Dialect, _newest_alive
from tests.integration.storage.helpers import next_event, take
from tests.support.waiting import async_wait_until


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
    await asyncio.sleep(1.1)  # the TTL runs out while the store is closed

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
    await async_wait_until(lambda: store.active_watches == 1, message="the watch to subscribe")
    await store.close()
    with pytest.raises(Exception, match="closed"):
        await pending


async def test_writes_arriving_together_commit_together_and_a_refused_one_is_undone_alone(
    sqlite_path: str,
) -> None:
    store = await open_store(sqlite_path)
    try:
        first = await store.create("/g/taken", b"0")
        start = await store.current_revision()
        # Sent at once: they share transactions (and syncs), each refused one undone alone.
        writes = [store.create(f"/g/{i}", b"x") for i in range(100)]
        writes += [store.create("/g/taken", b"again") for _ in range(50)]  # refused: the key exists
        writes += [store.update("/g/taken", b"y", expected_revision=first.mod_revision) for _ in range(50)]
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        created = [o for o in outcomes[:100] if not isinstance(o, BaseException)]
        assert len(created) == 100
        assert all(isinstance(o, KeyExistsError) for o in outcomes[100:150])
        updated = [o for o in outcomes[150:] if not isinstance(o, BaseException)]
        assert len(updated) == 1, "one update of a revision wins; the others conflict"
        assert all(isinstance(o, RevisionConflictError) for o in outcomes[150:] if o not in updated)
        # Revisions are handed out without a gap: the refused writes took none.
        revisions = sorted(o.mod_revision for o in [*created, *updated])
        assert revisions == list(range(start + 1, start + 102))
        assert await store.current_revision() == start + 101
        assert (await store.get("/g/taken")) == updated[0]
    finally:
        await store.close()
    reopened = await open_store(sqlite_path)
    try:
        listed = await reopened.list("/g/")
        assert len(listed.items) == 101 and listed.revision == start + 101
    finally:
        await reopened.close()


def test_the_ttl_sweep_finds_due_keys_through_the_expiry_index(sqlite_path: str) -> None:
    """Every Event has a TTL, and the sweep looks for due keys every second, holding the write lock:
    walking the whole table instead took 0.7 s at 300,000 Events."""
    dialect = Dialect.connect(sqlite_path)
    try:
        plan = [row[3] for row in dialect.conn.execute(f"EXPLAIN QUERY PLAN {DUE}", (time.time(),))]
    finally:
        dialect.close()
    assert any("USING INDEX kv_expires_at" in step for step in plan), plan
    assert not any(step.startswith("SCAN kv") for step in plan), plan


async def test_a_list_chooses_its_keys_from_the_covering_index_of_a_migrated_file(sqlite_path: str) -> None:
    """A file from before kv_name_id_deleted (its index on (name, id) only) gets the covering index
    when opened, loses the old one, and lists as before, in key order."""
    old = sqlite3.connect(sqlite_path)
    old.executescript(
        SCHEMA.replace("kv_name_id_deleted ON kv (name, id, deleted)", "kv_name_id ON kv (name, id)").replace(
            "DROP INDEX IF EXISTS kv_name_id;", ""
        )
    )
    old.close()
    store = await open_store(sqlite_path)
    try:
        for name in ("c", "a", "é", "b", "z"):
            await store.create(f"/s/{name}", name.encode())
        await store.delete("/s/b")
        assert [kv.key for kv in (await store.list("/s/", limit=3)).items] == ["/s/a", "/s/c", "/s/z"]
        assert [kv.key for kv in (await store.list("/s/")).items] == ["/s/a", "/s/c", "/s/z", "/s/é"]
    finally:
        await store.close()
    dialect = Dialect.connect(sqlite_path)
    try:
        indexes = {
            row[0] for row in dialect.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
        at = dialect.conn.execute("SELECT MAX(id) FROM kv").fetchone()[0]
        params: list[object] = ["/s/", at]
        plan = [
            row[3]
            for row in dialect.conn.execute(
                f"EXPLAIN QUERY PLAN {_newest_alive('/s0', False, params)}", params
            )
        ]
    finally:
        dialect.close()
    assert "kv_name_id_deleted" in indexes and "kv_name_id" not in indexes, indexes
    assert any("USING COVERING INDEX kv_name_id_deleted" in step for step in plan), plan
