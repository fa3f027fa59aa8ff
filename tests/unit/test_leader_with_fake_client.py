"""Leader election's error handling, with a fake client (the real-cluster behaviour is in
tests/e2e/test_leader_election.py): a connection the API server drops mid-renewal, which is what
its restart produces, is retried rather than crashing the operator."""

from __future__ import annotations

import aiohttp
from apiserver_operator.leader import LeaderElection

from apiserver.machinery.types import JSON


class FakeDisconnectingClient:
    """Drops the connection on every request, as a restarting kube-apiserver does."""

    calls = 0

    async def get_or_none(self, path: str) -> JSON | None:
        self.calls += 1
        raise aiohttp.ServerDisconnectedError()


async def test_a_dropped_connection_is_a_failed_attempt_not_a_crash() -> None:
    fake = FakeDisconnectingClient()
    election = LeaderElection(fake, "ns", "lease", "me")  # type: ignore[arg-type]
    assert await election._attempt() is False
    assert fake.calls == 1
