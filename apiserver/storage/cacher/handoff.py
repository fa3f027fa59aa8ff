"""The first fill of a server's watch caches, read from the storage once, not once per worker.

Every worker keeps a watch cache of each resource. Filled each on its own, a server of two workers
had its storage serve every stored object twice at each start (on etcd, 130,000 Events cost etcd
0.7 s of CPU a worker, on the two cores the workers use too), where kube-apiserver lists once. Now
the first worker lists the storage alone and, once its cache is ready, passes what it listed on to
the other workers (`PageTee`), a page at a time from the objects as listed; they fill from those
pages (`PageFeed`) at the first worker's revision, then each follows the storage's watch from there
on its own, as before. Only a cache's first fill is handed on: a cache filled again later (its watch
failed) lists the storage itself. The pages went on as they were listed before: the followers then
took them in on the cores the first worker and the storage were listing on, and the server was
ready 0.4 s later on 130,000 Events than one worker alone.

The pages travel through pipes the supervisor opens before it forks the workers, one from the first
worker to each other, as pickles of plain tuples (10 ms a page of 10,000 Events each way): the
workers are forks of one program, so nothing foreign is ever unpickled. A thread of each end moves
the bytes, so neither event loop waits on a pipe: the first worker waits only while QUEUED_PAGES
pages are still on their way, and a follower stops reading while it holds QUEUED_PAGES of one
cache, so neither holds more than a few pages. A follower that learns nothing more of a cache's
pages (the first worker's list failed, or the pipe ended) lists the storage itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pickle
import queue
import struct
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from apiserver.storage.interface import KeyValue

_LENGTH = struct.Struct("<Q")
# The pages a follower holds for one cache before it stops reading the pipe.
QUEUED_PAGES = 2
# How long the first worker waits for its followers to take a page, and a follower for the first
# worker's next frame, before either gives the handoff up (the followers then list the storage
# themselves): far longer than a page takes (0.1 s for 10,000 Events) and than a failed list takes
# to say so (the etcd client's request timeout, 10 s). While it lists, the first worker says so
# every third of it: its first page comes only once it is ready (2 s on 130,000 Events, 13 s on a
# million, more than 30 on a loaded machine), and a follower that gave up would list the storage
# beside it, slowing both.
STALL_SECONDS = 30.0
# The revision of a frame that carries no page, only that the first worker is still listing.
_STILL_LISTING = 0
PIPE_SIZE = 1 << 20

_Tuple = tuple[str, bytes, int, int]
_Result = TypeVar("_Result")


@dataclass(frozen=True)
class FirstFill:
    """A worker's part in handing on the first fill: the pipes it sends pages to (the first
    worker), or the one it takes them from (the others)."""

    send_to: tuple[int, ...] = ()
    take_from: int | None = None

    @classmethod
    def pipes(cls, workers: int) -> list[FirstFill]:
        """One pipe from the first of `workers` to each other worker (opened before they fork; each
        worker closes the ends that are not its own: storage/pipes.py)."""
        pairs = [os.pipe() for _ in range(workers - 1)]
        for _, write in pairs:
            _widen(write)
        first = cls(send_to=tuple(write for _, write in pairs))
        return [first, *(cls(take_from=read) for read, _ in pairs)]

    def fds(self) -> tuple[int, ...]:
        return (*self.send_to, *([] if self.take_from is None else [self.take_from]))


def _widen(fd: int) -> None:
    """The pipe's buffer made as large as an unprivileged process may (Linux: 1 MiB, against 64
    KiB): a page of 15 MB crosses in 16 writes, not 240."""
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)


class PageTee:
    """The first worker's end: each page its caches list first, sent on to every other worker.
    The pipes close once every one of `roots` was sent in full, or at the first that failed (the
    followers list the storage themselves for what they have not had whole)."""

    def __init__(self, fds: Sequence[int], roots: Sequence[str]) -> None:
        self._pipes = _Pipes(fds)
        self._pending = set(roots)

    async def open(self) -> None:
        self._pipes.start()

    async def send(self, root: str, revision: int, items: Sequence[KeyValue], *, last: bool) -> None:
        """A page of `root`'s fill on its way to every follower: it waits only while QUEUED_PAGES
        are already on their way (a follower that is gone is left out)."""
        rows = [(kv.key, kv.value, kv.mod_revision, kv.create_revision) for kv in items]
        await self._pipes.put(_frame(root, last, revision, rows))
        if last:
            self._pending.discard(root)
            if not self._pending:
                self._pipes.close()

    async def still_listing(self, root: str) -> None:
        """Tells the followers that `root` is still being listed (no page)."""
        await self._pipes.put(_frame(root, False, _STILL_LISTING, []))

    def fail(self, root: str) -> None:
        """`root`'s fill failed (or was cancelled): no more pages go to anyone."""
        self._pipes.close()

    async def close(self) -> None:
        self._pipes.close()


