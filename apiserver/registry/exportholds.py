"""The history the EventExports still need (issue 25): the storage keeps every change after the
lowest position of an export that is not further behind than its `maxLag`, so an exporter that was
down resumes exactly where it stopped; an export further behind is released (logged once), its
exporter then meets 410 and lists anew, reporting the gap.

How far behind a position is, is measured in time: the server samples its current revision every
few seconds, and a position's age is the time since the store first stood at or past it. Samples
live in memory: after a restart, a position older than the first sample is dated by the restart
(kept up to one maxLag longer, never released early: an export that selects few Events moves its
position by bookmarks, so its last acknowledged batch may be far older than its position).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time

from apiserver.machinery import fastjson
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import DEFAULT_MAX_LAG
from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import Storage, StorageError

log = logging.getLogger(__name__)
SAMPLE_INTERVAL = 5.0
MAX_SAMPLES = 200_000  # about eleven days at one sample each 5 s


class RevisionClock:
    """When the store was first seen at or past each revision (wall-clock seconds)."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._revisions: list[int] = []

    def record(self, now: float, revision: int) -> None:
        if not self._revisions or revision > self._revisions[-1]:
            self._times.append(now)
            self._revisions.append(revision)
        if len(self._times) > MAX_SAMPLES:  # the oldest half goes (bisect needs lists, not deques)
            del self._times[: MAX_SAMPLES // 2], self._revisions[: MAX_SAMPLES // 2]

    def reached(self, revision: int) -> float | None:
        """When the store first stood at or past `revision`; None when that was before the first
        sample (or it has not yet)."""
        if not self._revisions or revision < self._revisions[0]:
            return None
        index = bisect.bisect_left(self._revisions, revision)
        return self._times[index] if index < len(self._times) else None

    @property
    def first(self) -> tuple[float, int] | None:
        """The first sample: its time and revision."""
        return (self._times[0], self._revisions[0]) if self._times else None


def position_age(export: JSON, clock: RevisionClock, now: float) -> float:
    """Seconds since the store moved past the export's position (0 when it has not)."""
    status = export.get("status") or {}
    position = int(status.get("position") or 0)
    reached = clock.reached(position + 1)
    first = clock.first
    if reached is None and first is not None and position + 1 < first[1]:
        reached = first[0]  # before the samples: dated by the first, never older
    return max(now - reached, 0.0) if reached is not None else 0.0


class ExportHolds:
    """Sets `hold` from the EventExports stored under `root`, every `interval` seconds: at most
    half the compaction interval, so a new export's first position is held before a compaction
    (which reaches the revision seen one interval earlier) can pass it."""

    def __init__(
        self, storage: Storage, root: str, hold: HistoryHold, compaction_interval: float = 0.0
    ) -> None:
        self.storage = storage
        self.root = root
        self.hold = hold
        self.interval = (
            min(SAMPLE_INTERVAL, compaction_interval / 2) if compaction_interval > 0 else SAMPLE_INTERVAL
        )
        self.clock = RevisionClock()
        self._released: set[tuple[str, int]] = set()

    async def run(self) -> None:
        """Refreshes for ever: a failure keeps the last hold (it holds more, never less)."""
        while True:
            await asyncio.sleep(self.interval)
            await self.refresh_logged()

    async def refresh_logged(self) -> None:
        try:
            await self.refresh(time.time())
        except StorageError as exc:
            log.warning("cannot read the EventExports' positions: %s", exc)
        except Exception:  # a malformed export must not stop the refreshes and freeze the hold
            log.exception("reading the EventExports' positions failed")

    async def refresh(self, now: float) -> None:
        current = await self.storage.current_revision()
        self.clock.record(now, current)
        exports = await self._exports()
        held = [position for export in exports if (position := self._held_position(export, now, current))]
        self.hold.revision = min(held, default=0)

    async def _exports(self) -> list[JSON]:
        listed = await self.storage.list(self.root, counted=False)
        exports = []
        for kv in listed.items:
            try:
                obj = fastjson.loads(kv.value)
            except ValueError:
                continue
            if isinstance(obj, dict):
                exports.append(obj)
        return exports

    def _held_position(self, export: JSON, now: float, current: int) -> int:
        """The export's position, or 0 when it holds nothing (no position yet, or past its maxLag
        or its maxLagRevisions, `current` being the store's revision)."""
        meta = export.get("metadata") or {}
        try:
            position = int((export.get("status") or {}).get("position") or 0)
        except ValueError:
            position = 0
        if not position or meta.get("deletionTimestamp"):
            return 0
        behind = self._past_bound(export, position, now, current)
        if behind is None:
            return position
        released = (str(meta.get("uid", "")), position)
        if released not in self._released:
            self._released.add(released)
            log.warning(
                "EventExport %s/%s is %s: the history after its position %d is no longer kept",
                meta.get("namespace"),
                meta.get("name"),
                behind,
                position,
            )
        return 0

    def _past_bound(self, export: JSON, position: int, now: float, current: int) -> str | None:
        """How far behind the export is, when that is past one of its bounds."""
        spec = export.get("spec") or {}
        try:
            max_lag = parse_go_duration(spec.get("maxLag") or DEFAULT_MAX_LAG)
        except ValueError:
            max_lag = parse_go_duration(DEFAULT_MAX_LAG)
        age = position_age(export, self.clock, now)
        if age > max_lag:
            return f"{age:.0f}s behind, past its maxLag of {spec.get('maxLag') or DEFAULT_MAX_LAG}"
        revisions = spec.get("maxLagRevisions") or 0
        if isinstance(revisions, int) and revisions and current - position > revisions:
            return f"{current - position} revisions behind, past its maxLagRevisions of {revisions}"
        return None
