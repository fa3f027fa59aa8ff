"""coreio_events_written_total's labels (apiserver/http/eventmetrics.py): the type, reason and
namespace of each Event counted, reasons and namespaces beyond the caps counted as `other`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from apiserver.http.eventmetrics import OTHER, CappedValues, EventsWritten
from apiserver.http.metrics import ServerMetrics
from apiserver.machinery.types import JSON
from apiserver.resources import KINDS
from apiserver.resources.event import EventKind
from apiserver.resources.rolebinding import RoleBindingKind

NAME = "coreio_events_written_total"


def event(namespace: str, reason: str, kind: object = "Warning") -> JSON:
    return {"metadata": {"name": "e", "namespace": namespace}, "type": kind, "reason": reason}


def count(registry: CollectorRegistry, kind: str, reason: str, namespace: str) -> float:
    labels = {"type": kind, "reason": reason, "namespace": namespace}
    return registry.get_sample_value(NAME, labels) or 0.0


def test_the_first_values_are_kept_and_every_later_one_is_other() -> None:
    capped = CappedValues(2)
    assert [capped(v) for v in ("a", "b", "c", "a", "b", "d")] == ["a", "b", OTHER, "a", "b", OTHER]
    assert [CappedValues(0)(v) for v in ("a", "b")] == [OTHER, OTHER]


def test_events_are_counted_by_type_reason_and_namespace_under_the_caps() -> None:
    registry = CollectorRegistry()
    written = EventsWritten(registry, max_reasons=2, max_namespaces=1)
    for _ in range(3):
        written.stored(event("team-a", "BackOff"))
    written.stored(event("team-a", "Pulled", "Normal"))
    written.stored(event("team-a", "FailedMount"))  # a third reason
    written.stored(event("team-b", "BackOff"))  # a second namespace
    written.stored(event("team-a", "BackOff", kind="Bogus"))
    written.stored(event("team-a", "BackOff", kind=None))
    assert count(registry, "Warning", "BackOff", "team-a") == 3
    assert count(registry, "Normal", "Pulled", "team-a") == 1
    assert count(registry, "Warning", OTHER, "team-a") == 1
    assert count(registry, "Warning", "BackOff", OTHER) == 1
    assert count(registry, OTHER, "BackOff", "team-a") == 2
    samples = [s for metric in registry.collect() for s in metric.samples if s.name == NAME]
    assert sum(s.value for s in samples) == 8


def test_only_events_are_counted_by_the_server_metrics() -> None:
    metrics = ServerMetrics(KINDS, max_event_reasons=5, max_event_namespaces=5)
    metrics.stored(RoleBindingKind(), event("team-a", "BackOff"))
    assert count(metrics.registry, "Warning", "BackOff", "team-a") == 0
    metrics.stored(EventKind(), event("team-a", "BackOff"))
    assert count(metrics.registry, "Warning", "BackOff", "team-a") == 1
    assert b"# TYPE coreio_events_written_total counter" in metrics.exposition()
