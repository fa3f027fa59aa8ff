"""The storage contract both backends (SQLite, etcd) fulfil; the registry knows only this.

Keys are strings such as `/registry/events.core.io/events/<namespace>/<name>`; values are the
object's JSON bytes without `metadata.resourceVersion` (the revision is the version, set on read).
Revisions are one global, strictly increasing counter per store (etcd's revision; in SQLite the
id of an append-only log row). Every write takes exactly one new revision.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, TypeVar, dataclass_transform, runtime_checkable

_Record = TypeVar("_Record")


class StorageError(Exception):
    """Base of the errors a backend raises; the registry maps them to Status errors."""


class KeyExistsError(StorageError):
    """Create found the key already present."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key exists: {key}")
        self.key = key


class KeyNotFoundError(StorageError):
    """Update or delete found no such key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}")
        self.key = key


class RevisionConflictError(StorageError):
    """A compare-and-swap lost: the key's mod revision is not the expected one.

    `current` is the key's present state (None when it has been deleted meanwhile), so a caller
    retrying a guaranteed update need not read it again.
    """

    def __init__(self, key: str, current: KeyValue | None) -> None:
        super().__init__(f"revision conflict on {key}")
        self.key = key
        self.current = current


class UpdateContentionError(StorageError):
    """A read-modify-write lost its compare-and-swap to other writers too many times in a row."""

    def __init__(self, key: str, attempts: int) -> None:
        super().__init__(f"{key} changed under {attempts} attempts to update it")
        self.key = key
        self.attempts = attempts


class CompactedError(StorageError):
    """The requested revision is older than the oldest revision kept (answered 410 Gone)."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"required revision {requested} has been compacted (oldest kept: {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevisionError(StorageError):
    """The requested revision is newer than the store's current revision."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"required revision {requested} is a future revision (current: {current})")
        self.requested = requested
        self.current = current


class UnsupportedStorageError(StorageError):
    """The backend's server is a release this server must not run on (one with a known data-loss
    bug); the server refuses to start."""


class StorageUnavailableError(StorageError):
    """The backend cannot be reached (answered 503) or timed out."""


class WatchOverflowError(StorageError):
    """A watch fell too far behind the changes (its bounded buffer overflowed); the consumer must
    start a new watch (from its last seen revision, or relist)."""


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def _frozen_to_mypy(cls: type[_Record]) -> type[_Record]:
    """A dataclass with slots that mypy checks as frozen, and that runs as a plain one: a frozen
    dataclass sets each field through object.__setattr__ (0.5 µs an instance against 0.1 µs), and a
    watch cache makes one a stored object when it fills. It hashes as a frozen one."""
    return dataclass(slots=True, unsafe_hash=True)(cls)


@_frozen_to_mypy
class KeyValue:
    key: str
    value: bytes
    mod_revision: int
    create_revision: int
    # What a reader found out about `value`, kept with it: a watch cache hands the same pair to
    # every read, and the value never changes, so later reads need not find it out again. Whether
    # it decodes; and where in it the reader's encoding of the object read inserts the
    # resourceVersion (-1: not found, or not so encoded).
    decodes: bool = field(default=False, compare=False, repr=False)
    version_at: int = field(default=-1, compare=False, repr=False)

    def mark_decodes(self) -> None:
        # The fields that may change: verdicts on the value, not part of it.
        object.__setattr__(self, "decodes", True)

    def mark_version_at(self, offset: int) -> None:
        object.__setattr__(self, "version_at", offset)

    @property
    def size(self) -> int:
        """The value's length in bytes (known without unpacking a packed value)."""
        return len(self.value)


@dataclass(frozen=True)
class ListResult:
    """A page of a range read taken at `revision`.

    `more` says whether keys remain after the last item; `remaining` counts them (0 when not more).
    """

    items: list[KeyValue]
    revision: int
    more: bool
    remaining: int


class EventType(Enum):
    PUT = "PUT"
    DELETE = "DELETE"
    # A progress marker: every change up to `revision` has been delivered on this watch.
    PROGRESS = "PROGRESS"


@dataclass(frozen=True)
class WatchEvent:
    """One change. For PUT, `value` is the new value and `prev_value` the old one (None on create).
    For DELETE, `value` is None and `prev_value` is the last value before deletion.
    `revision` is the revision of this change (for DELETE, the deletion's revision).
    `create_revision` lets a consumer tell a create from an update (create: == revision).
    """

    type: EventType
    key: str
    revision: int
    value: bytes | None = None
    prev_value: bytes | None = None
    create_revision: int = 0

    @property
    def is_create(self) -> bool:
        return self.type is EventType.PUT and self.prev_value is None


class Storage(Protocol):
    """What every backend provides. All methods are coroutines that never block the event loop."""

    async def start(self) -> None:
        """Open files/connections; create the schema; start background sweepers."""
        ...

    async def close(self) -> None: ...

    async def get(self, key: str) -> KeyValue | None:
        """The key's latest state, or None. Linearizable (a quorum read on etcd)."""
        ...

    async def list(
        self,
        prefix: str,
        *,
        start: str | None = None,
        limit: int = 0,
        revision: int = 0,
        counted: bool = True,
        end: str | None = None,
    ) -> ListResult:
        """Keys with `prefix`, ascending, from `start` inclusive (None: from the prefix's start)
        to `end` exclusive (None: to the prefix's end), at most `limit` of them (0: all), as of
        `revision` (0: the current revision, consistent). `counted=False`: a backend that counts
        the keys past the page only for `remaining` may leave it 0 (the watch cache's fill has no
        use for it; on SQLite it is a scan of the rest).
        Raises CompactedError when `revision` is older than the compaction point and
        FutureRevisionError when it is newer than the current revision.
        """
        ...

    async def create(self, key: str, value: bytes, *, ttl: int = 0) -> KeyValue:
        """Stores `value` under a key that must not exist (else KeyExistsError). `ttl` > 0 makes the
        key expire after that many seconds, with a DELETE event like any delete."""
        ...

    async def update(self, key: str, value: bytes, *, expected_revision: int, ttl: int = 0) -> KeyValue:
        """Replaces the value if the key's mod revision equals `expected_revision`.
        KeyNotFoundError when absent, RevisionConflictError when the revision differs."""
        ...

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        """Deletes the key (if `expected_revision` > 0, only at that mod revision). Returns the last
        value with `mod_revision` set to the deletion's revision. KeyNotFoundError when absent,
        RevisionConflictError when the revision differs."""
        ...

    async def current_revision(self) -> int:
        """The store's latest revision (a consistent read)."""
        ...

    async def compacted_revision(self) -> int:
        """The oldest revision still readable (0 when nothing was compacted)."""
        ...

    async def compact(self, revision: int) -> None:
        """Drops history older than `revision`: lists and watches from before it raise CompactedError."""
        ...

    def watch(
        self, prefix: str, *, after_revision: int, progress: bool = False, progress_every: float = 0.0
    ) -> AsyncGenerator[WatchEvent, None]:
        """Changes under `prefix` with revision > `after_revision`, in revision order, forever (until
        the consumer stops iterating). Raises CompactedError (at the first iteration) when
        `after_revision` + 1 has been compacted. With `progress`, yields PROGRESS events carrying a
        revision all earlier changes were delivered up to: one as soon as the backend has taken the
        watch up, then now and then (at least every few seconds while idle; every `progress_every`
        seconds when that is given). An async generator: the
        consumer closes it (`aclose`, or `contextlib.aclosing`) to stop, which ends the watch in
        the backend at once rather than when the generator is collected."""
        ...


@runtime_checkable
class Compacting(Protocol):
    """A backend that tells who asks when it has compacted its history (the watch cache trims its
    window so that no watch starts before the compaction point)."""

    compaction_listeners: list[Callable[[int], None]]


@runtime_checkable
class Readiness(Protocol):
    """A storage that is not ready to serve as soon as it has started: the watch cache, until each
    of its resources has its initial list and its storage watch (upstream's StorageWithReadiness).
    A storage without this is ready once started."""

    @property
    def ready(self) -> bool: ...

    async def wait_ready(self) -> None:
        """Returns once ready (bound it with asyncio.timeout)."""
        ...


@runtime_checkable
class ReadsAhead(Protocol):
    """A storage whose consistent get can have its revision read started before it is asked for:
    the watch cache over etcd (`reads_ahead`). Within `reading_ahead()`, entered as a request
    arrives, the request's first get waits for that read."""

    reads_ahead: bool

    def reading_ahead(self) -> contextlib.AbstractAsyncContextManager[None]: ...
