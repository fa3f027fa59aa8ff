"""Throughput and latency of the API over real HTTPS against a real server process, on SQLite and
on etcd. Prints figures; asserts nothing. Run:

    .venv/bin/python bench/api.py [--objects 500] [--concurrency 16] [--backend sqlite|etcd|both]

Each backend gets a fresh server (and, for etcd, a fresh etcd: the one the tests use, built from Go
modules and cached by tests/support/etcd_build.py, or $ETCD_BIN).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.etcd import EtcdProcess
from tests.support.server import ServerProcess, start_server

RB = "/apis/rbac.authorization.core.io/v1/namespaces/bench/rolebindings"


def body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "labels": {"bench": "yes"}},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": f"user-{name}"}],
    }


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def timed_requests(
    session: aiohttp.ClientSession, url: str, calls: list[tuple[str, str, Any]], concurrency: int
) -> tuple[float, list[float]]:
    semaphore = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(method: str, path: str, payload: Any) -> None:
        async with semaphore:
            began = time.perf_counter()
            async with session.request(method, url + path, json=payload) as response:
                await response.read()
                if response.status >= 300:
                    raise RuntimeError(f"{method} {path}: {response.status}")
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(one(m, p, b) for m, p, b in calls))
    return time.perf_counter() - began, latencies


def report(label: str, elapsed: float, latencies: list[float]) -> None:
    count = len(latencies)
    print(
        f"  {label:<28} {count:>6} req  {count / elapsed:>8.0f} req/s  "
        f"p50 {statistics.median(latencies) * 1000:6.1f} ms  p99 {percentile(latencies, 0.99) * 1000:6.1f} ms"
    )


async def run(server: ServerProcess, objects: int, concurrency: int) -> None:
    context = server.ssl_context()
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        url = server.url
        names = [f"rb-{i:05d}" for i in range(objects)]
        elapsed, lat = await timed_requests(session, url, [("POST", RB, body(n)) for n in names], concurrency)
        report("create", elapsed, lat)
        elapsed, lat = await timed_requests(
            session, url, [("GET", f"{RB}/{n}", None) for n in names], concurrency
        )
        report("get", elapsed, lat)
        patch = [("PATCH", f"{RB}/{n}", None) for n in names]
        semaphore = asyncio.Semaphore(concurrency)
        latencies: list[float] = []

        async def merge(path: str) -> None:
            async with semaphore:
                began = time.perf_counter()
                async with session.patch(
                    url + path,
                    data=json.dumps({"metadata": {"labels": {"patched": "yes"}}}),
                    headers={"Content-Type": "application/merge-patch+json"},
                ) as response:
                    await response.read()
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(merge(p) for _, p, _ in patch))
        report("merge patch", time.perf_counter() - began, latencies)

        list_calls = [("GET", f"{RB}?limit=100", None)] * 50
        elapsed, lat = await timed_requests(session, url, list_calls, concurrency)
        report("list page of 100", elapsed, lat)
        elapsed, lat = await timed_requests(session, url, [("GET", RB, None)] * 20, 4)
        report(f"list all {objects}", elapsed, lat)

        # Watch delivery: 8 watchers; time from a write's response to each watcher seeing it.
        start_rv = (await (await session.get(url + RB + "?limit=1")).json())["metadata"]["resourceVersion"]
        seen: list[float] = []
        sent: dict[str, float] = {}
        ready = asyncio.Event()

        async def watcher(index: int) -> None:
            async with session.get(
                url + RB + f"?watch=1&resourceVersion={start_rv}&timeoutSeconds=60"
            ) as resp:
                if index == 0:
                    ready.set()
                async for line in resp.content:
                    event = json.loads(line)
                    name = event["object"]["metadata"]["name"]
                    if name in sent:
                        seen.append(time.perf_counter() - sent[name])
                    if name == "watch-last":
                        return

        watchers = [asyncio.create_task(watcher(i)) for i in range(8)]
        await ready.wait()
        await asyncio.sleep(0.2)
        for i in range(100):
            name = f"watch-{i}" if i < 99 else "watch-last"
            sent[name] = time.perf_counter()
            async with session.post(url + RB, json=body(name)) as response:
                await response.read()
        await asyncio.wait_for(asyncio.gather(*watchers), 60)
        print(
            f"  {'watch delivery (8 watchers)':<28} {len(seen):>6} evt  "
            f"p50 {statistics.median(seen) * 1000:6.1f} ms  p99 {percentile(seen, 0.99) * 1000:6.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--backend", choices=["sqlite", "etcd", "both"], default="both")
    args = parser.parse_args()
    backends = ["sqlite", "etcd"] if args.backend == "both" else [args.backend]
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            etcd = None
            extra: list[str] = []
            if backend == "etcd":
                etcd = EtcdProcess()
                extra = ["--etcd-servers", etcd.start()]
            server = start_server(Path(tmp), extra)
            try:
                print(f"{backend}: {args.objects} RoleBindings, concurrency {args.concurrency}")
                asyncio.run(run(server, args.objects, args.concurrency))
            finally:
                server.stop()
                if etcd is not None:
                    etcd.stop()


if __name__ == "__main__":
    main()
