"""Handing memory freed in the middle of the heap back to the system.

CPython takes objects larger than 512 bytes (most stored values) from the C library's malloc, which
gives freed memory back to the system only from the top of its heap. When a watch cache packs the
values it holds, the whole ones it frees lie all through the heap, and the process would keep their
pages: glibc's malloc_trim hands them back. Elsewhere (musl, macOS) there is no such call and this
does nothing. No library wraps it: it is one call through ctypes.
"""

from __future__ import annotations

import ctypes
import functools
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
