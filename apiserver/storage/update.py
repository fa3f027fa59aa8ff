"""Read-modify-write on a Storage that never loses a concurrent write (k8s' GuaranteedUpdate).

The one compare-and-swap loop of the server: every registry write that reads, modifies and writes
(update, patch, apply, delete, the release of the last finalizer) goes through it. It knows nothing
of objects; the caller's decision function does, and raises to refuse.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from enum import Enum

from apiserver.storage.interface import (
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RevisionConflictError,
    Storage,
    UpdateContentionError,
)


class Deletion(Enum):
    DELETE = "delete"


# The decision to delete the key (at the revision the decision was made on).
DELETE = Deletion.DELETE
# What to do with the key: write these bytes, DELETE it, or None: leave it as it is.
Decision = bytes | Deletion | None
# Given the key's present state (None: absent), the decision. Raising aborts the update.
UpdateFn = Callable[[KeyValue | None], Decision | Awaitable[Decision]]


async def guaranteed_update(
    storage: Storage,
    key: str,
    update: UpdateFn,
    *,
    create_if_missing: bool = False,
    ttl: int = 0,
    current: KeyValue | None = None,
    max_attempts: int = 0,
) -> KeyValue | None:
    """Applies `update`'s decision to the key's latest state with compare-and-swap, deciding again
    from the fresh state whenever another writer got there first.

    Each retry starts from the state the conflict reported, so a loser costs one extra round trip.
    `current` may seed the first attempt (e.g. from a cache); a stale seed just costs a retry.
    An absent key raises KeyNotFoundError unless `create_if_missing`, then `update(None)` decides
    whether to create it. A value equal to the current one is not written. A DELETE that finds the
    key gone raises KeyNotFoundError. `max_attempts` > 0 bounds the attempts (then
    UpdateContentionError); a precondition that must not be retried is the decision's to check.

    Returns the key's state afterwards: what was written, the unchanged state (None when absent),
    or for a delete the last value with the deletion's revision.
    """
    if current is None:
        current = await storage.get(key)
    attempts = 0
    while not max_attempts or attempts < max_attempts:
        attempts += 1
        if current is None and not create_if_missing:
            raise KeyNotFoundError(key)
        decision = update(current)
        if inspect.isawaitable(decision):
            decision = await decision
        try:
            return await _carry_out(storage, key, current, decision, ttl)
        except RevisionConflictError as conflict:
            current = conflict.current
        except KeyExistsError:
            current = await storage.get(key)
        except KeyNotFoundError:
            if decision is DELETE:
                raise
            current = None
    raise UpdateContentionError(key, attempts)


async def _carry_out(
    storage: Storage, key: str, current: KeyValue | None, decision: Decision, ttl: int
) -> KeyValue | None:
    """One compare-and-swap on the revision `current` was read at."""
    if decision is None or (current is not None and decision == current.value):
        return current
    if decision is DELETE:
        if current is None:
            raise KeyNotFoundError(key)
        return await storage.delete(key, expected_revision=current.mod_revision)
    if current is None:
        return await storage.create(key, decision, ttl=ttl)
    return await storage.update(key, decision, expected_revision=current.mod_revision, ttl=ttl)
