"""Several worker processes on one port (`--workers`): to its users the server is still one.

The workers share one listening socket, and a new connection goes to a worker holding the fewest
(http/acceptor.py). Whatever worker a request reaches, it reads every write any worker
acknowledged, and every watch sees every write in order, on SQLite (the workers poll the shared
log) as on etcd. /metrics answers for all workers. Signals, a worker's crash and the supervisor's
death end the whole server; a start error is one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.api import EV_PATH
from tests.support.server import BACKENDS, ServerProcess, backend_args, children, free_port, start_server
from tests.support.waiting import wait_until

WORKERS = 2
NAMESPACE = "workers"
WRITES = 30


@pytest.fixture(scope="module", params=BACKENDS)
def workers_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    args = [*backend_args(request, request.param), "--workers", str(WORKERS)]
    process = start_server(tmp_path_factory.mktemp(f"workers-{request.param}"), args)
    try:
        yield process
    finally:
        process.stop()


def alive(pid: int) -> bool:
    """Whether any thread of the process still runs. Its main thread is a zombie as soon as it has
    exited, while another (SQLite's, in an fsync) may still hold the process's sockets open."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    return any(_running(task / "stat") for task in tasks)


def _running(stat: Path) -> bool:
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def event(name: str) -> dict[str, object]:
    return {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "eventTime": "2026-11-24T10:00:00.000000Z",
        "reportingController": "example.com/workers",
        "reportingInstance": "test",
        "action": "Check",
        "reason": "Checked",
        "regarding": {"kind": "Pod", "name": "p", "namespace": NAMESPACE},
        "type": "Normal",
    }


def run_to_exit(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`coreio-apiserver` run until it exits (for the ones that must not start)."""
    command = [sys.executable, "-m", "apiserver", "--data-dir", str(data_dir), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def fresh_session(server: ServerProcess) -> aiohttp.ClientSession:
    """A session whose every request opens its own connection (so each goes to any worker)."""
    connector = aiohttp.TCPConnector(ssl=server.ssl_context(), force_close=True)
    return aiohttp.ClientSession(connector=connector)


def pinned_session(server: ServerProcess) -> aiohttp.ClientSession:
    """A session of one connection, kept open: its requests all go to the worker that accepted it
    (one holding the fewest connections when it was opened)."""
    connector = aiohttp.TCPConnector(ssl=server.ssl_context(), limit=1)
    return aiohttp.ClientSession(connector=connector)


async def watch(server: ServerProcess, rv: str, count: int, ready: asyncio.Event) -> list[tuple[str, str]]:
    url = f"{server.url}{EV_PATH}/namespaces/{NAMESPACE}/events?watch=1&resourceVersion={rv}"
    seen: list[tuple[str, str]] = []
    async with fresh_session(server) as session, session.get(url) as answer:
        assert answer.status == 200
        ready.set()
        async for line in answer.content:
            item = json.loads(line)
            seen.append((item["type"], item["object"]["metadata"]["name"]))
            if len(seen) == count:
                break
    return seen


def served(metrics: str, verb: str, code: str) -> dict[str, float]:
    """Event requests of `verb` answered `code`, by worker, as /metrics counts them."""
    pattern = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)
    counted: dict[str, float] = {}
    for match in pattern.finditer(metrics):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if labels.get("verb") == verb and labels.get("resource") == "events" and labels["code"] == code:
            counted[labels["worker"]] = counted.get(labels["worker"], 0) + float(match["value"])
    return counted


def served_creates(metrics: str) -> dict[str, float]:
    return served(metrics, "POST", "201")


async def _metrics(server: ServerProcess) -> str:
    async with fresh_session(server) as session, session.get(f"{server.url}/metrics") as answer:
        return await answer.text()


async def _on_two_workers(
    server: ServerProcess, url: str, stack: contextlib.AsyncExitStack
) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession]:
    """Two pinned sessions whose connections two different workers hold (each new connection goes
    to a worker holding the fewest, so a few are opened until one lands on another worker; all stay
    open until `stack` closes)."""
    found: dict[str, aiohttp.ClientSession] = {}
    for _ in range(8):
        session = await stack.enter_async_context(pinned_session(server))
        before = served(await _metrics(server), "GET", "404")
        async with session.get(url) as answer:
            assert answer.status == 404
        after = served(await _metrics(server), "GET", "404")
        worker = next(w for w in after if after[w] != before.get(w, 0))
        found.setdefault(worker, session)
        if len(found) == 2:
            return found["0"], found["1"]
    raise AssertionError(f"every kept connection went to one worker: {list(found)}")


async def _every_worker_accepting(server: ServerProcess, url: str) -> None:
    """Returns once each worker has answered a connection of its own (a worker but the first
    accepts only once ready, after the server's /readyz first passes): while a kept connection
    holds one worker, a new one goes to the other as soon as it accepts."""
    async with pinned_session(server) as held, fresh_session(server) as session:
        for _ in range(200):
            for client in (held, session):
                async with client.get(url) as answer:
                    assert answer.status == 404
            if len(served(await _metrics(server), "GET", "404")) == WORKERS:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("a worker never accepted a connection")


async def test_connections_opened_at_once_are_shared_out_evenly(workers_server: ServerProcess) -> None:
    """32 clients connect at once, as a client's pool does, each keeping its connection: the
    workers hold 16 each (give or take one), where the kernel's hash of SO_REUSEPORT sockets split
    them as it fell (11 and 21 was common), and the busier worker capped the server."""
    server = workers_server
    url = f"{server.url}{EV_PATH}/namespaces/{NAMESPACE}/events/absent"
    await _every_worker_accepting(server, url)
    before = served(await _metrics(server), "GET", "404")
    sessions = [
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=server.ssl_context())) for _ in range(32)
    ]
    try:

        async def get(session: aiohttp.ClientSession) -> int:
            async with session.get(url) as answer:
                return answer.status

        assert await asyncio.gather(*(get(session) for session in sessions)) == [404] * 32
    finally:
        await asyncio.gather(*(session.close() for session in sessions))
    after = served(await _metrics(server), "GET", "404")
    each = [after.get(str(i), 0) - before.get(str(i), 0) for i in range(WORKERS)]
    assert sum(each) == 32 and max(each) - min(each) <= 2, each


async def test_every_worker_reads_and_watches_the_writes_of_every_other(
    workers_server: ServerProcess,
) -> None:
    server = workers_server
    base = f"{server.url}{EV_PATH}/namespaces/{NAMESPACE}/events"
    await _every_worker_accepting(server, f"{base}/absent")
    async with fresh_session(server) as session, session.get(base) as listed:
        rv = (await listed.json())["metadata"]["resourceVersion"]
    ready = [asyncio.Event() for _ in range(4)]
    watchers = [asyncio.create_task(watch(server, rv, WRITES, r)) for r in ready]
    await asyncio.gather(*(r.wait() for r in ready))
    names = [f"e{i:02d}" for i in range(WRITES)]
    # A kept connection on each of two workers: each write is read at once through the other.
    async with contextlib.AsyncExitStack() as stack:
        one, two = await _on_two_workers(server, f"{base}/absent", stack)
        for index, name in enumerate(names):
            writer, reader = (one, two) if index % 2 else (two, one)
            async with writer.post(base, json=event(name)) as created:
                assert created.status == 201, await created.text()
            async with reader.get(f"{base}/{name}") as got:
                assert got.status == 200, f"{name}: {await got.text()}"
            async with reader.get(base) as listed:
                assert name in {i["metadata"]["name"] for i in (await listed.json())["items"]}
    seen = await asyncio.wait_for(asyncio.gather(*watchers), timeout=30)
    metrics = await _metrics(server)
    assert all(s == [("ADDED", n) for n in names] for s in seen), seen
    creates = served_creates(metrics)
    assert set(creates) == {str(i) for i in range(WORKERS)}, f"not every worker served creates: {creates}"
    assert sum(creates.values()) == WRITES


async def test_a_watch_on_one_worker_sees_anothers_writes_at_once(workers_server: ServerProcess) -> None:
    """On SQLite the writing worker rings the others after its commit (storage/sqlite/doorbell.py);
    they poll the log only every second besides, so a watch that heard of writes by polling alone
    would see them about half a second late."""
    server = workers_server
    base = f"{server.url}{EV_PATH}/namespaces/{NAMESPACE}/events"
    await _every_worker_accepting(server, f"{base}/absent")
    async with fresh_session(server) as session, session.get(base) as listed:
        rv = (await listed.json())["metadata"]["resourceVersion"]
    names = [f"late-{i:02d}" for i in range(20)]
    arrived: dict[str, float] = {}
    async with contextlib.AsyncExitStack() as stack:
        watching, writing = await _on_two_workers(server, f"{base}/absent", stack)
        stream = await stack.enter_async_context(watching.get(f"{base}?watch=1&resourceVersion={rv}"))
        assert stream.status == 200

        async def read() -> None:
            async for line in stream.content:
                arrived[json.loads(line)["object"]["metadata"]["name"]] = time.monotonic()
                if len(arrived) == len(names):
                    return

        reading = asyncio.create_task(read())
        answered: dict[str, float] = {}
        for name in names:
            async with writing.post(base, json=event(name)) as created:
                assert created.status == 201, await created.text()
            answered[name] = time.monotonic()
            await asyncio.sleep(0.05)  # spread out, as a poll's phase would be
        await asyncio.wait_for(reading, timeout=30)
    late = sorted(arrived[name] - answered[name] for name in names)
    assert list(arrived) == names
    assert late[len(late) // 2] < 0.1, f"seconds from each 201 to its event on the other worker: {late}"


def test_on_etcd_only_the_first_worker_lists_the_storage_as_the_caches_fill(
    workers_server: ServerProcess,
) -> None:
    """On etcd the other worker's caches took the first worker's pages (storage/cacher/handoff.py):
    etcd served the start's lists once. On SQLite each worker reads the file itself. Everything
    above read through both workers."""
    log = workers_server.log_file.read_text()
    on_etcd = "--etcd-servers" in workers_server.extra_args
    for root in ("/registry/events.core.io/events/", "/registry/rbac.authorization.core.io/rolebindings/"):
        taken = f"[worker 1]: watch cache of {root} takes the first worker's list at revision"
        assert (taken in log) is on_etcd, log
        assert f"[worker 0]: watch cache of {root} takes" not in log, log


def test_sigterm_stops_every_worker_and_exits_0(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", ["--workers", str(WORKERS)])
    assert server.process is not None
    workers = children(server.process.pid)
    assert len(workers) == WORKERS
    server.stop()
    assert server.process.returncode == 0, server.log_file.read_text()
    assert not any(alive(pid) for pid in workers)
    log = server.log_file.read_text()
    assert log.count("serving on") == 1, "only the first worker says where it serves"
    assert f"serving on {server.url} (storage: sqlite" in log and f"; {WORKERS} workers;" in log
    # uvloop's loop is installed with coreio on Linux (apiserver.machinery.eventloop).
    assert "event loop: uvloop.Loop)" in log


def test_a_worker_that_dies_ends_the_server_with_status_1(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", ["--workers", str(WORKERS)])
    assert server.process is not None
    victim, *others = sorted(children(server.process.pid))
    os.kill(victim, signal.SIGKILL)
    code = server.process.wait(timeout=20)
    log = server.log_file.read_text()
    assert code == 1, log
    assert not any(alive(pid) for pid in others)
    assert re.search(
        rf"worker \d \(pid {victim}\) exited with status -9; the other workers were stopped", log
    )


def test_a_worker_whose_event_loop_stops_is_aborted_with_its_stacks_and_ends_the_server(
    tmp_path: Path,
) -> None:
    """A worker that still holds the connections it accepted but no longer turns its event loop
    (stopped here with SIGSTOP) is aborted once --worker-hang-timeout has passed, and the server ends
    with status 1 for whatever restarts it; a pause shorter than that is let be."""
    server = start_server(tmp_path / "data", ["--workers", str(WORKERS), "--worker-hang-timeout", "3s"])
    assert server.process is not None
    victim, *others = sorted(children(server.process.pid))
    try:
        code = _stopped_twice(server, victim)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGCONT)
        server.stop()
    log = server.log_file.read_text()
    assert code == 1, log
    assert re.search(rf"worker \d \(pid {victim}\) has not turned its event loop for 3s: aborting it", log)
    assert "Fatal Python error: Aborted" in log and "most recent call first" in log, log
    assert re.search(
        rf"worker \d \(pid {victim}\) exited with status -6; the other workers were stopped", log
    )
    assert not any(alive(pid) for pid in others)


def _stopped_twice(server: ServerProcess, victim: int) -> int:
    """`victim` stopped for less than the hang timeout (the server serves on), then until the
    watchdog aborts it; the server's exit status."""
    assert server.process is not None
    asyncio.run(
        _every_worker_accepting(server, f"{server.url}{EV_PATH}/namespaces/{NAMESPACE}/events/absent")
    )
    os.kill(victim, signal.SIGSTOP)
    time.sleep(1.5)
    os.kill(victim, signal.SIGCONT)
    time.sleep(3)
    assert server.process.poll() is None and "aborting it" not in server.log_file.read_text()
    os.kill(victim, signal.SIGSTOP)
    wait_until(
        lambda: "has not turned its event loop" in server.log_file.read_text(),
        timeout=15,
        message="the watchdog to abort the stopped worker",
    )
    os.kill(victim, signal.SIGCONT)  # the SIGABRT pending since is taken: its stacks are written
    return server.process.wait(timeout=20)


def test_killing_the_supervisor_kills_its_workers_and_frees_the_port(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", ["--workers", str(WORKERS)])
    assert server.process is not None
    workers = children(server.process.pid)
    server.process.kill()
    server.process.wait(timeout=10)
    wait_until(lambda: not any(alive(pid) for pid in workers), timeout=5, message="the workers to exit")
    # Nobody listens there any more: a connection is refused. (A bind to the port is no proof
    # either way: a socket whose ephemeral local port happens to be that one would refuse it.)
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("127.0.0.1", server.port))


def test_a_port_taken_by_a_server_of_several_workers_is_refused(tmp_path: Path) -> None:
    first = start_server(tmp_path / "first", ["--workers", str(WORKERS)])
    try:
        done = run_to_exit(tmp_path / "second", "--secure-port", str(first.port), "--workers", str(WORKERS))
    finally:
        first.stop()
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"coreio-apiserver: error: failed to listen on 127.0.0.1:{first.port}: listen tcp"
        f" 127.0.0.1:{first.port}: bind: address already in use"
    )


def test_a_start_error_in_every_worker_is_one_line(tmp_path: Path) -> None:
    port = free_port()  # no etcd there
    done = run_to_exit(
        tmp_path / "data",
        *("--secure-port", str(free_port()), "--workers", str(WORKERS)),
        *("--etcd-servers", f"http://127.0.0.1:{port}"),
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors == done.stderr.splitlines()[-1:], done.stderr
    assert errors[0].startswith(
        f"coreio-apiserver: error: cannot reach the storage (etcd http://127.0.0.1:{port}) within 5s: "
    )
