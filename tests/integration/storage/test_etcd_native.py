"""The Rust extension's channel (storage/etcd/native.py) where grpcio's behaviour is not enough of a
guide: it is built in the source tree the tests run, callers that give up leave the others
answered, the calls of one turn of the event loop go out together and are answered each (a bad one
failing alone), a call to a member that stopped answering ends at its deadline, closing the client ends
the calls and watches still waiting, and a watch read late loses nothing (its stream stops reading
while answers wait unread, then goes on)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from aetcd import rpc

from apiserver.storage.etcd import EtcdStorage, native
from apiserver.storage.interface import EventType, StorageUnavailableError
from tests.support.etcd import EtcdProcess, find_etcd_binary

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.skipif(find_etcd_binary() is None, reason="no etcd binary"),
]


@contextlib.asynccontextmanager
async def opened(store: EtcdStorage) -> AsyncIterator[EtcdStorage]:
    await store.start()
    try:
        yield store
    finally:
        await store.close()


def test_the_extension_is_built_where_the_tests_run() -> None:
    """scripts/test builds it in place (setup.py build_rust --inplace); without it the etcd tests
    would prove grpcio twice."""
    assert native.available(), "build it: COREIO_NATIVE=1 python setup.py build_rust --inplace --release"


async def test_callers_that_give_up_leave_the_others_answered(etcd_endpoint: str) -> None:
    async with opened(EtcdStorage([etcd_endpoint], prefix="/native-cancel")) as store:
        created = [await store.create(f"/k/{i}", str(i).encode()) for i in range(50)]
        calls = [asyncio.ensure_future(store.get(f"/k/{i}")) for i in range(50)]
        for call in calls[::2]:
            call.cancel()
        answered = await asyncio.gather(*calls[1::2])
        assert answered == created[1::2]
        assert all(call.cancelled() for call in calls[::2])
        # The answers of the abandoned calls arrived and were dropped: the channel goes on.
        assert await store.get("/k/0") == created[0]


async def test_the_calls_of_one_turn_are_answered_each_and_a_bad_one_fails_alone(etcd_endpoint: str) -> None:
    async with opened(EtcdStorage([etcd_endpoint], prefix="/native-batch")) as store:
        for i in range(300):
            await store.create(f"/k/{i}", str(i).encode())
    channel = native.NativeChannel(etcd_endpoint, ca=None, cert=None, key=None)
    try:
        range_path = "/etcdserverpb.KV/Range"

        def asked(i: int) -> bytes:
            data: bytes = rpc.RangeRequest(key=f"/native-batch/k/{i}".encode()).SerializeToString()
            return data

        # Made in one turn: submitted to the runtime together, at its end.
        calls = [channel.unary(range_path, asked(i), 10.0) for i in range(300)]
        bad_path = channel.unary("not a path", asked(0), 10.0)
        bad_timeout = channel.unary(range_path, asked(0), -1.0)
        answers = [rpc.RangeResponse.FromString(answer) for answer in await asyncio.gather(*calls)]
        assert [answer.kvs[0].value for answer in answers] == [str(i).encode() for i in range(300)]
        for bad in (bad_path, bad_timeout):
            with pytest.raises(native.NativeRpcError) as failed:
                await bad
            assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Closed before the turn ended: its calls fail, none is left waiting.
        late = channel.unary(range_path, asked(1), 10.0)
    finally:
        channel.close()
    with pytest.raises(native.NativeRpcError) as closed:
        await asyncio.wait_for(late, 5)
    assert closed.value.code() == grpc.StatusCode.CANCELLED


async def test_a_member_that_stops_answering_fails_the_call_at_its_deadline() -> None:
    with EtcdProcess() as etcd:
        async with opened(EtcdStorage([etcd.client_url], request_timeout=1.0)) as store:
            await store.create("/a", b"x")
            etcd.pause()
            try:
                started = time.monotonic()
                with pytest.raises(StorageUnavailableError, match="DEADLINE_EXCEEDED"):
                    await store.get("/a")
                assert 0.9 < time.monotonic() - started < 5
            finally:
                etcd.resume()
            assert await store.get("/a") is not None


async def test_closing_the_client_ends_the_calls_still_waiting() -> None:
    with EtcdProcess() as etcd:
        store = EtcdStorage([etcd.client_url], request_timeout=30.0)
        await store.start()
        await store.create("/a", b"x")
        etcd.pause()
        try:
            waiting = asyncio.ensure_future(store.get("/a"))
            await asyncio.sleep(0.2)
            assert not waiting.done()
            await store.close()
            with pytest.raises(StorageUnavailableError, match="CANCELLED"):
                await asyncio.wait_for(waiting, 5)
        finally:
            etcd.resume()


async def test_a_watch_read_late_loses_nothing(etcd_endpoint: str) -> None:
    """1,000 changes, one answer each, written while the watch is not read: far more answers than
    its stream holds unread (64), so it stops reading from etcd and resumes as they are read."""
    async with opened(EtcdStorage([etcd_endpoint], prefix="/native-late")) as store:
        start = await store.current_revision()
        events = store.watch("/w/", after_revision=start)
        async with contextlib.aclosing(events):
            first = await store.create("/w/first", b"x")
            assert (await anext(events)).revision == first.mod_revision
            written = [(await store.create(f"/w/{i}", b"y")).mod_revision for i in range(1000)]
            await asyncio.sleep(0.5)  # the stream's answers pile up unread meanwhile
            seen = [(await anext(events)).revision for _ in written]
        assert seen == written


async def test_closing_the_client_ends_its_watches() -> None:
    with EtcdProcess() as etcd:
        store = EtcdStorage([etcd.client_url], request_timeout=2.0)
        await store.start()
        events = store.watch("/", after_revision=await store.current_revision())
        waiting = asyncio.ensure_future(anext(events))
        await store.create("/a", b"x")
        assert (await asyncio.wait_for(waiting, 5)).type is EventType.PUT
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.2)
        await store.close()
        with pytest.raises(StorageUnavailableError, match="CANCELLED"):
            await asyncio.wait_for(waiting, 5)
        await events.aclose()
