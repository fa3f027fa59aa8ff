"""`coreio_events_written_total`: the Events this server stored, by type, reason and namespace, so
that an alert on a storm of Warnings needs no exporter at all.

Each write that stores an Event counts once, as it is acknowledged: a create, and an update, patch
or apply that stored a new version (a recorder reports a repeated occurrence by updating the
Event's series), never a dry run, an unchanged write or a deletion. The count is the server's own:
each worker (and each replica) counts the writes it acknowledges, and a sum over them is the total.

Reasons and namespaces are free text to the metric: each worker keeps the first `max_reasons`
reasons and `max_namespaces` namespaces it meets under their own names and counts every later one
as `other` (as would be a namespace or reason named `other`), so that a flood of made-up reasons
cannot flood Prometheus. A type other than Normal or Warning is `other` too.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from apiserver.machinery.series import Series
from apiserver.machinery.types import JSON

OTHER = "other"
TYPES = frozenset({"Normal", "Warning"})
# The label values each worker keeps by default, before counting the rest as OTHER.
MAX_REASONS = 100
MAX_NAMESPACES = 100


class CappedValues:
    """Label values as they are for the first `limit` distinct ones met, OTHER for any later one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._kept:
            return value
        if len(self._kept) < self.limit:
            self._kept.add(value)
            return value
        return OTHER


class EventsWritten:
    """The counter, and the caps on its reasons and namespaces."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        max_reasons: int = MAX_REASONS,
        max_namespaces: int = MAX_NAMESPACES,
    ) -> None:
        self.counter = Counter(
            "coreio_events_written",
            "Events stored by this server (creates, and updates that stored a new version), by type,"
            " reason and namespace; reasons and namespaces beyond the first met are counted as other.",
            ("type", "reason", "namespace"),
            registry=registry,
        )
        self._series = Series(self.counter)
        self._reasons = CappedValues(max_reasons)
        self._namespaces = CappedValues(max_namespaces)

    def stored(self, event: JSON) -> None:
        """Counts `event`, as stored."""
        kind = event.get("type")
        metadata = event.get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
        self._series(
            kind if isinstance(kind, str) and kind in TYPES else OTHER,
            self._reasons(str(event.get("reason") or "")),
            self._namespaces(str(namespace or "")),
        ).inc()
