"""Create, get, update and delete with their revision preconditions."""

from __future__ import annotations

import pytest

from apiserver.storage.interface import (
    KeyExistsError,
    KeyNotFoundError,
    RevisionConflictError,
    Storage,
)


async def test_create_then_get(store: Storage) -> None:
    before = await store.current_revision()
    created = await store.create("/pods/a", b"one")
    assert created.key == "/pods/a"
    assert created.value == b"one"
    assert created.mod_revision == created.create_revision > before
    assert await store.get("/pods/a") == created
    assert await store.current_revision() == created.mod_revision


async def test_get_missing_is_none(store: Storage) -> None:
    assert await store.get("/pods/missing") is None


async def test_create_existing_key_fails(store: Storage) -> None:
    await store.create("/pods/a", b"one")
    revision = await store.current_revision()
    with pytest.raises(KeyExistsError) as caught:
        await store.create("/pods/a", b"two")
    assert caught.value.key == "/pods/a"
    stored = await store.get("/pods/a")
    assert stored is not None and stored.value == b"one"
    assert await store.current_revision() == revision, "a failed write must not take a revision"


async def test_update_at_current_revision(store: Storage) -> None:
    created = await store.create("/pods/a", b"one")
    updated = await store.update("/pods/a", b"two", expected_revision=created.mod_revision)
    assert updated.value == b"two"
    assert updated.mod_revision > created.mod_revision
    assert updated.create_revision == created.create_revision
    assert await store.get("/pods/a") == updated


async def test_update_at_stale_revision_conflicts_with_current_state(store: Storage) -> None:
    created = await store.create("/pods/a", b"one")
    updated = await store.update("/pods/a", b"two", expected_revision=created.mod_revision)
    revision = await store.current_revision()
    with pytest.raises(RevisionConflictError) as caught:
        await store.update("/pods/a", b"three", expected_revision=created.mod_revision)
    assert caught.value.key == "/pods/a"
    assert caught.value.current == updated
    assert await store.current_revision() == revision
    assert await store.get("/pods/a") == updated


async def test_update_missing_key_fails(store: Storage) -> None:
    with pytest.raises(KeyNotFoundError):
        await store.update("/pods/missing", b"x", expected_revision=1)
    with pytest.raises(KeyNotFoundError):
        await store.update("/pods/missing", b"x", expected_revision=0)


async def test_update_with_revision_zero_never_matches_an_existing_key(store: Storage) -> None:
    await store.create("/pods/a", b"one")
    with pytest.raises(RevisionConflictError):
        await store.update("/pods/a", b"two", expected_revision=0)


async def test_delete_returns_last_value_at_the_deletion_revision(store: Storage) -> None:
    created = await store.create("/pods/a", b"one")
    deleted = await store.delete("/pods/a")
    assert deleted.key == "/pods/a"
    assert deleted.value == b"one"
    assert deleted.create_revision == created.create_revision
    assert deleted.mod_revision > created.mod_revision
    assert deleted.mod_revision == await store.current_revision()
    assert await store.get("/pods/a") is None
    with pytest.raises(KeyNotFoundError):
        await store.delete("/pods/a")


async def test_delete_with_revision_precondition(store: Storage) -> None:
    created = await store.create("/pods/a", b"one")
    updated = await store.update("/pods/a", b"two", expected_revision=created.mod_revision)
    with pytest.raises(RevisionConflictError) as caught:
        await store.delete("/pods/a", expected_revision=created.mod_revision)
    assert caught.value.current == updated
    deleted = await store.delete("/pods/a", expected_revision=updated.mod_revision)
    assert deleted.value == b"two"
    assert await store.get("/pods/a") is None


async def test_recreated_key_has_a_new_create_revision(store: Storage) -> None:
    first = await store.create("/pods/a", b"one")
    await store.delete("/pods/a")
    second = await store.create("/pods/a", b"again")
    assert second.create_revision == second.mod_revision > first.create_revision
    with pytest.raises(RevisionConflictError):
        await store.update("/pods/a", b"x", expected_revision=first.mod_revision)


async def test_every_write_takes_exactly_one_new_revision(store: Storage) -> None:
    start = await store.current_revision()
    a = await store.create("/pods/a", b"1")
    b = await store.create("/pods/b", b"1")
    a2 = await store.update("/pods/a", b"2", expected_revision=a.mod_revision)
    b2 = await store.delete("/pods/b")
    c = await store.create("/pods/c", b"1")
    revisions = [a.mod_revision, b.mod_revision, a2.mod_revision, b2.mod_revision, c.mod_revision]
    assert revisions == list(range(start + 1, start + 6))
    assert await store.current_revision() == c.mod_revision


async def test_values_are_opaque_bytes(store: Storage) -> None:
    value = bytes(range(256)) * 4
    created = await store.create("/pods/bin", value)
    fetched = await store.get("/pods/bin")
    assert fetched is not None and fetched.value == value == created.value
