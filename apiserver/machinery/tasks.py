"""Background tasks, run one way: started by name beside their owner, and stopped by cancelling
them and waiting until they have ended, their cancellation being no error (kopf keeps its task
tools in one place likewise).

Stopping waits: a task cancelled but not awaited may still be running its `finally` (closing a
watch, a channel) when its owner closes what it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any


async def finish(*tasks: asyncio.Task[Any] | None) -> None:
    """Waits for each task to end; one that ends cancelled ends quietly, one that fails raises."""
    for task in tasks:
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def stop(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancels the tasks (None: none), then waits for them to end (`finish`)."""
    for task in tasks:
        if task is not None:
            task.cancel()
    await finish(*tasks)


class BackgroundTasks:
    """The tasks an owner runs beside itself (loops, watches, pollers) until it stops them."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def started(self) -> bool:
        """Whether any task was started since the last `stop`."""
        return bool(self._tasks)

    def start(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=name)
        self._tasks.append(task)
        return task

    async def stop(self) -> None:
        """Cancels every task started, and waits until they have ended."""
        tasks, self._tasks = self._tasks, []
        await stop(*tasks)
