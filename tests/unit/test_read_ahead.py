"""Which requests start the storage's consistent read as they arrive (http/middleware.py read_ahead):
a GET of one object, and no other request. The storage here is a fake that counts its entries."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from apiserver.http.middleware import read_ahead
from apiserver.storage.interface import ReadsAhead

EVENTS = "/apis/events.core.io/v1/namespaces/ns/events"


class FakeReadsAhead:
    reads_ahead = True

    def __init__(self) -> None:
        self.entered = 0
        self.inside = False

    @contextlib.asynccontextmanager
    async def reading_ahead(self) -> AsyncIterator[None]:
        self.entered += 1
        self.inside = True
        try:
            yield
        finally:
            self.inside = False


async def handled(method: str, path: str) -> tuple[int, bool]:
    """How many reads the request started, and whether its handler ran inside one."""
    storage = FakeReadsAhead()
    assert isinstance(storage, ReadsAhead)
    seen: list[bool] = []

    async def handler(_request: web.Request) -> web.StreamResponse:
        seen.append(storage.inside)
        return web.Response()

    await read_ahead(storage)(make_mocked_request(method, path), handler)
    return storage.entered, seen[0]


async def test_a_get_of_one_object_starts_its_read_and_is_handled_within_it() -> None:
    assert await handled("GET", f"{EVENTS}/e1") == (1, True)
    assert await handled("GET", f"{EVENTS}/e1/status") == (1, True)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", EVENTS),  # a list
        ("GET", f"{EVENTS}?watch=true"),
        ("GET", f"{EVENTS}?fieldSelector=metadata.name%3De1"),  # a list, even naming one
        ("GET", "/apis/events.core.io/v1/watch/namespaces/ns/events/e1"),
        ("POST", EVENTS),
        ("PUT", f"{EVENTS}/e1"),
        ("DELETE", f"{EVENTS}/e1"),
        ("GET", "/readyz"),
        ("GET", "/apis/events.core.io/v1"),
    ],
)
async def test_no_other_request_starts_one(method: str, path: str) -> None:
    assert await handled(method, path) == (0, False)
