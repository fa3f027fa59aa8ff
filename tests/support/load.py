"""A small write load against a real server that records the outcome of every write, and the checks
a user makes of it afterwards (what was acknowledged is there; what failed is there at most once).

The load is `chains` RoleBindings, each written `writes_per_chain` times in sequence by one of
`concurrency` workers: a create, then updates that each add one subject (`User w-<seq>`) to what the
chain last read, with its resourceVersion as precondition. No write is retried and nothing is ever
deleted, so the subjects of an object are exactly the writes that took effect on it: an
acknowledged write's marker must be there, a failed one's there at most once. After a failure the
chain re-reads its object (a read, not counted as a write) and backs off, as a client would.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.support.api import rb_path, rolebinding
from tests.support.waiting import async_wait_until

JSON = dict[str, Any]


@dataclass
class Outcome:
    """One write as its client saw it: status None when no HTTP answer came (`error` says why)."""

    op: str  # "create" or "update"
    name: str
    seq: int
    started: float  # monotonic
    elapsed: float
    status: int | None
    error: str = ""
    resource_version: str = ""
    body: JSON | None = None

    @property
    def acknowledged(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def marker(seq: int) -> JSON:
    return {"kind": "User", "name": f"w-{seq}"}


@dataclass
class Load:
    base_url: str
    context: ssl.SSLContext
    namespace: str = "faults"
    chains: int = 200
    writes_per_chain: int = 5
    concurrency: int = 64
    client_timeout: float = 30.0
    backoff: float = 0.25
    outcomes: list[Outcome] = field(default_factory=list)
    # Once set, no chain is begun (those under way are finished): a load that runs for as long as
    # its test needs, `chains` its bound.
    stop: asyncio.Event | None = None

    @property
    def total(self) -> int:
        return self.chains * self.writes_per_chain

    async def run(self) -> list[Outcome]:
        connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=self.context, force_close=False)
        timeout = aiohttp.ClientTimeout(total=self.client_timeout)
        queue: asyncio.Queue[str] = asyncio.Queue()
        for index in range(self.chains):
            queue.put_nowait(f"rb-{index:04d}")
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def worker() -> None:
                delay = self.backoff  # kept across chains: a worker facing an outage stays patient
                while not queue.empty() and not (self.stop is not None and self.stop.is_set()):
                    delay = await self._chain(session, queue.get_nowait(), delay)

            await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return self.outcomes

    async def _chain(self, session: aiohttp.ClientSession, name: str, delay: float) -> float:
        """Writes one chain; returns the back-off its worker is at."""
        current: JSON | None = None
        for seq in range(self.writes_per_chain):
            if current is None:
                outcome = await self._write(
                    session, "create", name, seq, rolebinding(name, subjects=[marker(seq)])
                )
            else:
                body = dict(current, subjects=[*current.get("subjects", []), marker(seq)])
                outcome = await self._write(session, "update", name, seq, body)
            if outcome.acknowledged:
                current, delay = outcome.body, self.backoff
                continue
            await asyncio.sleep(delay)  # a client's backoff before it retries
            delay = min(delay * 2, 2.0)
            current = await self._read(session, name)
        return delay

    async def _write(
        self, session: aiohttp.ClientSession, op: str, name: str, seq: int, body: JSON
    ) -> Outcome:
        method, url = ("POST", self.url()) if op == "create" else ("PUT", self.url(name))
        started = time.monotonic()
        outcome = Outcome(op, name, seq, started, 0.0, None)
        try:
            async with session.request(method, url, json=body) as response:
                outcome.status = response.status
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            outcome.error = f"{type(error).__name__}: {error}"
        else:
            try:
                outcome.body = json.loads(text)
            except ValueError:
                outcome.error = f"not JSON: {text[:200]!r}"
            if outcome.body is not None and outcome.acknowledged:
                outcome.resource_version = str(outcome.body["metadata"]["resourceVersion"])
        outcome.elapsed = time.monotonic() - started
        self.outcomes.append(outcome)
        return outcome

    async def _read(self, session: aiohttp.ClientSession, name: str) -> JSON | None:
        """The object as it is now; None when it is absent or cannot be read."""
        try:
            async with session.get(self.url(name)) as response:
                if response.status == 200:
                    body: JSON = await response.json()
                    return body
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            pass
        return None

    def url(self, name: str = "") -> str:
        return self.base_url + rb_path(self.namespace, name)


async def wait_for_writes(load: Load, count: int, within: float = 60) -> None:
    """Returns once `count` writes of the load have an outcome."""
    await async_wait_until(
        lambda: len(load.outcomes) >= count,
        timeout=within,
        interval=0.01,
        message=lambda: f"{count} writes done (only {len(load.outcomes)})",
    )


@dataclass
class Verdict:
    """What the final state says about every write."""

    acknowledged: int = 0
    acknowledged_missing: list[str] = field(default_factory=list)
    acknowledged_stale: list[str] = field(default_factory=list)
    failed_present: int = 0
    failed_absent: int = 0
    duplicated: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        return (
            f"writes {sum(self.statuses.values())}: acknowledged {self.acknowledged}"
            f" (missing {len(self.acknowledged_missing)}, stale {len(self.acknowledged_stale)});"
            f" failed {self.failed_present + self.failed_absent} (took effect {self.failed_present},"
            f" absent {self.failed_absent}); duplicated {len(self.duplicated)};"
            f" answers {dict(sorted(self.statuses.items()))}"
        )


def judge(outcomes: list[Outcome], final: dict[str, JSON], revision: Callable[[str], int] = int) -> Verdict:
    """Checks every write against `final` (name -> the object as listed at the end)."""
    verdict = Verdict()
    for outcome in outcomes:
        verdict.statuses[str(outcome.status) if outcome.status is not None else "no answer"] += 1
        obj = final.get(outcome.name)
        names = [subject["name"] for subject in obj.get("subjects", [])] if obj else []
        count = names.count(marker(outcome.seq)["name"])
        where = f"{outcome.op} {outcome.name} w-{outcome.seq}"
        if count > 1:
            verdict.duplicated.append(where)
        if outcome.acknowledged:
            verdict.acknowledged += 1
            if count == 0:
                verdict.acknowledged_missing.append(
                    f"{where} (acknowledged at rv {outcome.resource_version})"
                )
            elif obj is not None and revision(obj["metadata"]["resourceVersion"]) < revision(
                outcome.resource_version
            ):
                verdict.acknowledged_stale.append(where)
        elif count:
            verdict.failed_present += 1
        else:
            verdict.failed_absent += 1
    return verdict
