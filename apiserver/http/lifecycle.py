"""The server's graceful termination as requests see it (k8s.io/apiserver's lifecycle signals).

Once shutdown is initiated, /readyz fails while everything else is still served. When the server
stops listening it waits for the connections it had accepted to send their first bytes (Go's
server waits for its new connections too), then ends the open watches: each stream ends as it does
at its timeout (the final chunk is sent), so that its client lists and watches again, elsewhere.
Then it waits for the requests in flight, whose bodies may still be arriving, before it closes any
connection; their answers close their connections (Go's server stops keep-alives at shutdown too).
No connection is served once the server closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import weakref
from collections.abc import Callable, Iterator

from aiohttp import web
from aiohttp.typedefs import Handler

# However long the grace period, watches are ended at least this fast (upstream's floor).
MIN_WATCH_END_RATE = 200.0
# Go's server counts a connection it accepted as idle (and closes it) once it has been so for 5 s
# without a request; until then its shutdown waits for it. So long is a new connection waited for.
NEW_CONNECTION_GRACE = 5.0
ARRIVAL_POLL = 0.01


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
        self.closed = False
        self._new_connections: weakref.WeakKeyDictionary[NewConnection, float] = weakref.WeakKeyDictionary()

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

    def listener_closed(self) -> None:
        """From now on answers close their connections, and watches opened are ended at once."""
        self._ending = True

    def accepting(self, handler: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """The protocol factory to listen with: `handler`'s connections, seen from their acceptance."""

        def accept() -> asyncio.Protocol:
            connection = NewConnection(handler(), self)
            self._new_connections[connection] = time.monotonic()
            return connection

        return accept

    async def arrivals_done(self) -> None:
        """Returns once each connection accepted so far has sent its first bytes (parsed at once:
        its request is then in flight), been closed, failed its TLS handshake or been open for
        NEW_CONNECTION_GRACE seconds."""
        # Polled: the event loop tells a protocol nothing of a failed handshake; its stand-in only
        # disappears once collected (at once on uvloop; asyncio's keeps it in a cycle).
        collected = False
        while any(time.monotonic() - at < NEW_CONNECTION_GRACE for at in self._new_connections.values()):
            await asyncio.sleep(ARRIVAL_POLL)
            if not collected and self._new_connections:
                collected = True
                gc.collect(1)  # a young cycle: no full collection needed

    def arrived(self, connection: NewConnection) -> None:
        """`connection` sent its first bytes or ended: it is no longer waited for."""
        self._new_connections.pop(connection, None)

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


class NewConnection(asyncio.Protocol):
    """Stands for a connection's handler from its acceptance until its first bytes (Go's StateNew),
    so that the lifecycle can wait for it: once the TLS handshake is done the handler has the
    connection (or it is closed, if the server has closed); the first bytes go to the handler,
    which from then on receives the connection's all."""

    def __init__(self, handler: asyncio.Protocol, lifecycle: Lifecycle) -> None:
        self._handler = handler
        self._lifecycle = lifecycle
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._lifecycle.closed:
            self._lifecycle.arrived(self)
            transport.close()
            return
        self._transport = transport
        self._handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._lifecycle.arrived(self)
        if self._transport is not None:
            self._transport.set_protocol(self._handler)
        self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lifecycle.arrived(self)
        if self._transport is not None:
            self._handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()


LIFECYCLE_KEY = web.AppKey("lifecycle", Lifecycle)
