"""A watch cache's first list read as two key ranges at once (`storage.cacher.split`): the pages
hold every key once, at one revision, however the keys are spread, and only the last says no more
follow; on etcd, whose pages count what follows them, a large list is split. A cache filled so
serves its keys in order."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from apiserver.storage.cacher import CachedStorage, resource, split
from apiserver.storage.cacher.split import between
from apiserver.storage.interface import ListResult, Storage

ROOT = "/registry/group/things/"
SIZE = 20  # keys a page
SPLIT_AT = 60  # keys past the first page from which the list is split


class ListCalls:
    """The storage under test, with the ranges its lists asked for noted (a real store: only the
    calls are seen)."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.ends: list[str | None] = []

    async def list(self, prefix: str, **options: Any) -> ListResult:
        if options.get("limit") != 1:  # not a count read
            self.ends.append(options.get("end"))
        return await self.inner.list(prefix, **options)


async def _write(store: Storage, names: list[str]) -> None:
    async def one(chunk: list[str]) -> None:
        for name in chunk:
            await store.create(ROOT + name, name.encode())

    await asyncio.gather(*(one(names[i::8]) for i in range(8)))


async def _read(store: Storage) -> list[ListResult]:
    async with contextlib.aclosing(split.pages(store, ROOT, SIZE, split_at=SPLIT_AT)) as pages:
        return [page async for page in pages]


def _names(namespaces: list[str], per_namespace: int) -> list[str]:
    return [f"{ns}/event-{index:04d}" for ns in namespaces for index in range(per_namespace)]


@pytest.mark.parametrize(
    "names",
    [
        # The benchmark's shape: every namespace starts alike, so the middle is found deep in them.
        _names([f"ns{i}" for i in range(10)], 30),
        # A cluster's: namespaces spread over the alphabet, one of them holding most.
        _names(["default", "kube-system", "monitoring", "zz"], 20) + _names(["apps"], 220),
        # Names past ASCII (a RoleBinding's name may hold them): counted, if not split on.
        _names(["ns"], 100) + [f"ns/{word}-{i:03d}" for word in ("é", "名前") for i in range(100)],
    ],
    ids=["alike", "spread", "unicode"],
)
async def test_the_pages_hold_every_key_once_at_one_revision(store: Storage, names: list[str]) -> None:
    await _write(store, names)
    await store.create("/registry/group/thingsx/outside", b"x")
    calls = ListCalls(store)
    pages = await _read(calls)  # type: ignore[arg-type]
    listed = [kv.key for page in pages for kv in page.items]
    assert sorted(listed) == sorted(ROOT + name for name in names) and len(set(listed)) == len(listed)
    assert {page.revision for page in pages} == {pages[0].revision}
    assert [page.more for page in pages] == [True] * (len(pages) - 1) + [False]
    assert all(page.items for page in pages[:-1])
    counted = (await store.list(ROOT, limit=SIZE, counted=False)).remaining > 0
    if counted:  # etcd counts what follows a page: the list was read as two ranges
        assert any(end is not None for end in calls.ends)


async def test_a_small_list_is_one_range(store: Storage) -> None:
    await _write(store, _names(["ns"], SIZE + SPLIT_AT - 1))
    calls = ListCalls(store)
    pages = await _read(calls)  # type: ignore[arg-type]
    assert sum(len(page.items) for page in pages) == SIZE + SPLIT_AT - 1
    assert calls.ends == [None] * len(calls.ends)


async def test_an_empty_root_is_one_empty_page(store: Storage) -> None:
    pages = await _read(store)
    assert [(page.items, page.more) for page in pages] == [([], False)]


async def test_a_cache_filled_from_a_split_list_serves_its_keys_in_order(
    store: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resource, "LIST_PAGE", SIZE)
    monkeypatch.setattr(split, "SPLIT_AT", SPLIT_AT)
    names = _names([f"ns{i}" for i in range(6)], 40) + _names(["apps"], 60)
    await _write(store, names)
    cached = CachedStorage(store, [ROOT], progress_interval=0.2)
    await cached.start_caches()
    try:
        async with asyncio.timeout(10):
            await cached.wait_ready()
        expected = sorted(ROOT + name for name in names)
        cache = cached.caches[0]  # read from the cache itself, not the storage beneath it
        assert [kv.key for kv in cache.page(ROOT, None, 0).items] == expected
        walked: list[str] = []
        start: str | None = None
        while True:
            page = cache.page(ROOT, start, 7)
            walked += [kv.key for kv in page.items]
            if not page.more:
                break
            start = page.items[-1].key + "\x00"
        assert walked == expected
    finally:
        for cache in cached.caches:  # the store is the fixture's to close
            await cache.close()


def test_between_is_strictly_between_and_near_the_middle() -> None:
    assert between("a", "c") == "b"
    assert between("ns0/x", "ns9") is not None
    middle = between("/r/ns0/event-9", "/r/\x80")
    assert middle is not None and "/r/ns0/event-9" < middle < "/r/\x80"
    assert between("ab", "ab\x00\x01") == "ab\x00\x00@"
    # Past TOP, code points count as TOP: no middle is found, and the list is not split there.
    assert between("a\u0200", "b") is None
    for low, high in [("a", "b"), ("ns0/a", "ns0/b"), ("x/é", "x/名"), ("/r/", "/r0")]:
        found = between(low, high)
        assert found is None or low < found < high
