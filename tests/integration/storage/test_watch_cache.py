"""What the watch cache adds to the contract the suite checks for it: one storage watch however many
watches it serves, consistent reads that see writes made through another server, and watches from
before its window ended with 410 (CompactedError), as upstream's cacher ends them."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
import pytest

from apiserver.storage.cacher import CachedStorage, packing
from apiserver.storage.cacher.packing import PackedKeyValue
from apiserver.storage.etcd import EtcdStorage
from apiserver.storage.interface import (
    CompactedError,
    KeyValue,
    Storage,
    StorageUnavailableError,
    WatchEvent,
)
from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.integration.storage.helpers import summary, take
from tests.support.cluster_events import stored_event

ROOT = "/registry/group/things/"


async def open_cached(inner: Storage, window_size: int = 100, watch_buffer: int = 1000) -> CachedStorage:
    store = CachedStorage(
        inner, [ROOT], window_size=window_size, watch_buffer=watch_buffer, progress_interval=0.2
    )
    await store.start()
    async with asyncio.timeout(10):
        await store.wait_ready()
    return store


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
async def backend(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[Storage]:
    if request.param == "sqlite":
        inner: Storage = SQLiteStorage(f"{tmp_path}/cached.db", progress_interval=0.2)
    else:
        endpoint = request.getfixturevalue("etcd_endpoint")
        inner = EtcdStorage([endpoint], prefix=f"/test-{uuid.uuid4().hex}", progress_interval=0.2)
    yield inner


async def test_many_watches_share_one_storage_watch(backend: Storage) -> None:
    store = await open_cached(backend)
    try:
        start = await store.current_revision()
        watches = [store.watch(f"{ROOT}ns{i % 2}/", after_revision=start) for i in range(20)]
        created = [await store.create(f"{ROOT}ns{n}/a", b"1") for n in range(2)]
        for index, events in enumerate(watches):
            got = await take(events, 1)
            assert summary(got) == [("PUT", f"{ROOT}ns{index % 2}/a", created[index % 2].mod_revision)]
        assert store.active_watches == 20
        assert backend.active_watches == 1  # type: ignore[attr-defined]
        for events in watches:
            await events.aclose()
        assert store.active_watches == 0
    finally:
        await store.close()


@pytest.mark.etcd
async def test_a_consistent_read_sees_what_another_server_wrote(etcd_endpoint: str) -> None:
    prefix = f"/test-{uuid.uuid4().hex}"
    one = await open_cached(EtcdStorage([etcd_endpoint], prefix=prefix, progress_interval=0.2))
    other = await open_cached(EtcdStorage([etcd_endpoint], prefix=prefix, progress_interval=0.2))
    try:
        for number in range(20):
            written = await other.create(f"{ROOT}ns/{number}", b"x")
            listed = await one.list(ROOT)
            assert listed.revision >= written.mod_revision
            assert f"{ROOT}ns/{number}" in {kv.key for kv in listed.items}
            got = await one.get(f"{ROOT}ns/{number}")
            assert got is not None and got.mod_revision == written.mod_revision
        # A write outside the cached resource moves the storage's revision, too: the cache catches
        # up by the storage watch's progress reports, and a list is at least that new.
        elsewhere = await other.create("/registry/other/x", b"x")
        assert (await one.list(ROOT)).revision >= elsewhere.mod_revision
    finally:
        await one.close()
        await other.close()


async def test_a_watch_from_before_the_window_is_too_old(backend: Storage) -> None:
    store = await open_cached(backend, window_size=3)
    try:
        start = await store.current_revision()
        written = [await store.create(f"{ROOT}ns/{n}", b"x") for n in range(10)]
        await store.list(ROOT)  # consistent: the cache has every change, and holds the last 3
        with pytest.raises(CompactedError) as too_old:
            async with contextlib.aclosing(store.watch(ROOT, after_revision=start)) as events:
                await take(events, 1)
        assert (too_old.value.requested, too_old.value.compacted) == (start, written[-3].mod_revision)
        assert backend.active_watches == 1, "the storage watch is the cache's alone"  # type: ignore[attr-defined]
        async with contextlib.aclosing(store.watch(ROOT, after_revision=written[-3].mod_revision)) as recent:
            assert [event.revision for event in await take(recent, 2)] == [
                kv.mod_revision for kv in written[-2:]
            ]
            assert backend.active_watches == 1  # type: ignore[attr-defined]
    finally:
        await store.close()


async def test_concurrent_gets_share_one_revision_read_and_are_answered_from_the_cache(
    backend: Storage,
) -> None:
    store = await open_cached(backend)
    try:
        created = await store.create(f"{ROOT}ns/a", b"1")
        assert (await store.list(ROOT)).revision >= created.mod_revision  # the cache has it
        calls = {"current_revision": 0, "get": 0}
        for name in calls:
            method = getattr(backend, name)

            async def counted(*args: object, _method: Any = method, _name: str = name) -> Any:
                calls[_name] += 1
                return await _method(*args)

            setattr(backend, name, counted)
        got = await asyncio.gather(*(store.get(f"{ROOT}ns/a") for _ in range(50)))
        assert {(kv.key, kv.value, kv.mod_revision) for kv in got if kv} == {
            (created.key, b"1", created.mod_revision)
        }
        assert calls == {"current_revision": 1, "get": 0}
        # Read after a write it returned, a get sees it: from the cache once it has caught up, else
        # from the backend.
        updated = await store.update(f"{ROOT}ns/a", b"2", expected_revision=created.mod_revision)
        again = await store.get(f"{ROOT}ns/a")
        assert again is not None and (again.value, again.mod_revision) == (b"2", updated.mod_revision)
        assert await store.get(f"{ROOT}ns/missing") is None
    finally:
        await store.close()


def counted_revision_reads(backend: Storage) -> list[int]:
    """The number of `backend.current_revision` calls from now on, in a list of one."""
    reads = [0]
    read = backend.current_revision

    async def counted() -> int:
        reads[0] += 1
        return await read()

    backend.current_revision = counted  # type: ignore[method-assign]
    return reads


@pytest.mark.etcd
async def test_a_get_reading_ahead_waits_for_the_read_started_on_entering(etcd_endpoint: str) -> None:
    """A GET's revision read started as its request arrives: the read is under way on entering, the
    first get inside waits for it (no read of its own) and sees what was written before, and the
    next get, or one after leaving, reads anew."""
    prefix = f"/test-{uuid.uuid4().hex}"
    inner = EtcdStorage([etcd_endpoint], prefix=prefix, progress_interval=0.2)
    one = CachedStorage(inner, [ROOT], progress_interval=0.2, read_ahead=True)
    other = await open_cached(EtcdStorage([etcd_endpoint], prefix=prefix, progress_interval=0.2))
    await one.start()
    reads = counted_revision_reads(inner)
    try:
        async with asyncio.timeout(10):
            await one.wait_ready()
        written = await other.create(f"{ROOT}ns/a", b"x")
        before = reads[0]
        async with one.reading_ahead():
            assert reads[0] == before + 1, "the read is under way on entering"
            got = await one.get(f"{ROOT}ns/a")
            assert got is not None and got.mod_revision == written.mod_revision
            assert reads[0] == before + 1, "the get waited for it"
            await one.get(f"{ROOT}ns/a")
            assert reads[0] == before + 2, "once only"
        await one.get(f"{ROOT}ns/a")
        assert reads[0] == before + 3, "not after leaving"
    finally:
        await one.close()
        await other.close()


async def test_a_storage_not_reading_ahead_starts_no_read_on_entering(backend: Storage) -> None:
    store = await open_cached(backend)
    reads = counted_revision_reads(backend)
    try:
        async with store.reading_ahead():
            await asyncio.sleep(0.05)
            assert reads == [0]
    finally:
        await store.close()


async def _overflowed_watch(store: CachedStorage) -> tuple[AsyncGenerator[WatchEvent, None], list[KeyValue]]:
    """A watch that took its first change, then 40 written while it read nothing: far more than its
    inbox holds, which has overflowed once the cache has them all."""
    events = store.watch(ROOT, after_revision=await store.current_revision())
    first = await store.create(f"{ROOT}ns/0", b"0")
    assert summary(await take(events, 1)) == [("PUT", f"{ROOT}ns/0", first.mod_revision)]
    written = [await store.create(f"{ROOT}ns/{n}", b"x") for n in range(1, 41)]
    assert (await store.list(ROOT)).revision >= written[-1].mod_revision
    return events, written


async def test_a_watch_behind_its_inbox_catches_up_from_the_window(backend: Storage) -> None:
    store = await open_cached(backend, window_size=100, watch_buffer=5)
    try:
        events, written = await _overflowed_watch(store)
        got = await take(events, 40)
        assert summary(got) == [("PUT", kv.key, kv.mod_revision) for kv in written]
        later = await store.create(f"{ROOT}ns/later", b"y")
        assert summary(await take(events, 1)) == [("PUT", later.key, later.mod_revision)]
        await events.aclose()
    finally:
        await store.close()


async def test_a_watch_behind_the_window_too_ends_too_old(backend: Storage) -> None:
    store = await open_cached(backend, window_size=10, watch_buffer=5)
    try:
        events, _ = await _overflowed_watch(store)
        with pytest.raises(CompactedError):
            await take(events, 40)
    finally:
        await store.close()


async def test_a_watch_behind_its_inbox_ends_as_the_others_when_the_cache_closes(backend: Storage) -> None:
    store = await open_cached(backend, window_size=100, watch_buffer=5)
    closed = False
    try:
        events, _ = await _overflowed_watch(store)
        await store.close()
        closed = True
        with pytest.raises(StorageUnavailableError):  # not a catch-up that would wait for ever
            await take(events, 40)
    finally:
        if not closed:
            await store.close()


async def test_packed_values_read_back_as_the_storage_holds_them(backend: Storage) -> None:
    store = await open_cached(backend)
    try:
        for index in range(packing.TRAIN_AT + 100):
            body = stored_event(index)
            await store.create(f"{ROOT}{body['metadata']['namespace']}/{index}", orjson.dumps(body))
        listed = await store.list(ROOT)
        cache = store.caches[0]
        for _ in range(400):  # the training and the packing, in the background
            if all(isinstance(kv, PackedKeyValue) for kv in cache.state.page(ROOT, None, 0, 0).items):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the cache packed nothing in 20 s")
        stored = await backend.list(ROOT, revision=listed.revision)
        again = await store.list(ROOT)
        assert [(kv.key, kv.value, kv.mod_revision) for kv in again.items] == [
            (kv.key, kv.value, kv.mod_revision) for kv in stored.items
        ]
        for kv in stored.items[::97]:
            got = await store.get(kv.key)
            assert got is not None and (got.value, got.mod_revision) == (kv.value, kv.mod_revision)
    finally:
        await store.close()
