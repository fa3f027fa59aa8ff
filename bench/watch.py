"""The watch fan-out: N watchers (another process, bench.watchers) while this process writes Events
at a steady rate; delivery latency is from the write's acknowledgement to each watcher's receipt."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.client import ensure_namespaces, list_revision, session
from bench.events import event_body
from bench.processes import Target, cpu_seconds

NAMESPACE = "watch"
MAX_IN_FLIGHT = 64
_JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class WatchResult:
    rate: float  # Events written (acknowledged) per second
    p50: float  # seconds, acknowledgement -> receipt
    p99: float
    lost: int  # (watcher, Event) pairs acknowledged but never received
    deliveries: int
    write_errors: int
    # Share of one core used while writing: the server, the watchers' process, the writer (this one);
    # and by the watchers' process from its start to the last Event.
    cpu: dict[str, float]


class Writer:
    """POSTs `<prefix>-<n>` at `rate` per second (fewer when the server keeps MAX_IN_FLIGHT busy)."""

    def __init__(self, target: Target, prefix: str) -> None:
        self.target = target
        self.prefix = prefix
        self.acks: dict[int, float] = {}
        self.errors = 0
        self.path = target.events_path(NAMESPACE)

    async def create(self, http: aiohttp.ClientSession, name: str) -> bool:
        body = event_body(self.target.group_version, NAMESPACE, name, sent=time.time())
        async with http.post(self.path, data=json.dumps(body), headers=_JSON) as response:
            await response.read()
            return response.status == 201

    async def one(self, http: aiohttp.ClientSession, number: int, slots: asyncio.Semaphore) -> None:
        try:
            if await self.create(http, f"{self.prefix}-{number}"):
                self.acks[number] = time.time()
            else:
                self.errors += 1
        finally:
            slots.release()

    async def run(self, rate: float, duration: float) -> float:
        """Writes for `duration` seconds, then the end marker; the achieved rate."""
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        tasks: list[asyncio.Task[None]] = []
        async with session(self.target, MAX_IN_FLIGHT) as http:
            began = time.monotonic()
            number = 0
            while (now := time.monotonic()) < began + duration:
                await asyncio.sleep(max(0.0, began + number / rate - now))
                await slots.acquire()
                tasks.append(asyncio.create_task(self.one(http, number, slots)))
                number += 1
            await asyncio.gather(*tasks)
            elapsed = time.monotonic() - began
            await self.create(http, f"{self.prefix}-end")
        return len(self.acks) / elapsed


def start_watchers(target: Target, prefix: str, revision: str, watchers: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "bench.watchers", "--url", target.url, "--token", target.token]
    command += ["--path", target.events_path(NAMESPACE), "--rv", revision, "--prefix", prefix]
    command += ["--watchers", str(watchers)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != "ready":
        process.kill()
        raise RuntimeError(f"watchers of {target.name} did not start: {line!r}")
    return process


def finish_watchers(process: subprocess.Popen[str], acks: dict[int, float]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(acks, out)
    try:
        answer, _ = process.communicate(f"done {out.name}\n", timeout=180)
    finally:
        Path(out.name).unlink()
    if process.returncode != 0:
        raise RuntimeError(f"watchers failed ({process.returncode}): {answer}")
    result: dict[str, float] = json.loads(answer.strip().splitlines()[-1])
    return result


def fan_out(target: Target, watchers: int, rate: float, duration: float) -> WatchResult:
    """`watchers` watches of one namespace while Events are written at `rate` for `duration` s."""
    prefix = f"w{int(time.time())}"
    asyncio.run(ensure_namespaces(target, [NAMESPACE]))
    revision = asyncio.run(list_revision(target, NAMESPACE))
    process = start_watchers(target, prefix, revision, watchers)
    try:
        return measure_fan_out(target, process, prefix, rate, duration)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def measure_fan_out(
    target: Target, process: subprocess.Popen[str], prefix: str, rate: float, duration: float
) -> WatchResult:
    time.sleep(1.0)  # let every watch reach the server's fan-out before writing
    writer = Writer(target, prefix)
    pids = {"server": target.pid, "watchers": process.pid, "writer": os.getpid()}
    before, began = {name: cpu_seconds(pid) for name, pid in pids.items()}, time.monotonic()
    achieved = asyncio.run(writer.run(rate, duration))
    elapsed = time.monotonic() - began
    cpu = {name: (cpu_seconds(pid) - before[name]) / elapsed for name, pid in pids.items()}
    got = finish_watchers(process, writer.acks)
    cpu["watchers to the end"] = got["cpu"]
    lost, deliveries = int(got["lost"]), int(got["deliveries"])
    return WatchResult(achieved, got["p50"], got["p99"], lost, deliveries, writer.errors, cpu)
