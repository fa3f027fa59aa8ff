"""One watch stream on one etcd member: created from the revision after the last delivered, read
with a timeout, asked for progress when idle; what ends it raised as a storage error."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import grpc
from aetcd import rpc

from apiserver.storage.etcd import native
from apiserver.storage.etcd.client import Connection
from apiserver.storage.etcd.errors import translate
from apiserver.storage.etcd.keys import Keys, range_end
from apiserver.storage.etcd.progress import Progress
from apiserver.storage.interface import (
    CompactedError,
    EventType,
    StorageError,
    StorageUnavailableError,
    WatchEvent,
)


async def watch_on(
    connection: Connection, keys: Keys, prefix: str, tracker: Progress
) -> AsyncGenerator[WatchEvent, None]:
    """The watch on one endpoint, from the revision after `tracker.last`."""
    stream = _WatchStream(connection.watch_stream())
    try:
        first = keys.key(prefix)
        create = rpc.WatchCreateRequest(
            key=first,
            range_end=range_end(first),
            start_revision=tracker.last + 1,
            prev_kv=True,
            progress_notify=tracker.interval is not None,
        )
        await stream.call.write(rpc.WatchRequest(create_request=create))
        async with contextlib.aclosing(_follow(stream, keys, connection.target, tracker)) as events:
            async for event in events:
                yield event
    except (grpc.aio.AioRpcError, native.NativeRpcError) as error:
        raise translate(error, connection.target) from error
    finally:
        stream.close()


async def _follow(
    stream: _WatchStream, keys: Keys, target: str, tracker: Progress
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
            if (revision := tracker.established()) is not None:
                yield WatchEvent(EventType.PROGRESS, "", revision)
            continue
        if not response.events:
            tracker.reported(response.header.revision)
            continue
        for raw in response.events:
            event = keys.event(raw)
            if (revision := tracker.delivering(event.revision)) is not None:
                yield WatchEvent(EventType.PROGRESS, "", revision)
            yield event


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
