"""/readyz waits for the watch cache: `poststarthook/storage-readiness` fails, in upstream's words,
until every cached resource has its initial list and its storage watch, and passes at once when
nothing is cached (--watch-cache=false). The storage is the real SQLite one; only its watch is held
back (`WatchHeldSQLite`), so that the cache stays unfilled for as long as the test needs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from apiserver.http.health import PostStartHooks
from apiserver.http.system import STORAGE_READINESS_HOOK, SystemEndpoints, await_storage_readiness
from apiserver.storage.cacher import CachedStorage
from apiserver.storage.interface import Storage, WatchEvent
from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.support.waiting import async_wait_until

ROOT = "/registry/events.core.io/events/"
HOOK = f"poststarthook/{STORAGE_READINESS_HOOK}"
Client = TestClient[web.Request, web.Application]


class WatchHeldSQLite(SQLiteStorage):
    """Fast unit fake: the real SQLite storage, but a watch delivers nothing until `release()`, as
    a storage slow to answer a cache's first watch (or a cache still listing 100,000 Events)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.released = asyncio.Event()

    def release(self) -> None:
        self.released.set()

    def watch(
        self, prefix: str, *, after_revision: int, progress: bool = False, progress_every: float = 0.0
    ) -> AsyncGenerator[WatchEvent, None]:
        events = super().watch(
            prefix, after_revision=after_revision, progress=progress, progress_every=progress_every
        )
        return self._held(events)

    async def _held(self, events: AsyncGenerator[WatchEvent, None]) -> AsyncGenerator[WatchEvent, None]:
        async with contextlib.aclosing(events) as changes:
            await self.released.wait()
            async for event in changes:
                yield event


def event(name: str) -> bytes:
    return json.dumps(
        {"kind": "Event", "apiVersion": "events.core.io/v1", "metadata": {"name": name}}
    ).encode()


@contextlib.asynccontextmanager
async def serving(storage: Storage, give_up_after: float = 60.0) -> AsyncIterator[Client]:
    """The system endpoints over `storage` (started), with the storage-readiness hook waiting for it,
    as the server wires them."""
    hooks = PostStartHooks()
    waiting = asyncio.create_task(
        await_storage_readiness(storage, hooks.add(STORAGE_READINESS_HOOK), give_up_after=give_up_after)
    )
    app = web.Application()
    SystemEndpoints(storage, post_start_hooks=hooks).add_routes(app.router)
    try:
        async with TestClient(TestServer(app)) as client:
            yield client
    finally:
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting


async def body(client: Client, path: str) -> tuple[int, str]:
    answer = await client.get(path)
    return answer.status, await answer.text()


async def eventually_ready(client: Client) -> None:
    async def ready() -> bool:
        return (await client.get("/readyz")).status == 200

    await async_wait_until(ready, timeout=10, interval=0.01, message="/readyz ok")


def verbose(mark: str, outcome: str, end: str) -> str:
    return (
        "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n"
        f"[{mark}]{HOOK} {outcome}\n[+]shutdown ok\nreadyz check {end}\n"
    )


@pytest.fixture
async def held(tmp_path: Path) -> AsyncIterator[tuple[WatchHeldSQLite, CachedStorage]]:
    backend = WatchHeldSQLite(str(tmp_path / "coreio.db"))
    cached = CachedStorage(backend, [ROOT])
    await cached.start()
    for number in range(3):
        await cached.create(f"{ROOT}default/e{number}", event(f"e{number}"))
    try:
        yield backend, cached
    finally:
        backend.release()
        await cached.close()


async def test_the_cache_is_not_ready_until_its_storage_watch_answers(
    held: tuple[WatchHeldSQLite, CachedStorage],
) -> None:
    backend, cached = held
    await asyncio.sleep(0.3)  # time to list three objects, ample: only the watch may hold it back
    assert not cached.ready
    # Reads are answered all the same, by the storage.
    assert [kv.key for kv in (await cached.list(ROOT)).items] == [f"{ROOT}default/e{n}" for n in range(3)]
    backend.release()
    async with asyncio.timeout(10):
        await cached.wait_ready()
    assert cached.ready


async def test_readyz_fails_on_storage_readiness_until_the_watch_cache_is_filled(
    held: tuple[WatchHeldSQLite, CachedStorage],
) -> None:
    backend, cached = held
    async with serving(cached) as client:
        await asyncio.sleep(0.3)  # as above: not ready however long it lists
        assert await body(client, "/readyz?verbose") == (
            500,
            verbose("-", "failed: reason withheld", "failed"),
        )
        assert await body(client, "/readyz") == (500, verbose("-", "failed: reason withheld", "failed"))
        assert await body(client, f"/readyz/{HOOK}") == (500, "internal server error: not finished\n")
        # Every other check passes: only the cache holds readiness back, and excluding it says so.
        assert (await client.get(f"/readyz?exclude={HOOK}")).status == 200

        backend.release()
        await eventually_ready(client)
        assert await body(client, "/readyz?verbose") == (200, verbose("+", "ok", "passed"))
        assert await body(client, "/readyz") == (200, "ok")
        assert await body(client, f"/readyz/{HOOK}") == (200, "ok")


async def test_without_a_watch_cache_storage_readiness_passes_at_once(tmp_path: Path) -> None:
    storage = SQLiteStorage(str(tmp_path / "coreio.db"))
    await storage.start()
    try:
        async with serving(storage) as client:
            # The hook's first step runs before the first request is answered.
            assert await body(client, "/readyz?verbose") == (200, verbose("+", "ok", "passed"))
    finally:
        await storage.close()


async def test_a_cache_that_never_fills_stops_holding_readiness_back_after_the_timeout(
    held: tuple[WatchHeldSQLite, CachedStorage], caplog: pytest.LogCaptureFixture
) -> None:
    _, cached = held
    with caplog.at_level(logging.WARNING, logger="apiserver.http.system"):
        async with serving(cached, give_up_after=0.2) as client:
            await eventually_ready(client)
            assert await body(client, "/readyz?verbose") == (200, verbose("+", "ok", "passed"))
    assert not cached.ready  # reads go to the storage meanwhile
    assert "Deadline exceeded while waiting for storage readiness... ignoring" in caplog.messages
