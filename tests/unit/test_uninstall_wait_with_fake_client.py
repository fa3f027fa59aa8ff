"""How long the chart's pre-delete hook waits for the operator, with a fake client (the real
uninstall, operator running or not, is in tests/e2e/test_operator_on_node.py): it stops waiting as
soon as the operator's Lease shows no operator running, and waits while one renews it."""

from __future__ import annotations

import time

from apiserver.cluster.leader import LeaderElection
from apiserver.machinery.types import JSON
from apiserver_operator.uninstall import _wait_for_operator

INSTALLATION = "/apis/operator.core.io/v1alpha1/namespaces/ns/installations/coreio"


class FakeClient:
    """An Installation that never goes, and a Lease whose holder renews it on each read or not."""

    def __init__(self, holder: str, renewing: bool) -> None:
        self.holder, self.renewing, self.renewals = holder, renewing, 0

    async def get_or_none(self, path: str) -> JSON | None:
        if path == INSTALLATION:
            return {"metadata": {"name": "coreio"}}
        if self.renewing:
            self.renewals += 1
        spec = {"holderIdentity": self.holder, "leaseDurationSeconds": 1, "renewTime": str(self.renewals)}
        return {"spec": spec}


def _lease(fake: FakeClient) -> LeaderElection:
    return LeaderElection(fake, "ns", "coreio-operator", "coreio-uninstall", ())  # type: ignore[arg-type]


async def test_a_released_lease_ends_the_wait_at_once() -> None:
    fake = FakeClient(holder="", renewing=False)
    started = time.monotonic()
    why = await _wait_for_operator(fake, INSTALLATION, 30, _lease(fake))  # type: ignore[arg-type]
    assert why == "no operator leads (Lease ns/coreio-operator released or not renewed)"
    assert time.monotonic() - started < 1


async def test_a_lease_nobody_renews_ends_the_wait_after_its_duration() -> None:
    fake = FakeClient(holder="op-0", renewing=False)
    started = time.monotonic()
    why = await _wait_for_operator(fake, INSTALLATION, 30, _lease(fake))  # type: ignore[arg-type]
    assert why.startswith("no operator leads")
    assert 1 <= time.monotonic() - started < 4  # the Lease's 1 s, polled every second


async def test_a_renewed_lease_keeps_the_hook_waiting_until_its_timeout() -> None:
    fake = FakeClient(holder="op-0", renewing=True)
    why = await _wait_for_operator(fake, INSTALLATION, 2.5, _lease(fake))  # type: ignore[arg-type]
    assert why == "the operator did not finish within 2.5s"
    assert fake.renewals >= 2
