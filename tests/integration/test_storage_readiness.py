"""A server restarted over many stored Events is not ready before its watch cache holds them: the
real server, on a SQLite database already holding EVENTS Events, answers /readyz 200 only once the
Events cache has its initial list and watch, and lists upstream's `poststarthook/storage-readiness`
among its checks; with --watch-cache=false that check passes from the first answer on."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.support.api import Api, ev_path, event
from tests.support.server import ServerProcess, free_port
from tests.support.waiting import wait_until

EVENTS = 10_000
NAMESPACE = "load"
ROOT = "/registry/events.core.io/events/"
DATABASE = "coreio.db"
CHECK = "poststarthook/storage-readiness"


async def store_events(path: Path) -> None:
    """EVENTS Events written straight into the database a server will open (as a previous run of the
    server left them: faster than through the API)."""
    storage = SQLiteStorage(str(path))
    await storage.start()
    try:
        writers = asyncio.Semaphore(64)

        async def write(number: int) -> None:
            name = f"e{number:05d}"
            obj = event(name, NAMESPACE)
            obj["metadata"] |= {
                "namespace": NAMESPACE,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": "2026-11-22T02:16:41Z",
            }
            async with writers:
                await storage.create(f"{ROOT}{NAMESPACE}/{name}", json.dumps(obj).encode())

        await asyncio.gather(*(write(number) for number in range(EVENTS)))
    finally:
        await storage.close()


@pytest.fixture(scope="module")
def stored_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory's database holding EVENTS Events (copied into each server's own)."""
    directory = tmp_path_factory.mktemp("events-db")
    asyncio.run(store_events(directory / DATABASE))
    return directory


@pytest.fixture
def data_dir(stored_events: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "coreio"
    directory.mkdir()
    for file in stored_events.glob(f"{DATABASE}*"):
        shutil.copy(file, directory / file.name)
    return directory


def readyz(server: ServerProcess) -> tuple[int, str] | None:
    """/readyz?verbose as a probe reads it, or None while nothing answers."""
    context = ssl.create_default_context(cafile=str(server.ca_file))
    try:
        with urllib.request.urlopen(f"{server.url}/readyz?verbose", context=context, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return None


@pytest.fixture
def launched(data_dir: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """The server on `data_dir` with the test's extra flags (`@pytest.mark.parametrize` of
    `flags`), started and not waited for: the test probes it from its first answer on."""
    flags: list[str] = getattr(request, "param", [])
    server = ServerProcess(data_dir=data_dir, port=free_port(), extra_args=flags)
    args = [
        sys.executable,
        "-m",
        server.module,
        "--data-dir",
        str(data_dir),
        "--secure-port",
        str(server.port),
    ]
    with server.log_file.open("ab") as log:
        server.process = subprocess.Popen([*args, *flags], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield server
    finally:
        server.stop()


def answers_until_ready(server: ServerProcess, within: float = 60) -> list[tuple[int, str, str]]:
    """Every answer of /readyz?verbose, polled until the first 200, each with the server's log as it
    stood when the answer came."""
    answers: list[tuple[int, str, str]] = []

    def ready() -> bool:
        assert server.process is not None and server.process.poll() is None, server.log_file.read_text()
        answer = readyz(server) if server.ca_file.exists() else None
        if answer is not None:
            answers.append((*answer, server.log_file.read_text()))
        return answer is not None and answer[0] == 200

    wait_until(ready, timeout=within, interval=0.02, message=lambda: f"/readyz ok: {answers[-1:]}")
    return answers


def cache_filled(log: str) -> bool:
    return f"watch cache of {ROOT} ready at revision" in log and f"({EVENTS} objects)" in log


def test_readyz_is_ok_only_once_the_events_watch_cache_holds_every_event(launched: ServerProcess) -> None:
    answers = answers_until_ready(launched)
    _, body, log = answers[-1]
    assert f"[+]{CHECK} ok\n" in body and body.endswith("readyz check passed\n"), body
    # When /readyz first said ready, the Events cache had listed all of them and was watching.
    assert cache_filled(log), log
    # Any earlier answer that came before that said not ready, and named the check that held it.
    for earlier_status, earlier_body, earlier_log in answers[:-1]:
        assert earlier_status == 500, earlier_body
        if not cache_filled(earlier_log):
            assert f"[-]{CHECK} failed: reason withheld\n" in earlier_body, earlier_body
    listed = Api(launched).get(ev_path(NAMESPACE)).json
    assert len(listed["items"]) == EVENTS


@pytest.mark.parametrize("launched", [["--workers=2"]], indirect=True)
def test_with_two_workers_each_is_ready_once_its_cache_holds_every_event(launched: ServerProcess) -> None:
    """Each worker says it holds every Event, and any connection (the kernel picks the worker)
    lists them all."""
    answers_until_ready(launched)
    pattern = rf"\[worker (\d)\]: watch cache of {ROOT} ready at revision \d+ \({EVENTS} objects\)"
    wait_until(lambda: set(re.findall(pattern, launched.log_file.read_text())) == {"0", "1"}, timeout=30)
    api = Api(launched)
    for _ in range(6):  # a new connection each: both workers answer some
        assert len(api.get(ev_path(NAMESPACE)).json["items"]) == EVENTS


@pytest.mark.parametrize("launched", [["--watch-cache=false"]], indirect=True)
def test_without_the_watch_cache_storage_readiness_passes_from_the_first_answer(
    launched: ServerProcess,
) -> None:
    answers = answers_until_ready(launched)
    for _, body, _ in answers:
        assert f"[+]{CHECK} ok\n" in body, body
    assert "watch cache of" not in answers[-1][2]
    assert len(Api(launched).get(ev_path(NAMESPACE)).json["items"]) == EVENTS
