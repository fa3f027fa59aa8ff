"""Keys with a TTL expire through the ordinary delete path, so watchers see DELETE."""

from __future__ import annotations

import asyncio
import contextlib

from apiserver.storage.interface import EventType, Storage
from tests.integration.storage.helpers import take
from tests.support.waiting import async_wait_until


async def test_expiring_key_is_deleted_with_a_watch_event(store: Storage) -> None:
    start = await store.current_revision()
    async with contextlib.aclosing(store.watch("/t/", after_revision=start)) as events:
        expiring = await store.create("/t/short", b"bye", ttl=1)
        kept = await store.create("/t/kept", b"stay", ttl=1)
        # An update without a TTL makes the key permanent again.
        await store.update("/t/kept", b"stay", expected_revision=kept.mod_revision)
        permanent = await store.create("/t/permanent", b"stay")
        got = await take(events, 5, within=10)
        assert await store.get("/t/permanent") == permanent

    delete = got[4]
    assert delete.type is EventType.DELETE
    assert delete.key == "/t/short"
    assert delete.prev_value == b"bye"
    assert delete.revision > expiring.mod_revision
    assert await store.get("/t/short") is None
    await asyncio.sleep(0.5)  # past the sweep of the first expiry
    assert [item.key for item in (await store.list("/t/")).items] == ["/t/kept", "/t/permanent"]


async def test_keys_sharing_a_ttl_all_expire(store: Storage) -> None:
    for name in "abc":
        await store.create(f"/t/{name}", b"x", ttl=1)
    await store.create("/t/long", b"x", ttl=120)

    async def expired() -> bool:
        return [item.key for item in (await store.list("/t/")).items] == ["/t/long"]

    await async_wait_until(expired, timeout=10, interval=0.1, message="the keys sharing a TTL to expire")
