"""Compaction: what stays readable, what answers CompactedError, and periodic compaction."""

from __future__ import annotations

import pytest

from apiserver.storage.interface import CompactedError, FutureRevisionError, Storage
from tests.integration.storage.conftest import StoreFactory
from tests.support.waiting import async_wait_until


async def test_compaction_keeps_the_state_at_and_after_the_compaction_point(isolated_store: Storage) -> None:
    store = isolated_store
    assert await store.compacted_revision() == 0
    a = await store.create("/c/a", b"a1")
    b = await store.create("/c/b", b"b1")
    await store.update("/c/a", b"a2", expected_revision=a.mod_revision)
    await store.delete("/c/b", expected_revision=b.mod_revision)
    gone = await store.create("/c/gone", b"x")
    point = await store.current_revision()
    await store.create("/c/c", b"c1")
    await store.delete("/c/gone", expected_revision=gone.mod_revision)

    await store.compact(point)
    assert await store.compacted_revision() == point

    at_point = await store.list("/c/", revision=point)
    assert [(i.key, i.value) for i in at_point.items] == [("/c/a", b"a2"), ("/c/gone", b"x")]
    assert [(i.key, i.value) for i in (await store.list("/c/")).items] == [("/c/a", b"a2"), ("/c/c", b"c1")]
    with pytest.raises(CompactedError) as caught:
        await store.list("/c/", revision=point - 1)
    assert (caught.value.requested, caught.value.compacted) == (point - 1, point)

    # Compacting to an older revision changes nothing; to a future one is refused.
    await store.compact(point - 2)
    assert await store.compacted_revision() == point
    with pytest.raises(FutureRevisionError):
        await store.compact(await store.current_revision() + 10)

    # Writes continue normally on top of compacted history.
    a_now = await store.get("/c/a")
    assert a_now is not None
    updated = await store.update("/c/a", b"a3", expected_revision=a_now.mod_revision)
    assert updated.create_revision == a.create_revision


async def test_periodic_compaction(make_store: StoreFactory) -> None:
    store = await make_store(isolated=True, compaction_interval=0.2)
    first = await store.create("/c/a", b"1")
    second = await store.create("/c/b", b"1")

    async def compacted() -> bool:
        return await store.compacted_revision() >= second.mod_revision

    await async_wait_until(compacted, timeout=5, interval=0.1, message="a periodic compaction")
    with pytest.raises(CompactedError):
        await store.list("/c/", revision=first.mod_revision)
    assert [item.key for item in (await store.list("/c/")).items] == ["/c/a", "/c/b"]
