"""`--leader-elect`: of several replicas of one EventExport's exporter (a Deployment's pods, the old
and the new during a rollout), only the one holding the Lease `coreio-export-NAME` in the export's
namespace exports; the others wait to take it over (apiserver.cluster.leader, client-go's
algorithm). The position lives in the export's status, so the one that takes over goes on from the
last batch the previous leader had delivered: a failover costs at most that replica's batch in
flight, sent again, as a restart does.
"""

from __future__ import annotations

import asyncio
import math
import socket
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from apiserver.cluster.leader import LeaderElection
from apiserver.resources import eventexport
from coreio_export.connection import NOT_FOUND, Api, ApiError, ExportError
from coreio_export.target import Target

LEASES = "/apis/coordination.k8s.io/v1"


@dataclass(frozen=True)
class Timings:
    """client-go's flags and defaults (--leader-elect-lease-duration and the others), in seconds."""

    lease: float = 15.0
    renew_deadline: float = 10.0
    retry: float = 2.0

    def check(self) -> str:
        """Why these timings cannot work (client-go refuses the same), or ""."""
        if not self.lease > self.renew_deadline > self.retry > 0:
            return (
                "--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline, and that "
                "longer than --leader-elect-retry-period, which must be positive"
            )
        return ""


def lease_name(target: Target) -> str:
    return eventexport.lease_name(target.name)


def identity() -> str:
    """As client-go's: the host (the pod's name in a cluster), then a unique suffix."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


async def run_elected(
    api: Api,
    target: Target,
    timings: Timings,
    work: Callable[[], Coroutine[Any, Any, None]],
    stop: asyncio.Event,
) -> None:
    """`work` while this replica holds the export's Lease. Stopped while waiting for it, it returns
    at once; stopped while leading, `work` ends as it does when stopped (its batch sent, its position
    kept) and the Lease is handed back, so that a waiting replica takes over at once. LeadershipLost:
    the Lease could not be kept (`work` was cancelled first)."""
    await _check_leases(api)
    election = LeaderElection(
        api,
        target.namespace,
        lease_name(target),
        identity(),
        errors=(ExportError,),
        lease_seconds=math.ceil(timings.lease),  # whole seconds, never shorter than asked
        renew_deadline=timings.renew_deadline,
        retry_seconds=timings.retry,
    )
    running = asyncio.create_task(election.run(work))
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait((running, stopped), return_when=asyncio.FIRST_COMPLETED)
        if not running.done() and not election.leading:
            # Stopped while waiting to lead. An attempt cut short may still have taken the Lease:
            # handed back, so that another replica need not wait for it to expire.
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await election.release_quietly()
            return
        await running
    finally:
        stopped.cancel()
        running.cancel()


async def _check_leases(api: Api) -> None:
    """One line for a server without Leases (a standalone coreio), rather than waiting forever."""
    try:
        await api.get(LEASES)
    except ApiError as exc:
        if exc.status == NOT_FOUND:
            raise ExportError(
                "--leader-elect needs the cluster's Leases (coordination.k8s.io/v1), which this "
                "server does not serve: run it against kube-apiserver, or without --leader-elect"
            ) from None
        raise
