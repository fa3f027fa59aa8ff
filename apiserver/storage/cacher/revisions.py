"""The backend's current revision, one read shared by every caller that asks while the previous one
is under way: what each caller learns is at least as new as its own request, since it joins only a
read that starts after it asked (a linearizable read, as etcd's would be, for many callers at the
price of one)."""

from __future__ import annotations

import asyncio

from apiserver.machinery import tasks
from apiserver.storage.interface import Storage


class SharedRevisionReads:
    """`current()` is `backend.current_revision()`, with concurrent callers sharing reads."""

    def __init__(self, backend: Storage) -> None:
        self.backend = backend
        self._next: asyncio.Future[int] | None = None  # the read the next callers wait for
        self._reader: asyncio.Task[None] | None = None

    async def current(self) -> int:
        # Shielded: a caller that gives up does not cancel the read the others wait for.
        return await asyncio.shield(self.ask())

    def ask(self) -> asyncio.Future[int]:
        """The revision of the next read to start, asked for now and awaited later (shielded, as
        `current` awaits it): the read starts at the next turns of the loop."""
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            # Read once unwaited, an error is not reported as "never retrieved".
            self._next.add_done_callback(_retrieve)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_while_asked())
        return self._next

    async def close(self) -> None:
        """Stops reading; a caller still waiting gets CancelledError rather than waiting forever."""
        if self._next is not None:
            self._next.cancel()
            self._next = None
        await tasks.stop(self._reader)

    async def _read_while_asked(self) -> None:
        """Reads the revision for the callers waiting, then again for those who came meanwhile."""
        while self._next is not None:
            waited, self._next = self._next, None
            try:
                waited.set_result(await self.backend.current_revision())
            except asyncio.CancelledError:
                waited.cancel()
                raise
            except Exception as exc:  # every error belongs to the callers
                waited.set_exception(exc)


def _retrieve(future: asyncio.Future[int]) -> None:
    if not future.cancelled():
        future.exception()
