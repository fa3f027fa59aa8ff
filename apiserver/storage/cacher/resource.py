"""The watch cache of one resource, as kube-apiserver's cacher: one storage watch feeds the objects
in memory and a window of recent changes; lists are answered and watches served from them.

Until it has listed the storage and started its watch (and again after that watch fails), the cache
is not ready and the caller reads the storage itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from apiserver.machinery import tasks
from apiserver.machinery.memory import release_free_memory
from apiserver.machinery.tasks import BackgroundTasks
from apiserver.storage.broadcaster import Broadcaster, follow
from apiserver.storage.cacher import split
from apiserver.storage.cacher.handoff import HandoffEnded, PageFeed, PageTee, while_listing
from apiserver.storage.cacher.packing import Codec, Packer
from apiserver.storage.cacher.state import SortedState, Window
from apiserver.storage.interface import (
    CompactedError,
    EventType,
    KeyValue,
    ListResult,
    Storage,
    StorageError,
    StorageUnavailableError,
    WatchEvent,
    WatchOverflowError,
)

log = logging.getLogger(__name__)

# How often the cache's own storage watch reports progress while idle: a consistent read waits for
# the cache to reach the storage's revision, at most about this long when nothing changes here.
FRESHNESS_INTERVAL = 0.1
# How long a consistent read waits for the cache before it reads the storage instead (upstream 3 s).
FRESHNESS_TIMEOUT = 3.0
# How long the cache waits before it lists and watches the storage again after its watch failed.
RESTART_DELAY = 0.5
LIST_PAGE = 10_000
# How many objects of a page the cache takes in between two turns of the event loop while it lists:
# the next page arrives meanwhile (about 1 ms of work).
TAKE_IN_CHUNK = 1_000
# How many values are packed again between two turns of the event loop after a codec is trained:
# about 4 ms of work.
REPACK_CHUNK = 1_000
# The objects of a page the first worker hands on to the others once ready (handoff.py): about 1 ms
# of pickling, between two requests it serves.
HAND_ON_PAGE = 1_000


class ResourceCache:
    """The objects under `root`, at `revision`, and their latest `window_size` changes."""

    def __init__(
        self,
        storage: Storage,
        root: str,
        *,
        window_size: int,
        watch_buffer: int,
        current_revision: Callable[[], Awaitable[int]] | None = None,
        handoff: PageTee | PageFeed | None = None,
    ) -> None:
        self.storage = storage
        # Where the first fill's pages go (the first worker) or come from (the others).
        self._handoff = handoff
        # How a consistent read learns the storage's current revision (shared reads, say).
        self._current_revision = current_revision or storage.current_revision
        self.root = root
        self.packer = Packer()
        self.state = SortedState(self.packer)
        self.window = Window(window_size)
        self.revision = 0
        self.filled = asyncio.Event()  # set while the cache is ready
        self._broadcaster = Broadcaster(watch_buffer)
        self._advanced = asyncio.Event()
        self._tasks = BackgroundTasks()  # the one storage watch feeding the cache
        self._training: asyncio.Task[None] | None = None
        # The first fill, to be handed on to the other workers once this cache is ready.
        self._hand_on: _HandOn | None = None
        # Counts the ends of the cache's storage watch (a restart, the close): a watch that left
        # the broadcaster to catch up, and so was not failed with the others, learns of them here.
        self._ended = 0

    async def start(self) -> None:
        self._tasks.start(self._run(), name=f"watch-cache {self.root}")

    async def close(self) -> None:
        await self._tasks.stop()
        await tasks.stop(self._training)
        self._hand_on_failed()
        self._ended += 1
        self._broadcaster.fail_all(StorageUnavailableError("storage closed"))

    @property
    def ready(self) -> bool:
        return self.filled.is_set()

    @property
    def watchers(self) -> int:
        return len(self._broadcaster)

    # -- reads -------------------------------------------------------------------------------------

    async def fresh(self) -> bool:
        """Waits until the cache has caught up with the storage's current revision; False when it
        is not ready or did not catch up within FRESHNESS_TIMEOUT."""
        if not self.ready:
            return False
        target = await self._current_revision()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FRESHNESS_TIMEOUT):
                while self.ready and self.revision < target:
                    self._advanced.clear()
                    await self._advanced.wait()
        return self.ready and self.revision >= target

    def page(self, prefix: str, start: str | None, limit: int) -> ListResult:
        return self.state.page(prefix, start, limit, self.revision)

    async def watch(
        self, prefix: str, after_revision: int, progress: float | None
    ) -> AsyncGenerator[WatchEvent, None]:
        """The changes under `prefix` after `after_revision`: those the window holds, then the live
        ones. A watch from before the window ends with CompactedError, upstream's "too old" 410.
        A watch whose client falls behind its inbox catches up from the window, which every watch
        shares, rather than ending: it ends (410) only once it has fallen behind the window too, and
        as the others did (StorageUnavailableError) when the cache restarted or closed meanwhile:
        the window then no longer follows on from what it sent."""
        last, ended = after_revision, self._ended
        while True:
            if self._ended != ended:
                raise StorageUnavailableError(f"the watch cache of {self.root} restarts")
            if last < self.window.start:
                # As the storage reports it: the revision asked for, and the oldest one still held.
                raise CompactedError(last, self.window.start + 1)
            try:
                async with contextlib.aclosing(self._watch_from(prefix, last, progress)) as events:
                    async for event in events:
                        yield event
                        if event.type is not EventType.PROGRESS:
                            last = event.revision
            except WatchOverflowError:
                continue  # the inbox was emptied; what it held is in the window (or the watch ends)

    async def _watch_from(
        self, prefix: str, last: int, progress: float | None
    ) -> AsyncGenerator[WatchEvent, None]:
        # Subscribed before the window is read, with no await between: every change is in one or
        # both, and the revision check in `follow` drops the doubles.
        subscriber = self._broadcaster.subscribe(prefix)
        try:
            for event in self.window.after(last, prefix):
                yield event
                last = event.revision
            if progress is not None:  # as the storage's watches: taken up, reported at once
                yield WatchEvent(EventType.PROGRESS, "", last)
            async with contextlib.aclosing(follow(subscriber, last, progress, self._newest)) as followed:
                async for event in followed:
                    yield event
        finally:
            self._broadcaster.unsubscribe(subscriber)

    def _newest(self) -> int:
        return self.revision

    # -- filling -----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self._fill()
            except StorageError as error:
                log.warning("watch cache of %s restarts: %s", self.root, error)
            self._hand_on_failed()
            self.filled.clear()
            self._ended += 1
            self._broadcaster.fail_all(StorageUnavailableError(f"the watch cache of {self.root} restarts"))
            self._advanced.set()
            await asyncio.sleep(RESTART_DELAY)

    async def _fill(self) -> None:
        """Lists the storage, then follows its watch until that fails."""
        state, revision = await self._list()
        self.state, self.revision = state, revision
        self.window.reset(revision)
        events = self.storage.watch(
            self.root, after_revision=revision, progress=True, progress_every=FRESHNESS_INTERVAL
        )
        async with contextlib.aclosing(events) as changes:
            async for event in changes:
                self._apply(event)
                if not self.ready:  # the watch has answered (at once, once taken up): established
                    self.filled.set()
                    log.info(
                        "watch cache of %s ready at revision %d (%d objects)", self.root, revision, len(state)
                    )
                    self._start_hand_on()
                self._pack_later()

    async def _list(self) -> tuple[SortedState, int]:
        """The objects under the root and the revision they were read at: the first time, as the
        first worker hands them on (handoff.py), else from the storage."""
        handoff, self._handoff = self._handoff, None
        if isinstance(handoff, PageFeed):
            try:
                return await self._take(handoff)
            except HandoffEnded as ended:
                log.info("watch cache of %s lists the storage itself: %s", self.root, ended)
        tee = handoff if isinstance(handoff, PageTee) else None
        try:
            state, revision = await while_listing(tee, self.root, self._read())
        except BaseException:
            if tee is not None:
                tee.fail(self.root)
            raise
        if tee is not None:
            self._hand_on = _HandOn(tee, self.root, state.page(self.root, None, 0, revision).items, revision)
        return state, revision

    async def _take(self, feed: PageFeed) -> tuple[SortedState, int]:
        state, taken_at = SortedState(self.packer), 0
        async with contextlib.aclosing(feed.pages(self.root)) as pages:
            async for revision, items in pages:
                await _take_in(state, items)
                taken_at = revision
        state.sort()
        log.info("watch cache of %s takes the first worker's list at revision %d", self.root, taken_at)
        return state, taken_at

    async def _read(self) -> tuple[SortedState, int]:
        """Lists the storage a page at a time (split.py: in two key ranges at once, so not in key
        order)."""
        state, revision = SortedState(self.packer), 0
        async with contextlib.aclosing(split.pages(self.storage, self.root, LIST_PAGE)) as pages:
            async for page in pages:
                revision = page.revision
                await _take_in(state, page.items)
        state.sort()
        return state, revision

    def _start_hand_on(self) -> None:
        """The first fill on its way to the other workers, in the background, now that this cache is
        ready: they list nothing, and take no core from this worker's fill and the storage's list
        while this worker is not ready yet."""
        hand_on, self._hand_on = self._hand_on, None
        if hand_on is not None:
            self._tasks.start(hand_on.send(), name=f"watch-cache handoff {self.root}")

    def _hand_on_failed(self) -> None:
        """The cache restarts or closes before it was ready: the other workers list the storage."""
        hand_on, self._hand_on = self._hand_on, None
        if hand_on is not None:
            hand_on.tee.fail(self.root)

    def _apply(self, event: WatchEvent) -> None:
        if event.type is not EventType.PROGRESS:
            self.state.apply(event)
            self.window.add(event)
            self._broadcaster.publish([event])
        if event.revision > self.revision:
            self.revision = event.revision
            self._advanced.set()

    # -- packing -----------------------------------------------------------------------------------

    def _pack_later(self) -> None:
        """Trains a (new) codec and packs the values held with it, in the background, when the
        packer says it is time (and no training is under way)."""
        if (self._training is None or self._training.done()) and self.packer.due(len(self.state)):
            self._training = asyncio.create_task(self._train(), name=f"watch-cache packing {self.root}")

    async def _train(self) -> None:
        held = len(self.state)
        try:
            codec = await asyncio.to_thread(Codec.train, self.state.samples())
        except Exception as error:  # zstandard.ZstdError, mostly: too few or too alike to train on
            self.packer.untrainable(held)
            log.info("watch cache of %s keeps its %d values whole: %s", self.root, held, error)
            return
        self.packer.trained(codec)
        packed = 0
        state = None
        while state is not self.state:  # filled anew meanwhile: what was put before the training
            state = self.state
            keys = state.all_keys()
            for start in range(0, len(keys), REPACK_CHUNK):
                if state is not self.state:
                    break
                state.repack(keys[start : start + REPACK_CHUNK])
                await asyncio.sleep(0)
            packed = len(keys)
        await asyncio.to_thread(release_free_memory)
        log.info("watch cache of %s packed %d values with a new dictionary", self.root, packed)

    def compacted(self, revision: int) -> None:
        """The storage was compacted to `revision`: no watch starts before it any more."""
        self.window.trim(revision)


async def _take_in(state: SortedState, items: list[KeyValue]) -> None:
    """A page of the first fill taken into `state` (sorted once the last is in)."""
    for start in range(0, len(items), TAKE_IN_CHUNK):
        for kv in items[start : start + TAKE_IN_CHUNK]:
            state.take(kv)
        await asyncio.sleep(0)


@dataclass(frozen=True)
class _HandOn:
    """A cache's first fill as listed (its objects in key order, at `revision`), for `tee`."""

    tee: PageTee
    root: str
    items: list[KeyValue]
    revision: int

    async def send(self) -> None:
        """Every object sent on, HAND_ON_PAGE at a time (one empty page when there are none); then
        the memory they held, if this list was the last to hold them, handed back."""
        try:
            for start in range(0, max(1, len(self.items)), HAND_ON_PAGE):
                page = self.items[start : start + HAND_ON_PAGE]
                last = start + HAND_ON_PAGE >= len(self.items)
                await self.tee.send(self.root, self.revision, page, last=last)
                await asyncio.sleep(0)
        except BaseException:
            self.tee.fail(self.root)
            raise
        finally:
            # The values as listed, whole, which the cache has packed meanwhile: they were this
            # list's alone, and lie all through the heap (machinery/memory.py).
            self.items.clear()
        await asyncio.to_thread(release_free_memory)
