"""Read-modify-write on a Storage that never loses a concurrent write (k8s' GuaranteedUpdate)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from apiserver.storage.interface import (
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RevisionConflictError,
    Storage,
)

# Given the key's present state (None: absent), the new value. Raising aborts the update.
UpdateFn = Callable[[KeyValue | None], bytes | Awaitable[bytes]]


async def guaranteed_update(
    storage: Storage,
    key: str,
    update: UpdateFn,
    *,
    create_if_missing: bool = False,
    ttl: int = 0,
    current: KeyValue | None = None,
) -> KeyValue:
    """Applies `update` to the key's latest value with compare-and-swap, retrying on conflicts.

    Each retry starts from the state the conflict reported, so a loser costs one extra round trip.
    `current` may seed the first attempt (e.g. from a cache); a stale seed just costs a retry.
    An absent key raises KeyNotFoundError unless `create_if_missing`, then `update(None)` creates it.
    A value equal to the current one is not written (the current state is returned, no new revision).
    """
    if current is None:
        current = await storage.get(key)
    while True:
        if current is None and not create_if_missing:
            raise KeyNotFoundError(key)
        value = update(current)
        if inspect.isawaitable(value):
            value = await value
        if current is None:
            try:
                return await storage.create(key, value, ttl=ttl)
            except KeyExistsError:
                current = await storage.get(key)
                continue
        if value == current.value:
            return current
        try:
            return await storage.update(key, value, expected_revision=current.mod_revision, ttl=ttl)
        except RevisionConflictError as conflict:
            current = conflict.current
        except KeyNotFoundError:
            current = None
