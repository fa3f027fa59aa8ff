"""/metrics of several workers: every worker's series, labelled by worker, whichever one answers."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from apiserver.http.workermetrics import WorkerSet, gathered, merged, render


def exposition(requests: int, seconds: list[float], tasks: int) -> str:
    registry = CollectorRegistry()
    counter = Counter("apiserver_request", "Requests.", ["verb"], registry=registry)
    counter.labels("GET").inc(requests)
    histogram = Histogram("etcd_request_duration_seconds", "Latency.", registry=registry, buckets=[0.1, 1])
    for value in seconds:
        histogram.observe(value)
    Gauge("coreio_asyncio_tasks", "Tasks.", registry=registry).set(tasks)
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_every_series_of_every_worker_is_kept_and_labelled_with_its_worker() -> None:
    text = render(merged({0: exposition(3, [0.05], 10), 1: exposition(5, [0.5, 2], 12)}))
    seen = samples(text)
    assert seen[("apiserver_request_total", frozenset({("verb", "GET"), ("worker", "0")}))] == 3
    assert seen[("apiserver_request_total", frozenset({("verb", "GET"), ("worker", "1")}))] == 5
    assert seen[("etcd_request_duration_seconds_count", frozenset({("worker", "1")}))] == 2
    assert seen[("etcd_request_duration_seconds_bucket", frozenset({("le", "1.0"), ("worker", "1")}))] == 1
    assert seen[("coreio_asyncio_tasks", frozenset({("worker", "0")}))] == 10
    # One HELP and TYPE a family, as Prometheus requires.
    assert text.count("# TYPE apiserver_request_total counter") == 1


def test_one_worker_alone_reads_as_prometheus_client_writes_it() -> None:
    own = exposition(1, [0.2], 3)
    text = render(merged({0: own}))
    assert text.replace(',worker="0"', "").replace('{worker="0"}', "") == own


async def test_a_sibling_that_does_not_answer_is_left_out_of_the_scrape(tmp_path: Path) -> None:
    workers = WorkerSet(index=0, count=2, directory=tmp_path)  # worker 1's socket never existed
    seen = samples(await gathered(workers, exposition(2, [], 1)))
    assert {dict(labels)["worker"] for _, labels in seen} == {"0"}
