"""The server's processes: one that serves, or a supervisor over one worker per core on one port.

Python runs one core per process, so the server forks workers, each accepting connections of one
shared listening socket (each takes a new one only while no other holds fewer: http/acceptor.py; a
worker but the first accepts once its /readyz checks pass) with its own storage client and watch
cache; besides the socket and those counts, the storage is what they share (on SQLite, the file:
see storage/sqlite). The supervisor sets up what exists once (the data directory's lock, the
socket, the certificates) before forking, then only relays signals and waits. Workers sit in their
own process group, so that a terminal's Ctrl-C reaches them once, through the supervisor; a worker
whose supervisor is gone shuts down. When one worker ends, so does the server: the others are
stopped and the supervisor exits non-zero, for whatever restarts it (kubelet, systemd) to decide.
A worker whose event loop stops turning while it serves (--worker-hang-timeout) is aborted, and so
ends the server the same way.
"""

from __future__ import annotations

import ctypes
import dataclasses
import faulthandler
import gc
import logging
import math
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import NoReturn

from apiserver import logs, server
from apiserver.config import Settings
from apiserver.http.acceptor import Shares
from apiserver.http.workermetrics import WorkerSet
from apiserver.machinery import eventloop
from apiserver.resources import KINDS
from apiserver.resources.base import ResourceKind
from apiserver.storage import factory
from apiserver.storage.pipes import WorkerPipes

log = logging.getLogger("coreio")
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
PR_SET_PDEATHSIG = 1  # prctl(2)
# After SIGABRT (which dumps a hung worker's stacks), how long before SIGKILL (a stopped worker, or
# one stuck where the signal cannot end it).
ABORT_GRACE = 5.0


def cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota (the
    container's CPU limit), at least one."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with suppress(OSError, ValueError):
        quota, period = CGROUP_CPU_MAX.read_text().split()
        if quota != "max":
            count = min(count, math.ceil(int(quota) / int(period)))
    return max(1, count)


def run(settings: Settings, kinds: Sequence[ResourceKind] = KINDS) -> None:
    """Serves with --workers processes (0: one per core). StartError: why the server could not start."""
    count = settings.workers or cores()
    if count == 1:
        server.run(dataclasses.replace(settings, workers=1), kinds)
        return
    with server.own_data_dir(settings):
        # The one socket every worker accepts on, taken now (the port answers, unready, from the
        # start; the first worker accepts at once, the others once ready).
        shared = server.listen(
            settings.bind_address, settings.secure_port, backlog=server.LISTEN_BACKLOG * count
        )
        # Where the workers serve each other their metrics: a directory only this user enters.
        with closing(shared), tempfile.TemporaryDirectory(prefix="coreio-workers-") as directory:
            reached = server.prepare(settings)
            told = worker_settings(settings, count)
            shares = Shares(count)
            where = WorkerSet(0, count, Path(directory), shares)
            workers = Workers.fork(told, kinds, shared, reached, where)
            shared.close()  # the workers' now
            if settings.worker_hang_timeout > 0:
                Watchdog(workers, shares, settings.worker_hang_timeout).start()
            workers.wait()


def worker_settings(settings: Settings, count: int) -> Settings:
    """One worker's settings: the in-flight limits are the server's, shared out among its workers."""

    def share(limit: int) -> int:
        return math.ceil(limit / count) if limit else 0

    return dataclasses.replace(
        settings,
        workers=count,
        max_requests_inflight=share(settings.max_requests_inflight),
        max_mutating_requests_inflight=share(settings.max_mutating_requests_inflight),
    )


@dataclass
class Workers:
    """The forked workers (pid -> index), the pipe they report start errors on and the lifeline
    whose end tells them the supervisor is gone."""

    pids: dict[int, int]
    errors: int
    lifeline: int
    stopping: bool = False
    signalled: bool = False  # a SIGINT or SIGTERM has been relayed
    status: int = 0  # the supervisor's exit status: 1 once a worker ended otherwise than with 0
    failed: str = ""  # the first worker that ended unasked
    start_errors: list[str] = field(default_factory=list)

    @classmethod
    def fork(
        cls,
        settings: Settings,
        kinds: Sequence[ResourceKind],
        shared: socket.socket,
        reached: server.Endpoint,
        where: WorkerSet,
    ) -> Workers:
        """Forks `where.count` workers, accepting on the `shared` socket."""
        errors_read, errors_write = os.pipe()
        lifeline_read, lifeline_write = os.pipe()
        ends = WorkerPipes.open(
            where.count, etcd=bool(settings.etcd_servers), watch_cache=settings.watch_cache
        )
        workers = cls({}, errors_read, lifeline_write)
        # Before forking: a signal from now on is relayed, never lost to Python's default handler.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, workers.relay)
        factory.preload(etcd=bool(settings.etcd_servers))
        # What the supervisor made stays out of the workers' garbage collections, which would
        # otherwise write to (and so copy) every page holding it (Python's advice for forking).
        gc.freeze()
        for index in range(where.count):
            pid = os.fork()
            if pid == 0:
                os.close(errors_read)
                os.close(lifeline_write)
                WorkerPipes.close_others(ends, ends[index])
                worker = dataclasses.replace(where, index=index)
                _work(
                    worker,
                    settings,
                    kinds,
                    shared,
                    reached,
                    (lifeline_read, errors_write),
                    ends[index],
                )
            workers.pids[pid] = index
        os.close(errors_write)
        os.close(lifeline_read)
        WorkerPipes.close_others(ends, WorkerPipes())
        return workers

    def relay(self, signum: int, _frame: FrameType | None) -> None:
        """The supervisor's signal handler: the first signal goes to every worker, which starts
        its graceful shutdown; a second ends the server at once with status 1, as upstream's
        handler does. The supervisor kills the workers itself rather than relaying the second (a
        worker not yet run since the first still holds it pending, and the kernel merges the two);
        `wait` then reaps them and the supervisor exits 1, its temporary directory removed."""
        name = signal.Signals(signum).name
        if self.signalled:
            log.warning("second %s: exiting now", name)
            self.signal_all(signal.SIGKILL)
            return
        log.info("received %s: passing it to the workers", name)
        self.signalled = self.stopping = True
        self.signal_all(signum)

    def signal_all(self, signum: int) -> None:
        for pid in self.pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signum)

    def wait(self) -> None:
        """Until every worker has ended. StartError: a worker could not start (in its words);
        SystemExit(1): a worker ended unasked, and the others were stopped."""
        os.set_blocking(self.errors, False)
        while self.pids:
            pid, status = os.waitpid(-1, 0)
            index = self.pids.pop(pid, None)
            code = os.waitstatus_to_exitcode(status)
            if index is None or code == 0:
                continue
            self.status = 1
            self.start_errors += self._reported()
            if not self.stopping:
                # A server that cannot start says so in one line: the others end without a word.
                self.stopping = True
                self.signal_all(signal.SIGKILL if self.start_errors else signal.SIGTERM)
                self.failed = f"worker {index} (pid {pid}) exited with status {code}"
        os.close(self.lifeline)
        self.start_errors += self._reported()
        os.close(self.errors)
        if self.start_errors:
            raise server.StartError(self.start_errors[0])
        if self.failed:
            log.error("%s; the other workers were stopped", self.failed)
        if self.status:
            raise SystemExit(self.status)

    def _reported(self) -> list[str]:
        """The start errors the workers have written so far."""
        try:
            return os.read(self.errors, 1 << 16).decode(errors="replace").splitlines()
        except BlockingIOError:
            return []


