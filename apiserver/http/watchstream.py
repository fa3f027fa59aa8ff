"""Watch responses: newline-delimited JSON events over a chunked response. Never gzipped: upstream
compresses only watch-list streams, and only from Kubernetes 1.37 (WatchListCompression)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from apiserver.http.lifecycle import LIFECYCLE_KEY
from apiserver.http.responses import NO_CACHE
from apiserver.machinery import fastjson
from apiserver.registry.store import WatchEventOut

# Seconds a watch may wait for its client to accept more of the stream (0: forever). Memory stays
# bounded either way: aiohttp waits for the transport to drain past its high-water mark, and the
# storage ends a watch that falls too far behind (an ERROR 410 once the writer catches up). This
# frees the connection, the buffered data and the storage watch of a client that stopped reading.
SEND_TIMEOUT_KEY = web.AppKey("watch_send_timeout", float)
# Bytes of events a watch queues before waiting for its client (the events a turn of the loop hands
# it go out together; past this it waits, its inbox fills, and the storage ends it if it lags on).
PENDING_BYTES = 256 * 1024
# While events keep coming, a watch writes at most this often (seconds): what arrives meanwhile goes
# out in the same write. Upstream writes whenever its queue is empty; here a write costs a Python
# core a TLS record and a send(2), and at 1,000 Events/s asked to 200 watches grouping them 5 ms
# raised the Events written from 347 to 597/s (bench.watch), while one Event every 20 ms still goes
# out at once.
WRITE_INTERVAL = 0.005
# The name of a shared event's JSON watch line among its encodings (WatchEventOut.encodings), by
# type: an object's encodings may be shared by events of different types.
WATCH_LINE_ENCODINGS = {
    event_type: f"json-watch-line-{event_type}" for event_type in ("ADDED", "MODIFIED", "DELETED")
}


def watch_timeout(requested: int | None, min_request_timeout: float) -> float:
    """timeoutSeconds when given, else a random time in [min, 2*min) so watchers spread out."""
    if requested:
        return float(requested)
    return min_request_timeout * (1 + random.random())


async def stream_watch(
    request: web.Request,
    events: AsyncIterator[WatchEventOut],
    deadline: float,
    transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> web.StreamResponse:
    """Streams `events` until `deadline` seconds have passed, the client leaves, an ERROR ends it or
    the server shuts down. `transform` converts each event's object (to a Table, say) in the order
    the events are sent."""
    response = web.StreamResponse(
        status=200,
        headers={"Content-Type": "application/json", "Cache-Control": NO_CACHE},
    )
    response.enable_chunked_encoding()
    await response.prepare(request)
    sender = WatchWriter(request, response, request.config_dict.get(SEND_TIMEOUT_KEY, 0.0))
    try:
        async with asyncio.timeout(deadline) as scope:
            with _ended_at_shutdown(request, scope):
                async for event in events:
                    if not await sender.send(encoded(event, transform)):
                        break
                    if event.type == "ERROR":
                        break
        await sender.flush()
    except TimeoutError:
        pass
    except ConnectionResetError:
        # The client went away; the iterator is closed below.
        pass
    finally:
        sender.close()
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response


def watch_line(event_type: str, obj: dict[str, Any]) -> bytes:
    """One event as the stream sends it: a JSON object on a line of its own."""
    return fastjson.dumps({"type": event_type, "object": obj}) + b"\n"


def encoded(
    event: WatchEventOut, transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> bytes:
    """The event's line: a shared event's is encoded once for every watcher sending it as it is;
    a transformed one (a Table) is this watcher's own."""
    if transform is not None:
        return watch_line(event.type, transform(event.object))
    shared = event.encodings
    name = WATCH_LINE_ENCODINGS.get(event.type)
    if shared is None or name is None:
        return watch_line(event.type, event.object)
    line = shared.get(name)
    if line is None:
        line = shared[name] = watch_line(event.type, event.object)
    return line


def _ended_at_shutdown(
    request: web.Request, scope: asyncio.Timeout
) -> contextlib.AbstractContextManager[None]:
    """While the stream runs, the server's shutdown ends it as its deadline does: normally."""
    lifecycle = request.config_dict.get(LIFECYCLE_KEY)
    if lifecycle is None:
        return contextlib.nullcontext()
    return lifecycle.watch(lambda: scope.reschedule(asyncio.get_running_loop().time()))


class WatchWriter:
    """Writes a watch's events, several at a time: the events a watch takes in one turn of the event
    loop, or within WRITE_INTERVAL of its last write, go out in one write (a storage commit wakes
    every watch at once: one write a watch instead of one an event is what lets a fan-out keep up).
    Cuts the connection of a client that accepted nothing for `patience` seconds (0: never); what
    it has not read is lost anyway: it resumes from its last event. One timer a stream, moved on
    only when it fires, bounds every write: a timeout of each write's own would cost more than the
    write."""

    def __init__(self, request: web.Request, response: web.StreamResponse, patience: float) -> None:
        self._request = request
        self._response = response
        self._patience = patience
        self._loop = asyncio.get_running_loop()
        self._writing_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stalled = False
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._flusher: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._last_write = 0.0

    async def send(self, data: bytes) -> bool:
        """Queues one event for the next write; False when the connection was cut for a stall. Waits
        while more than PENDING_BYTES are queued (the client is slower than the watch)."""
        if self._failure is not None:
            raise self._failure
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._flusher is None:
            self._flusher = self._loop.create_task(self._flush())
        if self._pending_bytes > PENDING_BYTES:
            await self.flush()
        return not self._stalled

    async def flush(self) -> bool:
        """Waits until every queued event is written; False when the connection was cut for a stall."""
        if self._flusher is not None:
            await asyncio.shield(self._flusher)
        if self._failure is not None:
            raise self._failure
        return not self._stalled

    async def _flush(self) -> None:
        try:
            wait = self._last_write + WRITE_INTERVAL - self._loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            while self._pending and not self._stalled:
                self._last_write = self._loop.time()
                data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
                self._pending.clear()
                self._pending_bytes = 0
                await self._write(data)
        except Exception as exc:  # the client left, say: raised where the stream's own task is
            self._failure = exc
        finally:
            self._flusher = None

    async def _write(self, data: bytes) -> None:
        if self._patience <= 0:
            await self._response.write(data)
            return
        self._writing_since = since = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(since + self._patience, self._check)
        try:
            await self._response.write(data)
        finally:
            self._writing_since = None

    def _check(self) -> None:
        """The timer: cuts a write that has waited `patience`, waits on for a younger one, and
        stops while nothing is being written (the next write starts it again)."""
        self._timer = None
        since = self._writing_since
        if since is None:
            return
        if self._loop.time() < since + self._patience:
            self._timer = self._loop.call_at(since + self._patience, self._check)
            return
        # Aborting ends the write waiting for the client (the connection is lost).
        self._stalled = True
        if self._request.transport is not None:
            self._request.transport.abort()

    def close(self) -> None:
        """Stops the timer and any write still waiting (the stream has ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
