"""The watching side of the watch fan-out, run as its own process (`python -m bench.watchers`), so
that the writer's Python and the watchers' Python each have a core.

It opens N watches from one resourceVersion, says `ready` on stdout once every watch has answered,
and notes when each watch receives each Event named `<prefix>-<n>` (a regular expression over the
raw stream: no JSON decoding of a few hundred thousand lines). When stdin says `done <file>` it
waits for the marker Event `<prefix>-end` on every watch (or a time limit), reads the writer's
acknowledgement times from the file (JSON: {"n": unix time}) and prints one JSON line: delivery
latencies (received minus acknowledged, floored at 0), deliveries, Events lost, and the share of a
core this process used from `ready` to the end (near 1.0: the watchers, not the server, were the limit).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import time
from pathlib import Path

import aiohttp

from bench.processes import insecure_context
from bench.stats import percentile

END = "end"
OPEN_LIMIT = 60.0
STALL_LIMIT = 30.0


class Watch:
    """What one watch received: sequence number -> Unix time of arrival."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern = pattern
        self.received: dict[int, float] = {}
        self.ended = asyncio.Event()
        self.opened = asyncio.Event()

    def feed(self, chunk: bytes, at: float) -> None:
        for match in self.pattern.finditer(chunk):
            name = match.group(1)
            if name == END.encode():
                self.ended.set()
            else:
                self.received.setdefault(int(name), at)


async def follow(http: aiohttp.ClientSession, url: str, watch: Watch) -> None:
    carry = b""
    async with http.get(url) as response:
        if response.status != 200:
            raise RuntimeError(f"watch answered {response.status}: {await response.text()}")
        watch.opened.set()
        async for chunk in response.content.iter_any():
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            watch.feed(data[:cut], time.time())
            carry = data[cut:]
            if watch.ended.is_set():
                return


def summary(watches: list[Watch], acks: dict[int, float]) -> dict[str, float]:
    latencies: list[float] = []
    lost = 0
    for watch in watches:
        for number, acked in acks.items():
            arrived = watch.received.get(number)
            if arrived is None:
                lost += 1
            else:
                latencies.append(max(0.0, arrived - acked))
    return {
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "deliveries": len(latencies),
        "lost": lost,
        "ended": sum(watch.ended.is_set() for watch in watches),
    }


async def read_command() -> str:
    line: str = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return line.strip()


async def watch_all(args: argparse.Namespace) -> dict[str, float]:
    pattern = re.compile(rb'"name":"' + re.escape(args.prefix.encode()) + rb'-(\d+|end)"')
    watches = [Watch(pattern) for _ in range(args.watchers)]
    url = f"{args.url}{args.path}?watch=1&resourceVersion={args.rv}&timeoutSeconds=3600"
    connector = aiohttp.TCPConnector(ssl=insecure_context(), limit=0)
    headers = {"Authorization": f"Bearer {args.token}"}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as http:
        tasks = [asyncio.create_task(follow(http, url, watch)) for watch in watches]
        async with asyncio.timeout(OPEN_LIMIT):
            await asyncio.gather(*(watch.opened.wait() for watch in watches))
        print("ready", flush=True)
        began, cpu = time.monotonic(), time.process_time()
        command = await read_command()
        acks_file = Path(command.removeprefix("done ").strip())
        await drain(watches)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    cpu_share = (time.process_time() - cpu) / (time.monotonic() - began)
    return {**summary(watches, read_acks(acks_file)), "cpu": cpu_share}


def read_acks(path: Path) -> dict[int, float]:
    return {int(number): float(at) for number, at in json.loads(path.read_text()).items()}


async def drain(watches: list[Watch]) -> None:
    """Waits for the end marker on every watch while Events keep arriving: it gives up once
    nothing has arrived for STALL_LIMIT seconds (what has not arrived then counts as lost)."""
    seen = -1
    while seen != (seen := sum(len(watch.received) for watch in watches)):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STALL_LIMIT):
                await asyncio.gather(*(watch.ended.wait() for watch in watches))
                return


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.watchers")
    for flag in ("--url", "--path", "--token", "--rv", "--prefix"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--watchers", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(watch_all(args))), flush=True)


if __name__ == "__main__":
    main()
