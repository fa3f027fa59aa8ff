"""The gRPC channels to etcd's members: one for each endpoint, the one calls go to, and one call
with failover (clientv3's balancer and retries, reduced to what coreio needs)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
from aetcd import rpc

from apiserver.storage.etcd import native
from apiserver.storage.etcd.errors import translate
from apiserver.storage.interface import StorageUnavailableError, UnsupportedStorageError

log = logging.getLogger(__name__)

_CHANNEL_OPTIONS = [
    # A full list of a large resource can exceed gRPC's 4 MiB default.
    ("grpc.max_receive_message_length", 2**31 - 1),
    ("grpc.max_send_message_length", 2**31 - 1),
    # Notice dead connections under long-lived, quiet watches (etcd permits a ping every 5 s).
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
]


class RawKV:
    """The KV service's Range answering the response's bytes, for wire.py to read."""

    def __init__(self, channel: Any) -> None:
        # Named as the stubs name the method, for Client.call.
        self.Range = channel.unary_unary(
            "/etcdserverpb.KV/Range",
            request_serializer=rpc.RangeRequest.SerializeToString,
            response_deserializer=None,
        )


# The unary calls the native channel takes: (service, method) to the method's path and the type its
# answer is read into (None: the bytes themselves, for wire.py).
_NATIVE: dict[tuple[str, str], tuple[str, Any]] = {
    ("raw_kv", "Range"): ("/etcdserverpb.KV/Range", None),
    ("kv", "Range"): ("/etcdserverpb.KV/Range", rpc.RangeResponse),
    ("kv", "Txn"): ("/etcdserverpb.KV/Txn", rpc.TxnResponse),
    ("kv", "Put"): ("/etcdserverpb.KV/Put", rpc.PutResponse),
    ("kv", "Compact"): ("/etcdserverpb.KV/Compact", rpc.CompactionResponse),
    ("lease", "LeaseGrant"): ("/etcdserverpb.Lease/LeaseGrant", rpc.LeaseGrantResponse),
}


@dataclass
class Connection:
    """One member's channel and the raw stubs on it, and its native channel where built."""

    target: str
    channel: Any
    kv: Any
    lease: Any
    watch: Any
    maintenance: Any
    raw_kv: RawKV
    native: native.NativeChannel | None = None

    def watch_stream(self) -> Any:
        """A Watch stream on this member: the native channel's where built, else grpcio's."""
        if self.native is not None:
            return self.native.stream("/etcdserverpb.Watch/Watch", rpc.WatchResponse)
        return self.watch.Watch()


class Client:
    """The channels to `endpoints` (URLs or `host:port`), TLS for https endpoints or when `ca_file`
    is given. Calls go to one member and move to the next after it proves unreachable. `refused`,
    once set (a release found to lose writes after start), fails every call and watch. Unary calls
    go through the native channel (native.py) when it is built and `use_native` is True."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        ca_file: str | None,
        cert_file: str | None,
        key_file: str | None,
        request_timeout: float,
        use_native: bool = True,
    ) -> None:
        self.endpoints = list(endpoints)
        self.use_native = use_native and native.available()
        self.ca_file, self.cert_file, self.key_file = ca_file, cert_file, key_file
        self.request_timeout = request_timeout
        self.connections: list[Connection] = []
        self.refused: UnsupportedStorageError | None = None
        self._active = 0

    async def open(self) -> None:
        pems = await self._pems()
        credentials = None
        if pems is not None:
            root, key, cert = pems
            credentials = grpc.ssl_channel_credentials(
                root_certificates=root, private_key=key, certificate_chain=cert
            )
        for endpoint in self.endpoints:
            target = _target(endpoint)
            if credentials is not None:
                channel = grpc.aio.secure_channel(target, credentials, options=_CHANNEL_OPTIONS)
            else:
                channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
            stubs = (rpc.KVStub(channel), rpc.LeaseStub(channel), rpc.WatchStub(channel))
            connection = Connection(target, channel, *stubs, rpc.MaintenanceStub(channel), RawKV(channel))
            if self.use_native:
                connection.native = _native_channel(target, pems)
            self.connections.append(connection)

    async def _pems(self) -> tuple[bytes | None, bytes | None, bytes | None] | None:
        """The CA, key and certificate files' bytes when the endpoints take TLS, else None."""
        tls = self.ca_file or any(urlsplit(e).scheme == "https" for e in self.endpoints)
        if not tls:
            return None

        def read(path: str | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        root, key, cert = await asyncio.gather(
            *(asyncio.to_thread(read, path) for path in (self.ca_file, self.key_file, self.cert_file))
        )
        return root, key, cert

    async def close(self) -> None:
        connections, self.connections = self.connections, []
        for connection in connections:
            if connection.native is not None:
                connection.native.close()
            await connection.channel.close()

    @property
    def active(self) -> Connection:
        """The member calls go to now."""
        if not self.connections:
            raise StorageUnavailableError("etcd storage is not started")
        return self.connections[self._active % len(self.connections)]

    async def call(self, service: str, method: str, request: Any) -> Any:
        """One call to the active endpoint. A read (Range) that finds it unavailable is asked again
        of each other endpoint, as clientv3 retries its repeatable calls; anything else is not (a
        write may have landed), and the next call goes to the next endpoint."""
        if self.refused is not None:
            raise self.refused
        tries = len(self.connections) if method == "Range" else 1
        for attempt in range(1, tries + 1):
            connection = self.active
            try:
                return await self._call_on(connection, service, method, request)
            except (grpc.aio.AioRpcError, native.NativeRpcError) as error:
                translated = translate(error, connection.target)
                if not isinstance(translated, StorageUnavailableError):
                    raise translated from error
                self.failover(connection)
                if attempt == tries:
                    raise translated from error
        raise AssertionError("unreachable: the last try raises")

    async def _call_on(self, connection: Connection, service: str, method: str, request: Any) -> Any:
        route = _NATIVE.get((service, method))
        if connection.native is None or route is None:
            stub_method = getattr(getattr(connection, service), method)
            return await stub_method(request, timeout=self.request_timeout)
        path, answer = route
        data = await connection.native.unary(path, request.SerializeToString(), self.request_timeout)
        return data if answer is None else answer.FromString(data)

    def failover(self, failed: Connection) -> None:
        """`failed` proved unreachable: calls go to the next member (if it is still the active one)."""
        if len(self.connections) > 1 and self.active is failed:
            self._active += 1
            log.warning("etcd endpoint %s unavailable; switching to %s", failed.target, self.active.target)


def _native_channel(
    target: str, pems: tuple[bytes | None, bytes | None, bytes | None] | None
) -> native.NativeChannel | None:
    """The native channel to `target`, or None (grpcio then) where its TLS cannot be set up the
    way grpcio's can (no system CA store for an https endpoint given no CA file, say)."""
    root, key, cert = pems or (None, None, None)
    uri = f"https://{target}" if pems is not None else f"http://{target}"
    try:
        return native.NativeChannel(uri, ca=root, cert=cert, key=key)
    except (ValueError, RuntimeError) as error:
        log.warning("etcd %s: the native client cannot connect (%s); using grpcio", target, error)
        return None


def _target(endpoint: str) -> str:
    """gRPC target `host:port` from `http(s)://host:port` or `host:port`."""
    if "://" not in endpoint:
        return endpoint
    parts = urlsplit(endpoint)
    return parts.netloc or endpoint
