"""Batch mode (upstream's buffered plugin): events wait in a bounded buffer and go out in batches
of up to --audit-webhook-batch-max-size, or whatever has come within --audit-webhook-batch-max-wait,
each batch sent on its own (at most --audit-webhook-batch-throttle-qps batches a second) so that a
slow service never holds up the next. A full buffer drops the event (counted and logged): a request
never waits for the audit. Stopping sends what is left."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apiserver.audit.metrics import METRICS
from apiserver.audit.webhook.client import EncodedEvent
from apiserver.audit.webhook.throttle import TokenBucket

Deliver = Callable[[list[EncodedEvent]], Awaitable[object]]


@dataclass(frozen=True)
class BatchConfig:
    buffer_size: int = 10000
    max_batch_size: int = 400
    max_batch_wait: float = 30.0
    throttle_enable: bool = True
    throttle_qps: float = 10.0
    throttle_burst: int = 15


class Batcher:
    """The buffer, and the task that empties it into `deliver` a batch at a time."""

    def __init__(self, config: BatchConfig, deliver: Deliver) -> None:
        self.config = config
        self._deliver = deliver
        self._buffer: collections.deque[EncodedEvent] = collections.deque()
        self._arrived = asyncio.Event()
        self._stopped = False
        self._throttle = (
            TokenBucket(config.throttle_qps, config.throttle_burst) if config.throttle_enable else None
        )
        self._runner: asyncio.Task[None] | None = None
        self.sending: set[asyncio.Task[object]] = set()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def offer(self, event: EncodedEvent) -> None:
        """Buffered, or dropped when the buffer is full or the batcher stopped."""
        if self._stopped or len(self._buffer) >= self.config.buffer_size:
            reason = "audit backend shut down" if self._stopped else "audit buffer queue blocked"
            METRICS.failed("buffered", 1, reason, [event.audit_id])
            return
        self._buffer.append(event)
        self._arrived.set()

    def start(self) -> None:
        self._runner = asyncio.create_task(self._run(), name="audit-webhook-batches")

    async def _run(self) -> None:
        while True:
            batch = await self.collect()
            if batch:
                await self._throttled(batch)
                self._dispatch(batch)
            if self._stopped and not self._buffer:
                return

    async def _throttled(self, batch: list[EncodedEvent]) -> None:
        """Once the throttle lets `batch` go; cancelled (a stop cut short), it is counted as lost."""
        if self._throttle is None:
            return
        try:
            await asyncio.sleep(self._throttle.reserve())
        except asyncio.CancelledError:
            METRICS.failed(
                "buffered", len(batch), "audit backend shut down", [event.audit_id for event in batch]
            )
            raise

    async def collect(self) -> list[EncodedEvent]:
        """The next batch: up to the batch size, or what came within the batch wait (no wait when
        batches are of one event; none once stopped)."""
        loop = asyncio.get_running_loop()
        batching = self.config.max_batch_size > 1
        deadline = loop.time() + self.config.max_batch_wait if batching else None
        batch: list[EncodedEvent] = []
        while len(batch) < self.config.max_batch_size:
            if self._buffer:
                batch.append(self._buffer.popleft())
                continue
            remaining = None if deadline is None else deadline - loop.time()
            if self._stopped or (remaining is not None and remaining <= 0):
                break
            self._arrived.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._arrived.wait()
            except TimeoutError:
                break
        return batch

    def _dispatch(self, batch: list[EncodedEvent]) -> None:
        task: asyncio.Task[object] = asyncio.ensure_future(self._deliver(batch))
        self.sending.add(task)
        task.add_done_callback(self.sending.discard)

    async def stop(self) -> None:
        """Once every buffered event is sent (or its sending failed). Bound it with a timeout:
        cancelled, it cancels the sending too, and counts what was never sent."""
        self._stopped = True
        self._arrived.set()
        try:
            if self._runner is not None:
                await asyncio.shield(self._runner)
            while self.sending:
                await asyncio.gather(*self.sending, return_exceptions=True)
        except asyncio.CancelledError:
            self._abandon()
            raise

    def _abandon(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
        for task in self.sending:
            task.cancel()
        if self._buffer:
            ids = [event.audit_id for event in self._buffer]
            METRICS.failed("buffered", len(ids), "audit backend shut down", ids)
            self._buffer.clear()
