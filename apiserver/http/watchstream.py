"""Watch responses: newline-delimited JSON events over a chunked response."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator

from aiohttp import web

from apiserver.http.responses import NO_CACHE
from apiserver.registry import WatchEventOut


def watch_timeout(requested: int | None, min_request_timeout: float) -> float:
    """timeoutSeconds when given, else a random time in [min, 2*min) so watchers spread out."""
    if requested:
        return float(requested)
    return min_request_timeout * (1 + random.random())


async def stream_watch(
    request: web.Request,
    events: AsyncIterator[WatchEventOut],
    deadline: float,
) -> web.StreamResponse:
    """Streams `events` until `deadline` seconds have passed, the client leaves or an ERROR ends it."""
    response = web.StreamResponse(
        status=200,
        headers={"Content-Type": "application/json", "Cache-Control": NO_CACHE},
    )
    response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        async with asyncio.timeout(deadline):
            async for event in events:
                line = json.dumps({"type": event.type, "object": event.object}, separators=(",", ":"))
                await response.write(line.encode() + b"\n")
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
