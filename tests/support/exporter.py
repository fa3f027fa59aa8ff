"""The exporter as users run it (`python -m coreio_export`, the console script's module, with the
server's kubeconfig), an Event writer paced at a rate with every acknowledged write recorded, and
the reading of what a JSON-lines sink holds."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import orjson
import pytest

from apiserver.machinery.objectmeta import format_micro_time
from tests.support.api import event
from tests.support.server import ServerProcess, module_server

EXPORTS = "/apis/events.core.io/v1alpha1"
GROUP_VERSION = "events.core.io/v1alpha1"
SERVES_EXPORTS = f"--runtime-config={GROUP_VERSION}=true"


def exports_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[ServerProcess]:
    """module_server, with EventExports served (the alpha version enabled)."""
    yield from module_server(request, tmp_path_factory, name, [SERVES_EXPORTS])


def export(name: str, sink: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"sink": sink, "batch": {"maxEvents": 100, "maxWait": "200ms"}} | spec
    return {"apiVersion": GROUP_VERSION, "kind": "EventExport", "metadata": {"name": name}, "spec": body}


class Reached(Protocol):
    """A server the exporter and the writer reach: a coreio ServerProcess, or a control plane's
    kube-apiserver aggregating coreio."""

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def url(self) -> str: ...

    def ssl_context(self) -> ssl.SSLContext: ...


@dataclass
class ExporterProcess:
    """`coreio-export NAME -n NAMESPACE` against `server`, its stderr in `log`."""

    server: Reached
    namespace: str
    name: str
    log: Path
    args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "coreio_export", self.name, "-n", self.namespace, "-v", *self.args]
        env = dict(os.environ, KUBECONFIG=str(self.server.kubeconfig))
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        """SIGTERM, then its exit status (it sends the batch in hand first)."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class Written:
    """Events the server acknowledged: (namespace, name, resourceVersion, type), in no order."""

    events: list[tuple[str, str, int, str]] = field(default_factory=list)
    refused: int = 0
    acknowledged_at: dict[str, float] = field(default_factory=dict)  # name -> Unix time


async def write_events(
    server: Reached,
    namespaces: list[str],
    *,
    rate: float,
    seconds: float,
    prefix: str,
    kind: Callable[[int], str] = lambda i: "Warning" if i % 2 else "Normal",
    connections: int = 8,
    during: Callable[[float], None] | None = None,
    fields: dict[str, Any] | None = None,
    group_version: str = "events.core.io/v1",
    stamped: bool = False,
) -> Written:
    """Events written at `rate` a second for `seconds` (at most `connections` in flight), spread
    over `namespaces`, with `fields` set in each, as `group_version` (kube-apiserver's twin:
    events.k8s.io/v1), with `stamped` each Event's eventTime the time it is written;
    `during(elapsed)` called every 0.1 s meanwhile (on this loop's thread)."""
    written = Written()
    total = int(rate * seconds)
    numbers = itertools.count()
    start = time.monotonic()
    ssl = server.ssl_context()

    async def writer(session: aiohttp.ClientSession) -> None:
        while (i := next(numbers)) < total:
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            ns = namespaces[i % len(namespaces)]
            body = event(f"{prefix}-{i}", ns, type=kind(i), reason=f"Reason{i % 7}", **(fields or {}))
            body["apiVersion"] = group_version
            if stamped:
                body["eventTime"] = format_micro_time(datetime.now(UTC))
            url = f"{server.url}/apis/{group_version}/namespaces/{ns}/events"
            async with session.post(url, data=orjson.dumps(body), ssl=ssl) as response:
                answer = await response.read()
            if response.status != 201:
                written.refused += 1
                continue
            meta = orjson.loads(answer)["metadata"]
            written.events.append((ns, meta["name"], int(meta["resourceVersion"]), body["type"]))
            written.acknowledged_at[meta["name"]] = time.time()

    async def ticking() -> None:
        while True:
            await asyncio.sleep(0.1)
            if during is not None:
                during(time.monotonic() - start)

    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(headers=headers) as session:
        ticker = asyncio.create_task(ticking())
        try:
            await asyncio.gather(*(writer(session) for _ in range(connections)))
        finally:
            ticker.cancel()
    return written


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The records a JSON-lines sink wrote, rotated files first (oldest first)."""
    rotated = sorted(path.parent.glob(f"{path.name}.*"), key=lambda p: -int(p.suffix[1:]))
    records: list[dict[str, Any]] = []
    for file in [*rotated, path]:
        if file.exists():
            # A line without its newline is one being written: not read yet.
            complete = file.read_bytes().rpartition(b"\n")[0]
            records += [orjson.loads(line) for line in complete.splitlines() if line]
    return records


@dataclass
class Delivery:
    """What a sink received, judged against what was written."""

    first: dict[str, dict[str, Any]]  # dedup key -> its first record
    duplicates: int
    out_of_order: list[str]


def delivery(records: list[dict[str, Any]]) -> Delivery:
    """Records in the order received: duplicates (a dedup key again), and namespaces whose first
    receipts do not follow revision order."""
    first: dict[str, dict[str, Any]] = {}
    duplicates = 0
    last: dict[str, int] = {}
    out_of_order: list[str] = []
    for record in records:
        if record["dedupKey"] in first:
            duplicates += 1
            continue
        first[record["dedupKey"]] = record
        ns = record["event"]["metadata"]["namespace"]
        revision = int(record["resourceVersion"])
        if revision <= last.get(ns, 0):
            out_of_order.append(f"{ns}: {revision} after {last[ns]}")
        last[ns] = revision
    return Delivery(first, duplicates, out_of_order)


def rss_mib(pid: int) -> float:
    """The resident memory of process `pid`, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0