class _Pipes:
    """The write ends, written by a thread of their own in the order the frames were put, so that
    the event loop never waits on a follower unless QUEUED_PAGES frames are waiting already. That
    thread alone closes them: a descriptor closed under a writing thread could be given to another
    file before its next write."""

    def __init__(self, fds: Sequence[int]) -> None:
        self._fds = list(fds)
        self._frames: queue.Queue[bytes | None] = queue.Queue(QUEUED_PAGES)
        self._closing = False

    def start(self) -> None:
        threading.Thread(target=self._write_all, name="watch-cache handoff", daemon=True).start()

    async def put(self, frame: bytes) -> None:
        """`frame` on its way; when the followers have taken nothing for STALL_SECONDS, no more are
        sent (the followers, hearing nothing, list the storage themselves)."""
        if self._closing:
            return
        try:
            self._frames.put_nowait(frame)
        except queue.Full:
            try:
                await in_thread(self._frames.put, frame, True, STALL_SECONDS)
            except queue.Full:
                self._closing = True

    def close(self) -> None:
        """No more frames: the thread closes the pipes once it has written those already put."""
        if not self._closing:
            self._closing = True
            with contextlib.suppress(queue.Full):  # else the thread sees `_closing` after a frame
                self._frames.put_nowait(None)

    def _write_all(self) -> None:
        try:
            while (frame := self._frames.get()) is not None:
                self._fds = [fd for fd in self._fds if _write(fd, frame)]
                if self._closing and self._frames.empty():
                    break
        finally:
            self._closing = True  # whatever ended it: nothing more is put
            for fd in self._fds:
                os.close(fd)


def _write(fd: int, frame: bytes) -> bool:
    """Writes `frame` whole to the pipe (blocking); False, and the pipe closed, if its reader is gone."""
    try:
        view = memoryview(frame)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # EPIPE
        os.close(fd)
        return False
    return True


class HandoffEnded(Exception):
    """The first worker sends no more of this cache's fill: the follower lists the storage."""


class PageFeed:
    """A follower's end: the first worker's pages, sorted out by cache."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queues: dict[str, asyncio.Queue[_Frame]] = {}
        self._abandoned: set[str] = set()
        self._reader: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()

    async def open(self) -> None:
        self._reader = asyncio.create_task(self._read(), name="watch-cache handoff")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def pages(self, root: str) -> AsyncGenerator[tuple[int, list[KeyValue]], None]:
        """`root`'s pages with the revision they were read at, the last one included.
        HandoffEnded: no more will come, or none came for STALL_SECONDS (the follower lists the
        storage itself)."""
        pending = self._queue(root)
        try:
            while True:
                _, last, revision, rows = await _next(pending, self._ended)
                if revision == _STILL_LISTING and not last:
                    continue
                yield revision, [KeyValue(*row) for row in rows]
                if last:
                    return
        finally:
            # Given up: later frames of this cache are dropped, and a reader waiting to queue one
            # (the queue full) goes on, so that the other caches' pages still come.
            self._abandoned.add(root)
            self._queues.pop(root, None)
            while not pending.empty():
                pending.get_nowait()

    def _queue(self, root: str) -> asyncio.Queue[_Frame]:
        return self._queues.setdefault(root, asyncio.Queue(QUEUED_PAGES))

    async def _read(self) -> None:
        try:
            while (frame := await in_thread(_read_frame, self._fd)) is not None:
                if frame[0] not in self._abandoned:
                    await self._queue(frame[0]).put(frame)
            os.close(self._fd)  # ended: no thread reads it any more
        finally:
            self._ended.set()


_Frame = tuple[str, bool, int, list[_Tuple]]


def _frame(root: str, last: bool, revision: int, rows: list[_Tuple]) -> bytes:
    body = pickle.dumps((root, last, revision, rows), protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


def _read_frame(fd: int) -> _Frame | None:
    """The next frame from the pipe (blocking), None once it has ended or broke off."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    body = _read_exactly(fd, _LENGTH.unpack(head)[0])
    frame: _Frame | None = None if body is None else pickle.loads(body)
    return frame


def _read_exactly(fd: int, size: int) -> bytearray | None:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        read = os.readv(fd, [view[got:]])
        if read == 0:
            return None
        got += read
    return buffer


async def in_thread(function: Callable[..., _Result], *args: Any) -> _Result:
    """`function(*args)` on a thread of its own, a daemon: unlike asyncio.to_thread's pool, one
    blocked on a pipe that never ends keeps neither the event loop nor the process from ending."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_Result] = loop.create_future()

    def settle(result: _Result | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = function(*args), None
        except BaseException as exc:  # handed to the awaiting task
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the event loop has closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="watch-cache handoff", daemon=True).start()
    return await future


async def while_listing(tee: PageTee | None, root: str, listing: Awaitable[_Result]) -> _Result:
    """`listing` awaited, the followers told every third of STALL_SECONDS meanwhile that `root` is
    still being listed."""
    if tee is None:
        return await listing

    async def beat(pipe: PageTee) -> None:
        while True:
            await asyncio.sleep(STALL_SECONDS / 3)
            await pipe.still_listing(root)

    beating = asyncio.create_task(beat(tee), name=f"watch-cache handoff {root}: still listing")
    try:
        return await listing
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)


async def _next(pending: asyncio.Queue[_Frame], ended: asyncio.Event) -> _Frame:
    """The queue's next frame; HandoffEnded once the pipe has ended with the queue empty, or when
    nothing came for STALL_SECONDS."""
    if not pending.empty():
        return pending.get_nowait()
    got = asyncio.ensure_future(pending.get())
    done = asyncio.ensure_future(ended.wait())
    try:
        await asyncio.wait((got, done), timeout=STALL_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        if got.done():
            return got.result()
    finally:
        for future in (got, done):
            future.cancel()
    raise HandoffEnded("the first worker sent nothing more" if ended.is_set() else "no page for a while")
