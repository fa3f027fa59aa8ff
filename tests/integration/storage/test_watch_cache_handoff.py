"""The first fill handed on (storage/cacher/handoff.py): of a server's workers, only the first lists
the storage when their watch caches fill at start; the others fill from its pages, through real
pipes, over a real SQLite file or etcd, and then follow the storage's watch themselves. A follower
whose pages stop coming lists the storage itself; a first worker whose follower is gone fills all
the same."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from apiserver.storage.cacher import CachedStorage, handoff, resource
from apiserver.storage.cacher.handoff import FirstFill, PageFeed, PageTee
from apiserver.storage.etcd import EtcdStorage
from apiserver.storage.interface import KeyValue, Storage, WatchEvent
from apiserver.storage.sqlite.backend import SQLiteStorage

EVENTS = "/registry/events.core.io/events/"
BINDINGS = "/registry/rbac.authorization.core.io/rolebindings/"
STORED = {EVENTS: 25, BINDINGS: 3}
PAGE = 10  # so that the Events take three pages


Opener = Callable[[], Awaitable[Storage]]


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
async def open_storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens clients of one store, as each worker has its own; the first one opened is filled with
    the STORED objects. All are closed at teardown."""
    opened: list[Storage] = []
    prefix = f"/test-{uuid.uuid4().hex}"

    async def open_one() -> Storage:
        storage: Storage
        if request.param == "sqlite":
            storage = SQLiteStorage(str(tmp_path / "shared.db"), shared=True, progress_interval=0.2)
        else:
            storage = EtcdStorage(
                [request.getfixturevalue("etcd_endpoint")], prefix=prefix, progress_interval=0.2
            )
        await storage.start()
        if not opened:
            for root, count in STORED.items():
                for number in range(count):
                    await storage.create(f"{root}ns{number % 3}/o{number:03d}", f'{{"n":{number}}}'.encode())
        opened.append(storage)
        return storage

    yield open_one
    for storage in opened:
        await storage.close()


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource, "LIST_PAGE", PAGE)


def counting_lists(storage: Storage) -> list[str]:
    """The prefixes `storage` is asked to list from now on (it still lists them)."""
    asked: list[str] = []
    real = storage.list

    async def list_counted(prefix: str, **options: Any) -> Any:
        asked.append(prefix)
        return await real(prefix, **options)

    storage.list = list_counted  # type: ignore[method-assign]
    return asked


async def cached(storage: Storage, fill: FirstFill) -> CachedStorage:
    store = CachedStorage(storage, list(STORED), progress_interval=0.2, first_fill=fill)
    await store.start_caches()
    return store


async def ready(*stores: CachedStorage) -> None:
    async with asyncio.timeout(10):
        for store in stores:
            await store.wait_ready()


def held(store: CachedStorage) -> dict[str, list[KeyValue]]:
    return {cache.root: cache.page(cache.root, None, 0).items for cache in store.caches}


async def test_a_follower_fills_from_the_first_workers_pages_without_listing(open_storage: Opener) -> None:
    first_storage, other_storage = await open_storage(), await open_storage()
    asked = counting_lists(other_storage)
    fills = FirstFill.pipes(2)
    first = await cached(first_storage, fills[0])
    follower = await cached(other_storage, fills[1])
    try:
        await ready(first, follower)
        assert asked == []  # the follower never listed the storage
        assert held(follower) == held(first)
        assert {root: len(items) for root, items in held(follower).items()} == STORED
        assert [c.revision for c in follower.caches] == [c.revision for c in first.caches]
        # From there on it follows the storage's watch itself.
        written = await first_storage.create(f"{EVENTS}ns0/later", b'{"n":"later"}')
        assert await follower.caches[0].fresh()  # it has reached the storage's revision
        assert follower.caches[0].state.get(written.key) == written
    finally:
        await follower.close()
        await first.close()


