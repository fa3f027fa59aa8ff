"""The workers' connection counts (http/acceptor.py): a new connection waits only for a worker
that accepts and has written its count lately, never for one not ready, shut down, hung or gone."""

from __future__ import annotations

import os
import time

import pytest

from apiserver.http.acceptor import NOT_ACCEPTING, STALE, Shares


def test_no_worker_is_waited_for_before_it_accepts() -> None:
    shares = Shares(3)
    assert shares.fewest(besides=0) == NOT_ACCEPTING
    shares.publish(1, 4)
    assert shares.fewest(besides=0) == 4
    shares.publish(2, 2)
    assert shares.fewest(besides=0) == 2
    assert shares.fewest(besides=2) == 4  # a worker compares itself with the others
    shares.publish(2, NOT_ACCEPTING)  # shutting down
    assert shares.fewest(besides=0) == 4


def test_a_worker_silent_for_longer_than_stale_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    shares = Shares(2)
    shares.publish(0, 5)
    shares.publish(1, 1)  # then it hangs: it writes nothing more
    later = time.monotonic() + STALE + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    shares.publish(0, 5)
    assert shares.fewest(besides=0) == NOT_ACCEPTING


def test_the_counts_are_seen_by_a_forked_process() -> None:
    shares = Shares(2)
    pid = os.fork()
    if pid == 0:  # the child writes, as a worker does
        shares.publish(1, 7)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    shares.publish(0, 9)
    assert shares.fewest(besides=0) == 7
