"""A metric's series kept by their label values (machinery/series.py): counts through a Series land
in the metric's own series, one for each set of values, as through labels()."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from apiserver.machinery.series import Series


def test_counts_through_a_series_are_the_metrics_own() -> None:
    registry = CollectorRegistry()
    counter = Counter("things", "Things.", ("verb", "code"), registry=registry)
    series = Series(counter)
    series("get", "200").inc()
    series("get", "200").inc()
    series("get", "404").inc()
    counter.labels("get", "200").inc()
    assert series("get", "200") is series("get", "200")
    assert registry.get_sample_value("things_total", {"verb": "get", "code": "200"}) == 3
    assert registry.get_sample_value("things_total", {"verb": "get", "code": "404"}) == 1
