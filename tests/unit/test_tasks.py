"""The one way background tasks are run: stopping cancels and waits, and only cancellation is quiet."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.machinery import tasks
from apiserver.machinery.tasks import BackgroundTasks


async def test_stop_cancels_and_waits_until_each_task_has_ended() -> None:
    ended: list[str] = []

    async def loop(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # clean-up that itself awaits
            ended.append(name)

    background = BackgroundTasks()
    background.start(loop("a"), name="a")
    background.start(loop("b"), name="b")
    await asyncio.sleep(0)  # they start (a yield)
    assert background.started
    await background.stop()
    assert sorted(ended) == ["a", "b"]
    assert not background.started


async def test_a_failed_task_raises_when_finished() -> None:
    async def fail() -> None:
        raise ValueError("broken")

    task = asyncio.create_task(fail())
    await asyncio.sleep(0)  # it fails (a yield)
    with pytest.raises(ValueError, match="broken"):
        await tasks.stop(task)


async def test_finish_waits_without_cancelling() -> None:
    release = asyncio.Event()

    async def work() -> str:
        await release.wait()
        return "done"

    task = asyncio.create_task(work())
    asyncio.get_running_loop().call_later(0.01, release.set)
    await tasks.finish(task, None)
    assert task.result() == "done"
