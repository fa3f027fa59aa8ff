"""Shared reads of the storage's current revision: a caller joins only a read that starts after it
asked, so what it learns is as new as its request (a linearizable read), and concurrent callers
share one read. The storage here is a fake that counts and holds its reads."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from apiserver.storage.cacher.revisions import SharedRevisionReads
from apiserver.storage.interface import Storage, StorageUnavailableError
from tests.support.waiting import async_wait_until


class FakeHeldRevisions:
    """current_revision answers the number of reads started so far, once `release` is set."""

    def __init__(self) -> None:
        self.started = 0
        self.release = asyncio.Event()
        self.fail = False

    async def current_revision(self) -> int:
        self.started += 1
        number = self.started
        await self.release.wait()
        if self.fail:
            raise StorageUnavailableError("etcd is gone")
        return number


def reads() -> tuple[SharedRevisionReads, FakeHeldRevisions]:
    fake = FakeHeldRevisions()
    return SharedRevisionReads(cast(Storage, fake)), fake


async def test_concurrent_callers_share_one_read() -> None:
    shared, fake = reads()
    callers = [asyncio.create_task(shared.current()) for _ in range(50)]
    await asyncio.sleep(0)  # they ask (a yield)
    fake.release.set()
    assert await asyncio.gather(*callers) == [1] * 50
    assert fake.started == 1


async def test_a_caller_never_joins_a_read_that_began_before_it_asked() -> None:
    shared, fake = reads()
    early = asyncio.create_task(shared.current())
    await async_wait_until(lambda: fake.started, interval=0)
    assert fake.started == 1  # under way
    late = [asyncio.create_task(shared.current()) for _ in range(3)]
    await asyncio.sleep(0)  # they ask (a yield: each runs until it awaits the next read)
    fake.release.set()
    assert await early == 1
    assert await asyncio.gather(*late) == [2, 2, 2]
    assert fake.started == 2


async def test_an_error_reaches_every_caller_and_the_next_read_is_fresh() -> None:
    shared, fake = reads()
    fake.fail = True
    callers = [asyncio.create_task(shared.current()) for _ in range(3)]
    fake.release.set()
    for caller in callers:
        with pytest.raises(StorageUnavailableError):
            await caller
    fake.fail = False
    assert await shared.current() == 2


async def test_a_caller_that_gives_up_leaves_the_read_to_the_others() -> None:
    shared, fake = reads()
    quitter = asyncio.create_task(shared.current())
    stayer = asyncio.create_task(shared.current())
    await async_wait_until(lambda: fake.started, interval=0)  # both asked; the read is under way
    quitter.cancel()
    fake.release.set()
    assert await stayer == 1
    assert quitter.cancelled()
    await shared.close()


async def test_closing_ends_the_wait_of_every_caller() -> None:
    shared, fake = reads()
    first = asyncio.create_task(shared.current())
    await async_wait_until(lambda: fake.started, interval=0)  # its read is under way
    second = asyncio.create_task(shared.current())  # waits for the next read
    await asyncio.sleep(0)  # it asks (a yield: it runs until it awaits the next read)
    await shared.close()
    for caller in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await caller
