"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it, so
that several operator replicas never reconcile at once: one holds the Lease and renews it; the
others wait until it is released or expires, then take it with a compare-and-swap update.

kopf's peering is not used for this: replicas of the same priority all pause in it, since it is
meant to let a developer's operator pre-empt the deployed one, not to elect a leader.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from apiserver.machinery.types import JSON
from apiserver_operator.kube import ApiError, KubeClient, resource_path

log = logging.getLogger("coreio.operator.leader")


class LeadershipLost(Exception):
    """The Lease could not be renewed in time: another replica may lead now."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _micro(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC)


@dataclass
class LeaderElection:
    client: KubeClient
    namespace: str
    name: str
    identity: str
    lease_seconds: int = 15
    renew_seconds: float = 5.0
    retry_seconds: float = 2.0
    leading: bool = False

    @property
    def path(self) -> str:
        return resource_path("coordination.k8s.io/v1", "leases", self.namespace, self.name)

    def _spec(self, acquired: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": acquired,
            "renewTime": _micro(_now()),
            "leaseTransitions": transitions,
        }

    def _expired(self, spec: JSON) -> bool:
        holder, renewed = spec.get("holderIdentity"), spec.get("renewTime")
        if not holder or not renewed:
            return True
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        return _parse(str(renewed)) + datetime.timedelta(seconds=duration) < _now()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this identity holds the Lease afterwards."""
        lease = await self.client.get_or_none(self.path)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(_micro(_now()), 0),
            }
            return await self._write("POST", self.path.rsplit("/", 1)[0], body)
        spec = lease.get("spec", {})
        mine = spec.get("holderIdentity") == self.identity
        if not mine and not self._expired(spec):
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        acquired = str(spec.get("acquireTime")) if mine else _micro(_now())
        lease["spec"] = self._spec(acquired, transitions)
        # The resourceVersion read above makes this a compare-and-swap: a rival's write wins.
        return await self._write("PUT", self.path, lease)

    async def _write(self, method: str, path: str, body: JSON) -> bool:
        try:
            await self.client.request(method, path, body=body)
        except ApiError as exc:
            if exc.status in (409, 422):
                return False
            raise
        return True

    async def acquire(self) -> None:
        """Returns once this identity leads."""
        log.info("waiting to lead through Lease %s/%s as %s", self.namespace, self.name, self.identity)
        while not await self._attempt():  # noqa: ASYNC110 - polling the API is the point
            await asyncio.sleep(self.retry_seconds)
        self.leading = True
        log.info("leading as %s", self.identity)

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except (ApiError, OSError, TimeoutError) as exc:
            log.warning("Lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    async def keep(self) -> None:
        """Renews until cancelled; raises LeadershipLost when a renewal is not done in time."""
        deadline = asyncio.get_running_loop().time() + self.lease_seconds
        while True:
            await asyncio.sleep(self.renew_seconds)
            if await self._attempt():
                deadline = asyncio.get_running_loop().time() + self.lease_seconds
            elif asyncio.get_running_loop().time() >= deadline - self.renew_seconds:
                raise LeadershipLost(f"Lease {self.namespace}/{self.name} not renewed in time")

    async def release(self) -> None:
        """Hands the Lease back at once, so that another replica need not wait for it to expire."""
        lease = await self.client.get_or_none(self.path)
        if lease is None or lease.get("spec", {}).get("holderIdentity") != self.identity:
            return
        lease["spec"].update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _micro(_now())})
        await self._write("PUT", self.path, lease)

    async def run(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Runs `work` while leading; it is cancelled if leadership is lost."""
        await self.acquire()
        worker = asyncio.create_task(work())
        keeper = asyncio.create_task(self.keep())
        try:
            done, _ = await asyncio.wait({worker, keeper}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in (worker, keeper):
                task.cancel()
            await asyncio.gather(worker, keeper, return_exceptions=True)
            await self._release_quietly()

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except (ApiError, OSError, TimeoutError) as exc:
            log.warning("Lease %s/%s not released: %s", self.namespace, self.name, exc)
