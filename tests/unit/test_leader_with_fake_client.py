"""Leader election's error handling, with a fake client (the real-cluster behaviour is in
tests/e2e/test_leader_election.py): a connection the API server drops mid-renewal, which is what
its restart produces, is retried rather than crashing the operator."""

from __future__ import annotations

import aiohttp

from apiserver.cluster.leader import LeaderElection
from apiserver.machinery.types import JSON


class FakeDisconnectingClient:
    """Drops the connection on every request, as a restarting kube-apiserver does."""

    calls = 0

    async def get_or_none(self, path: str) -> JSON | None:
        self.calls += 1
        raise aiohttp.ServerDisconnectedError()


async def test_a_dropped_connection_is_a_failed_attempt_not_a_crash() -> None:
    fake = FakeDisconnectingClient()
    election = LeaderElection(fake, "ns", "lease", "me", ())  # type: ignore[arg-type]
    assert await election._attempt() is False
    assert fake.calls == 1


class FakeRenewingClient:
    """A Lease this process holds, renewed on every write."""

    def __init__(self) -> None:
        self.lease: JSON = {"metadata": {"resourceVersion": "1"}, "spec": {"holderIdentity": "me"}}

    async def get_or_none(self, path: str) -> JSON | None:
        return self.lease

    async def request(self, method: str, path: str, body: JSON | None = None) -> JSON:
        assert body is not None
        self.lease = body
        return body


async def test_health_follows_the_lease_as_client_gos_check_does() -> None:
    """/healthz's answer: a leader is unhealthy once its Lease went unrenewed for the lease's
    duration plus the tolerance, a waiting replica once its attempts stopped for as long."""
    election = LeaderElection(FakeRenewingClient(), "ns", "lease", "me", (), lease_seconds=15)
    assert election.unhealthy() == ""  # just started
    assert await election._attempt() is True
    election.leading = True
    assert election.unhealthy() == ""
    election.last_renewed -= 36
    assert election.unhealthy().startswith("leading, but the Lease was last renewed 36s ago")
    assert await election._attempt() is True
    assert election.unhealthy() == ""
    election.leading = False
    election.last_attempt -= 40
    assert election.unhealthy().startswith("waiting to lead, but no attempt at the Lease for 40s")


async def test_a_failed_attempt_still_counts_as_the_loop_alive() -> None:
    election = LeaderElection(FakeDisconnectingClient(), "ns", "lease", "me", ())  # type: ignore[arg-type]
    election.last_attempt -= 100
    assert election.unhealthy() != ""
    assert await election._attempt() is False
    assert election.unhealthy() == ""
