"""Many objects at once in a stopped coreio's SQLite data directory, as coreio itself stores them.

Creating 300,000 Events through the API takes five minutes; this writes them in well under one.
Each object takes the path a create request's body takes inside the server, in the kind's own
`ResourceStore` (decoded, its managedFields for `field_manager`, uid and creationTimestamp, the
kind's validation, its stored form under its key), in worker processes; then the SQLite backend's
own revision log writes it (`RevisionLog.transact` of `RevisionLog.create`s with the kind's TTL,
as `SQLiteStorage.create` queues them), thousands to a transaction where the server commits a few
hundred. So each object gets the revision of a create, in index order, and a server started on
the directory serves them as if they had been created through its API, one after the other
(tests/integration/test_seed.py compares the two). Admission is not run: standalone, no Event
has any.

The directory is taken with the server's own lock while seeding (a running server is refused),
and the files made are private, as the server makes them.
"""

from __future__ import annotations

import functools
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from apiserver.config import Settings
from apiserver.machinery.errors import StatusError
from apiserver.machinery.options import WriteOptions
from apiserver.machinery.types import JSON
from apiserver.registry import strategy
from apiserver.registry.store import ResourceStore
from apiserver.resources.base import ResourceKind
from apiserver.server import storage_options
from apiserver.standalone import lock_data_dir
from apiserver.storage.interface import StorageError
from apiserver.storage.sqlite.backend import SQLiteStorage
from apiserver.storage.sqlite.log import RevisionLog, expiry
from apiserver.supervisor import cores

# The create request's body of the object at an index: a module's function (or a partial of one),
# for the worker processes are given it.
Body = Callable[[int], JSON]
# Objects a worker prepares at a time; each such chunk is one transaction.
CHUNK = 5_000
FIELD_MANAGER = "coreio-seed"
Stored = list[tuple[str, bytes]]


@dataclass(frozen=True)
class Seeded:
    """What a seeding wrote: how many objects, the database's revision after them, in how long."""

    count: int
    revision: int
    seconds: float


def database(data_dir: Path) -> Path:
    """The SQLite file a server on `data_dir` keeps its objects in."""
    return storage_options(Settings(data_dir=data_dir)).sqlite_path


class _Preparer:
    """One worker's store of the kind, never started: only its create path is taken."""

    def __init__(self, kind: ResourceKind, path: Path, body: Body, ttl_seconds: int, manager: str) -> None:
        self.store = ResourceStore(kind, SQLiteStorage(str(path)), ttl_seconds=ttl_seconds)
        self.body = body
        self.options = WriteOptions(field_manager=manager)

    def stored(self, index: int) -> tuple[str, bytes]:
        """(key, stored value) of the object at `index`, made as `ResourceStore.create` makes them.
        A body the server would refuse, or warn of, is a ValueError saying why."""
        raw = self.body(index)
        namespace = str(raw["metadata"]["namespace"])
        warnings: list[str] = []
        try:
            obj = self.store._decode_create(namespace, raw, self.options, warnings, ())
            strategy.prepare_and_validate_create(self.store.kind, obj)
        except StatusError as exc:  # not picklable: the pool could not hand it over
            raise ValueError(f"object {index} would be refused: {exc}") from None
        if warnings:
            raise ValueError(f"object {index} would be created with warnings: {warnings}")
        return self.store.key(namespace, str(obj["metadata"]["name"])), self.store.objects.encode(obj)


_preparer: _Preparer | None = None


def _start_worker(kind: ResourceKind, path: Path, body: Body, ttl_seconds: int, manager: str) -> None:
    global _preparer
    _preparer = _Preparer(kind, path, body, ttl_seconds, manager)


def _prepare(indices: range) -> Stored:
    if _preparer is None:
        raise RuntimeError("the seeding worker was not started")
    return [_preparer.stored(index) for index in indices]


def _prepared(pool: ProcessPoolExecutor, count: int, ahead: int) -> Iterator[Stored]:
    """The chunks of objects 0..count-1 in order, at most `ahead` of them prepared or under way
    before the writer takes them (so that a slow writer does not pile them up in memory)."""
    pending: deque[Future[Stored]] = deque()
    for start in range(0, count, CHUNK):
        pending.append(pool.submit(_prepare, range(start, min(start + CHUNK, count))))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _write(log: RevisionLog, rows: Stored, ttl_seconds: int) -> None:
    """One transaction of creates; the first the storage refuses (a key taken) is raised."""
    writes = [functools.partial(log.create, key, value, expiry(ttl_seconds)) for key, value in rows]
    outcomes, _ = log.transact(writes)
    refused = [outcome for outcome in outcomes if isinstance(outcome, StorageError)]
    if refused:
        raise refused[0]


def _ttl(kind: ResourceKind, ttl_seconds: int | None) -> int:
    if ttl_seconds is not None:
        return ttl_seconds
    return Settings().ttl_seconds(kind)


def seed(
    data_dir: Path,
    kind: ResourceKind,
    body: Body,
    count: int,
    *,
    ttl_seconds: int | None = None,
    field_manager: str = FIELD_MANAGER,
    processes: int = 0,
) -> Seeded:
    """Creates the objects `body(0)` .. `body(count - 1)` of `kind` in `data_dir`, whose server must
    be stopped. `ttl_seconds`: the kind's TTL as the server will run (None: its flag's default,
    one hour for Events); `processes`: workers preparing the objects (0: one a core this process
    may use, as the server counts them)."""
    started = time.monotonic()
    ttl, workers = _ttl(kind, ttl_seconds), processes or cores()
    path = database(data_dir)
    lock = lock_data_dir(data_dir, "tests.support.seed")
    umask = os.umask(0o077)  # the server's: its database is no one else's to read
    log = RevisionLog(str(path))
    try:
        log.open()
        setup = (kind, path, body, ttl, field_manager)
        with ProcessPoolExecutor(workers, initializer=_start_worker, initargs=setup) as pool:
            for rows in _prepared(pool, count, ahead=2 * workers):
                _write(log, rows, ttl)
        return Seeded(count, log.committed, time.monotonic() - started)
    finally:
        log.close()
        os.umask(umask)
        lock.release()
