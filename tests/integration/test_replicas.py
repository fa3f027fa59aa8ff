"""Replicas on one etcd, and linearizable updates (issue 10, items 9 and 6).

1. Two coreio processes serve one real etcd (same --etcd-prefix, their own data directories and
   ports). A watch on replica A delivers every write made through replica B, in revision order,
   none missing; a PUT through A with a resourceVersion that an update through B made stale is
   409; with both replicas under write load, replica B is killed with SIGKILL (and started again a
   second later): every write acknowledged by either replica is present afterwards
   (tests/support/load.py), and a watch on A saw each change B's load made, once, in order.
2. 16 clients increment a counter annotation of one RoleBinding, by read-modify-write PUTs (GET,
   +1, PUT with the resourceVersion read; 409 means retry) and by JSON patches (`test` the value
   read, `replace` it by the next; 422 or 409 means retry): on SQLite (one server) and on etcd
   across two replicas. Every request is recorded (client, start, end, value read, value written,
   outcome) and `check_counter_history` checks the history is linearizable for a register that
   each successful write moves from v to v+1:
   - the successful writes wrote exactly 1..N, each once, and the final value is N;
   - real time: a write that ended before another started wrote the smaller value;
   - every read returns a value that was written (or 0), no older than any write that completed
     before the read started, and written by a write that started before the read ended.
   Failed writes (409/422) are recorded and counted but not checked further.
   Because each write sets v+1 only if it read v (a precondition the server checks), distinct
   values 1..N that respect real time give a linearization: the writes in value order, each read
   placed right after the write of the value it returned.

Each test prints its figures (`pytest -s`). The default run takes about 10 s in all; the `soak`
variants (`pytest -m soak tests/integration/test_replicas.py`) kill B three times under 3,000 writes
and have 32 clients make 800 increments (about 25 s each).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.api import rb_path, rolebinding
from tests.support.load import JSON, Load, judge, wait_for_writes
from tests.support.server import ServerProcess, free_port
from tests.support.waiting import async_wait_until

ANNOTATION = "coreio.test/counter"
ANNOTATION_POINTER = "/metadata/annotations/coreio.test~1counter"


@dataclass(frozen=True)
class Contention:
    """How many clients increment the counter, and how many times each."""

    clients: int
    increments: int


CONTENTION = [
    pytest.param(Contention(clients=16, increments=6), id="16x6"),
    pytest.param(Contention(clients=32, increments=25), id="soak-32x25", marks=pytest.mark.soak),
]


def replica(data_dir: Path, etcd: str, prefix: str) -> ServerProcess:
    return ServerProcess(
        data_dir=data_dir,
        port=free_port(),
        extra_args=["--request-timeout", "5s", "--etcd-servers", etcd, "--etcd-prefix", prefix],
    )


@asynccontextmanager
async def running(*servers: ServerProcess) -> AsyncIterator[None]:
    try:
        await asyncio.gather(*(asyncio.to_thread(server.start) for server in servers))
        yield
    finally:
        await asyncio.gather(*(asyncio.to_thread(server.stop) for server in servers))


def session_for(server: ServerProcess, limit: int = 100) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=server.ssl_context(), limit=limit),
        timeout=aiohttp.ClientTimeout(total=30),
    )


async def call(session: aiohttp.ClientSession, method: str, url: str, **kwargs: Any) -> tuple[int, JSON]:
    async with session.request(method, url, **kwargs) as answer:
        body: JSON = await answer.json(content_type=None)
        return answer.status, body


# --- 1. replicas on one etcd ----------------------------------------------------------------------


@pytest.mark.etcd
@pytest.mark.parametrize(
    "kills", [pytest.param(1, id="once"), pytest.param(3, id="soak", marks=pytest.mark.soak)]
)
async def test_replicas_on_one_etcd_share_watch_order_concurrency_and_acknowledged_writes(
    tmp_path: Path, etcd_endpoint: str, kills: int
) -> None:
    prefix = f"/replicas-{uuid.uuid4().hex[:12]}"
    a = replica(tmp_path / "a", etcd_endpoint, prefix)
    b = replica(tmp_path / "b", etcd_endpoint, prefix)
    async with running(a, b), session_for(a) as on_a, session_for(b) as on_b:
        watched = await watch_sees_other_replicas_writes(a, b, on_a, on_b)
        await stale_put_through_a_conflicts(a, b, on_a, on_b)
        await kill_replica_under_load(a, b, on_a, kills)
    print(f"[replicas watch] {json.dumps(watched)}")


async def watch_sees_other_replicas_writes(
    a: ServerProcess, b: ServerProcess, on_a: aiohttp.ClientSession, on_b: aiohttp.ClientSession
) -> dict[str, Any]:
    """200 writes through B (100 creates, 100 updates, 16 at a time) while A watches the namespace."""
    namespace = "watched"
    status, listed = await call(on_a, "GET", a.url + rb_path(namespace))
    assert status == 200, listed
    start_rv = listed["metadata"]["resourceVersion"]
    acknowledged: list[tuple[str, str, str]] = []  # (type, name, resourceVersion)
    limit = asyncio.Semaphore(16)

    async def create_then_update(index: int) -> None:
        name = f"rb-{index:03d}"
        async with limit:
            status, body = await call(on_b, "POST", b.url + rb_path(namespace), json=rolebinding(name))
            assert status == 201, body
            acknowledged.append(("ADDED", name, body["metadata"]["resourceVersion"]))
            body["subjects"].append({"kind": "User", "name": "bob"})
            status, body = await call(on_b, "PUT", b.url + rb_path(namespace, name), json=body)
            assert status == 200, body
            acknowledged.append(("MODIFIED", name, body["metadata"]["resourceVersion"]))

    seen: list[tuple[str, str, str]] = []
    url = a.url + rb_path(namespace) + f"?watch=1&resourceVersion={start_rv}&timeoutSeconds=50"
    async with on_a.get(url) as stream:
        assert stream.status == 200
        started = time.monotonic()
        writes = asyncio.gather(*(create_then_update(index) for index in range(100)))
        while len(seen) < 200:
            line = await asyncio.wait_for(stream.content.readline(), timeout=20)
            assert line, f"watch ended after {len(seen)} events"
            event = json.loads(line)
            if event["type"] == "BOOKMARK":
                continue
            meta = event["object"]["metadata"]
            seen.append((event["type"], meta["name"], meta["resourceVersion"]))
        delivered = time.monotonic() - started
        await writes
    revisions = [int(rv) for _, _, rv in seen]
    assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions), "out of order"
    assert sorted(seen, key=lambda e: int(e[2])) == sorted(acknowledged, key=lambda e: int(e[2]))
    return {
        "writes through B": len(acknowledged),
        "events on A": len(seen),
        "in order": True,
        "all delivered within (s)": round(delivered, 2),
    }


async def stale_put_through_a_conflicts(
    a: ServerProcess, b: ServerProcess, on_a: aiohttp.ClientSession, on_b: aiohttp.ClientSession
) -> None:
    namespace, name = "occ", "shared"
    status, created = await call(on_a, "POST", a.url + rb_path(namespace), json=rolebinding(name))
    assert status == 201, created
    status, read_a = await call(on_a, "GET", a.url + rb_path(namespace, name))
    assert status == 200, read_a
    status, read_b = await call(on_b, "GET", b.url + rb_path(namespace, name))
    assert read_b["metadata"]["resourceVersion"] == read_a["metadata"]["resourceVersion"]
    read_b["subjects"] = [{"kind": "User", "name": "through-b"}]
    status, updated = await call(on_b, "PUT", b.url + rb_path(namespace, name), json=read_b)
    assert status == 200, updated
    read_a["subjects"] = [{"kind": "User", "name": "through-a"}]
    status, conflict = await call(on_a, "PUT", a.url + rb_path(namespace, name), json=read_a)
    assert status == 409 and conflict["reason"] == "Conflict", conflict
    status, now = await call(on_a, "GET", a.url + rb_path(namespace, name))
    assert [subject["name"] for subject in now["subjects"]] == ["through-b"], now
    assert now["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]
    print(
        f"\n[replicas occ] update through B at rv {updated['metadata']['resourceVersion']}; PUT through"
        f" A with rv {read_a['metadata']['resourceVersion']}: {status_line(409, conflict)}"
    )


def status_line(status: int, body: JSON) -> str:
    return f"{status} {body.get('reason')}: {body.get('message')}"


async def kill_replica_under_load(
    a: ServerProcess, b: ServerProcess, on_a: aiohttp.ClientSession, kills: int
) -> None:
    """A load on each replica (its own namespace, `chains` objects x 5 writes); B is killed `kills`
    times, 150 writes of its load apart, and started again a second later on its data directory and
    port. A watch on A follows B's namespace throughout."""
    chains = 100 * kills
    load_a = Load(
        a.url, a.ssl_context(), namespace="load-a", chains=chains, concurrency=32, client_timeout=15
    )
    load_b = Load(
        b.url, b.ssl_context(), namespace="load-b", chains=chains, concurrency=32, client_timeout=15
    )
    status, listed = await call(on_a, "GET", a.url + rb_path(load_b.namespace))
    assert status == 200, listed
    seen: list[tuple[str, int]] = []  # (name, revision) of each event on A for B's namespace
    url = a.url + rb_path(load_b.namespace)
    url += f"?watch=1&resourceVersion={listed['metadata']['resourceVersion']}&timeoutSeconds=200"
    async with on_a.get(url, timeout=aiohttp.ClientTimeout(total=None)) as stream:
        assert stream.status == 200

        async def follow() -> None:
            async for line in stream.content:
                event = json.loads(line)
                if event["type"] != "BOOKMARK":
                    meta = event["object"]["metadata"]
                    seen.append((meta["name"], int(meta["resourceVersion"])))

        following = asyncio.create_task(follow())
        both = asyncio.gather(load_a.run(), load_b.run())
        down = await kill_repeatedly(b, load_b, kills)
        await asyncio.wait_for(both, timeout=240)
        figures: dict[str, Any] = {"B killed": kills, "B down (s)": down}
        finals = {
            title: await judged(on_a, a, load, title, figures)
            for title, load in (("A", load_a), ("B", load_b))
        }
        newest = max(int(item["metadata"]["resourceVersion"]) for item in finals["B"].values())
        await async_wait_until(
            lambda: seen and seen[-1][1] >= newest,
            timeout=20,
            message=lambda: f"the watch on A at the newest rv {newest}: stopped at {seen[-1:]}",
        )
        following.cancel()
    check_watched(seen, load_b, finals["B"])
    figures["events on A for B's writes"] = len(seen)
    assert any(not o.acknowledged for o in load_b.outcomes), "the kill failed no write on B"
    assert all(o.acknowledged for o in load_a.outcomes), Counter(o.status for o in load_a.outcomes)
    print(f"\n[replica killed] {json.dumps(figures)}")


