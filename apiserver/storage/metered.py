"""The Storage protocol, timed: what k8s.io/apiserver's etcd3 store reports of each call it makes
(`etcd_request_duration_seconds`, `etcd_requests_total`, `etcd_request_errors_total`, labelled by
operation and object type), measured here at the protocol's boundary so that either backend is
measured the same way (kine-backed servers report these names for SQLite too).

`MeteredStorage` wraps the storage one kind's store uses, its `type` label the kind's resource
(`rolebindings.rbac.authorization.core.io`); `count` is the object count behind
`apiserver_storage_objects`, reported as upstream's `listWithCount` of the key prefix.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram

from apiserver.machinery.series import Series
from apiserver.storage.interface import (
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    RevisionConflictError,
    Storage,
    WatchEvent,
)

# The same buckets as apiserver_request_duration_seconds (upstream keeps them equal).
LATENCY_BUCKETS = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0,
    4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
)  # fmt: skip
# Answers the protocol gives by raising, not failures of the storage: upstream sees them as
# unsuccessful transactions, which it does not count as errors.
_OUTCOMES = (KeyExistsError, KeyNotFoundError, RevisionConflictError)


class StorageMetrics:
    """The storage request metrics, in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("operation", "type")
        self.duration = Histogram(
            "etcd_request_duration_seconds",
            "[ALPHA] Etcd request latency in seconds for each operation and object type.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        # prometheus_client adds `_total` to a counter's name.
        self.requests = Counter(
            "etcd_requests",
            "[ALPHA] Etcd request counts for each operation and object type.",
            labels,
            registry=registry,
        )
        self.errors = Counter(
            "etcd_request_errors",
            "[ALPHA] Etcd failed request counts for each operation and object type.",
            labels,
            registry=registry,
        )
        self._duration, self._requests = Series(self.duration), Series(self.requests)
        self._errors = Series(self.errors)

    @contextlib.contextmanager
    def timed(self, operation: str, type_: str) -> Iterator[None]:
        """Records one call: its duration and count, and an error unless it succeeded or gave one
        of the protocol's answers (key exists, not found, revision conflict)."""
        start = time.perf_counter()
        failed = False
        try:
            yield
        except _OUTCOMES:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            self._duration(operation, type_).observe(time.perf_counter() - start)
            self._requests(operation, type_).inc()
            if failed:
                self._errors(operation, type_).inc()


class MeteredStorage:
    """`storage` with its reads and writes timed under `type_`; watches, revisions and compaction
    pass through untimed (upstream times the reads a watch starts with, which are lists here)."""

    def __init__(self, storage: Storage, metrics: StorageMetrics, type_: str) -> None:
        self.inner = storage
        self.metrics = metrics
        self.type = type_

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def get(self, key: str) -> KeyValue | None:
        with self.metrics.timed("get", self.type):
            return await self.inner.get(key)

    async def list(
        self,
        prefix: str,
        *,
        start: str | None = None,
        limit: int = 0,
        revision: int = 0,
        counted: bool = True,
        end: str | None = None,
    ) -> ListResult:
        with self.metrics.timed("list", self.type):
            return await self.inner.list(
                prefix, start=start, limit=limit, revision=revision, counted=counted, end=end
            )

    async def create(self, key: str, value: bytes, *, ttl: int = 0) -> KeyValue:
        with self.metrics.timed("create", self.type):
            return await self.inner.create(key, value, ttl=ttl)

    async def update(self, key: str, value: bytes, *, expected_revision: int, ttl: int = 0) -> KeyValue:
        with self.metrics.timed("update", self.type):
            return await self.inner.update(key, value, expected_revision=expected_revision, ttl=ttl)

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        with self.metrics.timed("delete", self.type):
            return await self.inner.delete(key, expected_revision=expected_revision)

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compacted_revision(self) -> int:
        return await self.inner.compacted_revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    def watch(
        self, prefix: str, *, after_revision: int, progress: bool = False, progress_every: float = 0.0
    ) -> AsyncGenerator[WatchEvent, None]:
        return self.inner.watch(
            prefix, after_revision=after_revision, progress=progress, progress_every=progress_every
        )

    async def count(self, prefix: str) -> int:
        """How many keys `prefix` holds now (a one-key page and the count of the rest)."""
        with self.metrics.timed("listWithCount", prefix):
            page = await self.inner.list(prefix, limit=1)
        return len(page.items) + page.remaining
