"""How tests wait: until a condition holds, polled, within a timeout; never for a fixed time.

`wait_until` (threads, subprocesses, servers) and `async_wait_until` (inside an event loop) call
`condition` every `interval` seconds until it answers something truthy, and return that answer. On
timeout they fail the test with an AssertionError naming what was awaited (`message`, or what a
function given as `message` says then) and the last answer (or the last exception of the kinds
`ignoring` lists, which count as "not yet").

`CONVERGING` is what `ignoring` takes while a cluster converges (the node's tests): a failed kubectl,
a kubectl that timed out, or an unreachable service is "not yet".

A fixed sleep is for time itself being under test (a lease expiring, a timeout firing, a rate), and
says so where it is written.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")
Message = str | Callable[[], str]

TIMEOUT = 10.0
INTERVAL = 0.05
CONVERGING: tuple[type[Exception], ...] = (AssertionError, subprocess.SubprocessError, OSError)


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
    message: Message = "the condition",
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """`condition()`'s first truthy answer, polled every `interval` s for up to `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        last: object = None
        try:
            if answer := condition():
                return answer
            last = answer
        except ignoring as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, message, last)
        time.sleep(interval)


@overload
async def async_wait_until(
    condition: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = ...,  # noqa: ASYNC109 (see async_wait_until)
    interval: float = ...,
    message: Message = ...,
    ignoring: tuple[type[Exception], ...] = ...,
) -> T: ...


@overload
async def async_wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float = ...,  # noqa: ASYNC109 (see async_wait_until)
    interval: float = ...,
    message: Message = ...,
    ignoring: tuple[type[Exception], ...] = ...,
) -> T: ...


async def async_wait_until(
    condition: Callable[[], object],
    *,
    # Its own deadline rather than the caller's asyncio.timeout: a failure names what it awaited.
    timeout: float = TIMEOUT,  # noqa: ASYNC109
    interval: float = INTERVAL,
    message: Message = "the condition",
    ignoring: tuple[type[Exception], ...] = (),
) -> object:
    """As `wait_until`, sleeping on the event loop; `condition` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        last: object = None
        try:
            answer = condition()
            if inspect.isawaitable(answer):
                answer = await answer
            if answer:
                return answer
            last = answer
        except ignoring as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, message, last)
        await asyncio.sleep(interval)


def _timed_out(timeout: float, message: Message, last: object) -> AssertionError:
    said = f"timed out after {timeout}s waiting for {message if isinstance(message, str) else message()}"
    if isinstance(last, Exception):
        error = AssertionError(f"{said} (last: {type(last).__name__}: {last})")
        error.__cause__ = last
        return error
    if last is None or isinstance(last, bool):
        return AssertionError(said)
    return AssertionError(f"{said} (last: {last!r})")


def stopped(process: subprocess.Popen[bytes] | None, timeout: float = 30.0) -> None:
    """SIGTERM to `process` (if any), then its end awaited; SIGKILL once `timeout` has passed."""
    if process is None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
