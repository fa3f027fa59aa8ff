"""/metrics of a server of several workers: whichever worker a scrape reaches answers for all.

Each worker keeps its own registry and serves it, unauthenticated, on a Unix socket in a directory
only the server's user can enter; the worker a scrape reaches reads its siblings' there and answers
with every series of every worker, labelled `worker`. Counters then stay monotonic per series (a
scrape reaching another worker does not look like a reset), and `sum by (...)` gives the server's
totals, as Prometheus sums the replicas of kube-apiserver by `instance`. Hand-written because
prometheus_client's multiprocess mode cannot serve the custom collectors (process, tasks, in-flight).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from apiserver.http.acceptor import Shares

log = logging.getLogger(__name__)

WORKER_LABEL = "worker"
# How long a scrape waits for a sibling; one that does not answer is left out of that scrape.
SIBLING_TIMEOUT = 2.0


@dataclass(frozen=True)
class WorkerSet:
    """This worker's index among `count`, the directory of their metrics sockets, and how many
    connections each holds (http/acceptor.py)."""

    index: int
    count: int
    directory: Path
    shares: Shares | None = None

    def socket(self, index: int) -> Path:
        return self.directory / f"{index}.sock"

    def siblings(self) -> list[int]:
        return [i for i in range(self.count) if i != self.index]


async def serve_own(workers: WorkerSet, exposition: Callable[[], bytes]) -> web.AppRunner:
    """Serves this worker's own metrics on its socket, for its siblings' scrapes."""

    async def own(_request: web.Request) -> web.Response:
        return web.Response(body=exposition(), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", own)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.UnixSite(runner, str(workers.socket(workers.index))).start()
    return runner


async def _sibling(workers: WorkerSet, index: int) -> str | None:
    connector = aiohttp.UnixConnector(path=str(workers.socket(index)))
    timeout = aiohttp.ClientTimeout(total=SIBLING_TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
            session.get("http://worker/metrics") as answer,
        ):
            return await answer.text()
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        log.warning("worker %d's metrics are left out of this scrape: %s", index, exc or type(exc).__name__)
        return None


async def gathered(workers: WorkerSet, own: str) -> str:
    """Every worker's series, each labelled with its worker (siblings that do not answer left out)."""
    texts = await asyncio.gather(*(_sibling(workers, i) for i in workers.siblings()))
    by_worker = {workers.index: own} | {
        i: text for i, text in zip(workers.siblings(), texts, strict=True) if text is not None
    }
    return render(merged(by_worker))


def merged(by_worker: dict[int, str]) -> list[Metric]:
    """The families of all workers' texts, in the first text's order, samples by worker index."""
    families: dict[str, Metric] = {}
    for index in sorted(by_worker):
        for family in text_string_to_metric_families(by_worker[index]):
            into = families.setdefault(family.name, _empty_like(family))
            label = {WORKER_LABEL: str(index)}
            into.samples += [s._replace(labels=s.labels | label) for s in family.samples]
    return list(families.values())


def _empty_like(family: Metric) -> Metric:
    return Metric(family.name, family.documentation, family.type, family.unit)


def render(families: Iterable[Metric]) -> str:
    """Families in Prometheus' text format, as prometheus_client writes a registry."""
    listed = list(families)

    class Fixed:
        def collect(self) -> Iterator[Metric]:
            return iter(listed)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    return generate_latest(registry).decode()
