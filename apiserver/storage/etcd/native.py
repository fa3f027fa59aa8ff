"""etcd's unary calls through the Rust extension `_rpc` (native/etcd_rpc), where it was built: the
gRPC framing and HTTP/2 run on the extension's own thread, off the GIL, at a third of grpcio's CPU a
call (docs/architecture.md, "Compiled modules", has the figures). Requests are still encoded and
answers still read in Python. A watch is a stream on the same channel (`NativeStream`, read and
written as grpcio's stream is). Without the extension, `available()` is False and every call and
watch goes through grpcio."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import grpc

try:
    from apiserver.storage.etcd import _rpc
except ImportError:  # a build without Rust (setup.py): grpcio alone
    _rpc = None  # type: ignore[assignment]

_CODES = {status.value[0]: status for status in grpc.StatusCode}
_ENDED = -1  # a stream's end, from take()


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
        self._outbox: list[tuple[int, str, bytes, float]] = []  # calls not yet submitted
        self._streams: dict[int, asyncio.Queue[tuple[int, bytes | str]]] = {}
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._channel.fd, self._finished)

    def unary(self, method: str, request: bytes, timeout: float) -> asyncio.Future[bytes]:
        """The answer of `method` (`/etcdserverpb.KV/Range`) to the encoded `request`. The calls
        made in one turn of the event loop go to the runtime together at its end: one wake-up of
        the runtime's thread (a system call) for all of them rather than one each."""
        call = next(self._calls)
        future: asyncio.Future[bytes] = self._loop.create_future()
        self._waiting[call] = future
        self._outbox.append((call, method, request, timeout))
        if len(self._outbox) == 1:
            self._loop.call_soon(self._submit)
        return future

    def _submit(self) -> None:
        outbox, self._outbox = self._outbox, []
        if not outbox:
            return  # closed meanwhile
        try:
            self._channel.submit(outbox)
        except RuntimeError as exc:  # closed meanwhile
            failure = NativeRpcError(grpc.StatusCode.CANCELLED, str(exc))
            for call, *_ in outbox:
                future = self._waiting.pop(call, None)
                if future is not None and not future.done():
                    future.set_exception(failure)

    def stream(self, method: str, answer_type: Any) -> NativeStream:
        """A bidirectional stream of `method`, opened by its first write."""
        call = next(self._calls)
        queue = self._streams[call] = asyncio.Queue()
        return NativeStream(self._channel, self._streams, call, queue, method, answer_type)

    def _finished(self) -> None:
        for call, code, answer in self._channel.take():
            if (queue := self._streams.get(call)) is not None:
                queue.put_nowait((code, answer))
                continue
            future = self._waiting.pop(call, None)
            if future is None or future.done():  # cancelled by its caller meanwhile
                continue
            if code == 0:
                future.set_result(answer)  # type: ignore[arg-type]
            else:
                future.set_exception(_failure(code, answer))

    def close(self) -> None:
        self._loop.remove_reader(self._channel.fd)
        self._channel.close()
        self._outbox.clear()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(NativeRpcError(grpc.StatusCode.CANCELLED, "the etcd client closed"))
        for queue in self._streams.values():
            queue.put_nowait((grpc.StatusCode.CANCELLED.value[0], "the etcd client closed"))
        self._streams.clear()


class NativeStream:
    """One bidirectional stream, used as grpcio's stream call is (stream.py): `write` a request,
    `read` the next answer (grpc.aio.EOF at its end; a failure raised), `cancel`."""

    def __init__(
        self,
        channel: _rpc.Channel,
        streams: dict[int, asyncio.Queue[tuple[int, bytes | str]]],
        call: int,
        queue: asyncio.Queue[tuple[int, bytes | str]],
        method: str,
        answer_type: Any,
    ) -> None:
        self._channel, self._streams, self._call, self._queue = channel, streams, call, queue
        self._method, self._answer_type = method, answer_type
        self._opened = False

    async def write(self, request: Any) -> None:
        data = request.SerializeToString()
        if not self._opened:
            self._opened = True
            self._channel.open_stream(self._call, self._method, data)
        elif not self._channel.send(self._call, data):
            raise NativeRpcError(grpc.StatusCode.CANCELLED, "the watch stream is closed")

    async def read(self) -> Any:
        code, answer = await self._queue.get()
        if code == 0:
            self._channel.read(self._call)
            return self._answer_type.FromString(answer)
        self.cancel()
        if code == _ENDED:
            return grpc.aio.EOF
        raise _failure(code, answer)

    def cancel(self) -> None:
        self._streams.pop(self._call, None)
        self._channel.close_stream(self._call)


def _failure(code: int, message: bytes | str) -> NativeRpcError:
    return NativeRpcError(_CODES.get(code, grpc.StatusCode.UNKNOWN), str(message))
