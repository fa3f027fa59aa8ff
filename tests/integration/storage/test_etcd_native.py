"""The Rust extension's channel (storage/etcd/native.py) where grpcio's behaviour is not enough of a
guide: it is built in the source tree the tests run, callers that give up leave the others
answered, a call to a member that stopped answering ends at its deadline, and closing the client
ends the calls still waiting."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from apiserver.storage.etcd import EtcdStorage, native
from apiserver.storage.interface import StorageUnavailableError
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