async def kill_repeatedly(b: ServerProcess, load_b: Load, kills: int) -> list[float]:
    """Kills B (SIGKILL) `kills` times under its load, restarting it a second later; seconds down."""
    down: list[float] = []
    for index in range(kills):
        await wait_for_writes(load_b, 150 * (index + 1) + 50 * index)
        assert b.process is not None
        killed = time.monotonic()
        b.process.kill()
        await asyncio.to_thread(b.process.wait, 10)
        await asyncio.sleep(1.0)  # down a second: the fault itself
        await asyncio.to_thread(b.start)
        down.append(round(time.monotonic() - killed, 2))
    return down


async def judged(
    on_a: aiohttp.ClientSession, a: ServerProcess, load: Load, title: str, figures: dict[str, Any]
) -> dict[str, JSON]:
    """The load's objects as listed through A, every acknowledged write checked present."""
    status, listed = await call(on_a, "GET", a.url + rb_path(load.namespace))
    assert status == 200, listed
    final = {item["metadata"]["name"]: item for item in listed["items"]}
    verdict = judge(load.outcomes, final)
    figures[f"load on {title}"] = verdict.summary()
    assert verdict.acknowledged > 0
    assert not verdict.acknowledged_missing, verdict.acknowledged_missing[:20]
    assert not verdict.acknowledged_stale, verdict.acknowledged_stale[:20]
    assert not verdict.duplicated, verdict.duplicated[:20]
    return final


