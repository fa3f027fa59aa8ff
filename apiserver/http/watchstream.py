"""Watch responses: newline-delimited JSON events over a chunked response. Never gzipped: upstream
compresses only watch-list streams, and only from Kubernetes 1.37 (WatchListCompression)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from apiserver.http.lifecycle import LIFECYCLE_KEY
from apiserver.http.responses import NO_CACHE
from apiserver.registry.store import WatchEventOut

# Seconds a watch may wait for its client to accept more of the stream (0: forever). Memory stays
# bounded either way: aiohttp waits for the transport to drain past its high-water mark, and the
# storage ends a watch that falls too far behind (an ERROR 410 once the writer catches up). This
# frees the connection, the buffered data and the storage watch of a client that stopped reading.
SEND_TIMEOUT_KEY = web.AppKey("watch_send_timeout", float)


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
    send_timeout = request.config_dict.get(SEND_TIMEOUT_KEY, 0.0)
    try:
        async with asyncio.timeout(deadline) as scope:
            with _ended_at_shutdown(request, scope):
                async for event in events:
                    obj = event.object if transform is None else transform(event.object)
                    line = json.dumps({"type": event.type, "object": obj}, separators=(",", ":"))
                    if not await _send(request, response, line.encode() + b"\n", send_timeout):
                        break
                    if event.type == "ERROR":
                        break
    except TimeoutError:
        pass
    except ConnectionResetError:
        # The client went away; the iterator is closed below.
        pass
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response


def _ended_at_shutdown(
    request: web.Request, scope: asyncio.Timeout
) -> contextlib.AbstractContextManager[None]:
    """While the stream runs, the server's shutdown ends it as its deadline does: normally."""
    lifecycle = request.config_dict.get(LIFECYCLE_KEY)
    if lifecycle is None:
        return contextlib.nullcontext()
    return lifecycle.watch(lambda: scope.reschedule(asyncio.get_running_loop().time()))


async def _send(request: web.Request, response: web.StreamResponse, data: bytes, patience: float) -> bool:
    """Writes one event; False when the client accepted nothing for `patience` seconds and the
    connection was cut (what it has not read is lost anyway: it resumes from its last event)."""
    if patience <= 0:
        await response.write(data)
        return True
    stall = asyncio.timeout(patience)
    try:
        async with stall:
            await response.write(data)
        return True
    except TimeoutError:
        if not stall.expired():
            raise
    if request.transport is not None:
        request.transport.abort()
    return False
