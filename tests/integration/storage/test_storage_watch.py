"""Watches: replay from a revision, live changes, ordering, progress, compaction and closing."""

from __future__ import annotations

import asyncio
import contextlib
import re

import aiohttp
import pytest

from apiserver.storage.etcd import EtcdStorage
from apiserver.storage.interface import CompactedError, EventType, Storage, WatchEvent
from tests.integration.storage.conftest import StoreFactory
from tests.integration.storage.helpers import next_event, summary, take
from tests.support.waiting import async_wait_until


async def test_watch_delivers_create_update_delete_with_previous_values(store: Storage) -> None:
    start = await store.current_revision()
    async with contextlib.aclosing(store.watch("/w/", after_revision=start)) as events:
        created = await store.create("/w/a", b"1")
        updated = await store.update("/w/a", b"2", expected_revision=created.mod_revision)
        deleted = await store.delete("/w/a")
        got = await take(events, 3)

    assert got[0] == WatchEvent(EventType.PUT, "/w/a", created.mod_revision, b"1", None, created.mod_revision)
    assert got[0].is_create
    assert got[1] == WatchEvent(EventType.PUT, "/w/a", updated.mod_revision, b"2", b"1", created.mod_revision)
    assert not got[1].is_create
    assert got[2].type is EventType.DELETE
    assert (got[2].key, got[2].revision, got[2].value, got[2].prev_value) == (
        "/w/a",
        deleted.mod_revision,
        None,
        b"2",
    )


async def test_watch_from_a_revision_replays_later_history_then_goes_live(store: Storage) -> None:
    a = await store.create("/w/a", b"1")
    b = await store.create("/w/b", b"1")
    a2 = await store.update("/w/a", b"2", expected_revision=a.mod_revision)
    async with contextlib.aclosing(store.watch("/w/", after_revision=a.mod_revision)) as events:
        replayed = await take(events, 2)
        c = await store.create("/w/c", b"1")
        live = await take(events, 1)
    assert summary(replayed) == [("PUT", "/w/b", b.mod_revision), ("PUT", "/w/a", a2.mod_revision)]
    assert replayed[1].prev_value == b"1"
    assert summary(live) == [("PUT", "/w/c", c.mod_revision)]


async def test_watch_from_zero_replays_all_history(isolated_store: Storage) -> None:
    store = isolated_store
    a = await store.create("/w/a", b"1")
    await store.create("/other/x", b"1")
    a2 = await store.update("/w/a", b"2", expected_revision=a.mod_revision)
    async with contextlib.aclosing(store.watch("/w/", after_revision=0)) as events:
        got = await take(events, 2)
    assert summary(got) == [("PUT", "/w/a", a.mod_revision), ("PUT", "/w/a", a2.mod_revision)]


async def test_watch_sees_only_its_prefix_in_revision_order(store: Storage) -> None:
    start = await store.current_revision()
    async with contextlib.aclosing(store.watch("/w/in/", after_revision=start)) as events:

        async def write(worker: int) -> list[int]:
            revisions = []
            for i in range(10):
                inside = await store.create(f"/w/in/{worker}-{i}", b"x")
                await store.create(f"/w/out/{worker}-{i}", b"x")
                revisions.append(inside.mod_revision)
            return revisions

        written = await asyncio.gather(*(write(worker) for worker in range(5)))
        got = await take(events, 50)
    revisions = [event.revision for event in got]
    assert revisions == sorted(revisions) and len(set(revisions)) == 50
    assert set(revisions) == {revision for worker in written for revision in worker}
    assert all(event.key.startswith("/w/in/") for event in got)


async def test_watch_started_during_writes_has_no_gaps_or_duplicates(store: Storage) -> None:
    created = await store.create("/w/counter", b"0")
    revisions = [created.mod_revision]
    halfway = asyncio.Event()

    async def write() -> None:
        for i in range(1, 61):
            updated = await store.update("/w/counter", str(i).encode(), expected_revision=revisions[-1])
            revisions.append(updated.mod_revision)
            if i == 20:
                halfway.set()
            await asyncio.sleep(0)  # the watch starts between writes (a yield)

    writer = asyncio.create_task(write())
    await halfway.wait()
    # The watch replays history from an old revision while new writes keep landing.
    async with contextlib.aclosing(store.watch("/w/", after_revision=created.mod_revision)) as events:
        got = await take(events, 60)
    await writer
    assert [event.revision for event in got] == revisions[1:]
    assert [event.value for event in got] == [str(i).encode() for i in range(1, 61)]
    assert [event.prev_value for event in got] == [str(i).encode() for i in range(60)]


