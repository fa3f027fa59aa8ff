"""How the workers of one server, sharing one SQLite file, tell each other that they committed: a
pipe to each worker, a byte written to every other one after each commit that changed something.
A worker rung reads the log's new changes at once. Without it each worker polled the log every
20 ms: an idle server on SQLite cost about 3.5% of a core a worker, and a watch served by one worker
saw another's writes up to 20 ms late. Pipes, opened before the workers fork, need no names, no
files and no cleanup; the byte carries nothing (the log is what is read)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Doorbell:
    """A worker's ends: the one its siblings ring (`own`), and theirs (`siblings`)."""

    own: int
    siblings: tuple[int, ...]

    @classmethod
    def pipes(cls, workers: int) -> list[Doorbell]:
        """One pipe to each of `workers` (opened before they fork); never blocking: a full pipe
        already holds a ring its worker has not read."""
        pairs = [os.pipe() for _ in range(workers)]
        for read, write in pairs:
            os.set_blocking(read, False)
            os.set_blocking(write, False)
        return [
            cls(own=read, siblings=tuple(w for j, (_, w) in enumerate(pairs) if j != i))
            for i, (read, _) in enumerate(pairs)
        ]

    def fds(self) -> tuple[int, ...]:
        return (self.own, *self.siblings)

    def ring(self) -> None:
        """Tells every sibling the log has new changes (any thread)."""
        for fd in self.siblings:
            # Full: a ring is already waiting to be read. Broken: that worker is gone (and with
            # it, soon, the server).
            with contextlib.suppress(BlockingIOError, BrokenPipeError):
                os.write(fd, b"\0")

    def listen(self, loop: asyncio.AbstractEventLoop, rung: Callable[[], None]) -> None:
        """Calls `rung` on the loop whenever a sibling rang (several rings read at once are one)."""

        def drain() -> None:
            with contextlib.suppress(BlockingIOError):
                while os.read(self.own, 4096):
                    pass
                # No sibling left to ring (the server is ending): an ended pipe reads as ready for ever.
                loop.remove_reader(self.own)
            rung()

        loop.add_reader(self.own, drain)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self.own)
