"""One EventExport's exporter: its spec read, the Events it selects watched from its position,
sent in batches, and its position advanced (in its status) only after the sink acknowledged a
batch, before the next one is sent. So a kill sends again at most the one batch in flight.

A change of the spec (its generation) is seen by a watch of the export itself (specwatch.py): the
exporter starts again with the new spec, from the position it reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from pydantic import ValidationError

from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import EventExportSpec
from coreio_export.connection import BACKOFF, NOT_FOUND, Api, ApiError, ExportError, transient
from coreio_export.metrics import ExportMetrics
from coreio_export.progress import Progress
from coreio_export.reader import Gap, Item, Reader
from coreio_export.records import record
from coreio_export.selection import Selection
from coreio_export.sinkbase import RecordSink, SinkError, SinkRejected
from coreio_export.sinks import open_sink, sink_name
from coreio_export.specwatch import spec_changed
from coreio_export.target import ExportGone, Target

# A position moved on by bookmarks and unselected Events alone is written at most this often; one
# that sent records is written at once (the next batch waits for it).
QUIET_REPORT_SECONDS = 10.0
CAUGHT_UP = "the export reads the history as it is written"
log = logging.getLogger("coreio_export")


class SpecChanged(Exception):
    """The spec moved to a new generation: start again with it."""


class Stopping(Exception):
    """Stopped (SIGTERM) while waiting to try again: what failed is left for the next start."""


@dataclass
class Batch:
    records: list[JSON]
    reached: int  # every revision up to this one is in the batch or not selected
    since: float  # when its first record was read


class Exporter:
    def __init__(self, api: Api, target: Target, stop: asyncio.Event, metrics: ExportMetrics) -> None:
        self.api = api
        self.target = target
        self.stop = stop
        self.metrics = metrics
        self.reported = 0.0  # when the status was last written
        self.started = False  # the export was read once: not finding it now means it was deleted

    async def run(self) -> None:
        """Exports until stopped. ExportGone when the EventExport is deleted; an ExportError that
        trying again cannot mend (401, 403, 404) ends it, the others are tried again."""
        failures = 0
        while not self.stop.is_set():
            try:
                await self._run_generation()
            except SpecChanged:
                log.info("the spec of %s changed: starting again with it", self.target.name)
            except Stopping:
                return
            except ExportError as exc:
                if isinstance(exc, ExportGone) or not transient(exc):
                    raise
                log.warning("%s; starting again", exc)
                with contextlib.suppress(Stopping):
                    await self._pause(failures)
                failures += 1

    async def _run_generation(self) -> None:
        spec, progress, version = await self._read_export()
        self.metrics.sink(sink_name(spec.sink))
        queue: asyncio.Queue[Item | Gap] = asyncio.Queue(maxsize=spec.batch.maxEvents)
        reader = Reader(self.api, Selection(spec, self.target.namespace), queue)
        if not progress.position:
            # A new export starts at the present: its first position written before anything is read.
            progress.position = progress.newest = await reader.current_revision()
            progress.condition("Lagging", False, "CaughtUp", CAUGHT_UP)
            await self._report(progress)
        elif progress.observed != progress.generation:
            await self._report(progress)  # the new spec acknowledged (observedGeneration)
        sink = await self._sink(spec, progress)
        background = [
            asyncio.create_task(reader.run(progress.position)),
            asyncio.create_task(spec_changed(self.api, self.target, progress.generation, version)),
        ]
        try:
            await self._deliver(spec, sink, queue, progress, background)
        finally:
            for task in background:
                task.cancel()
            await asyncio.wait(background)
            for task in background:  # what ended one was raised in _next already, or is moot now
                error = None if task.cancelled() else task.exception()
                if error is not None and not isinstance(error, ExportError | SpecChanged):
                    log.error("a background task of the exporter failed", exc_info=error)
            await sink.close()

    async def _read_export(self) -> tuple[EventExportSpec, Progress, str]:
        """The spec, the status as the exporter keeps it, and the export's resourceVersion."""
        try:
            export = await self.api.get(self.target.path)
        except ApiError as exc:
            if exc.status != NOT_FOUND:
                raise
            if self.started:
                raise self.target.gone("was deleted") from None
            where = f"{self.target.namespace}/{self.target.name}"
            raise ApiError(NOT_FOUND, {"message": f"the EventExport {where} is not found"}) from None
        self.started = True
        try:
            spec = EventExportSpec.model_validate(export["spec"])
            progress = Progress.from_status(
                export.get("status") or {}, export["metadata"].get("generation", 1)
            )
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            raise ExportError(f"the EventExport as the server sent it cannot be read: {exc}") from None
        return spec, progress, str(export["metadata"].get("resourceVersion") or "")

    async def _sink(self, spec: EventExportSpec, progress: Progress) -> RecordSink:
        failures = 0
        while True:
            try:
                return await open_sink(spec.sink, self.api, self.target.namespace, spec.batch.maxEvents)
            except SinkError as exc:
                log.warning("%s (trying again)", exc)
                progress.failure(0, str(exc), time.monotonic())
                await self._report(progress)
                await self._pause(failures)
                failures += 1

    async def _deliver(
        self,
        spec: EventExportSpec,
        sink: RecordSink,
        queue: asyncio.Queue[Item | Gap],
        progress: Progress,
        background: list[asyncio.Task[None]],
    ) -> None:
        wait = parse_go_duration(spec.batch.maxWait)
        while not self.stop.is_set():
            batch, gap = await self._gather(queue, spec.batch.maxEvents, wait, progress, background)
            if batch.records:
                await self._send(sink, batch, progress)
            if gap is not None:
                self._gap(gap, progress)
            elif batch.reached > progress.position:
                progress.position = batch.reached
                if batch.records and "Lagging" in progress.conditions:
                    progress.condition("Lagging", False, "CaughtUp", CAUGHT_UP)
                quiet = not batch.records and time.monotonic() - self.reported < QUIET_REPORT_SECONDS
                if quiet and not self.stop.is_set():
                    continue
            else:
                continue
            await self._report(progress)

    def _gap(self, gap: Gap, progress: Progress) -> None:
        progress.gaps += 1
        self.metrics.gap()
        progress.position = gap.listed_at
        message = (
            f"the history after revision {gap.after} was gone; the Events stored at revision "
            f"{gap.listed_at} were listed and sent, those deleted in between were not"
        )
        progress.condition("Lagging", True, "HistoryGone", message)

    async def _gather(
        self,
        queue: asyncio.Queue[Item | Gap],
        size: int,
        wait: float,
        progress: Progress,
        background: list[asyncio.Task[None]],
    ) -> tuple[Batch, Gap | None]:
        """Items until a batch is full, `wait` has passed since the first one, a gap, or a stop."""
        batch = Batch([], 0, 0.0)
        deadline: float | None = None
        while len(batch.records) < size and not self.stop.is_set():
            within = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            item = await self._next(queue, within, background)
            if item is None:
                break
            if isinstance(item, Gap):
                return batch, item
            deadline = deadline or time.monotonic() + wait
            progress.newest = max(progress.newest, item.revision)
            batch.reached = item.revision
            if item.event is not None:
                batch.since = batch.since or item.received
                batch.records.append(record(item.change, item.event))
        return batch, None

    async def _next(
        self, queue: asyncio.Queue[Item | Gap], within: float | None, background: list[asyncio.Task[None]]
    ) -> Item | Gap | None:
        """The next item; None when `within` seconds passed or the exporter is stopping. What ends
        a background task is raised here: the reader's failure, the export's deletion, or
        SpecChanged when the spec watch saw a new generation."""
        if not queue.empty():
            return queue.get_nowait()
        getting = asyncio.ensure_future(queue.get())
        stopping = asyncio.ensure_future(self.stop.wait())
        done, _ = await asyncio.wait(
            {getting, stopping, *background}, timeout=within, return_when=asyncio.FIRST_COMPLETED
        )
        stopping.cancel()
        if getting in done:
            return getting.result()
        getting.cancel()
        reading, watching = background
        if reading in done:
            reading.result()
            raise ExportError("the watch ended")
        if watching in done:
            watching.result()
            raise SpecChanged
        return None

    async def _send(self, sink: RecordSink, batch: Batch, progress: Progress) -> None:
        """Sends until the sink takes the batch, with a growing pause between tries; Stopping when
        the exporter is stopped meanwhile."""
        failures = 0
        while True:
            if failures:
                self.metrics.retry(len(batch.records))
            try:
                await sink.send(batch.records)
            except SinkError as exc:
                progress.failure(len(batch.records), str(exc), batch.since)
                self.metrics.failure(len(batch.records))
                if isinstance(exc, SinkRejected):  # refused for good: the position moves on
                    log.error("%s (%d records not sent again)", exc, len(batch.records))
                    return
                log.warning("%s (retrying)", exc)
                await self._report(progress)
                await self._pause(failures)
                failures += 1
                continue
            progress.delivered(len(batch.records), batch.since)
            self.metrics.delivered(len(batch.records), time.time())
            return

    async def _report(self, progress: Progress) -> None:
        """The status written; retried until the server takes it, since the next batch may not be
        sent before the position of this one is kept."""
        failures = 0
        while True:
            try:
                written = await self.api.merge_patch(f"{self.target.path}/status", progress.body())
                break
            except ApiError as exc:
                if exc.status == NOT_FOUND:
                    raise self.target.gone("was deleted") from None
                error: ExportError = exc
            except ExportError as exc:
                error = exc
            log.warning("cannot write the status: %s (retrying)", error)
            await self._pause(failures)
            failures += 1
        self.reported = time.monotonic()
        self.metrics.observe(progress)
        if (written.get("metadata") or {}).get("generation", progress.generation) != progress.generation:
            raise SpecChanged

    async def _pause(self, failures: int) -> None:
        """The pause before the next try; Stopping when the exporter is stopped meanwhile."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(BACKOFF[min(failures, len(BACKOFF) - 1)]):
                await self.stop.wait()
        if self.stop.is_set():
            raise Stopping
