"""guaranteed_update: read-modify-write that retries on conflicts and loses no update."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.storage.interface import (
    KeyNotFoundError,
    KeyValue,
    Storage,
    UpdateContentionError,
)
from apiserver.storage.update import DELETE, Decision, guaranteed_update


def increment(current: KeyValue | None) -> bytes:
    return str(int(current.value) + 1 if current else 1).encode()


async def test_concurrent_increments_lose_nothing(store: Storage) -> None:
    await store.create("/g/counter", b"0")
    attempts = 0

    async def counted(current: KeyValue | None) -> bytes:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0)  # let the writers interleave between read and write
        return increment(current)

    async def worker() -> None:
        for _ in range(5):
            await guaranteed_update(store, "/g/counter", counted)

    await asyncio.gather(*(worker() for _ in range(10)))
    final = await store.get("/g/counter")
    assert final is not None and final.value == b"50"
    assert attempts > 50, "the writers never conflicted; the test proves nothing"


async def test_missing_key_is_an_error_unless_created(store: Storage) -> None:
    with pytest.raises(KeyNotFoundError):
        await guaranteed_update(store, "/g/new", increment)
    created = await guaranteed_update(store, "/g/new", increment, create_if_missing=True)
    assert created is not None
    assert created.value == b"1" and created.create_revision == created.mod_revision


async def test_stale_seed_costs_a_retry_not_a_lost_update(store: Storage) -> None:
    first = await store.create("/g/counter", b"0")
    await store.update("/g/counter", b"10", expected_revision=first.mod_revision)
    result = await guaranteed_update(store, "/g/counter", increment, current=first)
    assert result is not None and result.value == b"11"


async def test_unchanged_value_is_not_written(store: Storage) -> None:
    created = await store.create("/g/same", b"x")
    result = await guaranteed_update(store, "/g/same", lambda current: b"x")
    assert result == created
    assert await store.current_revision() == created.mod_revision


async def test_update_function_errors_abort(store: Storage) -> None:
    created = await store.create("/g/abort", b"x")

    def refuse(current: KeyValue | None) -> bytes:
        raise ValueError("no")

    with pytest.raises(ValueError):
        await guaranteed_update(store, "/g/abort", refuse)
    assert await store.get("/g/abort") == created


async def test_none_leaves_the_key_as_it_is(store: Storage) -> None:
    created = await store.create("/g/kept", b"x")
    assert await guaranteed_update(store, "/g/kept", lambda current: None) == created
    assert await guaranteed_update(store, "/g/absent", lambda current: None, create_if_missing=True) is None
    assert await store.get("/g/absent") is None
    assert await store.current_revision() == created.mod_revision


async def test_delete_removes_the_key_at_the_revision_decided_on(store: Storage) -> None:
    first = await store.create("/g/gone", b"0")
    seen: list[bytes] = []

    async def delete_unless_zero(current: KeyValue | None) -> Decision:
        assert current is not None
        seen.append(current.value)
        if len(seen) == 1:  # someone else writes between this read and the delete
            await store.update("/g/gone", b"1", expected_revision=first.mod_revision)
        return DELETE

    gone = await guaranteed_update(store, "/g/gone", delete_unless_zero)
    assert seen == [b"0", b"1"], "the delete lost its compare-and-swap and decided again"
    assert gone is not None and gone.value == b"1"
    assert gone.mod_revision == await store.current_revision()
    assert await store.get("/g/gone") is None


async def test_delete_of_a_key_deleted_meanwhile_is_not_found(store: Storage) -> None:
    await store.create("/g/raced", b"0")

    async def raced(current: KeyValue | None) -> Decision:
        await store.delete("/g/raced")
        return DELETE

    with pytest.raises(KeyNotFoundError):
        await guaranteed_update(store, "/g/raced", raced)


async def test_attempts_can_be_bounded(store: Storage) -> None:
    await store.create("/g/hot", b"0")

    async def always_beaten(current: KeyValue | None) -> Decision:
        assert current is not None
        await store.update("/g/hot", increment(current), expected_revision=current.mod_revision)
        return b"mine"

    with pytest.raises(UpdateContentionError):
        await guaranteed_update(store, "/g/hot", always_beaten, max_attempts=3)
    final = await store.get("/g/hot")
    assert final is not None and final.value == b"3"
