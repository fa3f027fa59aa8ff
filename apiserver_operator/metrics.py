"""The operator's Prometheus metrics, in a registry of its own.

A registry of its own rather than prometheus_client's global one: the operator runs in the same
process as tests (and kopf's own code), and a private registry keeps what it exposes to exactly
these series and lets tests read them without another library's metrics in the way.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)

# prometheus_client appends `_total` to counter names: these expose as `..._total`.
EVENTS_DELETED = Counter(
    "coreio_operator_events_deleted",
    "Events deleted by the retention garbage collection, by the rule that selected them.",
    ["rule"],
    registry=REGISTRY,
)
EVENTS_SKIPPED = Counter(
    "coreio_operator_events_skipped",
    "Events selected for deletion that had changed (or were gone) by the time of their delete.",
    registry=REGISTRY,
)
EVENT_DELETE_ERRORS = Counter(
    "coreio_operator_event_delete_errors",
    "Deletes of selected Events that failed for another reason than a change or a disappearance.",
    registry=REGISTRY,
)
EVENT_GC_RUNS = Counter(
    "coreio_operator_event_gc_runs",
    "Runs of the Event retention garbage collection, by result (success or error).",
    ["result"],
    registry=REGISTRY,
)
EVENT_GC_DURATION = Histogram(
    "coreio_operator_event_gc_duration_seconds",
    "How long one Event garbage-collection run took, listing and deleting.",
    # A run lists every Event of the cluster: from well under a second to minutes for large ones.
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
RECONCILE = Counter(
    "coreio_operator_reconcile",
    "Reconciliations of Installations, by result (success, error, or refused for a spec it cannot apply).",
    ["result"],
    registry=REGISTRY,
)
CERTIFICATE_EXPIRATION = Gauge(
    "coreio_operator_certificate_expiration_timestamp_seconds",
    "When each Installation's CA and serving certificate expire (Unix time), as last written;"
    " alert on `- time()`: it keeps falling if the operator stops renewing.",
    ["installation", "certificate"],
    registry=REGISTRY,
)
# The same counter under the name the handlers know it by.
RECONCILE_TOTAL = RECONCILE

# Every label value known up front, so that a series reads 0 before its first increment instead of
# being absent (rate() and alerts on absent series behave badly).
for _rule in ("age", "count"):
    EVENTS_DELETED.labels(rule=_rule)
for _result in ("success", "error"):
    EVENT_GC_RUNS.labels(result=_result)
for _result in ("success", "error", "refused"):
    RECONCILE.labels(result=_result)


def exposition() -> bytes:
    """The registry in Prometheus' text format, for a /metrics endpoint."""
    return generate_latest(REGISTRY)
