"""When a watch that asked for progress reports it, and which revision (the PROGRESS events the
watch cache and bookmarks rely on)."""

from __future__ import annotations

# etcd before 3.5.8 answers a progress request out of band with the watched events, so an event
# older than the reported revision may still be in flight behind it: hold the report this long for
# stragglers.
_PROGRESS_GRACE = 0.05
# Later releases answer in band, but only for a watch that is synced and (3.5.22+, 3.6.2+) whose
# start revision exists: a watch from the current revision hears nothing until the next write
# anywhere in etcd. How long an answer is waited for before the watch reports its own progress.
_PROGRESS_ANSWER_WAIT = 1.0


class Progress:
    """When a watch that asked for progress reports one, and which revision.

    An idle watch asks etcd (`timed_out` returns None: the caller sends a progress request) every
    `interval`. etcd's answer is held for _PROGRESS_GRACE, in case an older event is still on its
    way (etcd before 3.5.8 answers out of band), and reported then or just before the first newer
    event. When etcd leaves the request unanswered for _PROGRESS_ANSWER_WAIT (3.5.8 and later answer
    only a synced watch, 3.5.22 and 3.6.2 and later only once its start revision exists), the watch
    reports the revision it has delivered every change up to: etcd sends a revision's events
    together and in order, so none at or below it can follow.
    """

    def __init__(self, after_revision: int, interval: float | None) -> None:
        self.last = after_revision  # every change up to this revision has been delivered
        self.interval = interval  # None: no progress asked for
        self.held: int | None = None  # a revision etcd reported, waiting out _PROGRESS_GRACE
        self.asked = False  # a progress request is out, unanswered
        self.created = False  # etcd confirmed the current stream's watch

    def reopened(self) -> None:
        """The watch goes on in a new stream: what the old one had pending is dropped (a held
        report may have been ahead of changes that stream never delivered)."""
        self.held, self.asked, self.created = None, False, False

    def established(self) -> int | None:
        """etcd confirmed the stream's watch: the revision to report at once (everything up to the
        one the watch goes on from has been delivered), or None when no progress was asked for.
        A watch cache is ready from this report on: waiting for etcd's first progress answer would
        cost it two intervals, as etcd does not answer until the watch's start revision exists."""
        self.created = True
        return self.last if self.interval is not None else None

    def wait(self) -> float | None:
        """How long to wait for etcd before `timed_out` (None: for ever)."""
        if self.held is not None:
            return _PROGRESS_GRACE
        if self.interval is None:
            return None
        return min(self.interval, _PROGRESS_ANSWER_WAIT) if self.asked else self.interval

    def timed_out(self) -> int | None:
        """Nothing came in time: the revision to report now, or None to ask etcd for one."""
        if self.held is not None:
            self.last, self.held = max(self.last, self.held), None
            return self.last
        if self.asked:
            self.asked = False
            return self.last
        self.asked = True
        return None

    def reported(self, revision: int) -> None:
        """etcd reported progress (an answer, or its periodic notification)."""
        if self.interval is not None:
            self.held = max(self.held or 0, revision)
            self.asked = False

    def delivering(self, revision: int) -> int | None:
        """An event at `revision` is delivered next: the held report to yield before it, if older."""
        self.asked = False
        report = None
        if self.held is not None and revision > self.held:
            self.last, self.held = max(self.last, self.held), None
            report = self.last
        self.last = max(self.last, revision)
        return report
