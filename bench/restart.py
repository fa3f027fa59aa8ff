"""Start to ready on many stored Events (issue 24's restart target and scale row), for each storage
and worker count, several starts each, without the rest of the bench:

    .venv/bin/python -m bench.restart                               # 100,000 Events, both storages
    .venv/bin/python -m bench.restart --events 1000000 --storage sqlite

On SQLite the Events are written into the stopped server's data directory (tests.support.seed, as
its create path makes them); on etcd they are created through coreio's API (bench.client.fill, about
80 s for 100,000). Each start is timed from Popen to the first /readyz 200 (bench.processes), which
on a restart waits for every worker's watch caches to hold every object.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from apiserver.resources.event import EventKind
from bench.client import fill
from bench.events import event_body
from bench.processes import coreio_command, launch, start_coreio, wait_ready, write_token_file
from tests.support.etcd import EtcdProcess
from tests.support.seed import seed
from tests.support.server import free_port

NAMESPACES = 10


def starts(data_dir: Path, storage: list[str], workers: int, count: int, scratch: Path) -> list[float]:
    """Seconds to ready of `count` starts of a server on `data_dir`."""
    token_file, token = write_token_file(scratch)
    found = []
    for _ in range(count):
        port, log = free_port(), scratch / "server.log"
        process, began = launch(
            coreio_command(data_dir, port, token_file, [*storage, f"--workers={workers}"]), log
        )
        try:
            found.append(wait_ready(process, f"https://127.0.0.1:{port}", token, began, log))
        finally:
            process.terminate()
            process.wait(timeout=60)
    return found


def sqlite_rows(events: int, workers: list[int], count: int, scratch: Path) -> list[str]:
    data_dir = scratch / "sqlite"
    data_dir.mkdir()
    seeded = seed(data_dir, EventKind(), _body, events)
    print(f"sqlite: seeded {events:,} Events in {seeded.seconds:.0f} s", flush=True)
    return [_row("sqlite", n, starts(data_dir, [], n, count, scratch)) for n in workers]


def etcd_rows(events: int, workers: list[int], count: int, scratch: Path) -> list[str]:
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
        return [_row("etcd", n, starts(data_dir, storage, n, count, scratch)) for n in workers]
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
    options = parser.parse_args(argv)
    workers = [int(n) for n in options.workers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="coreio-restart-") as directory:
        scratch = Path(directory)
        if options.storage in ("sqlite", "both"):
            rows += sqlite_rows(options.events, workers, options.starts, scratch)
        if options.storage in ("etcd", "both"):
            rows += etcd_rows(options.events, workers, options.starts, scratch)
    print(f"\n{options.events:,} Events stored: start to /readyz 200, best of {options.starts}")
    print(f"{'storage':<7}{'workers':>8}{'best ms':>10}   (every start)")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
