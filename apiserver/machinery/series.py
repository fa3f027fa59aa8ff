"""A prometheus metric's series by their label values, kept once made.

prometheus_client's `labels()` takes the metric's lock and builds its key again at each call (3% of
a create's time across the request, storage and Event counters, py-spy); a series, once made, lives
as long as its metric, so the one made first is kept here. Label values must stay few (they are
capped or fixed wherever a Series is used), as for the metric itself."""

from __future__ import annotations

from typing import Generic, TypeVar

from prometheus_client.metrics import MetricWrapperBase

M = TypeVar("M", bound=MetricWrapperBase)


class Series(Generic[M]):
    def __init__(self, metric: M) -> None:
        self.metric = metric
        self._made: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        series = self._made.get(values)
        if series is None:
            series = self._made[values] = self.metric.labels(*values)
        return series
