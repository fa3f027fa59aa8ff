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
    """Writes a watch's events; cuts the connection of a client that accepted nothing for
    `patience` seconds (0: never). What it has not read is lost anyway: it resumes from its last
    event. One timer a stream, moved on only when it fires, bounds every write: a timeout of each
    write's own would cost more than the write."""

    def __init__(self, request: web.Request, response: web.StreamResponse, patience: float) -> None:
        self._request = request
        self._response = response
        self._patience = patience
        self._loop = asyncio.get_running_loop()
        self._writing_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stalled = False

    async def send(self, data: bytes) -> bool:
        """Writes one event; False when the connection was cut for a stall."""
        if self._patience <= 0:
            await self._response.write(data)
            return True
        self._writing_since = since = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(since + self._patience, self._check)
        try:
            await self._response.write(data)
        finally:
            self._writing_since = None
        return not self._stalled

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
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
