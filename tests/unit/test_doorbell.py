"""The pipes a server's workers ring each other by after a SQLite commit, and the bundle of every
pipe a worker's storage keeps (storage/pipes.py): real pipes, one process standing in for the
workers."""

from __future__ import annotations

import asyncio
import os

import pytest

from apiserver.storage.pipes import WorkerPipes
from apiserver.storage.sqlite.doorbell import Doorbell


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


async def _rings(bell: Doorbell, turns: int = 5) -> int:
    loop = asyncio.get_running_loop()
    heard = 0

    def rung() -> None:
        nonlocal heard
        heard += 1

    bell.listen(loop, rung)
    for _ in range(turns):
        await asyncio.sleep(0.01)
    bell.stop(loop)
    return heard


async def test_a_ring_reaches_every_other_worker_and_not_the_ringer() -> None:
    bells = Doorbell.pipes(3)
    try:
        bells[0].ring()
        assert [await _rings(bell) for bell in bells] == [0, 1, 1]
    finally:
        WorkerPipes.close_others([WorkerPipes(doorbell=b) for b in bells], WorkerPipes())


async def test_rings_nobody_reads_never_block_and_are_heard_as_one() -> None:
    bells = Doorbell.pipes(2)
    try:
        for _ in range(100_000):  # more than a pipe holds
            bells[0].ring()
        assert await _rings(bells[1]) == 1
    finally:
        WorkerPipes.close_others([WorkerPipes(doorbell=b) for b in bells], WorkerPipes())


async def test_a_bell_no_sibling_can_ring_stops_listening() -> None:
    bells = Doorbell.pipes(2)
    pipes = [WorkerPipes(doorbell=b) for b in bells]
    WorkerPipes.close_others(pipes, pipes[0])  # worker 1 gone: nothing writes to worker 0's pipe
    loop = asyncio.get_running_loop()
    heard = 0

    def rung() -> None:
        nonlocal heard
        heard += 1

    bells[0].listen(loop, rung)
    for _ in range(5):
        await asyncio.sleep(0.01)
    assert heard == 1  # the end read once, not a busy loop
    assert not loop.remove_reader(bells[0].own)
    WorkerPipes.close_others([pipes[0]], WorkerPipes())


@pytest.mark.parametrize("etcd", [False, True])
def test_each_worker_keeps_its_own_ends_and_the_supervisor_none(etcd: bool) -> None:
    everyone = WorkerPipes.open(3, etcd=etcd, watch_cache=True)
    assert all((p.doorbell is None) == etcd and (p.first_fill is None) != etcd for p in everyone)
    own = everyone[1]
    WorkerPipes.close_others(everyone, own)  # as worker 1 does after the fork
    assert own.fds() and all(_open(fd) for fd in own.fds())
    others = set().union(*(p.fds() for p in everyone)) - own.fds()
    assert others and not any(_open(fd) for fd in others)
    WorkerPipes.close_others([own], WorkerPipes())
    assert not any(_open(fd) for fd in own.fds())


def test_etcd_without_a_watch_cache_has_no_pipes() -> None:
    assert WorkerPipes.open(2, etcd=True, watch_cache=False) == [WorkerPipes(), WorkerPipes()]
