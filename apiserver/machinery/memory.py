"""Handing memory freed in the middle of the heap back to the system; the cyclic collector's pace.

CPython takes objects larger than 512 bytes (most stored values) from the C library's malloc, which
gives freed memory back to the system only from the top of its heap. When a watch cache packs the
values it holds, the whole ones it frees lie all through the heap, and the process would keep their
pages: glibc's malloc_trim hands them back. Elsewhere (musl, macOS) there is no such call and this
does nothing. No library wraps it: it is one call through ctypes.
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


def release_free_memory() -> bool:
    """Hands the pages malloc holds free back to the system; False where that cannot be done."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


# The cyclic collector's thresholds: a young collection every 50,000 allocations net, not 700. A
# create allocates a few thousand objects, so Python's default ran several young collections a
# request and, more often than needed, an older one that walks the watch cache's objects too.
# Measured with two workers at 16 connections: 3-7% less CPU a create, its p99 lower (issue 24).
# What requests leave in cycles (a few MB at most) waits longer before it is freed. (The numbers
# are CPython 3.11-3.13's generations; the older collections also wait for a quarter of the
# long-lived objects to be new, so they are rarer than the thresholds alone say.)
COLLECTOR_THRESHOLDS = (50_000, 20, 20)


def collect_less_often() -> None:
    """Sets the cyclic collector's thresholds to COLLECTOR_THRESHOLDS (a server process's)."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
