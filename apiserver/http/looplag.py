"""How late the event loop runs what is due: `coreio_event_loop_lag_seconds`, a histogram of how
much later than asked a short timer of the loop's own fires. A request that holds the loop (a
parser that is not linear, a large body decoded in place) shows here as it shows in every other
request's latency, /healthz included."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram

# The timer's period: often enough to see a stall of a tenth of a second, rarely enough to cost
# nothing (ten wake-ups a second).
PERIOD = 0.1
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLag:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.lag = Histogram(
            "coreio_event_loop_lag_seconds",
            "How much later than due the event loop ran a timer (sampled every 100 ms).",
            buckets=BUCKETS,
            registry=registry,
        )

    async def sample(self, samples: int | None = None) -> None:
        """Measures the lag `samples` times (for ever by default)."""
        loop = asyncio.get_running_loop()
        taken = 0
        while samples is None or taken < samples:
            due = loop.time() + PERIOD
            await asyncio.sleep(PERIOD)
            self.lag.observe(max(0.0, loop.time() - due))
            taken += 1

    async def context(self, _app: web.Application) -> AsyncIterator[None]:
        """For the app's cleanup_ctx: sampling from start-up to clean-up."""
        task = asyncio.create_task(self.sample(), name="event-loop-lag")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