def check_watched(seen: list[tuple[str, int]], load_b: Load, final_b: dict[str, JSON]) -> None:
    """A's watch of B's namespace: in revision order, each acknowledged write of B's load there, and
    one event per change that took effect (acknowledged, or failed but applied)."""
    revisions = [revision for _, revision in seen]
    assert revisions == sorted(set(revisions)), "watch on A out of order or repeated"
    events = set(seen)
    missing = [
        (o.name, o.resource_version)
        for o in load_b.outcomes
        if o.acknowledged and (o.name, int(o.resource_version)) not in events
    ]
    assert not missing, missing[:20]
    took_effect = sum(len(item["subjects"]) for item in final_b.values())
    assert len(seen) == took_effect, (len(seen), took_effect)


# --- 2. linearizable updates ----------------------------------------------------------------------


@dataclass
class Op:
    """One request as its client saw it. kind: "read" (GET), "put" or "patch"; for a write, `read`
    is the value it expects to replace and `wrote` read + 1; ok: whether it took effect (2xx)."""

    client: int
    kind: str
    start: float
    end: float
    read: int
    wrote: int | None
    status: int
    ok: bool


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)


def counter_of(obj: JSON) -> int:
    return int((obj["metadata"].get("annotations") or {}).get(ANNOTATION, "0"))


