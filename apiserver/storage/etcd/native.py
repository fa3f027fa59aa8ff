"""etcd's unary calls through the Rust extension `_rpc` (native/etcd_rpc), where it was built: the
gRPC framing and HTTP/2 run on the extension's own thread, off the GIL, at a third of grpcio's CPU a
call (docs/architecture.md, "Compiled modules", has the figures). Requests are still encoded and
answers still read in Python; watches stay on grpcio (client.py). Without the extension,
`available()` is False and every call goes through grpcio."""

from __future__ import annotations

import asyncio
import itertools

import grpc

try:
    from apiserver.storage.etcd import _rpc
except ImportError:  # a build without Rust (setup.py): grpcio alone
    _rpc = None  # type: ignore[assignment]

_CODES = {status.value[0]: status for status in grpc.StatusCode}


def available() -> bool:
    return _rpc is not None


class NativeRpcError(Exception):
    """A failed call, read as grpcio's AioRpcError is (errors.translate)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class NativeChannel:
    """One member's channel on the running event loop: `unary` answers a call's bytes."""

    def __init__(self, uri: str, *, ca: bytes | None, cert: bytes | None, key: bytes | None) -> None:
        if _rpc is None:
            raise RuntimeError("the _rpc extension is not built")
        self._channel = _rpc.Channel(uri, ca=ca, cert=cert, key=key)
        self._calls = itertools.count()
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._channel.fd, self._finished)

    def unary(self, method: str, request: bytes, timeout: float) -> asyncio.Future[bytes]:
        """The answer of `method` (`/etcdserverpb.KV/Range`) to the encoded `request`."""
        call = next(self._calls)
        future: asyncio.Future[bytes] = self._loop.create_future()
        self._channel.submit(call, method, request, timeout)
        self._waiting[call] = future
        return future

    def _finished(self) -> None:
        for call, code, answer in self._channel.take():
            future = self._waiting.pop(call, None)
            if future is None or future.done():  # cancelled by its caller meanwhile
                continue
            if code == 0:
                future.set_result(answer)  # type: ignore[arg-type]
            else:
                future.set_exception(NativeRpcError(_CODES.get(code, grpc.StatusCode.UNKNOWN), str(answer)))

    def close(self) -> None:
        self._loop.remove_reader(self._channel.fd)
        self._channel.close()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(NativeRpcError(grpc.StatusCode.CANCELLED, "the etcd client closed"))
