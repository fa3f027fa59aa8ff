"""A request's CPU-bound steps off the event loop when its input is large.

Once a request has read a body (or query string) larger than `LARGE_BYTES`, its pure steps (decoding,
managed fields, patching, validation) run in a worker thread, so the event loop goes on serving
other requests (the working thread hands the GIL back every few milliseconds). Small requests, nearly
all of them, stay on the loop: a thread hop would cost them more than the work itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")
LARGE_BYTES = 64 * 1024
# Set in the request's own task, so every later step of the same request sees it.
_LARGE: ContextVar[bool] = ContextVar("large_input", default=False)


def note_input(size: int) -> None:
    """The request read `size` bytes of input: from now on its steps run off the loop if large."""
    if size > LARGE_BYTES:
        _LARGE.set(True)


async def run(step: Callable[[], T]) -> T:
    """`step()`, in a worker thread when the request's input is large."""
    if not _LARGE.get():
        return step()
    return await asyncio.to_thread(step)
