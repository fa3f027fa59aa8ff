"""The pipes between a server's workers that their storage uses, opened before they fork: on etcd,
the first fill of the watch caches handed on (cacher/handoff.py); on SQLite, the doorbell each
worker rings after a commit (sqlite/doorbell.py)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from apiserver.storage.cacher.handoff import FirstFill
from apiserver.storage.sqlite.doorbell import Doorbell


@dataclass(frozen=True)
class WorkerPipes:
    """One worker's ends."""

    first_fill: FirstFill | None = None
    doorbell: Doorbell | None = None

    @classmethod
    def open(cls, workers: int, *, etcd: bool, watch_cache: bool) -> list[WorkerPipes]:
        """Each of `workers`' ends; every worker closes the others' with `close_others`."""
        if etcd:
            fills = FirstFill.pipes(workers) if watch_cache else []
            return [cls(first_fill=fill) for fill in fills] or [cls()] * workers
        return [cls(doorbell=bell) for bell in Doorbell.pipes(workers)]

    def fds(self) -> set[int]:
        fds: set[int] = set()
        if self.first_fill is not None:
            fds.update(self.first_fill.fds())
        if self.doorbell is not None:
            fds.update(self.doorbell.fds())
        return fds

    @staticmethod
    def close_others(everyone: Sequence[WorkerPipes], own: WorkerPipes) -> None:
        """Closes every end in `everyone` that is not `own`'s (the supervisor's `own`: none)."""
        for fd in set().union(*(pipes.fds() for pipes in everyone)) - own.fds():
            os.close(fd)
