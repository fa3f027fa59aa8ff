"""The server's graceful termination as requests see it (k8s.io/apiserver's lifecycle signals).

Once shutdown is initiated, /readyz fails while everything else is still served. When the server
stops listening it ends the open watches: each stream ends as it does at its timeout (the final
chunk is sent), so that its client lists and watches again, elsewhere. Then it waits for the
requests in flight, whose bodies may still be arriving, before it closes any connection; their
answers close their connections (Go's server stops keep-alives at shutdown too).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

from aiohttp import web
from aiohttp.typedefs import Handler

# However long the grace period, watches are ended at least this fast (upstream's floor).
MIN_WATCH_END_RATE = 200.0


class Lifecycle:
    """One server's shutdown: whether it was initiated, the watches open to end, and the requests
    in flight to wait for (counted by `middleware`, the application's outermost; its
    `on_response_prepare` ends keep-alive)."""

    def __init__(self) -> None:
        self.shutdown_initiated = False
        self._ending = False
        self._watches: set[Callable[[], None]] = set()
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def initiate_shutdown(self) -> None:
        self.shutdown_initiated = True

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.in_flight += 1
        self._idle.clear()
        try:
            response = await handler(request)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()
        return response

    async def on_response_prepare(self, _request: web.Request, response: web.StreamResponse) -> None:
        """Answers started once the listener is closed close their connection after them."""
        if self._ending:
            response.force_close()
            response.headers["Connection"] = "close"  # the keep-alive header is set before this hook

    async def drained(self) -> None:
        """Returns once no request is in flight (watches included)."""
        await self._idle.wait()

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    @contextlib.contextmanager
    def watch(self, end: Callable[[], None]) -> Iterator[None]:
        """Inside, `end` is called once when the server ends its watches (at once if it has)."""
        if self._ending:
            end()
            yield
            return
        self._watches.add(end)
        try:
            yield
        finally:
            self._watches.discard(end)

    async def end_watches(self, grace: float) -> int:
        """Ends every open watch (and any opened from now on), spread over at most `grace` seconds
        so that their clients do not all come back at once (0: all at once); returns how many."""
        self._ending = True
        pending = list(self._watches)
        pause = min(grace / len(pending), 1 / MIN_WATCH_END_RATE) if grace > 0 and pending else 0.0
        for end in pending:
            if end not in self._watches:
                continue  # ended on its own meanwhile
            self._watches.discard(end)
            end()
            if pause:
                await asyncio.sleep(pause)
        return len(pending)


LIFECYCLE_KEY = web.AppKey("lifecycle", Lifecycle)
