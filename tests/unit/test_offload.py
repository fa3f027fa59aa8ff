"""machinery.offload: large requests' steps in a worker thread, the collector paused meanwhile."""

from __future__ import annotations

import asyncio
import gc
import threading

from apiserver.machinery import offload
from tests.support.waiting import async_wait_until


async def test_small_inputs_stay_on_the_loop() -> None:
    offload.note_input(offload.LARGE_BYTES)
    assert await offload.run(threading.get_ident) == threading.get_ident()


async def test_a_large_input_runs_off_the_loop_with_the_collector_paused() -> None:
    stepping: list[int] = []

    async def request(release: threading.Event) -> tuple[int, bool]:
        offload.note_input(offload.LARGE_BYTES + 1)

        def step() -> tuple[int, bool]:
            stepping.append(threading.get_ident())
            release.wait(5)
            return threading.get_ident(), gc.isenabled()

        return await offload.run(step)

    first_release, second_release = threading.Event(), threading.Event()
    first = asyncio.create_task(request(first_release))
    second = asyncio.create_task(request(second_release))
    await async_wait_until(lambda: len(stepping) == 2, message="both steps in their threads")
    assert not gc.isenabled()
    first_release.set()
    thread, collecting = await first
    assert thread != threading.get_ident() and not collecting
    assert not gc.isenabled(), "the second large step still runs"
    second_release.set()
    await second
    assert gc.isenabled()
