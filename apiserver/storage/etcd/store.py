"""`EtcdStorage`: the Storage protocol over etcd v3 (upstream: etcd3/store.go): reads, writes as
compare-and-swap transactions, revisions and compaction; watches are the watcher's."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from aetcd import rpc

from apiserver.machinery.tasks import BackgroundTasks
from apiserver.storage.etcd import wire
from apiserver.storage.etcd.client import Client
from apiserver.storage.etcd.compactor import CompactedRevision, compact_every
from apiserver.storage.etcd.errors import LeaseNotFound, OutOfRange
from apiserver.storage.etcd.keys import Keys, range_end
from apiserver.storage.etcd.leases import Leases
from apiserver.storage.etcd.versions import check_versions, check_versions_later
from apiserver.storage.etcd.watcher import Watcher
from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import (
    CompactedError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    RevisionConflictError,
    StorageError,
    UnsupportedStorageError,
    WatchEvent,
)

log = logging.getLogger(__name__)


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
        hold: HistoryHold | None = None,
        use_native: bool = True,
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
        self.hold = hold or HistoryHold()
        self._client = Client(
            endpoints,
            ca_file=ca_file,
            cert_file=cert_file,
            key_file=key_file,
            request_timeout=request_timeout,
            use_native=use_native,
        )
        self._keys = Keys(prefix)
        self._leases = Leases(self._grant_lease)
        self._compacted = CompactedRevision(self._readable)
        self._watcher = Watcher(self._client, self._keys)
        self._tasks = BackgroundTasks()  # the compactor, the version check of silent endpoints

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        await self._client.open()
        try:
            if not await check_versions(self._client):
                log.warning(
                    "etcd %s did not answer; its version is checked once it does", ",".join(self.endpoints)
                )
                self._tasks.start(check_versions_later(self._client), name="etcd-version")
        except UnsupportedStorageError:
            await self.close()
            raise
        if self.compaction_interval > 0:
            self._tasks.start(compact_every(self, self.compaction_interval, self.hold), name="etcd-compactor")

    async def close(self) -> None:
        await self._tasks.stop()
        await self._client.close()

    @property
    def active_watches(self) -> int:
        """How many watch streams this client holds open (an observable for tests and metrics)."""
        return self._watcher.active

    # -- the protocol ------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        page = await self._range(rpc.RangeRequest(key=self._keys.key(key)))
        return page.items[0] if page.items else None

    async def list(
        self,
        prefix: str,
        *,
        start: str | None = None,
        limit: int = 0,
        revision: int = 0,
        counted: bool = True,  # etcd counts the range in any case
        end: str | None = None,
    ) -> ListResult:
        first = self._keys.key(prefix)
        begin = first if start is None else max(first, self._keys.key(start))
        stop = range_end(first)
        if end is not None and (stop == b"\0" or self._keys.key(end) < stop):  # b"\0": every key
            stop = self._keys.key(end)
        request = rpc.RangeRequest(key=begin, range_end=stop, limit=limit, revision=revision)
        try:
            page = await self._range(request)
        except OutOfRange as error:
            raise await self._revision_error(revision, str(error)) from None
        # `count` is every key in [begin, end) at that revision, regardless of the limit.
        remaining = page.count - len(page.items) if page.more else 0
        return ListResult(page.items, revision or page.revision, page.more, remaining)

    async def _range(self, request: Any) -> wire.RangePage:
        """A Range's kvs, read from the answer's bytes (wire.py)."""
        data = await self._client.call("raw_kv", "Range", request)
        try:
            return wire.parse_range(data, self._keys.strip)
        except (wire.MalformedError, UnicodeDecodeError) as error:
            raise StorageError(f"etcd answered a Range coreio cannot read: {error}") from None

    async def create(self, key: str, value: bytes, *, ttl: int = 0) -> KeyValue:
        k = self._keys.key(key)

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
        k = self._keys.key(key)

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
        k = self._keys.key(key)
        compare = [_compare_exists(k)]
        if expected_revision:
            compare.append(_compare_mod(k, expected_revision))
        request = rpc.TxnRequest(
            compare=compare,
            success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k, prev_kv=True))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
        )
        response = await self._client.call("kv", "Txn", request)
        if not response.succeeded:
            raise self._write_failure(key, response)
        previous = response.responses[0].response_delete_range.prev_kvs[0]
        return KeyValue(key, previous.value, response.header.revision, previous.create_revision)

    async def current_revision(self) -> int:
        request = rpc.RangeRequest(key=self._keys.probe(), count_only=True)
        response = await self._client.call("kv", "Range", request)
        return int(response.header.revision)

    async def compacted_revision(self) -> int:
        """etcd does not report its compaction point, but a read below it fails: search for the
        oldest readable revision, starting from the last one known (usually two reads)."""
        return await self._compacted.find(await self.current_revision())

    async def compact(self, revision: int) -> None:
        if revision <= 0:
            return
        try:
            await self._client.call("kv", "Compact", rpc.CompactionRequest(revision=revision))
        except OutOfRange as error:
            if "compacted" not in str(error):  # at or below an earlier compaction: nothing to do
                raise await self._revision_error(revision, str(error)) from None
        self._compacted.compacted(revision)
        for listener in self.compaction_listeners:
            listener(revision)

    def watch(
        self, prefix: str, *, after_revision: int, progress: bool = False, progress_every: float = 0.0
    ) -> AsyncGenerator[WatchEvent, None]:
        interval = (progress_every or self.progress_interval) if progress else None
        return self._watcher.watch(prefix, after_revision, interval)

    # -- plumbing ----------------------------------------------------------------------------------

    async def _write(self, build: Any, ttl: int) -> Any:
        """Runs the Txn `build(lease)`; a lease that vanished is replaced once."""
        for attempt in (1, 2):
            lease = await self._leases.lease_for(ttl) if ttl > 0 else 0
            try:
                return await self._client.call("kv", "Txn", build(lease))
            except LeaseNotFound:
                self._leases.forget(ttl)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _grant_lease(self, ttl: int) -> tuple[int, int]:
        granted = await self._client.call("lease", "LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl))
        return int(granted.ID), int(granted.TTL)

    def _write_failure(self, key: str, response: Any) -> StorageError:
        kvs = response.responses[0].response_range.kvs
        if not kvs:
            return KeyNotFoundError(key)
        return RevisionConflictError(key, self._keys.key_value(kvs[0]))

    async def _revision_error(self, requested: int, details: str) -> StorageError:
        if "future" in details:
            return FutureRevisionError(requested, await self.current_revision())
        return CompactedError(requested, await self.compacted_revision())

    async def _readable(self, revision: int) -> bool:
        try:
            request = rpc.RangeRequest(key=self._keys.probe(), revision=revision, count_only=True)
            await self._client.call("kv", "Range", request)
        except OutOfRange:
            return False
        return True


def _compare_mod(key: bytes, revision: int) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision)


def _compare_exists(key: bytes) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.VERSION, result=rpc.Compare.GREATER, version=0)
