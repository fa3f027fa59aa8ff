"""A request's CPU-bound steps off the event loop when its input is large.

Once a request has read a body (or query string) larger than `LARGE_BYTES`, its pure steps (decoding,
managed fields, patching, validation) run in a worker thread, so the event loop goes on serving
other requests (the working thread hands the GIL back every few milliseconds). Small requests, nearly
all of them, stay on the loop: a thread hop would cost them more than the work itself.

While such a step runs, the cyclic garbage collector waits: a 3 MiB body makes a million objects,
and each full collection they set off traverses every object of the process holding the GIL, for
up to a quarter of a second (measured: 1.2 s of collections in a 3.3 s YAML decode). Decoding makes
no cycles; reference counting frees what it drops, and the collector runs again once no large step
is in flight."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")
LARGE_BYTES = 64 * 1024
# Set in the request's own task, so every later step of the same request sees it.
_LARGE: ContextVar[bool] = ContextVar("large_input", default=False)
_in_flight = 0  # large steps running (counted on the event loop's thread only)


def note_input(size: int) -> None:
    """The request read `size` bytes of input: from now on its steps run off the loop if large."""
    if size > LARGE_BYTES:
        _LARGE.set(True)


async def run(step: Callable[[], T]) -> T:
    """`step()`, in a worker thread when the request's input is large."""
    global _in_flight
    if not _LARGE.get():
        return step()
    _in_flight += 1
    if _in_flight == 1:
        gc.disable()
    try:
        return await asyncio.to_thread(step)
    finally:
        _in_flight -= 1
        if _in_flight == 0:
            gc.enable()
