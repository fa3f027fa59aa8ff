"""The pieces of the server's life that need no process: the data directory's lock and how the
open watches are ended at shutdown."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from apiserver import pki, standalone
from apiserver.http.lifecycle import NEW_CONNECTION_GRACE, Lifecycle


def test_the_data_directory_is_held_until_released(tmp_path: Path) -> None:
    data_dir = tmp_path / "new" / "coreio"
    lock = standalone.lock_data_dir(data_dir, "https://127.0.0.1:6443")
    assert (data_dir / "apiserver.lock").read_text() == f"{os.getpid()} https://127.0.0.1:6443\n"
    # flock locks belong to an open file, so even this process cannot take it twice.
    with pytest.raises(standalone.DataDirInUseError) as refused:
        standalone.lock_data_dir(data_dir, "https://127.0.0.1:7443")
    assert str(refused.value) == (
        f"data directory {data_dir} is in use by pid {os.getpid()} (https://127.0.0.1:6443)"
    )
    lock.release()
    lock.release()
    again = standalone.lock_data_dir(data_dir, "https://127.0.0.1:7443")
    assert (data_dir / "apiserver.lock").read_text() == f"{os.getpid()} https://127.0.0.1:7443\n"
    again.release()


def test_a_holder_that_wrote_nothing_is_another_process(tmp_path: Path) -> None:
    lock_file = tmp_path / "apiserver.lock"
    lock_file.write_text("")
    started = time.monotonic()
    assert standalone.lock_holder(lock_file) == "another process"
    assert time.monotonic() - started < 2
    lock_file.write_text("2147483646 https://127.0.0.1:6443\n")  # no such process
    assert standalone.lock_holder(lock_file) == "another process"


async def test_watches_are_ended_once_and_late_ones_at_once() -> None:
    lifecycle = Lifecycle()
    ended: list[str] = []
    with lifecycle.watch(lambda: ended.append("a")), lifecycle.watch(lambda: ended.append("b")):
        assert lifecycle.open_watches == 2
        # However long the grace period, at least 200 a second are ended.
        started = asyncio.get_running_loop().time()
        assert await lifecycle.end_watches(grace=60) == 2
        assert asyncio.get_running_loop().time() - started < 1
        assert sorted(ended) == ["a", "b"]
        assert await lifecycle.end_watches(grace=0) == 0
        with lifecycle.watch(lambda: ended.append("late")):
            assert ended[-1] == "late"
    assert sorted(ended) == ["a", "b", "late"]
    assert lifecycle.open_watches == 0


async def test_a_failed_handshake_does_not_hold_the_shutdown(tmp_path: Path) -> None:
    """On asyncio's own loop (the fallback where uvloop is missing) a connection whose TLS handshake
    failed leaves its stand-in in a reference cycle, never told; the wait for the new connections
    collects it instead of waiting out their grace."""
    files = standalone.bootstrap(tmp_path / "data", port=6443)
    serving = pki.ServingCertificate(files.serving_cert, files.serving_key, files.ca_cert)
    lifecycle = Lifecycle()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lifecycle.accepting(asyncio.Protocol), "127.0.0.1", 0, ssl=serving.context
    )
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP to a TLS port
    await asyncio.wait_for(reader.read(), timeout=10)  # the server gave up on it
    writer.close()
    server.close()
    started = time.monotonic()
    await asyncio.wait_for(lifecycle.arrivals_done(), timeout=NEW_CONNECTION_GRACE / 2)
    assert time.monotonic() - started < 1
