"""The history a storage keeps for its consumers (issue 25): compaction never passes the position
of a consumer that has not read past it (as a database keeps a replication slot's log), and a
watch from such a position that the watch cache's window no longer holds is served by the storage
itself rather than ended with 410.

The storage knows nothing of who the consumers are: the registry sets `revision` from the
EventExports' positions (registry/exportholds.py); 0 holds nothing, the storage's own behaviour.
"""

from __future__ import annotations


class HistoryHold:
    """The oldest revision after which the history is kept (0: none)."""

    def __init__(self) -> None:
        self.revision = 0

    def compaction_target(self, revision: int) -> int:
        """How far a compaction meant to reach `revision` may go."""
        return min(revision, self.revision) if self.revision else revision

    def next_compaction(self, seen: int, done: int) -> int:
        """The revision to compact to, meant to reach `seen` with `done` reached already; 0 when
        there is nothing more to compact."""
        target = self.compaction_target(seen)
        return target if target > done else 0

    def covers(self, after_revision: int) -> bool:
        """Whether a watch from `after_revision` reads history this hold keeps."""
        return 0 < self.revision <= after_revision
