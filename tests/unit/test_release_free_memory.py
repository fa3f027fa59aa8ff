"""machinery/memory.py: pages freed in the middle of the heap go back to the system (on glibc, which
this machine runs), as they must after a watch cache packs the whole values it held."""

from __future__ import annotations

import os
from pathlib import Path

from apiserver.machinery.memory import release_free_memory


def _resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_values_freed_between_survivors_are_handed_back() -> None:
    # As a cache's whole values: 1.7 KB each (malloc's, not Python's small-object allocator), with
    # smaller objects that outlive them allocated in between.
    values = [os.urandom(1700) for _ in range(40_000)]
    survivors = [str(index) * 5 for index in range(0, 40_000, 2)]
    release_free_memory()
    held = _resident_mib()
    values.clear()
    assert release_free_memory()
    assert _resident_mib() < held - 40, "freed pages stayed resident"
    assert len(survivors) == 20_000
