"""Retrying with exponential backoff, as the audit webhook retries (apimachinery's wait.Backoff
with the webhook's factor, jitter and steps): every failure is retried, whatever its status, since
an audit event dropped is worse than one sent late."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Sleep = Callable[[float], Awaitable[None]]


class DeliveryError(Exception):
    """One attempt failed: the service could not be reached, or did not answer 2xx."""


@dataclass(frozen=True)
class Backoff:
    """`steps` attempts; the first retry after `initial` seconds, each next `factor` times later,
    each wait lengthened at random by up to `jitter` of itself."""

    initial: float
    factor: float = 1.5
    jitter: float = 0.2
    steps: int = 5

    def delays(self, draw: Callable[[], float] = random.random) -> list[float]:
        """The waits between the attempts (one fewer than the attempts)."""
        waits = []
        base = self.initial
        for _ in range(self.steps - 1):
            waits.append(base + base * self.jitter * draw())
            base *= self.factor
        return waits


async def with_backoff(
    attempt: Callable[[], Awaitable[None]], backoff: Backoff, sleep: Sleep = asyncio.sleep
) -> None:
    """`attempt()` until it succeeds; its last DeliveryError when every attempt failed."""
    for wait in backoff.delays():
        try:
            await attempt()
            return
        except DeliveryError:
            await sleep(wait)
    await attempt()