async def increment(
    client: int, session: aiohttp.ClientSession, url: str, use_patch: bool, history: History
) -> int:
    """One successful increment, retried on conflict; returns the attempts it took."""
    attempts = 0
    while True:
        attempts += 1
        start = time.monotonic()
        status, obj = await call(session, "GET", url)
        end = time.monotonic()
        assert status == 200, obj
        value = counter_of(obj)
        history.ops.append(Op(client, "read", start, end, value, None, status, True))
        start = time.monotonic()
        if use_patch:
            patch = [
                {"op": "test", "path": ANNOTATION_POINTER, "value": str(value)},
                {"op": "replace", "path": ANNOTATION_POINTER, "value": str(value + 1)},
            ]
            status, body = await call(
                session,
                "PATCH",
                url,
                data=json.dumps(patch),
                headers={"Content-Type": "application/json-patch+json"},
            )
            retry: tuple[int, ...] = (409, 422)
        else:
            obj["metadata"]["annotations"][ANNOTATION] = str(value + 1)
            status, body = await call(session, "PUT", url, json=obj)
            retry = (409,)
        end = time.monotonic()
        ok = 200 <= status < 300
        history.ops.append(
            Op(client, "patch" if use_patch else "put", start, end, value, value + 1, status, ok)
        )
        if ok:
            assert counter_of(body) == value + 1, body
            return attempts
        assert status in retry, (status, body)


def check_counter_history(ops: list[Op], final: int) -> dict[str, Any]:
    """The checks of the module docstring; returns figures."""
    writes = sorted((op for op in ops if op.wrote is not None and op.ok), key=lambda op: op.wrote or 0)
    values = [op.wrote for op in writes]
    n = len(writes)
    assert values == list(range(1, n + 1)), (
        f"written values not exactly 1..{n}: {Counter(values).most_common(5)}"
    )
    assert final == n, (final, n)
    by_value = {op.wrote: op for op in writes}
    # Real time between writes: a write that ended before b started wrote less than b.
    for b in writes:
        before = [a for a in writes if a.end < b.start]
        assert all((a.wrote or 0) < (b.wrote or 0) for a in before), b
    # Reads: a written value (or 0), not older than any write completed before the read started,
    # and written by a write that started before the read ended (nothing read from the future).
    reads = [op for op in ops if op.kind == "read"]
    for r in reads:
        assert r.read == 0 or r.read in by_value, r
        floor = max((a.wrote or 0 for a in writes if a.end < r.start), default=0)
        assert r.read >= floor, f"stale read {r.read} < {floor}: {r}"
        if r.read:
            assert by_value[r.read].start < r.end, f"read {r.read} before its write started: {r}"
    return {
        "successful writes": n,
        "reads": len(reads),
        "failed writes": sum(1 for op in ops if op.wrote is not None and not op.ok),
    }


