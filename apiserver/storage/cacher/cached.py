"""CachedStorage: the Storage protocol over a backend, with a watch cache for each resource root it
is given (kube-apiserver's cacher in front of etcd3). Writes, and reads outside those roots, go to
the backend.

- A list of the current state (revision 0) is answered from the cache once the cache has reached
  the backend's current revision (a consistent read from cache, as upstream's since 1.31); a list
  at a given revision (a continued paginated list) reads the backend, unless the cache is still at
  exactly that revision.
- A get is answered from the cache when the cache has already reached the backend's current
  revision, read after the get began: as linearizable as the backend's own read. That revision
  read is shared by every get (and consistent list) that asks while the previous one is under way,
  so many concurrent gets cost one backend round trip, not one each. When the cache lags (a write
  it has not yet seen), the backend answers, as upstream's GET without a resourceVersion reads etcd.
- A watch is served from the cache's window of recent changes: many watches, one backend watch. A
  watch from before the window ends at once with CompactedError, upstream's 410 "too old resource
  version": the client lists again (from the cache) and watches from there. Serving it from the
  backend instead would give every client resuming after a restart (when the window starts anew)
  a backend watch of its own for as long as its watch lasts, the cost the cache exists to save.
  A watch whose client falls more than its inbox holds behind catches up from the window (shared
  by every watch) rather than ending; it ends with CompactedError only once it has fallen behind
  the window too.
- A GET of one object may have its revision read started as its request arrives
  (`reading_ahead`, with a backend across the network: etcd), so that the request's own work
  (authentication, authorization, routing) runs while the read is on its way rather than before it.
- While a cache is not ready (starting, or restarting after its backend watch failed), or when it
  does not catch up within its freshness timeout, the backend answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from apiserver.storage.cacher.handoff import FirstFill, PageFeed, PageTee
from apiserver.storage.cacher.resource import ResourceCache
from apiserver.storage.cacher.revisions import SharedRevisionReads
from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import Compacting, KeyValue, ListResult, Storage, WatchEvent

WINDOW_SIZE = 10_000
WATCH_BUFFER = 1_000

# The revision read started as the request being handled arrived (`reading_ahead`), for its get.
_AHEAD: contextvars.ContextVar[asyncio.Future[int] | None] = contextvars.ContextVar(
    "coreio_read_ahead", default=None
)


class CachedStorage:
    """`backend` with a watch cache for each of `roots` (key prefixes ending in "/")."""

    def __init__(
        self,
        backend: Storage,
        roots: Sequence[str],
        *,
        window_size: int = WINDOW_SIZE,
        watch_buffer: int = WATCH_BUFFER,
        progress_interval: float = 5.0,
        hold: HistoryHold | None = None,
        first_fill: FirstFill | None = None,
        read_ahead: bool = False,
    ) -> None:
        self.backend = backend
        self.reads_ahead = read_ahead
        self.progress_interval = progress_interval
        self.hold = hold or HistoryHold()
        self._revisions = SharedRevisionReads(backend)
        self._handoff: PageTee | PageFeed | None = None
        if first_fill is not None and first_fill.send_to:
            self._handoff = PageTee(first_fill.send_to, roots)
        elif first_fill is not None and first_fill.take_from is not None:
            self._handoff = PageFeed(first_fill.take_from)
        self.caches = [
            ResourceCache(
                backend,
                root,
                window_size=window_size,
                watch_buffer=watch_buffer,
                current_revision=self._revisions.current,
                handoff=self._handoff,
            )
            for root in roots
        ]
        if isinstance(backend, Compacting):
            backend.compaction_listeners.append(self._compacted)

    async def start(self) -> None:
        await self.backend.start()
        await self.start_caches()

    async def start_caches(self) -> None:
        """Starts filling the caches (over a backend already started)."""
        if self._handoff is not None:
            await self._handoff.open()
        for cache in self.caches:
            await cache.start()

    async def wait_ready(self) -> None:
        """Waits until every cache is ready (bound it with asyncio.timeout)."""
        for cache in self.caches:
            await cache.filled.wait()

    @property
    def ready(self) -> bool:
        """Whether every cache has its initial list and its storage watch (the `Readiness` the
        server's `storage-readiness` check waits for); False again while one restarts."""
        return all(cache.ready for cache in self.caches)

    async def close(self) -> None:
        for cache in self.caches:
            await cache.close()
        if self._handoff is not None:
            await self._handoff.close()
        await self._revisions.close()
        await self.backend.close()

    @property
    def active_watches(self) -> int:
        return sum(cache.watchers for cache in self.caches)

    def _cache(self, key: str) -> ResourceCache | None:
        for cache in self.caches:
            if key.startswith(cache.root):
                return cache
        return None

    # -- reads -------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def reading_ahead(self) -> AsyncIterator[None]:
        """Within it, the first `get` waits for a revision read started on entering (it began after
        the request did, so the get stays linearizable), which two turns of the loop have sent on
        its way: in the first the reader's task calls the backend, in the second grpc's own task
        of the call sends it. GETs of one object at one connection on etcd: 1,080-1,099 a second
        against 889-939 without (the read is about half of a GET's time there)."""
        if not self.reads_ahead:
            yield
            return
        token = _AHEAD.set(self._revisions.ask())
        try:
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            yield
        finally:
            _AHEAD.reset(token)

    async def _current_revision(self) -> int:
        """The backend's revision, read after the request began: the read started ahead for it,
        once, or else one starting now."""
        ahead = _AHEAD.get()
        if ahead is None:
            return await self._revisions.current()
        _AHEAD.set(None)
        return await asyncio.shield(ahead)

    async def get(self, key: str) -> KeyValue | None:
        cache = self._cache(key)
        if cache is not None and cache.ready:
            target = await self._current_revision()
            if cache.ready and cache.revision >= target:
                return cache.state.get(key)
        return await self.backend.get(key)

    async def list(
        self,
        prefix: str,
        *,
        start: str | None = None,
        limit: int = 0,
        revision: int = 0,
        counted: bool = True,
        end: str | None = None,
    ) -> ListResult:
        cache = self._cache(prefix)
        if cache is not None and cache.ready and end is None:
            if revision and revision == cache.revision:
                return cache.page(prefix, start, limit)
            if not revision and await cache.fresh():
                return cache.page(prefix, start, limit)
        return await self.backend.list(
            prefix, start=start, limit=limit, revision=revision, counted=counted, end=end
        )

    def watch(
        self, prefix: str, *, after_revision: int, progress: bool = False, progress_every: float = 0.0
    ) -> AsyncGenerator[WatchEvent, None]:
        return self._watch(prefix, after_revision, progress, progress_every)

    async def _watch(
        self, prefix: str, after_revision: int, progress: bool, progress_every: float
    ) -> AsyncGenerator[WatchEvent, None]:
        cache = self._cache(prefix)
        source: AsyncGenerator[WatchEvent, None]
        # Checked as the watch starts, and followed by no await until the cache has subscribed it
        # (from before the window, CompactedError). From 0, all history: the backend's to replay;
        # so is a consumer's from before the window, when the history is held for it.
        if cache is not None and cache.ready and after_revision > 0 and not self._held(cache, after_revision):
            source = cache.watch(
                prefix, after_revision, (progress_every or self.progress_interval) if progress else None
            )
        else:
            source = self.backend.watch(
                prefix, after_revision=after_revision, progress=progress, progress_every=progress_every
            )
        async with contextlib.aclosing(source) as events:
            async for event in events:
                yield event

    def _held(self, cache: ResourceCache, after_revision: int) -> bool:
        return after_revision < cache.window.start and self.hold.covers(after_revision)

    # -- everything else: the backend's ------------------------------------------------------------

    async def create(self, key: str, value: bytes, *, ttl: int = 0) -> KeyValue:
        return await self.backend.create(key, value, ttl=ttl)

    async def update(self, key: str, value: bytes, *, expected_revision: int, ttl: int = 0) -> KeyValue:
        return await self.backend.update(key, value, expected_revision=expected_revision, ttl=ttl)

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        return await self.backend.delete(key, expected_revision=expected_revision)

    async def current_revision(self) -> int:
        return await self.backend.current_revision()

    async def compacted_revision(self) -> int:
        return await self.backend.compacted_revision()

    async def compact(self, revision: int) -> None:
        await self.backend.compact(revision)
        self._compacted(revision)

    def _compacted(self, revision: int) -> None:
        for cache in self.caches:
            cache.compacted(revision)
