"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it, so
that of several replicas (the operator's, an exporter's) only one works at a time: one holds the
Lease and renews it; the others wait until it is released or expires, then take it with a
compare-and-swap update. The replicas reach the API through their own clients (`LeaseClient`).

kopf's peering is not used for the operator: replicas of the same priority all pause in it, since
it is meant to let a developer's operator pre-empt the deployed one, not to elect a leader.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from apiserver.machinery.types import JSON

log = logging.getLogger("coreio.leader")

# What an attempt at the Lease may meet and try again after: the connection failing (a restarting
# kube-apiserver drops connections), besides the client's own errors (`LeaderElection.errors`).
NETWORK_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientError, OSError, TimeoutError)
CONFLICT = (409, 422)  # a rival's write came first: this attempt lost


class LeaseClient(Protocol):
    """The two requests an election makes; an answer other than 2xx raises an error with the
    HTTP code as its `status`."""

    async def get_or_none(self, path: str) -> JSON | None:
        """The object at `path`, None when there is none (404)."""
        ...

    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...


class LeadershipLost(Exception):
    """The Lease could not be renewed in time: another replica may lead now."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _micro(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElection:
    """client-go's timings: a Lease of 15 s, renewed every 2 s; a leader that has not renewed for
    10 s (the renew deadline) or that sees another holder steps down. Expiry is judged by this
    process's own clock: a rival's Lease counts as expired only once its record has stayed the same
    for a whole lease duration since this process first saw it, so skewed clocks cannot make two
    leaders."""

    client: LeaseClient
    namespace: str
    name: str
    identity: str
    # The client's errors (each with the answer's `status`), tried again like NETWORK_ERRORS; a
    # 409 or 422 among them is a rival's write that came first.
    errors: tuple[type[Exception], ...]
    lease_seconds: int = 15
    renew_deadline: float = 10.0
    retry_seconds: float = 2.0
    leading: bool = False
    holder: str = ""  # the holder the last read of the Lease showed
    # Monotonic times of the last attempt that completed (whatever its answer) and of the last
    # successful acquire or renewal: what /healthz judges.
    last_attempt: float = field(default_factory=time.monotonic)
    last_renewed: float = 0.0
    _observed: tuple[str, ...] = ()
    _observed_at: float = 0.0

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def _spec(self, acquired: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": acquired,
            "renewTime": _micro(_now()),
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: JSON) -> None:
        """Notes when the Lease's record last changed, by this process's monotonic clock."""
        fields = ("holderIdentity", "renewTime", "acquireTime", "leaseTransitions", "leaseDurationSeconds")
        record = tuple(str(spec.get(key) or "") for key in fields)
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        self.holder = record[0]

    def _expired(self, spec: JSON) -> bool:
        if not spec.get("holderIdentity"):
            return True  # released
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        return time.monotonic() >= self._observed_at + duration

    async def someone_leads(self) -> bool:
        """Whether a replica leads, by what this process has read so far (it never writes): the
        Lease exists, is held, and its record changed within a lease duration of this process first
        seeing it. A released Lease answers False at once; an abandoned one after its duration."""
        lease = await self.client.get_or_none(self.path)
        if lease is None:
            return False
        spec = lease.get("spec", {})
        self._observe(spec)
        return not self._expired(spec)

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
        self._observe(spec)
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
        except self.errors as exc:
            if getattr(exc, "status", 0) in CONFLICT:
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
            held = await self.try_acquire_or_renew()
        except (*self.errors, *NETWORK_ERRORS) as exc:
            log.warning("Lease %s/%s: %s", self.namespace, self.name, exc)
            held = False
        self.last_attempt = time.monotonic()
        if held:
            self.last_renewed = self.last_attempt
        return held

    async def _attempt_within(self, seconds: float) -> bool:
        """An attempt cut short after `seconds` (a request hanging on a dead connection must not
        keep a leader working past its renew deadline while a rival takes the Lease over)."""
        try:
            async with asyncio.timeout(max(seconds, 0.0)):
                return await self._attempt()
        except TimeoutError:
            log.warning("Lease %s/%s: no answer within the renew deadline", self.namespace, self.name)
            return False

    def unhealthy(self, tolerance: float = 20.0) -> str:
        """Why this replica should be restarted, or "": as client-go's leader-election health
        check, a leader whose Lease went unrenewed for its duration plus `tolerance`; and a
        waiting replica whose attempts stopped for as long (its loop is stuck)."""
        now, limit = time.monotonic(), self.lease_seconds + tolerance
        if self.leading and now - self.last_renewed > limit:
            return f"leading, but the Lease was last renewed {now - self.last_renewed:.0f}s ago"
        if not self.leading and now - self.last_attempt > limit:
            return f"waiting to lead, but no attempt at the Lease for {now - self.last_attempt:.0f}s"
        return ""

    async def keep(self) -> None:
        """Renews until cancelled; raises LeadershipLost when another holder is seen, or when no
        renewal succeeded within the renew deadline (so this replica stops before a rival, which
        waits a whole lease duration, can start)."""
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.retry_seconds)
            if await self._attempt_within(renewed + self.renew_deadline - time.monotonic()):
                renewed = time.monotonic()
            elif self.holder not in ("", self.identity):
                raise LeadershipLost(f"Lease {self.namespace}/{self.name} is held by {self.holder} now")
            elif time.monotonic() - renewed >= self.renew_deadline:
                raise LeadershipLost(
                    f"Lease {self.namespace}/{self.name} not renewed within {self.renew_deadline:g}s"
                )

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
            await self.release_quietly()

    async def release_quietly(self) -> None:
        """`release`, a failure logged rather than raised."""
        try:
            await self.release()
        except (*self.errors, *NETWORK_ERRORS) as exc:
            log.warning("Lease %s/%s not released: %s", self.namespace, self.name, exc)
