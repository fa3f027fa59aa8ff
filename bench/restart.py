"""Start to ready on many stored Events (issue 24's restart target and scale row), for each storage
and worker count, several starts each, without the rest of the bench:

    .venv/bin/python -m bench.restart                               # 100,000 Events, both storages
    .venv/bin/python -m bench.restart --events 1000000 --storage sqlite
    .venv/bin/python -m bench.restart --memory --shape cluster --storage sqlite --workers 2 --starts 1

On SQLite the Events are written into the stopped server's data directory (tests.support.seed, as
its create path makes them); on etcd they are created through coreio's API (bench.client.fill, about
80 s for 100,000). Each start is timed from Popen to the first /readyz 200 (bench.processes), which
on a restart waits for the first worker's watch caches to hold every object (the other workers
accept connections only once theirs do too, filled from the first's). `--memory` measures, after
the last start of each configuration, what the benchmark's memory row does: one unpaged LIST, then
the servers' Pss summed against the stored JSON (every Event listed in pages, compact). `--shape
cluster` seeds Events shaped as a cluster's (tests/support/cluster_events.py: varied notes, names
and uids) instead of the benchmark's own (one note repeated), which the watch cache packs far better
than a cluster's (SQLite only: etcd's are created through the API with the benchmark's Event).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apiserver.resources.event import EventKind
from bench.client import fill, stored_json_size, warm_up
from bench.events import event_body
from bench.processes import (
    COREIO_EVENTS,
    COREIO_GROUP,
    Target,
    coreio_command,
    installed_like,
    launch,
    rss_bytes,
    settle,
    start_coreio,
    tree,
    wait_ready,
    write_token_file,
)
from tests.support import cluster_events
from tests.support.etcd import EtcdProcess
from tests.support.seed import seed
from tests.support.server import free_port

NAMESPACES = 10


def starts(
    data_dir: Path, storage: list[str], workers: int, count: int, scratch: Path, memory: bool = False
) -> list[float]:
    """Seconds to ready of `count` starts of a server on `data_dir`; with `memory`, the last start's
    memory is printed."""
    token_file, token = write_token_file(scratch)
    found = []
    for number in range(count):
        port, log = free_port(), scratch / "server.log"
        process, began = launch(
            coreio_command(data_dir, port, token_file, [*storage, f"--workers={workers}"]),
            log,
            installed_like(),
        )
        try:
            url = f"https://127.0.0.1:{port}"
            found.append(wait_ready(process, url, token, began, log))
            if memory and number == count - 1:
                target = Target("coreio", url, COREIO_EVENTS, COREIO_GROUP, token, process)
                print(f"{workers} workers: {_memory(target)}", flush=True)
        finally:
            process.terminate()
            process.wait(timeout=60)
    return found


def _memory(target: Target) -> str:
    asyncio.run(warm_up(target))
    settle(tree(target.pid))  # as the benchmark's memory row: its caches packed, the server idle
    held = rss_bytes(target.pid)
    objects, size = asyncio.run(stored_json_size(target))
    mib = 1024 * 1024
    stored = f"{objects:,} Events of {size / mib:,.1f} MiB stored JSON"
    return f"Pss {held / mib:,.1f} MiB, {stored}: {held / size:.2f}x"


def sqlite_rows(
    events: int, workers: list[int], count: int, scratch: Path, body: Callable[[int], Any], memory: bool
) -> list[str]:
    data_dir = scratch / "sqlite"
    data_dir.mkdir()
    seeded = seed(data_dir, EventKind(), body, events)
    print(f"sqlite: seeded {events:,} Events in {seeded.seconds:.0f} s", flush=True)
    return [_row("sqlite", n, starts(data_dir, [], n, count, scratch, memory)) for n in workers]


def etcd_rows(events: int, workers: list[int], count: int, scratch: Path, memory: bool) -> list[str]:
    etcd = EtcdProcess()
    storage = ["--etcd-servers", etcd.start(), "--etcd-prefix", "/restart"]
    try:
        token_file, token = write_token_file(scratch)
        target = start_coreio("coreio-etcd", scratch, token_file, token, storage)
        began = time.monotonic()
        try:
            for index in range(NAMESPACES):
                asyncio.run(fill(target, f"ns{index}", "restart", events // NAMESPACES))
        finally:
            target.stop()
        print(f"etcd: created {events:,} Events in {time.monotonic() - began:.0f} s", flush=True)
        data_dir = scratch / "coreio-etcd"
        return [_row("etcd", n, starts(data_dir, storage, n, count, scratch, memory)) for n in workers]
    finally:
        etcd.stop()


def _body(index: int) -> dict[str, object]:
    return event_body("events.core.io/v1", f"ns{index % NAMESPACES}", f"restart-{index}")


def _row(storage: str, workers: int, seconds: list[float]) -> str:
    shown = ", ".join(f"{s * 1000:,.0f}" for s in seconds)
    return f"{storage:<7}{workers:>8}{min(seconds) * 1000:>10,.0f}   ({shown} ms)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.restart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--storage", choices=("sqlite", "etcd", "both"), default="both")
    parser.add_argument("--workers", default="2,1", help="worker counts, comma-separated (default 2,1)")
    parser.add_argument("--starts", type=int, default=3, help="starts per configuration")
    parser.add_argument("--memory", action="store_true", help="measure memory after the last start")
    parser.add_argument("--shape", choices=("bench", "cluster"), default="bench", help="the seeded Events")
    options = parser.parse_args(argv)
    workers = [int(n) for n in options.workers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="coreio-restart-") as directory:
        scratch = Path(directory)
        if options.storage in ("sqlite", "both"):
            body = cluster_events.event_body if options.shape == "cluster" else _body
            rows += sqlite_rows(options.events, workers, options.starts, scratch, body, options.memory)
        if options.storage in ("etcd", "both"):
            rows += etcd_rows(options.events, workers, options.starts, scratch, options.memory)
    print(f"\n{options.events:,} Events stored: start to /readyz 200, best of {options.starts}")
    print(f"{'storage':<7}{'workers':>8}{'best ms':>10}   (every start)")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
