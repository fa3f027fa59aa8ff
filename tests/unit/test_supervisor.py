"""How many workers a server runs by default, and what each is told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apiserver import supervisor
from apiserver.config import Settings


def test_one_worker_per_core_the_process_may_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.setattr(supervisor, "CGROUP_CPU_MAX", tmp_path / "missing")
    assert supervisor.cores() == 4


@pytest.mark.parametrize(
    ("cpu_max", "expected"), [("max 100000", 4), ("150000 100000", 2), ("20000 100000", 1)]
)
def test_a_container_cpu_limit_caps_the_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpu_max: str, expected: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    limit = tmp_path / "cpu.max"
    limit.write_text(cpu_max + "\n")
    monkeypatch.setattr(supervisor, "CGROUP_CPU_MAX", limit)
    assert supervisor.cores() == expected


def test_each_worker_takes_its_share_of_the_in_flight_limits() -> None:
    told = supervisor.worker_settings(
        Settings(max_requests_inflight=400, max_mutating_requests_inflight=0), 3
    )
    assert (told.workers, told.max_requests_inflight, told.max_mutating_requests_inflight) == (3, 134, 0)
