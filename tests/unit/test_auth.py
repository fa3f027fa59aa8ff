"""Authentication and authorization pieces: request info, front-proxy headers and client
certificates over real TLS, the Forbidden wording, and TokenReview/SubjectAccessReview delegation
against a stand-in cluster."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from apiserver import pki
from apiserver.auth.attributes import USER_KEY
from apiserver.auth.authn import (
    AuthenticatorChain,
    RequestHeaderAuthenticator,
    RequestHeaderConfig,
    TokenAuthenticator,
    X509Authenticator,
)
from apiserver.auth.authz import Decision, PrivilegedGroups, forbidden
from apiserver.auth.delegated import (
    ExtensionAuthentication,
    SubjectAccessReviewAuthorizer,
    TokenReviewAuthenticator,
    TTLCache,
)
from apiserver.auth.requestinfo import RequestInfo, request_info
from apiserver.cluster.connection import ClusterClient, ClusterConnection, load_kubeconfig
from apiserver.http.middleware import authentication, authorization, status_errors
from apiserver.machinery.user import UserInfo

# --- request info -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/apis", {}, ("get", False, "", "", "")),
        ("GET", "/apis/events.core.io/v1", {}, ("get", False, "", "", "")),
        ("GET", "/openapi/v3", {}, ("get", False, "", "", "")),
        ("GET", "/apis/events.core.io/v1/events", {}, ("list", True, "", "events", "")),
        ("GET", "/apis/events.core.io/v1/events", {"watch": "true"}, ("watch", True, "", "events", "")),
        ("GET", "/apis/events.core.io/v1/namespaces/a/events", {}, ("list", True, "a", "events", "")),
        ("GET", "/apis/events.core.io/v1/namespaces/a/events/x", {}, ("get", True, "a", "events", "x")),
        ("GET", "/apis/events.core.io/v1/watch/namespaces/a/events", {}, ("watch", True, "a", "events", "")),
        ("POST", "/apis/events.core.io/v1/namespaces/a/events", {}, ("create", True, "a", "events", "")),
        ("PUT", "/apis/events.core.io/v1/namespaces/a/events/x", {}, ("update", True, "a", "events", "x")),
        ("PATCH", "/apis/events.core.io/v1/namespaces/a/events/x", {}, ("patch", True, "a", "events", "x")),
        ("DELETE", "/apis/events.core.io/v1/namespaces/a/events/x", {}, ("delete", True, "a", "events", "x")),
        (
            "DELETE",
            "/apis/events.core.io/v1/namespaces/a/events",
            {},
            ("deletecollection", True, "a", "events", ""),
        ),
        (
            "GET",
            "/apis/events.core.io/v1/namespaces/a/events",
            {"fieldSelector": "metadata.name=x"},
            ("list", True, "a", "events", "x"),
        ),
        ("GET", "/api/v1/namespaces/a", {}, ("get", True, "a", "namespaces", "a")),
    ],
)
def test_request_info(method: str, path: str, query: dict[str, str], expected: tuple[Any, ...]) -> None:
    info = request_info(method, path, query)
    assert (info.verb, info.is_resource_request, info.namespace, info.resource, info.name) == expected
    if info.is_resource_request and path.startswith("/apis/"):
        assert (info.api_group, info.api_version) == ("events.core.io", "v1")


def test_forbidden_wording() -> None:
    alice = UserInfo("alice")
    info = request_info("GET", "/apis/rbac.authorization.core.io/v1/namespaces/ns/rolebindings/x", {})
    error = forbidden(alice, info)
    assert error.code == 403
    assert error.message == (
        'rolebindings.rbac.authorization.core.io "x" is forbidden: User "alice" cannot get resource '
        '"rolebindings" in API group "rbac.authorization.core.io" in the namespace "ns"'
    )
    assert error.details == {"name": "x", "group": "rbac.authorization.core.io", "kind": "rolebindings"}
    every = forbidden(alice, request_info("GET", "/apis/events.core.io/v1/events", {}), "no rule")
    assert every.message == (
        'events.events.core.io is forbidden: User "alice" cannot list resource "events" in API group '
        '"events.core.io" at the cluster scope: no rule'
    )
    path = forbidden(alice, request_info("GET", "/openapi/v2", {}))
    assert path.message == 'forbidden: User "alice" cannot get path "/openapi/v2"'


def test_ttl_cache_expires_and_bounds() -> None:
    cache: TTLCache[str, int] = TTLCache(ttl=60, size=2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, 2, 3)
    expired: TTLCache[str, int] = TTLCache(ttl=-1)
    expired.put("a", 1)
    assert expired.get("a") is None


# --- authentication over real TLS ------------------------------------------------------------


class Authorities:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.client_ca = pki.create_ca("client-ca")
        self.client_ca.save(directory / "client-ca.crt", directory / "client-ca.key")
        self.front_proxy_ca = pki.create_ca("front-proxy-ca")
        self.front_proxy_ca.save(directory / "front-proxy-ca.crt", directory / "front-proxy-ca.key")
        self.serving_ca = pki.create_ca("serving-ca")
        self.serving_ca.save(directory / "serving-ca.crt", directory / "serving-ca.key")
        serving = pki.issue_serving_certificate(self.serving_ca)
        serving.save(directory / "serving.crt", directory / "serving.key")

    def client(self, ca: pki.KeyPair, user: str, groups: tuple[str, ...] = ()) -> ssl.SSLContext:
        pair = pki.issue_client_certificate(ca, user, groups)
        pair.save(self.directory / f"{user}.crt", self.directory / f"{user}.key")
        context = ssl.create_default_context(cafile=str(self.directory / "serving-ca.crt"))
        context.load_cert_chain(str(self.directory / f"{user}.crt"), str(self.directory / f"{user}.key"))
        return context

    def anonymous(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.directory / "serving-ca.crt"))


async def _whoami(request: web.Request) -> web.Response:
    user = request[USER_KEY]
    return web.json_response(
        {"name": user.name, "uid": user.uid, "groups": list(user.groups), "extra": user.extra}
    )


@pytest.fixture
async def authorities(tmp_path: Path) -> Authorities:
    return Authorities(tmp_path)


@pytest.fixture
async def server(authorities: Authorities) -> AsyncIterator[str]:
    d = authorities.directory
    requestheader = RequestHeaderConfig(
        client_cas=pki.CABundle([d / "front-proxy-ca.crt"]),
        allowed_names=("front-proxy-client",),
        uid_headers=("X-Remote-Uid",),
    )
    chain = AuthenticatorChain(
        [
            RequestHeaderAuthenticator(requestheader),
            X509Authenticator(pki.CABundle([d / "client-ca.crt"])),
            TokenAuthenticator({"static-token": UserInfo("token-user")}),
        ]
    )
    serving = pki.ServingCertificate(
        d / "serving.crt", d / "serving.key", [d / "client-ca.crt", d / "front-proxy-ca.crt"]
    )
    app = web.Application(middlewares=[status_errors, authentication(chain)])
    app.router.add_get("/whoami", _whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving.context)
    await site.start()
    try:
        yield f"https://localhost:{runner.addresses[0][1]}/whoami"
    finally:
        await runner.cleanup()


async def _get(url: str, context: ssl.SSLContext, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context, headers=headers) as response:
        return response.status, await response.json()


FRONT_PROXY_HEADERS = {
    "X-Remote-User": "alice",
    "X-Remote-Uid": "alice-1",
    "X-Remote-Group": "devs",
    "X-Remote-Extra-Scopes": "view",
    "X-Remote-Extra-Example.com%2fteam": "blue",
}


async def test_front_proxy_certificate_asserts_the_header_user(authorities: Authorities, server: str) -> None:
    context = authorities.client(authorities.front_proxy_ca, "front-proxy-client")
    status, user = await _get(server, context, FRONT_PROXY_HEADERS)
    assert status == 200
    assert user == {
        "name": "alice",
        "uid": "alice-1",
        "groups": ["devs", "system:authenticated"],
        "extra": {"scopes": ["view"], "example.com/team": ["blue"]},
    }
    # Without a username header the front proxy is no one.
    status, _ = await _get(server, context)
    assert status == 401


async def test_headers_are_ignored_without_the_front_proxy_certificate(
    authorities: Authorities, server: str
) -> None:
    # A client certificate of the client CA: its own user.
    status, user = await _get(
        server, authorities.client(authorities.client_ca, "bob", ("team",)), FRONT_PROXY_HEADERS
    )
    assert (status, user["name"], user["groups"]) == (200, "bob", ["team", "system:authenticated"])
    # The front-proxy CA, but a CN not allowed: neither the headers nor the certificate count.
    status, _ = await _get(
        server, authorities.client(authorities.front_proxy_ca, "mallory"), FRONT_PROXY_HEADERS
    )
    assert status == 401
    # No certificate at all.
    status, _ = await _get(server, authorities.anonymous(), FRONT_PROXY_HEADERS)
    assert status == 401
    # A certificate named front-proxy-client but issued by the client CA is a plain user.
    status, user = await _get(
        server, authorities.client(authorities.client_ca, "front-proxy-client"), FRONT_PROXY_HEADERS
    )
    assert (status, user["name"]) == (200, "front-proxy-client")


async def test_static_token_and_unknown_token(authorities: Authorities, server: str) -> None:
    status, user = await _get(server, authorities.anonymous(), {"Authorization": "Bearer static-token"})
    assert (status, user["name"]) == (200, "token-user")
    status, body = await _get(server, authorities.anonymous(), {"Authorization": "Bearer nope"})
    assert (status, body["reason"]) == (401, "Unauthorized")


# --- delegation against a stand-in cluster ---------------------------------------------------


class FakeCluster:
    def __init__(self) -> None:
        self.reviews: list[dict[str, Any]] = []
        self.url = ""

    async def token_review(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        token = review["spec"]["token"]
        status: dict[str, Any] = {"authenticated": token == "good"}
        if token == "good":
            status["user"] = {
                "username": "system:serviceaccount:ns:bot",
                "uid": "u-1",
                "groups": ["system:serviceaccounts"],
                "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
            }
        return web.json_response({**review, "status": status})

    async def access_review(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        allowed = review["spec"].get("resourceAttributes", {}).get("verb") == "get"
        status = {"allowed": allowed} if allowed else {"allowed": False, "reason": "no RBAC rule"}
        return web.json_response({**review, "status": status})


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    fake = FakeCluster()
    app = web.Application()
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", fake.token_review)
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", fake.access_review)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield fake
    finally:
        await runner.cleanup()


async def _delegated_app(cluster: FakeCluster) -> tuple[web.AppRunner, str, ClusterClient]:
    client = ClusterClient(ClusterConnection(cluster.url, True, token="coreio-token"))
    chain = AuthenticatorChain([TokenReviewAuthenticator(client)])
    authorizer = PrivilegedGroups(SubjectAccessReviewAuthorizer(client))
    app = web.Application(middlewares=[status_errors, authentication(chain), authorization(authorizer)])
    app.router.add_route("*", "/{tail:.*}", _whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}", client


async def test_token_review_and_access_review(cluster: FakeCluster) -> None:
    runner, url, client = await _delegated_app(cluster)
    path = "/apis/events.core.io/v1/namespaces/ns/events/x"
    try:
        async with aiohttp.ClientSession() as session:
            good = {"Authorization": "Bearer good"}
            async with session.get(url + path, headers=good) as response:
                assert response.status == 200
                user = await response.json()
            assert user["name"] == "system:serviceaccount:ns:bot"
            assert user["groups"] == ["system:serviceaccounts", "system:authenticated"]
            assert user["extra"] == {"authentication.kubernetes.io/pod-name": ["p"]}
            async with session.delete(url + path, headers=good) as response:
                assert response.status == 403
                body = await response.json()
            assert body["message"].endswith('in the namespace "ns": no RBAC rule')
            async with session.get(url + path, headers={"Authorization": "Bearer bad"}) as response:
                assert response.status == 401
            # Answers are cached: asking again costs the cluster nothing.
            before = len(cluster.reviews)
            async with session.get(url + path, headers=good) as response:
                assert response.status == 200
            assert len(cluster.reviews) == before
    finally:
        await runner.cleanup()
        await client.close()
    access = [r for r in cluster.reviews if r["kind"] == "SubjectAccessReview"]
    assert access[0]["spec"] == {
        "user": "system:serviceaccount:ns:bot",
        "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
        "resourceAttributes": {
            "namespace": "ns",
            "verb": "get",
            "group": "events.core.io",
            "version": "v1",
            "resource": "events",
            "name": "x",
        },
    }


async def test_privileged_groups_skip_the_cluster() -> None:
    class Never:
        async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
            raise AssertionError("asked")

    authorizer = PrivilegedGroups(Never())
    decision = await authorizer.authorize(
        UserInfo("system:kube-aggregator", groups=("system:masters",)), request_info("GET", "/apis", {})
    )
    assert decision.allowed


def test_extension_authentication_from_configmap() -> None:
    published = ExtensionAuthentication.from_configmap(
        {
            "data": {
                "client-ca-file": "CA1",
                "requestheader-client-ca-file": "CA2",
                "requestheader-allowed-names": '["front-proxy-client"]',
                "requestheader-username-headers": '["X-Remote-User"]',
                "requestheader-uid-headers": '["X-Remote-Uid"]',
                "requestheader-group-headers": '["X-Remote-Group"]',
                "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
            }
        }
    )
    assert published.client_ca == b"CA1" and published.requestheader_client_ca == b"CA2"
    assert published.requestheader_allowed_names == ("front-proxy-client",)
    assert published.requestheader_uid_headers == ("X-Remote-Uid",)
    assert published.requestheader_extra_headers_prefix == ("X-Remote-Extra-",)


def test_load_kubeconfig_with_token_and_ca(tmp_path: Path) -> None:
    ca = pki.create_ca("cluster")
    pki.save_certificate(tmp_path / "ca.crt", ca.certificate)
    (tmp_path / "token").write_text("from-file\n")
    (tmp_path / "config").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443/', certificate-authority: ca.crt}}]\n"
        "users: [{name: u, user: {tokenFile: token}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    connection = load_kubeconfig(tmp_path / "config")
    assert connection.server == "https://127.0.0.1:6443"
    assert connection.headers() == {"Authorization": "Bearer from-file"}
    assert isinstance(connection.ssl_context, ssl.SSLContext)
