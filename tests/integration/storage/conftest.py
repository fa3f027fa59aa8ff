"""The contract suite's fixtures: every test runs against a fresh SQLite file and against etcd,
each bare and behind the watch cache (which must keep the same contract), against SQLite as one
of several worker processes sharing the file would use it, and against etcd with every call on
grpcio (as where the Rust extension is not built).

`store` shares one etcd per session, isolated by a unique key prefix. `isolated_store` gives etcd
tests their own etcd process, for what is global to an etcd (compaction, history from revision 0).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from apiserver.storage.cacher import CachedStorage
from apiserver.storage.etcd import EtcdStorage
from apiserver.storage.interface import Storage
from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.support.etcd import EtcdProcess

# Short intervals keep the suite fast; production defaults are seconds.
FAST = {"progress_interval": 0.2}

StoreFactory = Callable[..., Awaitable[Storage]]


@pytest.fixture(
    params=[
        "sqlite",
        "sqlite+cache",
        "sqlite-shared",
        pytest.param("etcd", marks=pytest.mark.etcd),
        pytest.param("etcd+cache", marks=pytest.mark.etcd),
        # Every call on grpcio, as where the Rust extension is not built (storage/etcd/native.py).
        pytest.param("etcd-grpcio", marks=pytest.mark.etcd),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    """Opens stores of the test's backend (closed at teardown); `isolated=True` gives etcd its own
    process. Keyword arguments go to the backend's constructor (`progress_interval` to the cache's
    too)."""
    opened: list[Storage] = []
    processes: list[EtcdProcess] = []

    async def cached(inner: Storage, progress_interval: float) -> Storage:
        # Every key the tests write is under one cached root; the cache is filled before use.
        store = CachedStorage(inner, ["/"], progress_interval=progress_interval)
        await store.start_caches()
        opened[opened.index(inner)] = store  # closing it closes the inner store
        async with asyncio.timeout(10):
            await store.wait_ready()
        return store

    async def make(*, isolated: bool = False, path: str | None = None, **options: Any) -> Storage:
        store: Storage
        if backend.startswith("sqlite"):
            options.setdefault("sweep_interval", 0.2)
            # Shared: as one of several workers on the file, learning of changes from the log.
            options.setdefault("shared", backend == "sqlite-shared")
            store = SQLiteStorage(path or str(tmp_path / "store.db"), **FAST | options)
        else:
            options.setdefault("use_native", backend != "etcd-grpcio")
            if isolated:
                process = EtcdProcess()
                processes.append(process)
                endpoint = process.start()
            else:
                endpoint = request.getfixturevalue("etcd_endpoint")
                options.setdefault("prefix", f"/test-{uuid.uuid4().hex}")
            store = EtcdStorage([endpoint], **FAST | options)
        await store.start()
        opened.append(store)
        if not backend.endswith("+cache"):
            return store
        return await cached(store, options.get("progress_interval", FAST["progress_interval"]))

    yield make
    for store in opened:
        await store.close()
    for process in processes:
        process.stop()


@pytest.fixture
async def store(make_store: StoreFactory) -> Storage:
    return await make_store()


@pytest.fixture
async def isolated_store(make_store: StoreFactory) -> Storage:
    return await make_store(isolated=True)
