"""The audit's counters, in kube-apiserver's names: every event handed to the backends
(`apiserver_audit_event_total`), and the events a backend failed to deliver, by the part that
failed (`apiserver_audit_error_total{plugin}`: `webhook`, `buffered` for a full buffer, `truncate`
for an event too large), and the requests refused for an event a blocking-strict webhook could not
take (`apiserver_audit_requests_rejected_total`). Process-wide, as the backend is; the server's
registry adds them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import Counter
from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)


class AuditMetrics:
    """The two counters, unregistered: a server's registry collects them (`collect`)."""

    def __init__(self) -> None:
        self.events = Counter(
            "apiserver_audit_event",
            "Counter of audit events generated and sent to the audit backend.",
            registry=None,
        )
        self.errors = Counter(
            "apiserver_audit_error",
            "Counter of audit events that failed to be audited properly."
            " Plugin identifies the plugin affected by the error.",
            ["plugin"],
            registry=None,
        )
        self.rejected = Counter(
            "apiserver_audit_requests_rejected",
            "Counter of apiserver requests rejected due to an error in audit logging backend.",
            registry=None,
        )

    def collect(self) -> Iterator[Metric]:
        yield from self.events.collect()
        yield from self.errors.collect()
        yield from self.rejected.collect()

    def failed(self, plugin: str, count: int, reason: str, audit_ids: list[str]) -> None:
        """`count` events lost in `plugin`: counted, and logged as upstream's HandlePluginError."""
        self.errors.labels(plugin).inc(count)
        shown = ", ".join(audit_ids[:10]) + (", ..." if len(audit_ids) > 10 else "")
        log.error(
            "Error in audit plugin '%s' affecting %d audit events: %s (auditIDs: %s)",
            plugin,
            count,
            reason,
            shown,
        )


METRICS = AuditMetrics()
