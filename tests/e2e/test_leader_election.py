"""The operator's leader election against the real kube-apiserver, as client-go's behaves: expiry
judged by the candidate's own clock (a rival's skewed renewTime changes nothing), a leader that sees
another holder steps down at once, one that cannot renew steps down within its renew deadline, and
a kube-apiserver restart (dropped connections) is ridden out without losing the Lease.

Short durations (a 3 s Lease) keep it fast; the production ones are client-go's 15/10/2 s."""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from apiserver.cluster.connection import load_kubeconfig
from apiserver.cluster.leader import LeaderElection, LeadershipLost
from apiserver_operator.kube import ApiError, KubeClient, resource_path
from tests.support.controlplane import ControlPlane, skip_without_control_plane, start_control_plane

pytestmark = pytest.mark.e2e
NS = "default"


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own: one test restarts its kube-apiserver."""
    skip_without_control_plane()
    directory = Path(tempfile.mkdtemp(prefix="coreio-leader-"))
    plane = start_control_plane(directory / "cp")
    try:
        yield plane
    finally:
        plane.stop()
        if not os.environ.get("COREIO_KEEP_CONTROLPLANE"):
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def client(plane: ControlPlane) -> AsyncIterator[KubeClient]:
    kube = KubeClient(load_kubeconfig(plane.kubeconfig), timeout=5)
    try:
        yield kube
    finally:
        await kube.close()


def _election(client: KubeClient, name: str, identity: str, **timings: float) -> LeaderElection:
    defaults = {"lease_seconds": 3, "renew_deadline": 2.0, "retry_seconds": 0.5}
    return LeaderElection(client, NS, name, identity, (ApiError,), **(defaults | timings))  # type: ignore[arg-type]


def _stamp(offset: float) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=offset)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _rival_lease(client: KubeClient, name: str, renewed_offset: float) -> None:
    """A Lease held by `rival`, whose clock is `renewed_offset` seconds off ours."""
    await client.request(
        "POST",
        resource_path("coordination.k8s.io/v1", "leases", NS),
        body={
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "holderIdentity": "rival",
                "leaseDurationSeconds": 3,
                "acquireTime": _stamp(renewed_offset),
                "renewTime": _stamp(renewed_offset),
                "leaseTransitions": 0,
            },
        },
    )


async def _holder(client: KubeClient, name: str) -> str:
    lease = await client.get(resource_path("coordination.k8s.io/v1", "leases", NS, name))
    return str(lease["spec"].get("holderIdentity") or "")


@pytest.mark.parametrize(("name", "skew"), [("rival-clock-behind", -12.0), ("rival-clock-ahead", 12.0)])
async def test_expiry_is_judged_by_the_candidates_own_clock(
    client: KubeClient, name: str, skew: float
) -> None:
    await _rival_lease(client, name, skew)
    candidate = _election(client, name, "candidate")
    # Behind: by the renewTime the Lease looks 12 s stale, but this candidate has just seen it.
    assert await candidate.try_acquire_or_renew() is False
    started = time.monotonic()
    await asyncio.wait_for(candidate.acquire(), timeout=15)
    waited = time.monotonic() - started
    # Ahead: by the renewTime it would look valid for 15 s more; the unchanged record expires in 3.
    assert 2.5 <= waited <= 5.0, waited
    assert await _holder(client, name) == "candidate"


async def test_a_leader_that_sees_another_holder_steps_down_at_once(client: KubeClient) -> None:
    leader = _election(client, "taken", "leader", renew_deadline=30.0)
    await leader.acquire()
    path = resource_path("coordination.k8s.io/v1", "leases", NS, "taken")
    keeping = asyncio.create_task(leader.keep())
    await asyncio.sleep(1)  # the leader keeps its Lease a while (renewing) before it is taken
    lease = await client.get(path)
    lease["spec"]["holderIdentity"] = "usurper"
    await client.request("PUT", path, body=lease)
    started = time.monotonic()
    with pytest.raises(LeadershipLost, match="held by usurper"):
        await asyncio.wait_for(keeping, timeout=10)
    assert time.monotonic() - started < 2.0  # one retry period, not the 30 s renew deadline


async def test_a_kube_apiserver_restart_is_ridden_out(plane: ControlPlane, client: KubeClient) -> None:
    timings = {"lease_seconds": 15, "renew_deadline": 10.0, "retry_seconds": 0.5}
    leader = _election(client, "restart", "leader", **timings)
    await leader.acquire()
    keeping = asyncio.create_task(leader.keep())
    await asyncio.to_thread(plane.restart_kube_apiserver, 1.0)
    await asyncio.sleep(2)  # renewals on the new process
    assert not keeping.done(), keeping.exception()
    keeping.cancel()
    assert await _holder(client, "restart") == "leader"


async def test_a_leader_that_cannot_renew_stops_within_its_deadline(
    plane: ControlPlane, client: KubeClient
) -> None:
    leader = _election(
        client, "unreachable", "leader", lease_seconds=15, renew_deadline=3.0, retry_seconds=0.5
    )
    await leader.acquire()
    keeping = asyncio.create_task(leader.keep())
    restart = asyncio.create_task(asyncio.to_thread(plane.restart_kube_apiserver, 6.0))
    started = time.monotonic()
    with pytest.raises(LeadershipLost, match="not renewed within 3s"):
        await asyncio.wait_for(keeping, timeout=20)
    # Down since the restart began: stepped down 3 s after its last renewal, well before a rival
    # (which waits the whole 15 s lease) could start.
    assert time.monotonic() - started < 5.0
    await restart