async def test_watch_from_a_compacted_revision_fails(isolated_store: Storage) -> None:
    store = isolated_store
    first = await store.create("/w/a", b"1")
    await store.update("/w/a", b"2", expected_revision=first.mod_revision)
    compact_to = await store.current_revision()
    await store.compact(compact_to)
    with pytest.raises(CompactedError) as caught:
        async with contextlib.aclosing(store.watch("/w/", after_revision=first.mod_revision - 1)) as events:
            await next_event(events)
    assert caught.value.compacted == compact_to
    # From the compaction point on, history is still there.
    async with contextlib.aclosing(store.watch("/w/", after_revision=compact_to - 1)) as events:
        got = await take(events, 1)
    assert summary(got) == [("PUT", "/w/a", compact_to)]


async def test_a_watch_asked_for_progress_reports_its_start_as_soon_as_it_is_taken_up(
    make_store: StoreFactory,
) -> None:
    # What a watch cache waits for to be ready after a restart: not an idle interval (here 30 s).
    store = await make_store(progress_interval=30.0)
    await store.create("/w/a", b"1")
    start = await store.current_revision()
    async with contextlib.aclosing(store.watch("/w/", after_revision=start, progress=True)) as events:
        first = await next_event(events, within=10.0)
    assert (first.type, first.revision) == (EventType.PROGRESS, start)


async def test_progress_events_report_a_revision_covering_all_delivered_changes(store: Storage) -> None:
    start = await store.current_revision()
    async with contextlib.aclosing(store.watch("/w/", after_revision=start, progress=True)) as events:
        idle = await next_event(events)
        assert idle.type is EventType.PROGRESS
        assert start <= idle.revision <= await store.current_revision()
        created = await store.create("/w/a", b"1")
        other = await store.create("/elsewhere", b"1")
        change = await next_event(events)
        assert change.type is EventType.PUT and change.revision == created.mod_revision
        progress = await next_event(events)
        while progress.revision < other.mod_revision:  # an earlier report may still be on its way
            assert progress.type is EventType.PROGRESS
            progress = await next_event(events)
        assert progress.type is EventType.PROGRESS


async def test_without_progress_an_idle_watch_is_silent(store: Storage) -> None:
    start = await store.current_revision()
    async with contextlib.aclosing(store.watch("/w/", after_revision=start)) as events:
        with pytest.raises(TimeoutError):
            await next_event(events, within=0.6)


async def _server_watchers(store: Storage) -> int | None:
    """etcd's own count of open watchers (None for other backends)."""
    if not isinstance(store, EtcdStorage):
        return None
    async with aiohttp.ClientSession() as session, session.get(f"{store.endpoints[0]}/metrics") as response:
        text = await response.text()
    match = re.search(r"^etcd_debugging_mvcc_watcher_total (\S+)$", text, re.MULTILINE)
    assert match, "etcd exposes no watcher gauge"
    return int(float(match.group(1)))


async def test_closing_a_watch_releases_it(store: Storage) -> None:
    await asyncio.sleep(0.05)  # start-up's short-lived tasks end first (nothing signals it)
    tasks_before = len(asyncio.all_tasks())
    watchers_before = await _server_watchers(store)
    start = await store.current_revision()

    events = store.watch("/w/", after_revision=start, progress=True)
    created = await store.create("/w/a", b"1")
    assert (await take(events, 1))[0].revision == created.mod_revision
    assert store.active_watches == 1  # type: ignore[attr-defined]
    if watchers_before is not None:
        assert await _server_watchers(store) == watchers_before + 1
    await events.aclose()

    assert store.active_watches == 0  # type: ignore[attr-defined]

    async def released() -> bool:  # the server notices the closed stream asynchronously
        return len(asyncio.all_tasks()) == tasks_before and await _server_watchers(store) == watchers_before

    await async_wait_until(released, timeout=2, interval=0.02, message="the watch's tasks and watcher to go")
    assert len(asyncio.all_tasks()) == tasks_before
    assert await _server_watchers(store) == watchers_before


async def test_a_deadline_ends_a_progress_watch_under_constant_writes(store: Storage) -> None:
    """A watch's deadline (timeoutSeconds, a client going away, shutdown) cancels its consumer; the
    cancellation must not be lost when a change arrives in the same instant, or the watch outlives
    its deadline. Python 3.11's asyncio.wait_for swallows exactly that cancellation, which kept
    SQLite watches open until their clients left."""

    async def write_constantly() -> None:
        number = 0
        while True:
            number += 1
            await store.create(f"/w/{number}", b"x")

    async def watch_until_deadline(after: int) -> None:
        events = store.watch("/w/", after_revision=after, progress=True)
        try:
            async with asyncio.timeout(0.05):
                async for _ in events:
                    pass
        except TimeoutError:
            pass
        finally:
            await events.aclose()

    writer = asyncio.create_task(write_constantly())
    try:
        for attempt in range(40):
            watch = asyncio.create_task(watch_until_deadline(await store.current_revision()))
            done, _ = await asyncio.wait({watch}, timeout=2.0)
            while not watch.done():  # a lost cancellation may be lost again: insist
                watch.cancel()
                await asyncio.wait({watch}, timeout=0.1)
            assert done, f"watch {attempt + 1} ran 2 s past its 0.05 s deadline"
    finally:
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer
