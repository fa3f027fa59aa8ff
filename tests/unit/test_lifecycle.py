"""The pieces of the server's life that need no process: the data directory's lock and how the
open watches are ended at shutdown."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from apiserver import standalone
from apiserver.http.lifecycle import Lifecycle


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
