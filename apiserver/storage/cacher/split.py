"""A watch cache's first list of a large resource, read as two key ranges at once (issue 24).

etcd answers one Range on one core, and a list can ask for its next page only once the page before
has named its last key: a page of 10,000 Events (19 MB) keeps etcd busy about 50 ms while its other
core idles. Two ranges read at once keep both busy (130,000 Events listed in 0.64 s against 0.92 s,
measured on 2 cores). The key that halves what is left after the first page is found by bisection
over the keys' code points, with reads of one key that also count the keys after it (etcd counts a
range in its in-memory index, without reading the values: a millisecond on an empty range, 20 ms on
130,000 keys). The pages come as they are read, from either range, so not in key order (the cache
sorts its keys once the last is in); each range reads at most AHEAD pages before they are taken,
so the list holds no more than a few pages beyond what the cache has taken in. Only the last page
says no more follow.

A backend that counts the keys past a page only when asked (SQLite, whose list is a local read
anyway) reports none remaining here, and is read as one range."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncGenerator

from apiserver.storage.interface import ListResult, Storage

# The keys left after the first page below which one range is read: splitting costs a few count
# reads, worth it only once several pages remain.
SPLIT_AT = 40_000
# The count reads spent looking for the middle, at most (keys that share a long prefix need about
# seven for each code point of it).
PROBES = 64
# The pages read but not yet taken, at most, of both ranges together.
AHEAD = 2
# Code points above this are counted as it when the middle is reckoned (keys are mostly ASCII: a
# namespace and a name); the counts themselves are exact whatever a key holds.
TOP = 0x7F

# The pages of both ranges as they are read; an exception that ended one; None when one is done.
_Pages = asyncio.Queue[ListResult | Exception | None]


async def pages(
    storage: Storage, root: str, size: int, *, split_at: int | None = None
) -> AsyncGenerator[ListResult, None]:
    """The keys under `root` in pages of `size`, all at the first page's revision, each once, in
    no set order; every page but the last says `more`. Split from `split_at` keys past the first
    page (None: SPLIT_AT)."""
    first = await storage.list(root, limit=size, counted=False)
    if not (first.more and first.items):
        yield first
        return
    start = first.items[-1].key + "\x00"
    middle = None
    if first.remaining >= (SPLIT_AT if split_at is None else split_at):
        middle = await _middle(storage, root, start, first.remaining, first.revision)
    queue: _Pages = asyncio.Queue(AHEAD)
    ranges = [(start, middle)] if middle is None else [(start, middle), (middle, None)]
    readers = [
        asyncio.create_task(_read(_range(storage, root, low, high, first.revision, size), queue))
        for low, high in ranges
    ]
    try:
        held, running = first, len(readers)
        while running:
            item = await queue.get()
            if item is None:
                running -= 1
            elif isinstance(item, Exception):
                raise item
            elif item.items:
                yield dataclasses.replace(held, more=True)
                held = item
        yield dataclasses.replace(held, more=False, remaining=0)
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)


async def _read(listed: AsyncGenerator[ListResult, None], queue: _Pages) -> None:
    """A range's pages put on `queue` as they are read (waiting while it is full), then None; or
    the exception that ended the range, for the taker to raise where the list was asked for."""
    try:
        async with contextlib.aclosing(listed) as pages:
            async for page in pages:
                await queue.put(page)
    except Exception as error:
        await queue.put(error)
    else:
        await queue.put(None)


async def _range(
    storage: Storage, root: str, start: str, end: str | None, revision: int, size: int
) -> AsyncGenerator[ListResult, None]:
    """The pages of [start, end) under `root` at `revision`."""
    while True:
        page = await storage.list(root, start=start, end=end, limit=size, revision=revision, counted=False)
        yield page
        if not (page.more and page.items):
            return
        start = page.items[-1].key + "\x00"


async def _middle(storage: Storage, root: str, low: str, total: int, revision: int) -> str | None:
    """A key with between a quarter and three quarters of the `total` keys from `low` on at or
    after it; None when none was found within PROBES count reads."""
    high = root + chr(TOP + 1)
    for _ in range(PROBES):
        middle = between(low, high)
        if middle is None:
            return None
        page = await storage.list(root, start=middle, limit=1, revision=revision, counted=True)
        above = len(page.items) + page.remaining
        if above * 4 < total:
            high = middle
        elif above * 4 > total * 3:
            low = middle
        else:
            return middle
    return None


def between(low: str, high: str) -> str | None:
    """A string strictly between `low` and `high` (low < high), about halfway in code points (each
    clamped to TOP) past their common prefix; None when the clamping leaves no room."""
    common = len(_common_prefix(low, high))
    for width in range(common + 1, common + 8):
        a, b = _number(low, width), _number(high, width)
        if b - a >= 2:
            middle = _string((a + b) // 2, width).rstrip("\x00")
            return middle if low < middle < high else None
    return None


def _common_prefix(a: str, b: str) -> str:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return a[:size]


def _number(key: str, width: int) -> int:
    """The first `width` code points of `key` (padded with 0, each clamped to TOP) in base TOP+1."""
    value = 0
    for index in range(width):
        value = value * (TOP + 1) + (min(ord(key[index]), TOP) if index < len(key) else 0)
    return value


def _string(value: int, width: int) -> str:
    digits = []
    for _ in range(width):
        value, digit = divmod(value, TOP + 1)
        digits.append(chr(digit))
    return "".join(reversed(digits))