class Watchdog(threading.Thread):
    """Aborts a worker that accepts connections but has not turned its event loop for `timeout`
    seconds (its count in `shares` unwritten: http/acceptor.py), as a kubelet's liveness probe would
    restart a hung server: connections already in its hands would wait for ever otherwise, and
    none of the probes, sent to the workers that do answer, would see it. SIGABRT first, so that
    its stacks are logged; the supervisor then ends the server as for any worker that ends."""

    def __init__(self, workers: Workers, shares: Shares, timeout: float) -> None:
        super().__init__(name="coreio-watchdog", daemon=True)
        self.workers, self.shares, self.timeout = workers, shares, timeout
        self.aborted: dict[int, float] = {}  # pid -> when it was sent SIGABRT

    def run(self) -> None:
        while not self.workers.stopping:
            time.sleep(min(1.0, self.timeout / 4))
            hung = set(self.shares.silent(self.timeout))
            for pid, index in list(self.workers.pids.items()):
                if index in hung or pid in self.aborted:
                    self._abort(pid, index)

    def _abort(self, pid: int, index: int) -> None:
        sent = self.aborted.get(pid)
        if sent is None:
            log.error(
                "worker %d (pid %d) has not turned its event loop for %gs: aborting it",
                *(index, pid, self.timeout),
            )
            self.aborted[pid] = time.monotonic()
            signum = signal.SIGABRT
        elif time.monotonic() - sent >= ABORT_GRACE:
            signum = signal.SIGKILL
        else:
            return
        with suppress(ProcessLookupError):
            os.kill(pid, signum)


def _die_with_the_supervisor() -> None:
    """On Linux, the kernel kills this worker when the supervisor dies, however it dies: a server
    killed with SIGKILL is gone at once with its port and data directory, as a single process is.
    (Had it died before this, the lifeline has already ended: the worker shuts down at its start.)"""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _work(
    workers: WorkerSet,
    settings: Settings,
    kinds: Sequence[ResourceKind],
    sock: socket.socket,
    reached: server.Endpoint,
    pipes: tuple[int, int],
    storage_pipes: WorkerPipes,
) -> NoReturn:
    """A forked worker's whole life; it never returns into the supervisor's stack. `pipes`: the
    lifeline's end and where start errors are written."""
    lifeline, errors = pipes
    code = 0
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        os.setpgid(0, 0)
        _die_with_the_supervisor()
        faulthandler.enable()  # SIGABRT from the watchdog: every thread's stack on stderr
        logs.configure(settings.log_format, worker=workers.index)
        eventloop.run(_serve(workers, settings, kinds, sock, reached, lifeline, storage_pipes))
    except server.StartError as exc:
        os.write(errors, f"{exc}\n".encode())
        code = 1
    except BaseException:
        log.exception("worker %d failed", workers.index)
        code = 1
    finally:
        logging.shutdown()
    os._exit(code)


async def _serve(
    workers: WorkerSet,
    settings: Settings,
    kinds: Sequence[ResourceKind],
    sock: socket.socket,
    reached: server.Endpoint,
    lifeline: int,
    storage_pipes: WorkerPipes,
) -> None:
    signals = server.Signals(lifeline)
    await server.serve_on(settings, kinds, sock, reached, signals, workers, storage_pipes)
