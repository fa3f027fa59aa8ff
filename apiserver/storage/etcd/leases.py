"""One etcd lease per TTL, shared by the keys written with it (upstream: etcd3/lease_manager.go)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass
class _Lease:
    id: int
    expires: float  # on our monotonic clock
    keys: int = 0


class Leases:
    """One lease per TTL, shared by every key written with that TTL while it still fits.

    A lease is granted for ttl plus a slack (5% of ttl, at most a minute) and reused while it would
    still outlive a fresh ttl: keys live between ttl and ttl + slack, and a busy writer needs only
    about one lease per slack period instead of one per key. Attachments are capped so that one
    expiry never deletes an enormous batch of keys in a single etcd transaction.
    """

    max_keys = 1000

    def __init__(self, grant: Callable[[int], Awaitable[tuple[int, int]]]) -> None:
        self._grant = grant  # requested TTL -> (lease id, granted TTL)
        self._by_ttl: dict[int, _Lease] = {}
        self._lock = asyncio.Lock()

    async def lease_for(self, ttl: int) -> int:
        async with self._lock:
            now = time.monotonic()
            lease = self._by_ttl.get(ttl)
            if lease is None or lease.expires < now + ttl or lease.keys >= self.max_keys:
                slack = min(ttl * 0.05, 60.0)
                lease_id, granted_ttl = await self._grant(math.ceil(ttl + slack))
                # Measured from before the request: the server's clock started later, never earlier.
                lease = self._by_ttl[ttl] = _Lease(lease_id, now + granted_ttl)
            lease.keys += 1
            return lease.id

    def forget(self, ttl: int) -> None:
        self._by_ttl.pop(ttl, None)
