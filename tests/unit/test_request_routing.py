"""One parse of a request (issue 20): for any path and query, either nothing is served, or the
operation the stores are asked for is exactly the one authorization judged: verb, group, resource,
namespace and name. The whole server app runs in-process on a real SQLite file; the stores are the
real ones, watched by a spy that records each call (`StoreCallSpy`), and the attributes judged are
read from the request afterwards (the same object the authorizer was given).

Hypothesis makes the paths from served ones: empty segments, `.` and `..` (plain and percent-encoded), encoded
slashes, case, trailing slashes, the /watch/ prefix, repeated query keys, `watch` spellings and field
selectors on metadata.name. The same property is checked over TLS against a live server, as an
ordinary user, in tests/integration/test_request_routing_live.py."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings

from apiserver.app import build_app
from apiserver.auth.attributes import INFO_KEY
from apiserver.auth.authn import AuthenticatorChain, TokenAuthenticator
from apiserver.auth.requestinfo import RequestInfo
from apiserver.config import Settings
from apiserver.machinery.options import ListOptions
from apiserver.machinery.user import UserInfo
from apiserver.registry.store import ResourceStore
from apiserver.server import storage_options
from apiserver.storage.factory import open_storage
from tests.support.requestpaths import requests

TOKEN = "routing-admin"
ADMIN = UserInfo("routing-admin", groups=("system:masters",))
# The verb each store method serves, as authorization names it.
VERB_OF = {
    "get": "get",
    "list": "list",
    "watch": "watch",
    "create": "create",
    "update": "update",
    "patch": "patch",
    "apply": "patch",
    "delete": "delete",
    "delete_corrupt": "delete",
    "delete_collection": "deletecollection",
}


@dataclasses.dataclass(frozen=True)
class StoreCall:
    group: str
    resource: str
    method: str
    namespace: str
    name: str  # the object's, or the name a list or watch is pinned to by its field selector


CALLS: contextvars.ContextVar[list[StoreCall]] = contextvars.ContextVar("calls")


def _pinned(args: tuple[Any, ...]) -> str:
    opts = next((a for a in args if isinstance(a, ListOptions)), None)
    selector = opts.field_selector if opts is not None else None
    return (selector.requires_exact_match("metadata.name") or "") if selector is not None else ""


def _spied(method: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(store: ResourceStore, namespace: str | None, *args: Any, **kwargs: Any) -> Any:
        named = method not in ("list", "watch", "delete_collection", "create")
        name = str(args[0]) if named else _pinned(args)
        kind = store.kind
        calls = CALLS.get(None)  # None: the server's own (the binding index lists)
        if calls is not None:
            calls.append(StoreCall(kind.group, kind.plural, method, namespace or "", name))
        return original(store, namespace, *args, **kwargs)

    return call


@pytest.fixture
def store_call_spy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ResourceStore call recorded (the real call still made)."""
    for method in VERB_OF:
        monkeypatch.setattr(ResourceStore, method, _spied(method, getattr(ResourceStore, method)))


@web.middleware
async def recording(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    CALLS.set([])
    response: web.StreamResponse = await handler(request)
    return response


Judged = dict[str, tuple[RequestInfo | None, list[StoreCall]]]
JUDGED = web.AppKey("judged", Judged)


Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def client(tmp_path: Path, store_call_spy: None) -> AsyncIterator[Client]:
    config = Settings(data_dir=tmp_path)
    storage, _ = open_storage(storage_options(config))
    app = build_app(config, storage, AuthenticatorChain([TokenAuthenticator({TOKEN: ADMIN})]))
    app.middlewares.insert(0, recording)
    judged: Judged = {}

    async def keep(request: web.BaseRequest, response: web.StreamResponse) -> None:
        if isinstance(request, web.Request):
            judged[request.headers.get("X-Case", "")] = (request.get(INFO_KEY), CALLS.get([]))

    app.on_response_prepare.append(keep)
    app[JUDGED] = judged
    async with TestClient(TestServer(app, handler_cancellation=True)) as test_client:
        yield test_client


BODY = b'{"apiVersion":"events.core.io/v1","kind":"Event","metadata":{"name":"x"}}'


def check(info: RequestInfo | None, calls: list[StoreCall]) -> None:
    """The handler's store call is the operation `info` describes (the calls that one makes in
    turn, a delete's list of the collection, come after it)."""
    for call in calls[:1]:
        assert info is not None and info.is_resource_request, (info, call)
        served = (call.group, call.resource, VERB_OF[call.method], call.namespace)
        assert served == (info.api_group, info.resource, info.verb, info.namespace), (info, call)
        assert info.subresource == "", (info, call)
        if call.method == "delete_collection":
            continue  # a whole collection is authorized, whatever narrows it
        if call.method in ("list", "watch"):
            # Pinned to the name judged, or judged for the whole collection.
            assert info.name in ("", call.name), (info, call)
        else:
            assert call.name == info.name, (info, call)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=requests())
async def test_what_is_served_is_what_was_authorized(
    client: Client, case: tuple[str, str, list[str]]
) -> None:
    method, path, terms = case
    url = path + ("?" + "&".join(terms) if terms else "")
    key = f"{method} {url}"
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Case": key, "Content-Type": "application/json"}
    body = BODY if method in ("POST", "PUT", "PATCH") else None
    response = await client.request(method, url, headers=headers, data=body, skip_auto_headers=["Accept"])
    response.close()
    assert response.status < 500, (key, response.status)
    info, calls = client.app[JUDGED][key]
    check(info, calls)


async def test_the_bypass_of_issue_20_is_a_404(client: Client) -> None:
    """The request that listed a namespace while its authorizer judged `get` of an object named
    `events`: kube-apiserver answers 404, and so does coreio, with nothing served."""
    for method in ("GET", "DELETE"):
        key = f"{method} bypass"
        headers = {"Authorization": f"Bearer {TOKEN}", "X-Case": key}
        path = "/apis/events.core.io/v1/namespaces/team-b//events"
        response = await client.request(method, path, headers=headers)
        assert response.status == 404
        assert (await response.json())["message"] == "the server could not find the requested resource"
        info, calls = client.app[JUDGED][key]
        assert calls == [] and info is not None and (info.resource, info.name) == ("", "events")