async def run_counter(servers: list[ServerProcess], namespace: str, contention: Contention) -> dict[str, Any]:
    sessions = [session_for(server) for server in servers]
    try:
        urls = [server.url + rb_path(namespace, "counter") for server in servers]
        status, body = await call(
            sessions[0],
            "POST",
            servers[0].url + rb_path(namespace),
            json=rolebinding("counter", metadata={"name": "counter", "annotations": {ANNOTATION: "0"}}),
        )
        assert status == 201, body
        history = History()
        started = time.monotonic()

        async def client(index: int) -> list[int]:
            where = index % len(servers)  # clients spread over the replicas
            return [
                await increment(index, sessions[where], urls[where], (index + round_) % 2 == 1, history)
                for round_ in range(contention.increments)
            ]

        per_client = await asyncio.gather(*(client(index) for index in range(contention.clients)))
        attempts = [n for counts in per_client for n in counts]
        took = time.monotonic() - started
        finals = []
        for session, url in zip(sessions, urls, strict=True):
            status, body = await call(session, "GET", url)
            finals.append(counter_of(body))
        assert len(set(finals)) == 1, finals
    finally:
        for session in sessions:
            await session.close()
    figures = check_counter_history(history.ops, finals[0])
    assert figures["successful writes"] == contention.clients * contention.increments
    statuses = Counter(f"{op.kind} {op.status}" for op in history.ops if op.kind != "read")
    figures.update(
        {
            "final value": finals[0],
            "answers": dict(sorted(statuses.items())),
            "attempts per increment (max)": max(attempts),
            "took (s)": round(took, 2),
        }
    )
    return figures


@pytest.mark.parametrize("contention", CONTENTION)
async def test_linearizable_counter_on_sqlite(tmp_path: Path, contention: Contention) -> None:
    server = ServerProcess(data_dir=tmp_path / "coreio", port=free_port(), extra_args=[])
    async with running(server):
        figures = await run_counter([server], "counter", contention)
    print(f"\n[counter sqlite, {contention.clients} clients] {json.dumps(figures)}")


@pytest.mark.etcd
@pytest.mark.parametrize("contention", CONTENTION)
async def test_linearizable_counter_on_etcd_across_two_replicas(
    tmp_path: Path, etcd_endpoint: str, contention: Contention
) -> None:
    prefix = f"/counter-{uuid.uuid4().hex[:12]}"
    a = replica(tmp_path / "a", etcd_endpoint, prefix)
    b = replica(tmp_path / "b", etcd_endpoint, prefix)
    async with running(a, b):
        figures = await run_counter([a, b], "counter", contention)
    print(f"\n[counter etcd, 2 replicas, {contention.clients} clients] {json.dumps(figures)}")


def test_counter_checker_rejects_non_linearizable_histories() -> None:
    """The checker itself: a sound history passes; each kind of violation is caught."""

    def write(client: int, start: float, end: float, value: int) -> Op:
        return Op(client, "put", start, end, value - 1, value, 200, True)

    def read(start: float, end: float, value: int) -> Op:
        return Op(9, "read", start, end, value, None, 200, True)

    sound = [write(1, 0, 2, 1), write(2, 1, 3, 2), read(0.5, 4, 1), read(3.5, 4, 2), read(0, 0.1, 0)]
    assert check_counter_history(sound, 2)["successful writes"] == 2
    bad = {
        "duplicate value": ([write(1, 0, 1, 1), write(2, 2, 3, 1)], 1),
        "gap": ([write(1, 0, 1, 1), write(2, 2, 3, 3)], 3),
        "final differs": ([write(1, 0, 1, 1)], 2),
        "real-time order": ([write(1, 0, 1, 2), write(2, 2, 3, 1)], 2),
        "stale read": ([write(1, 0, 1, 1), read(2, 3, 0)], 1),
        "read from the future": ([read(0, 1, 1), write(1, 2, 3, 1)], 1),
        "value never written": ([write(1, 0, 1, 1), read(2, 3, 5)], 1),
    }
    for name, (ops, final) in bad.items():
        with pytest.raises(AssertionError):
            check_counter_history(ops, final)
            raise RuntimeError(f"checker accepted: {name}")