async def test_a_follower_whose_pages_stop_lists_the_storage_itself(
    open_storage: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    """The first worker sent one page of the Events, then its list failed: the follower drops
    that page and lists every object itself."""
    caplog.set_level(logging.INFO, logger="apiserver.storage.cacher.resource")
    first_storage, other_storage = await open_storage(), await open_storage()
    fills = FirstFill.pipes(2)
    tee = PageTee(fills[0].send_to, list(STORED))
    await tee.open()
    follower = await cached(other_storage, fills[1])
    try:
        page = await first_storage.list(EVENTS, limit=PAGE)
        await tee.send(EVENTS, page.revision, page.items, last=False)
        tee.fail(EVENTS)
        await ready(follower)
        assert {root: len(items) for root, items in held(follower).items()} == STORED
        assert f"watch cache of {EVENTS} lists the storage itself" in caplog.text
    finally:
        await follower.close()
        await tee.close()


async def test_a_follower_waits_for_a_first_worker_that_lists_longer_than_a_stall(
    open_storage: Opener, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The first worker's list takes twice as long as a follower waits for a frame (a million
    Events take 13 s, more under load): it says every third of that wait that it is still
    listing, so its follower takes its list when it comes rather than listing the storage beside it."""
    caplog.set_level(logging.INFO, logger="apiserver.storage.cacher.resource")
    monkeypatch.setattr(handoff, "STALL_SECONDS", 0.6)
    first_storage, other_storage = await open_storage(), await open_storage()
    asked = counting_lists(other_storage)
    real = first_storage.list

    async def list_slowly(prefix: str, **options: Any) -> Any:
        await asyncio.sleep(0.3)
        return await real(prefix, **options)

    first_storage.list = list_slowly  # type: ignore[method-assign]
    fills = FirstFill.pipes(2)
    first = await cached(first_storage, fills[0])
    follower = await cached(other_storage, fills[1])
    try:
        async with asyncio.timeout(20):
            await first.wait_ready()
            await follower.wait_ready()
        assert asked == []  # it never listed the storage itself
        assert "lists the storage itself" not in caplog.text
        assert held(follower) == held(first)
    finally:
        await follower.close()
        await first.close()


async def test_the_first_worker_fills_when_its_follower_is_gone(open_storage: Opener) -> None:
    first_storage = await open_storage()
    fills = FirstFill.pipes(2)
    take_from = fills[1].take_from
    assert take_from is not None
    os.close(take_from)  # the follower's end: writing to the pipe fails with EPIPE
    first = await cached(first_storage, fills[0])
    try:
        await ready(first)
        assert {root: len(items) for root, items in held(first).items()} == STORED
    finally:
        await first.close()


async def test_a_cache_that_gives_its_pages_up_holds_back_no_other() -> None:
    """One cache of a follower stops taking its pages after the first (its queue full behind it):
    the pages of another cache, sent after them through the same pipe, still arrive."""
    fills = FirstFill.pipes(2)
    take_from = fills[1].take_from
    assert take_from is not None
    tee, feed = PageTee(fills[0].send_to, [EVENTS, BINDINGS]), PageFeed(take_from)
    await tee.open()
    await feed.open()
    try:
        page = [KeyValue(f"{EVENTS}ns/o", b"{}", 1, 1)]
        for _ in range(6):
            await tee.send(EVENTS, 9, page, last=False)
        events = feed.pages(EVENTS)
        assert await anext(events) == (9, page)
        # While this cache works on its first page, its queue fills and the reader waits to queue
        # one more; then the cache fails, and gives its pages up.
        await asyncio.sleep(0.3)
        await events.aclose()
        binding = KeyValue(f"{BINDINGS}ns/b", b"{}", 7, 7)
        await tee.send(BINDINGS, 9, [binding], last=True)
        async with asyncio.timeout(10):
            got = [page async for page in feed.pages(BINDINGS)]
        assert got == [(9, [binding])]
    finally:
        await feed.close()
        await tee.close()


def gated_watch(storage: Storage) -> tuple[asyncio.Event, asyncio.Event]:
    """Events set once a watch of `storage` is asked for, and setting which lets it start: a cache
    listed by then is not ready until it is."""
    asked, gate = asyncio.Event(), asyncio.Event()
    real = storage.watch

    async def watch_gated(*args: Any, **options: Any) -> AsyncGenerator[WatchEvent, None]:
        asked.set()
        await gate.wait()
        async for event in real(*args, **options):
            yield event

    storage.watch = watch_gated  # type: ignore[method-assign]
    return asked, gate


async def test_the_first_worker_hands_on_its_list_once_ready_as_it_was_listed(open_storage: Opener) -> None:
    """The followers take no core from the first worker and the storage while the first worker's
    cache fills: its pages come once it is ready. What comes is the list at its revision, not what
    the cache holds by then; the follower's own watch brings the rest."""
    first_storage = await open_storage()
    asked, gate = gated_watch(first_storage)
    fills = FirstFill.pipes(2)
    assert fills[1].take_from is not None
    feed = PageFeed(fills[1].take_from)
    await feed.open()
    taken: list[tuple[int, list[KeyValue]]] = []

    async def take() -> None:
        async for page in feed.pages(EVENTS):
            taken.append(page)

    first = await cached(first_storage, fills[0])
    taking = asyncio.create_task(take())
    try:
        events = next(cache for cache in first.caches if cache.root == EVENTS)
        await asyncio.wait_for(asked.wait(), 10)  # a cache has listed; its watch is held back
        await asyncio.sleep(0.3)
        assert not events.ready and taken == []
        later = await first_storage.create(f"{EVENTS}ns1/later", b'{"n":"later"}')
        gate.set()
        await ready(first)
        assert await events.fresh() and events.state.get(later.key) == later
        await asyncio.wait_for(taking, 10)
        assert {revision for revision, _ in taken} == {later.mod_revision - 1}
        keys = [kv.key for _, items in taken for kv in items]
        assert keys == sorted(kv.key for kv in held(first)[EVENTS] if kv.key != later.key)
        assert len(keys) == STORED[EVENTS]
    finally:
        taking.cancel()
        await first.close()
        await feed.close()
