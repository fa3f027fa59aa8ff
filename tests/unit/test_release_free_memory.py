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


def test_values_freed_between_survivors_stay_resident_until_handed_back() -> None:
    # As a cache's whole values (1.7 KB each, from malloc) among the small objects that outlive
    # them (keys, packed values: from Python's own allocator), with the heap's top kept in use:
    # free() alone hands nothing back.
    values, survivors = [], []
    for index in range(40_000):
        values.append(os.urandom(1700))
        survivors.append(f"/registry/events.core.io/events/ns/{index}")
    top = os.urandom(1700)
    release_free_memory()
    held = _resident_mib()
    values.clear()
    assert _resident_mib() > held - 10, "free() alone handed the pages back: nothing to test"
    assert release_free_memory()
    assert _resident_mib() < held - 40, "freed pages stayed resident"
    assert len(survivors) == 40_000 and len(top) == 1700
