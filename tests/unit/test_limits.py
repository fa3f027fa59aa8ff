"""The overload middlewares on an in-process aiohttp app: what they answer, what they cancel and
what they count (the real server is exercised in tests/integration/test_limits.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from apiserver.auth.attributes import USER_KEY
from apiserver.http.limits import InFlightLimit, request_timeout
from apiserver.http.middleware import Handler, status_errors
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.user import UserInfo

LIST = "/apis/g/v1/namespaces/ns/things"
# The user is kept under USER_KEY, as the authentication middleware keeps it.
pytestmark = pytest.mark.filterwarnings("ignore:It is recommended to use web.RequestKey")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("1m0s", 60.0),
        ("300ms", 0.3),
        ("1.5h", 5400.0),
        ("-2ms", -0.002),
        ("+3s", 3.0),
        (".5s", 0.5),
        ("5.s", 5.0),
        ("1h2m3s4ms5us6ns", 3723.004005006),
        ("2\u00b5s", 2e-6),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("abc", 'time: invalid duration "abc"'),
        ("5", 'time: missing unit in duration "5"'),
        ("5x", 'time: unknown unit "x" in duration "5x"'),
        ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
        (".s", 'time: invalid duration ".s"'),
        ("-", 'time: invalid duration "-"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
    ],
)
def test_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_go_duration(text)
    assert str(raised.value) == message


@web.middleware
async def _user_from_header(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Stands in for authentication: the user named in X-Test-User, in the groups of X-Test-Groups."""
    groups = tuple(g for g in request.headers.get("X-Test-Groups", "").split(",") if g)
    request[USER_KEY] = UserInfo(name=request.headers.get("X-Test-User", "someone"), groups=groups)
    return await handler(request)


class Slow:
    """Handlers that wait until released, and remember being cancelled."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0
        self.cancelled = 0
        self._progress = asyncio.Event()

    async def until_started(self, count: int) -> None:
        async with asyncio.timeout(5):
            while self.started < count:
                self._progress.clear()
                await self._progress.wait()

    async def wait(self, request: web.Request) -> web.StreamResponse:
        self.started += 1
        self._progress.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return web.json_response({"kind": "ThingList"})

    async def stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"half":')
        await self.release.wait()
        return response


@pytest.fixture
async def app_client() -> AsyncIterator[tuple[TestClient[web.Request, web.Application], Slow, InFlightLimit]]:
    slow = Slow()
    limit = InFlightLimit(1, 1)
    app = web.Application(
        middlewares=[status_errors, request_timeout(0.5), _user_from_header, limit.middleware]
    )
    app.router.add_route("*", LIST, slow.wait)
    app.router.add_get("/stream", slow.stream)
    async with TestClient(TestServer(app)) as client:
        yield client, slow, limit
        slow.release.set()


async def test_timeout_answers_504_and_cancels_the_handler(
    app_client: tuple[TestClient[web.Request, web.Application], Slow, InFlightLimit],
) -> None:
    client, slow, _ = app_client
    response = await client.get(LIST)
    assert response.status == 504
    assert await response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Timeout: request did not complete within the allotted timeout",
        "reason": "Timeout",
        "code": 504,
    }
    assert slow.cancelled == 1


async def test_timeout_parameter(
    app_client: tuple[TestClient[web.Request, web.Application], Slow, InFlightLimit],
) -> None:
    client, _, _ = app_client
    started = asyncio.get_running_loop().time()
    assert (await client.get(LIST, params={"timeout": "100ms"})).status == 504
    assert asyncio.get_running_loop().time() - started < 0.45
    response = await client.get(LIST, params={"timeout": "1x"})
    assert response.status == 400
    body = await response.json()
    assert (
        body["message"]
        == 'invalid timeout specified in the request URL - time: unknown unit "x" in duration "1x"'
    )


async def test_a_response_already_going_out_is_cut_not_replaced(
    app_client: tuple[TestClient[web.Request, web.Application], Slow, InFlightLimit],
) -> None:
    client, _, _ = app_client
    response = await client.get("/stream")
    assert response.status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.read()


async def test_watches_are_not_timed_out_nor_counted(
    app_client: tuple[TestClient[web.Request, web.Application], Slow, InFlightLimit],
) -> None:
    client, slow, limit = app_client
    watch = asyncio.ensure_future(client.get(LIST, params={"watch": "true"}))
    other = asyncio.ensure_future(client.get(LIST, params={"watch": "1"}))
    await slow.until_started(2)
    await asyncio.sleep(0.7)  # past the 0.5 s timeout
    assert limit.read_only.in_flight == 0
    assert (
        'apiserver_longrunning_requests{component="apiserver",group="g",resource="things"'
        in limit.metrics_text()
    )
    slow.release.set()
    assert (await watch).status == 200 and (await other).status == 200
    assert slow.cancelled == 0


async def test_in_flight_limits(
    app_client: tuple[TestClient[web.Request, web.Application], Slow, InFlightLimit],
) -> None:
    client, slow, limit = app_client
    first_read = asyncio.ensure_future(client.get(LIST))
    first_write = asyncio.ensure_future(client.post(LIST))
    await slow.until_started(2)
    assert (limit.read_only.in_flight, limit.mutating.in_flight) == (1, 1)
    for method in ("GET", "POST", "DELETE", "PATCH", "PUT"):
        response = await client.request(method, LIST)
        assert response.status == 429
        assert response.headers["Retry-After"] == "1"
        body = await response.json()
        assert body["reason"] == "TooManyRequests" and body["details"] == {"retryAfterSeconds": 1}
    # system:masters gets through even now (it waits for the handler like anyone).
    masters = asyncio.ensure_future(client.get(LIST, headers={"X-Test-Groups": "system:masters"}))
    await slow.until_started(3)
    slow.release.set()
    assert [(await r).status for r in (first_read, first_write, masters)] == [200, 200, 200]
    assert (limit.read_only.in_flight, limit.mutating.in_flight) == (0, 0)
    assert 'apiserver_current_inflight_requests{request_kind="readOnly"} 0' in limit.metrics_text()


async def test_long_running_labels_are_escaped_and_forgotten() -> None:
    from aiohttp.test_utils import make_mocked_request

    limit = InFlightLimit(1, 1)
    seen: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(limit.metrics_text())
        return web.Response()

    request = make_mocked_request("GET", "/apis/g/v1/namespaces/ns/a%22b%5C%0Ac?watch=1")
    await limit.middleware(request, handler)
    assert 'resource="a\\"b\\\\\\nc"' in seen[0]
    assert "apiserver_longrunning_requests{" not in limit.metrics_text()
