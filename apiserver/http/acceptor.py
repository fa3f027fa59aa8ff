"""A server's connections shared out evenly among its workers (issue 24).

With a SO_REUSEPORT socket for each worker, the kernel hashed each connection to a worker: the 16
long-lived connections of a client's pool often landed 11 and 5 (or worse), and the busier worker
capped the server while the other idled (creates at 16 connections: 2,305/s with its workers at
0.81 and 0.18 of a core, 2,600/s balanced). The workers now share one listening socket, and each
accepts for itself, one connection at a time, but none while another worker holds fewer open
connections: a new connection goes to a worker with the fewest. The counts live in a page of memory
the supervisor shares before it forks, each beside the time its worker last wrote it; a worker that
has not written for STALE seconds (hung, or gone) is not waited for. A worker that would take a
connection defers for DEFER seconds at a time, and takes it anyway once it has waited MAX_DEFER,
so that a slow worker never leaves a connection waiting long. asyncio's and uvloop's servers accept
every pending connection at once, with no say in it; accepting here is what `loop.create_server`
does, connection by connection, through `loop.connect_accepted_socket`."""

from __future__ import annotations

import asyncio
import errno
import logging
import mmap
import select
import socket
import ssl
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# How long a worker over its share waits for another to take a pending connection, and how long at
# most before it takes it itself (a loaded worker may run its event loop's turn that long: under CI's
# load, 50 ms left 32 connections opened at once split 13 and 19).
DEFER = 0.002
MAX_DEFER = 0.25
# How often a worker writes its count (connections close meanwhile) and the time, and after how
# long without a write the others stop waiting for it.
PUBLISH_INTERVAL = 0.1
STALE = 5.0
# After an accept fails for want of descriptors or memory, the pause before the next (asyncio's);
# other failures are the pending connection's own, and the next is accepted at once.
ACCEPT_RETRY_DELAY = 1.0
_SCARCE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# A worker's count while it does not accept (not ready yet, or shutting down): none waits for it.
NOT_ACCEPTING = 1 << 62


class Shares:
    """The open connections of each of `count` workers and when each last wrote its count (the
    monotonic clock, which all processes of the machine share), in anonymous memory shared with the
    processes forked after it was made (8 bytes a number, read and written whole)."""

    def __init__(self, count: int) -> None:
        self._memory = mmap.mmap(-1, 16 * count)
        self._counts = memoryview(self._memory)[: 8 * count].cast("q")
        self._beats = memoryview(self._memory)[8 * count :].cast("d")
        for index in range(count):
            self._counts[index] = NOT_ACCEPTING

    def publish(self, index: int, connections: int) -> None:
        self._counts[index] = connections
        self._beats[index] = time.monotonic()

    def fewest(self, besides: int) -> int:
        """The fewest connections a worker other than `besides` holds among those that accept
        (NOT_ACCEPTING: none does)."""
        since = time.monotonic() - STALE
        counts = zip(self._counts, self._beats, strict=True)
        live = [count for index, (count, beat) in enumerate(counts) if index != besides and beat >= since]
        return min(live, default=NOT_ACCEPTING)

    def silent(self, seconds: float) -> list[int]:
        """The workers accepting connections that have not written for `seconds`: their event loop
        has not turned since (a worker starting, or stopping, writes NOT_ACCEPTING and is left out)."""
        since = time.monotonic() - seconds
        counts = zip(self._counts, self._beats, strict=True)
        return [
            index for index, (count, beat) in enumerate(counts) if count != NOT_ACCEPTING and beat < since
        ]


class Acceptor:
    """This worker's part in accepting the connections of the shared socket `sock`: its count in
    `shares` (at `index`) is written from the start, as NOT_ACCEPTING until `start`."""

    def __init__(self, sock: socket.socket, shares: Shares, index: int) -> None:
        self._sock = sock
        self._shares = shares
        self._index = index
        self._loop = asyncio.get_running_loop()
        self._factory: Callable[[], asyncio.Protocol] | None = None
        self._context: ssl.SSLContext | None = None
        self._open: set[asyncio.BaseTransport] = set()
        self._handshakes: set[asyncio.Task[None]] = set()
        self._deferred_since: float | None = None  # while the connection pending waits for another
        self._timer: asyncio.TimerHandle | None = None
        self._publisher: asyncio.TimerHandle | None = None
        self._accepting = False
        self._publish()

    def start(self, factory: Callable[[], asyncio.Protocol], context: ssl.SSLContext) -> None:
        """Accepts from now on, into `factory`'s protocols over TLS with `context`."""
        self._factory, self._context = factory, context
        self._accepting = True
        self._sock.setblocking(False)
        self._listen()
        self._publish_now()

    def close(self) -> None:
        """Accepts no more, and closes this worker's hold on the socket (what is pending is left
        to the other workers; once the last has closed, the port refuses connections); the
        connections accepted stay open."""
        self._accepting = False
        self._publish_now()
        for handle in (self._timer, self._publisher):
            if handle is not None:
                handle.cancel()
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()

    def _listen(self) -> None:
        self._timer = None
        if not self._accepting:
            return
        if self._deferred_since is not None and not _pending(self._sock):
            self._deferred_since = None  # another worker took the connection deferred
        self._loop.add_reader(self._sock.fileno(), self._readable)

    def _pause(self, seconds: float) -> None:
        self._loop.remove_reader(self._sock.fileno())
        self._timer = self._loop.call_later(seconds, self._listen)

    def _readable(self) -> None:
        if self._over_share():
            self._pause(DEFER)
            return
        self._deferred_since = None
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return  # another worker took it
        except OSError as exc:
            if exc.errno in _SCARCE:
                log.error("accepting a connection failed (%s); retrying in %gs", exc, ACCEPT_RETRY_DELAY)
                self._pause(ACCEPT_RETRY_DELAY)
            return  # else the connection's own failure (it was reset, say): the next is taken
        handshake = self._loop.create_task(self._serve(conn))
        self._handshakes.add(handshake)
        handshake.add_done_callback(self._handshakes.discard)
        self._publish_now()

    def _over_share(self) -> bool:
        """Whether another worker holds fewer connections, and the pending one has not waited
        MAX_DEFER for it."""
        if self._held() <= self._shares.fewest(besides=self._index):
            return False
        now = time.monotonic()
        if self._deferred_since is None:
            self._deferred_since = now
        return now - self._deferred_since < MAX_DEFER

    async def _serve(self, conn: socket.socket) -> None:
        assert self._factory is not None  # started
        try:
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
        self._shares.publish(self._index, self._held() if self._accepting else NOT_ACCEPTING)

    def _publish(self) -> None:
        self._publish_now()
        self._publisher = self._loop.call_later(PUBLISH_INTERVAL, self._publish)


def _pending(sock: socket.socket) -> bool:
    """Whether a connection is pending on `sock` (a poll that does not wait)."""
    ready, _, _ = select.select([sock], [], [], 0)
    return bool(ready)
