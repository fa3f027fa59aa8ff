"""The storage ceiling: etcd create-if-absent transactions (what a create costs an API server in
etcd) straight from Python with aetcd, the client coreio depends on, from many coroutines."""

from __future__ import annotations

import asyncio
import itertools
import time
from urllib.parse import urlsplit

import aetcd

from bench.events import body_template
from bench.stats import Measured, percentile

PREFIX = b"/bench-raw/events/"


async def _creates(endpoint: str, concurrency: int, duration: float) -> Measured:
    address = urlsplit(endpoint)
    value = body_template("events.core.io/v1", "raw").encode()
    numbers = itertools.count()
    latencies: list[float] = []
    failed = 0
    async with aetcd.Client(address.hostname or "127.0.0.1", address.port or 2379) as client:
        stop = time.monotonic() + duration

        async def worker() -> None:
            nonlocal failed
            while time.monotonic() < stop:
                key = PREFIX + f"{concurrency}-{next(numbers)}".encode()
                began = time.monotonic()
                done = await client.transaction(
                    compare=[client.transactions.version(key) == 0],
                    success=[client.transactions.put(key, value)],
                    failure=[],
                )
                latencies.append(time.monotonic() - began)
                failed += 0 if done[0] else 1

        began = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.monotonic() - began
        await client.delete_prefix(PREFIX)
    return Measured(len(latencies) / elapsed, percentile(latencies, 0.5), percentile(latencies, 0.99), failed)


def raw_creates(endpoint: str, concurrency: int, duration: float) -> Measured:
    """Create-if-absent transactions per second (and their p50/p99) at `concurrency` coroutines."""
    return asyncio.run(_creates(endpoint, concurrency, duration))
