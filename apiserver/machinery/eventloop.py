"""The event loop a server process runs on: uvloop's (libuv, with its TLS written in Cython) where it
is installed, which it is beside coreio on Linux and macOS; asyncio's own elsewhere.

Measured on 2 cores, one worker, the same commands alternated (issue 24): creates at 16 connections
1,022-1,047/s on asyncio's loop against 1,121-1,154/s on uvloop's (`python -m bench.profile create`),
GETs at one connection 815 against 872/s, and the SQLite watch fan-out at 1,000 Events/s asked to 200
watches 597 against 686-703 Events/s written (bench.watch)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`main` to its end in a new event loop, as asyncio.run runs it."""
    try:
        import uvloop
    except ImportError:  # a platform uvloop has no wheel for (Windows): asyncio's loop does the same
        return asyncio.run(main)
    return uvloop.run(main)


def name() -> str:
    """The running loop's implementation, for the start-up log line."""
    loop = type(asyncio.get_running_loop())
    return f"{loop.__module__}.{loop.__qualname__}"
