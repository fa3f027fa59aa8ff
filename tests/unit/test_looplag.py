"""coreio_event_loop_lag_seconds sees a held loop."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from apiserver.http.looplag import LoopLag


async def test_a_held_loop_is_measured() -> None:
    registry = CollectorRegistry()
    lag = LoopLag(registry)
    sampling = asyncio.create_task(lag.sample(samples=2))
    await asyncio.sleep(0)  # the first timer is set
    time.sleep(0.3)  # noqa: ASYNC251 (the loop held, as a parser that is not linear holds it)
    await sampling
    assert registry.get_sample_value("coreio_event_loop_lag_seconds_count") == 2
    assert registry.get_sample_value("coreio_event_loop_lag_seconds_bucket", {"le": "0.1"}) == 1
    total = registry.get_sample_value("coreio_event_loop_lag_seconds_sum")
    assert total is not None and 0.19 < total < 1.0
