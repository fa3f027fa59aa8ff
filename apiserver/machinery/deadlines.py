"""The deadline of the request being served (its --request-timeout, or the shorter `?timeout=` it
asked for), for what it calls on: a webhook is told, and given, no more time than the request has
left, as upstream's dispatchers take it from the request's context."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

# The event loop's time at which the request ends; None outside a request with a limit.
_DEADLINE: ContextVar[float | None] = ContextVar("request_deadline", default=None)


@contextlib.contextmanager
def ending_at(when: float) -> Iterator[None]:
    """What runs in this block (and the tasks it starts) serves a request ending at `when`, on the
    event loop's clock."""
    token = _DEADLINE.set(when)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def capped(seconds: float) -> float:
    """`seconds`, or the time the request has left when that is less (never below zero)."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return seconds
    return max(0.0, min(seconds, deadline - asyncio.get_running_loop().time()))
