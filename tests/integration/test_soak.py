"""A bounded mixed load against one real coreio process, watching it for leaks (issue 10, item 11).

For COREIO_SOAK_SECONDS (default 600) the server on SQLite, then on etcd, serves what a cluster of
controllers mostly sends: reads (long-running watches that end and resume from the last
resourceVersion they saw, with bookmarks; LISTs plain, by label and field selector and paged; GETs)
and, for writes, mostly updates (some on objects every writer shares, so 409 conflicts happen) with
some creates and deletes that keep the object count bounded. Every few seconds it samples the
server's RSS and open file descriptors (/proc/<pid>/status and /proc/<pid>/fd; with its workers'
summed), its threads, the watchers it registers (`apiserver_registered_watchers` on /metrics) and
its asyncio tasks (`coreio_asyncio_tasks`). After a warm-up (the first 20% of the run) a least-
squares line through the samples must show no growth: RSS rising under 1 MiB a minute; the tasks'
mean over the last quarter of the samples at most 3 above that over the first, and never more than
25 above their level after the warm-up (the load's requests in flight come and go); the descriptors
at the end within 5 of that level. No request may fail apart from the expected 409 conflicts, and
no watch may run more than 5 s past its timeoutSeconds (measured by the client, from sending the
request to the end of the stream). It prints a summary of the samples and the requests (`pytest -s`
shows it).

On demand only: `./scripts/test -m soak -s tests/integration/test_soak.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from tests.support.api import rb_path, rolebinding
from tests.support.server import ServerProcess, backend_args, children, free_port

JSON = dict[str, Any]

DURATION = float(os.environ.get("COREIO_SOAK_SECONDS", "600"))
WARM_UP = 0.2  # share of the run left out of the trend
RSS_SLOPE_LIMIT = 1.0  # MiB per minute
FD_TOLERANCE = 5
TASK_DRIFT_LIMIT = 3.0  # tasks, between the means of the first and the last quarter after warm-up
TASK_TOLERANCE = 25
WATCH_OVERRUN_LIMIT = 5.0  # seconds a watch may last past its timeoutSeconds, as its client sees it
NAMESPACE = "soak"
GROUPS = 4  # label values `soak-group=g<n>`
HOT = 20  # objects every writer updates (never deleted): the source of 409s
OWN = 15  # names each writer creates, updates and deletes in (at most this many exist at once)
WRITERS = 6
WATCHES = 4  # one of them with a label selector
LISTERS = 2
GETTERS = 2

pytestmark = pytest.mark.soak


def labelled(name: str, index: int, user: str) -> JSON:
    return rolebinding(
        name,
        metadata={"name": name, "labels": {"soak-group": f"g{index % GROUPS}"}},
        subjects=[{"kind": "User", "name": user}],
    )


@dataclass
class Sample:
    at: float  # seconds since the load started
    rss_mib: float
    fds: int
    threads: int
    watchers: int | None
    tasks: int | None


@dataclass
class Tally:
    """Answers per (request kind, status); `expected` says which statuses are no error."""

    answers: Counter[tuple[str, str]] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    watch_events: Counter[str] = field(default_factory=Counter)
    watch_resumes: int = 0
    watch_overrun: float = 0.0  # longest a watch ran past its timeoutSeconds (s)

    def count(self, kind: str, status: int | None, ok: tuple[int, ...], detail: str = "") -> None:
        self.answers[(kind, str(status) if status is not None else "no answer")] += 1
        if status not in ok and len(self.problems) < 50:
            self.problems.append(f"{kind} -> {status}: {detail[:300]}")

    def errors(self) -> int:
        expected = {"update": {"200", "409"}, "create": {"201"}, "delete": {"200"}}
        return sum(
            n for (kind, status), n in self.answers.items() if status not in expected.get(kind, {"200"})
        )


class Soak:
    def __init__(self, server: ServerProcess, duration: float) -> None:
        self.server = server
        self.duration = duration
        self.tally = Tally()
        self.samples: list[Sample] = []
        self.started = 0.0
        self.end = 0.0
        self.rng = random.Random(11)
        self.seq = 0

    def url(self, name: str = "", query: str = "") -> str:
        return self.server.url + rb_path(NAMESPACE, name) + (f"?{query}" if query else "")

    def running(self) -> bool:
        return time.monotonic() < self.end

    def user(self) -> str:
        self.seq += 1
        return f"u-{self.seq}"

    async def call(
        self,
        session: aiohttp.ClientSession,
        kind: str,
        method: str,
        url: str,
        ok: tuple[int, ...],
        body: JSON | None = None,
    ) -> tuple[int | None, JSON | None]:
        try:
            async with session.request(method, url, json=body) as answer:
                text = await answer.text()
                status: int | None = answer.status
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            self.tally.count(kind, None, ok, f"{type(error).__name__}: {error}")
            return None, None
        try:
            parsed: JSON | None = json.loads(text)
        except ValueError:
            parsed = None
        self.tally.count(kind, status, ok, text)
        return status, parsed

    # --- writes ---------------------------------------------------------------------------------

    async def seed(self, session: aiohttp.ClientSession) -> None:
        for index in range(HOT):
            status, _ = await self.call(
                session, "create", "POST", self.url(), (201,), labelled(f"hot-{index:02d}", index, "seed")
            )
            assert status == 201

    async def writer(self, session: aiohttp.ClientSession, number: int) -> None:
        own = [f"w{number}-{index:02d}" for index in range(OWN)]
        present: set[str] = set()
        while self.running():
            roll = self.rng.random()
            absent = [name for name in own if name not in present]
            if roll < 0.08 and absent:
                name = self.rng.choice(absent)
                status, _ = await self.call(
                    session, "create", "POST", self.url(), (201,), labelled(name, number, self.user())
                )
                if status == 201:
                    present.add(name)
            elif roll < 0.16 and present:
                name = self.rng.choice(sorted(present))
                status, _ = await self.call(session, "delete", "DELETE", self.url(name), (200,))
                if status == 200:
                    present.discard(name)
            else:
                pool = sorted(present) if roll < 0.5 and present else [f"hot-{i:02d}" for i in range(HOT)]
                await self.update(session, self.rng.choice(pool))
            await asyncio.sleep(self.rng.uniform(0.0, 0.02))  # the writers' pace (the load)

    async def update(self, session: aiohttp.ClientSession, name: str) -> None:
        status, current = await self.call(session, "get", "GET", self.url(name), (200,))
        if status != 200 or current is None:
            return
        # Same size every time: the subjects are replaced, not grown.
        body = dict(current, subjects=[{"kind": "User", "name": self.user()}])
        await self.call(session, "update", "PUT", self.url(name), (200, 409), body)

    # --- reads ----------------------------------------------------------------------------------

    async def lister(self, session: aiohttp.ClientSession) -> None:
        queries: list[Callable[[], str]] = [
            lambda: "",
            lambda: "labelSelector=" + quote(f"soak-group=g{self.rng.randrange(GROUPS)}"),
            lambda: "labelSelector=" + quote("soak-group in (g0,g1)"),
            lambda: "fieldSelector=" + quote(f"metadata.name=hot-{self.rng.randrange(HOT):02d}"),
        ]
        while self.running():
            if self.rng.random() < 0.3:
                await self.paged(session)
            else:
                await self.call(session, "list", "GET", self.url(query=self.rng.choice(queries)()), (200,))
            await asyncio.sleep(self.rng.uniform(0.05, 0.3))  # the listers' pace (the load)

    async def paged(self, session: aiohttp.ClientSession) -> None:
        token = ""
        while True:
            query = "limit=7" + (f"&continue={quote(token)}" if token else "")
            status, page = await self.call(session, "list (paged)", "GET", self.url(query=query), (200,))
            if status != 200 or page is None:
                return
            token = page["metadata"].get("continue", "")
            if not token:
                return

    async def getter(self, session: aiohttp.ClientSession) -> None:
        while self.running():
            name = f"hot-{self.rng.randrange(HOT):02d}"
            await self.call(session, "get", "GET", self.url(name), (200,))
            await asyncio.sleep(self.rng.uniform(0.01, 0.1))  # the getters' pace (the load)

    async def watcher(self, session: aiohttp.ClientSession, selector: str) -> None:
        """Lists once, then watches from the newest resourceVersion seen, again and again: each
        watch asks the server to end it after 5-30 s (and the client cancels it when the soak
        ends). An ERROR event (410 Gone included) counts as an error."""
        extra = f"&labelSelector={quote(selector)}" if selector else ""
        status, listed = await self.call(session, "list", "GET", self.url(query=extra.lstrip("&")), (200,))
        assert status == 200 and listed is not None
        version = listed["metadata"]["resourceVersion"]
        while self.running():
            timeout = self.rng.randint(5, 30)
            opened = time.monotonic()
            query = (
                f"watch=1&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds={timeout}{extra}"
            )
            try:
                async with session.get(self.url(query=query)) as answer:
                    self.tally.count("watch", answer.status, (200,), "")
                    if answer.status != 200:
                        await asyncio.sleep(1)  # a client's pause before it watches again
                        continue
                    async for line in answer.content:
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        kind = event["type"]
                        self.tally.watch_events[kind] += 1
                        if kind == "ERROR":
                            self.tally.count("watch event", event["object"].get("code"), (), line.decode())
                            break
                        version = event["object"]["metadata"]["resourceVersion"]
            except (aiohttp.ClientError, TimeoutError, OSError) as error:
                self.tally.count("watch", None, (200,), f"{type(error).__name__}: {error}")
            finally:  # also when the soak's end cancels it: a watch kept past its time shows
                overrun = time.monotonic() - opened - timeout
                self.tally.watch_overrun = max(self.tally.watch_overrun, overrun)
            self.tally.watch_resumes += 1

    # --- the server process ---------------------------------------------------------------------

    async def sampler(self, session: aiohttp.ClientSession, every: float) -> None:
        while self.running():
            self.samples.append(await self.sample(session))
            await asyncio.sleep(every)  # the sampling interval

    async def sample(self, session: aiohttp.ClientSession) -> Sample:
        assert self.server.process is not None
        rss_kib, threads, fds = await asyncio.to_thread(process_figures, self.server.process.pid)
        watchers, tasks = await self.gauges(session)
        return Sample(
            at=time.monotonic() - self.started,
            rss_mib=rss_kib / 1024,
            fds=fds,
            threads=threads,
            watchers=watchers,
            tasks=tasks,
        )

    async def gauges(self, session: aiohttp.ClientSession) -> tuple[int | None, int | None]:
        """The RoleBinding watchers registered and the asyncio tasks alive, from /metrics."""
        try:
            async with session.get(self.server.url + "/metrics") as answer:
                if answer.status != 200:
                    return None, None
                text = await answer.text()
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None, None
        watchers = tasks = 0  # no watchers line yet: no watch has been registered
        for line in text.splitlines():
            if line.startswith("apiserver_registered_watchers{") and 'kind="RoleBinding"' in line:
                watchers += int(float(line.rsplit(" ", 1)[1]))
            elif line.startswith(("coreio_asyncio_tasks ", "coreio_asyncio_tasks{")):
                tasks += int(float(line.rsplit(" ", 1)[1]))  # summed over the workers
        return watchers, tasks

    async def run(self) -> None:
        context = self.server.ssl_context()
        timeout = aiohttp.ClientTimeout(total=30)
        watch_timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
        every = min(5.0, max(1.0, self.duration / 30))
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context), timeout=timeout) as session,
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=context), timeout=watch_timeout
            ) as watch_session,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context), timeout=timeout) as probe,
        ):
            await self.seed(session)
            self.started = time.monotonic()
            self.end = self.started + self.duration
            selectors = ["soak-group=g1", *[""] * (WATCHES - 1)]
            watches = [asyncio.create_task(self.watcher(watch_session, s)) for s in selectors]
            work = [
                *(self.writer(session, n) for n in range(WRITERS)),
                *(self.lister(session) for _ in range(LISTERS)),
                *(self.getter(session) for _ in range(GETTERS)),
                self.sampler(probe, every),
            ]
            try:
                await asyncio.gather(*work)
            finally:
                for task in watches:
                    task.cancel()
                ended = await asyncio.gather(*watches, return_exceptions=True)
            for outcome in ended:
                if isinstance(outcome, Exception):
                    raise outcome


def process_figures(pid: int) -> tuple[int, int, int]:
    """RSS (KiB), threads and open file descriptors of the server `pid` and its workers, summed, as
    /proc shows them."""
    rss = threads = fds = 0
    for member in [pid, *children(pid)]:
        fields = dict(
            line.partition(":")[::2] for line in Path(f"/proc/{member}/status").read_text().splitlines()
        )
        rss += int(fields["VmRSS"].split()[0])
        threads += int(fields["Threads"])
        fds += len(os.listdir(f"/proc/{member}/fd"))
    return rss, threads, fds


def trend(samples: list[Sample], value: Callable[[Sample], float]) -> float:
    """Least-squares slope per minute."""
    slope, _ = statistics.linear_regression([s.at / 60 for s in samples], [value(s) for s in samples])
    return slope


def report(backend: str, soak: Soak, steady: list[Sample]) -> None:
    samples = soak.samples
    warm = steady[0]
    print(
        f"\n[soak {backend}] {soak.duration:g}s, {len(samples)} samples, trend over the last"
        f" {len(steady)} (from {warm.at:.0f}s)"
    )
    print(f"  {'':<10}{'first':>10}{'warmed':>10}{'min':>10}{'max':>10}{'last':>10}{'slope/min':>12}")
    rows: list[tuple[str, Callable[[Sample], float]]] = [
        ("rss MiB", lambda s: s.rss_mib),
        ("fds", lambda s: s.fds),
        ("threads", lambda s: s.threads),
    ]
    if all(s.watchers is not None for s in samples):
        rows.append(("watchers", lambda s: s.watchers or 0))
    if all(s.tasks is not None for s in samples):
        rows.append(("tasks", lambda s: s.tasks or 0))
    for label, value in rows:
        print(
            f"  {label:<10}{value(samples[0]):>10.1f}{value(warm):>10.1f}"
            f"{min(map(value, steady)):>10.1f}{max(map(value, steady)):>10.1f}"
            f"{value(steady[-1]):>10.1f}{trend(steady, value):>12.3f}"
        )
    by_kind: dict[str, Counter[str]] = {}
    for (kind, status), n in soak.tally.answers.items():
        by_kind.setdefault(kind, Counter())[status] = n
    total = sum(soak.tally.answers.values())
    print(f"  requests {total} ({total / soak.duration:.0f}/s), errors {soak.tally.errors()}")
    for kind, statuses in sorted(by_kind.items()):
        print(f"  {kind:<14}{sum(statuses.values()):>8}  {dict(sorted(statuses.items()))}")
    print(
        f"  watch events {dict(sorted(soak.tally.watch_events.items()))}, watches resumed"
        f" {soak.tally.watch_resumes}, longest past timeoutSeconds {soak.tally.watch_overrun:.1f}s"
    )


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
async def test_mixed_load_leaks_no_memory_descriptors_or_watchers(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    server = ServerProcess(
        data_dir=tmp_path / "coreio", port=free_port(), extra_args=backend_args(request, backend)
    )
    soak = Soak(server, DURATION)
    try:
        await asyncio.to_thread(server.start)
        await soak.run()
    finally:
        await asyncio.to_thread(server.stop)
    samples = soak.samples
    steady = [s for s in samples if s.at >= WARM_UP * soak.duration]
    assert len(steady) >= 5, f"too few samples after the warm-up: {len(steady)}"
    report(backend, soak, steady)
    assert soak.tally.errors() == 0, soak.tally.problems
    assert soak.tally.answers[("update", "200")] > 0 and soak.tally.watch_events["MODIFIED"] > 0
    rss_slope = trend(steady, lambda s: s.rss_mib)
    assert rss_slope < RSS_SLOPE_LIMIT, f"RSS grows {rss_slope:.2f} MiB/min after the warm-up"
    assert abs(steady[-1].fds - steady[0].fds) <= FD_TOLERANCE, (steady[0].fds, steady[-1].fds)
    # Every watch ended is unregistered: at most the watches the load holds open (a resuming one
    # may be counted twice for a moment).
    assert all(s.watchers is None or s.watchers <= 2 * WATCHES for s in steady), [s.watchers for s in steady]
    tasks = [s for s in steady if s.tasks is not None]
    assert len(tasks) >= 5, "too few task counts sampled"
    counts = [s.tasks or 0 for s in tasks]
    quarter = max(1, len(counts) // 4)
    drift = statistics.mean(counts[-quarter:]) - statistics.mean(counts[:quarter])
    assert drift <= TASK_DRIFT_LIMIT, f"tasks grew by {drift:.1f} after the warm-up: {counts}"
    assert max(counts) <= counts[0] + TASK_TOLERANCE, counts
    assert soak.tally.watch_overrun < WATCH_OVERRUN_LIMIT, (
        f"a watch ran {soak.tally.watch_overrun:.1f}s past its timeoutSeconds"
    )
