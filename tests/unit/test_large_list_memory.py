"""A streamed list of more than RELEASE_AFTER_BYTES hands the memory its encoding freed back to the
system once written (http/responses.py), and a smaller one does not pay for a trim. The trim is
replaced by a counting stand-in here; tests/unit/test_release_free_memory.py tests the real one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from apiserver.http import responses

PIECE = b"x" * (1024 * 1024)


def _pieces(megabytes: int) -> Iterator[bytes]:
    return (PIECE for _ in range(megabytes))


@pytest.mark.parametrize(("megabytes", "trims"), [(8, 0), (70, 1)])
async def test_only_a_large_list_is_followed_by_a_trim(
    monkeypatch: pytest.MonkeyPatch, megabytes: int, trims: int
) -> None:
    calls: list[None] = []

    def counting_release_stand_in() -> bool:
        calls.append(None)
        return True

    monkeypatch.setattr(responses, "release_free_memory", counting_release_stand_in)

    async def handler(_request: web.Request) -> web.StreamResponse:
        return responses.StreamedBody(_pieces(megabytes), "application/json", gzipped=False)

    app = web.Application()
    app.router.add_get("/list", handler)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/list")
        assert len(await response.read()) == megabytes * len(PIECE)
    assert len(calls) == trims
