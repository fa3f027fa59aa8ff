"""A server's connections shared out evenly among its workers (issue 24).

With a SO_REUSEPORT socket for each worker, the kernel hashed each connection to a worker: the 16
long-lived connections of a client's pool often landed 11 and 5 (or worse), and the busier worker
capped the server while the other idled (creates at 16 connections: 2,305/s with its workers at
0.81 and 0.18 of a core, 2,600/s balanced). The workers now share one listening socket, and each
accepts for itself, one connection at a time, but none while it holds more open connections than
the worker holding the fewest (their counts in a page of memory the supervisor shares before it
forks): a new connection goes to a worker with the fewest. A worker that would take one defers for
DEFER seconds at a time, and takes it anyway after MAX_DEFER, so that a worker stalled or gone never
leaves a connection waiting. asyncio's and uvloop's servers accept every pending connection at
once, with no say in it; accepting here is what `loop.create_server` does, connection by
connection, through `loop.connect_accepted_socket`."""

from __future__ import annotations

import asyncio
import logging
import mmap
import socket
import ssl
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# How long a worker over its share waits for another to take a pending connection, and how long at
# most before it takes it itself.
DEFER = 0.002
MAX_DEFER = 0.05
# How often a worker publishes its count when nothing is accepted (connections close meanwhile).
PUBLISH_INTERVAL = 0.5
# After an accept fails (for want of descriptors or memory), the pause before the next (asyncio's).
ACCEPT_RETRY_DELAY = 1.0


# A worker's count while it does not accept (not ready yet, or shutting down): none defers to it.
NOT_ACCEPTING = 1 << 62


class Shares:
    """The open connections of each of `count` workers, in anonymous memory shared with the
    processes forked after it was made (8 bytes a worker, read and written whole)."""

    def __init__(self, count: int) -> None:
        self._memory = mmap.mmap(-1, 8 * count)
        self._counts = memoryview(self._memory).cast("q")
        for index in range(count):
            self._counts[index] = NOT_ACCEPTING

    def publish(self, index: int, connections: int) -> None:
        self._counts[index] = connections

    def fewest(self) -> int:
        return min(self._counts)


class Acceptor:
    """Accepts this worker's connections of the shared socket `sock` into `factory`'s protocols,
    over TLS with `context`; `shares` and `index` say how many each worker holds."""

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        context: ssl.SSLContext,
        shares: Shares,
        index: int,
    ) -> None:
        self._sock = sock
        self._factory = factory
        self._context = context
        self._shares = shares
        self._index = index
        self._loop = asyncio.get_running_loop()
        self._open: set[asyncio.BaseTransport] = set()
        self._handshakes: set[asyncio.Task[None]] = set()
        self._deferred_since = 0.0  # when the connection pending was first deferred
        self._last_deferred = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._publisher: asyncio.TimerHandle | None = None
        self._closed = False

    def start(self) -> None:
        self._sock.setblocking(False)
        self._listen()
        self._publish()

    def close(self) -> None:
        """Accepts no more, and closes this worker's hold on the socket (what is pending is left
        to the other workers; once the last has closed, the port refuses connections); the
        connections accepted stay open."""
        self._closed = True
        self._shares.publish(self._index, NOT_ACCEPTING)
        for handle in (self._timer, self._publisher):
            if handle is not None:
                handle.cancel()
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()

    def _listen(self) -> None:
        self._timer = None
        if not self._closed:
            self._loop.add_reader(self._sock.fileno(), self._readable)

    def _pause(self, seconds: float) -> None:
        self._loop.remove_reader(self._sock.fileno())
        self._timer = self._loop.call_later(seconds, self._listen)

    def _readable(self) -> None:
        if self._over_share():
            self._pause(DEFER)
            return
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return  # another worker took it, or its client gave it up
        except OSError as exc:  # out of descriptors or memory, mostly: asyncio pauses as long
            log.error("accepting a connection failed (%s); retrying in %gs", exc, ACCEPT_RETRY_DELAY)
            self._pause(ACCEPT_RETRY_DELAY)
            return
        conn.setblocking(False)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        handshake = self._loop.create_task(self._serve(conn))
        self._handshakes.add(handshake)
        handshake.add_done_callback(self._handshakes.discard)
        self._publish_now()

    def _over_share(self) -> bool:
        """Whether another worker holds fewer connections, and the pending one has not waited
        MAX_DEFER for it (deferrals more than a few DEFER apart are for different connections:
        another worker took the one deferred before)."""
        if self._held() <= self._shares.fewest():
            return False
        now = time.monotonic()
        if now - self._last_deferred > 4 * DEFER:
            self._deferred_since = now
        self._last_deferred = now
        return now - self._deferred_since < MAX_DEFER

    async def _serve(self, conn: socket.socket) -> None:
        try:
            transport, _ = await self._loop.connect_accepted_socket(self._factory, conn, ssl=self._context)
        except Exception as exc:  # its client's doing (a failed handshake, a reset): this one ends
            log.debug("a connection ended before its TLS handshake was done: %s", exc)
            conn.close()
            return
        self._open.add(transport)

    def _held(self) -> int:
        self._open = {transport for transport in self._open if not transport.is_closing()}
        return len(self._open) + len(self._handshakes)

    def _publish_now(self) -> None:
        self._shares.publish(self._index, self._held())

    def _publish(self) -> None:
        self._publish_now()
        self._publisher = self._loop.call_later(PUBLISH_INTERVAL, self._publish)
