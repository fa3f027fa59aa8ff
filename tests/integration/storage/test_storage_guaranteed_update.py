"""guaranteed_update: read-modify-write that retries on conflicts and loses no update."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.storage.interface import KeyNotFoundError, KeyValue, Storage
from apiserver.storage.update import guaranteed_update


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
    assert created.value == b"1" and created.create_revision == created.mod_revision


async def test_stale_seed_costs_a_retry_not_a_lost_update(store: Storage) -> None:
    first = await store.create("/g/counter", b"0")
    await store.update("/g/counter", b"10", expected_revision=first.mod_revision)
    result = await guaranteed_update(store, "/g/counter", increment, current=first)
    assert result.value == b"11"


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
