"""Request attributes (upstream's RequestInfoFactory readings), the authorization chain, the 403
Status as upstream words it, and the assembled authorization of a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import MultiDict

from apiserver.auth.attributes import attributes_from_request, describe, resource_attributes
from apiserver.auth.authz import Decision, forbidden
from apiserver.auth.requestinfo import RequestInfo, request_info
from apiserver.machinery.errors import StatusError
from apiserver.machinery.options import ListOptions, WriteOptions
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.rbac.authorizer import RBACAuthorizer
from apiserver.rbac.chain import (
    MODE_ALWAYS_ALLOW,
    AlwaysAllowPaths,
    AuthorizationConfig,
    AuthorizerUnion,
    BootstrapDiscovery,
    SkipPaths,
    build_authorization,
    build_authorizer,
    event_writer,
)
from apiserver.rbac.roles import StaticRoleSource
from apiserver.registry.store import ResourceStore
from apiserver.resources.event import EventKind
from apiserver.resources.rolebinding import RoleBindingKind
from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.support.waiting import async_wait_until
from tests.unit.test_rbac import Bindings, binding, fresh

RB = "/apis/rbac.authorization.core.io/v1"


# ----------------------------------------------------------------------------- attributes


def info(method: str, path: str, query: dict[str, str] | None = None) -> RequestInfo:
    return request_info(method, path, MultiDict(query or {}))


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", f"{RB}/namespaces/ns/rolebindings", {}, ("list", "ns", "rolebindings", "", "")),
        (
            "GET",
            f"{RB}/namespaces/ns/rolebindings",
            {"watch": "true"},
            ("watch", "ns", "rolebindings", "", ""),
        ),
        ("GET", f"{RB}/namespaces/ns/rolebindings", {"watch": "1"}, ("watch", "ns", "rolebindings", "", "")),
        # as upstream's query conversion: anything but "0"/"false" (any case) is true, empty too
        (
            "GET",
            f"{RB}/namespaces/ns/rolebindings",
            {"watch": "yes"},
            ("watch", "ns", "rolebindings", "", ""),
        ),
        ("GET", f"{RB}/namespaces/ns/rolebindings", {"watch": ""}, ("watch", "ns", "rolebindings", "", "")),
        (
            "GET",
            f"{RB}/namespaces/ns/rolebindings",
            {"watch": "False"},
            ("list", "ns", "rolebindings", "", ""),
        ),
        ("GET", f"{RB}/namespaces/ns/rolebindings", {"watch": "0"}, ("list", "ns", "rolebindings", "", "")),
        ("GET", f"{RB}/watch/namespaces/ns/rolebindings", {}, ("watch", "ns", "rolebindings", "", "")),
        ("GET", f"{RB}/watch/namespaces/ns/rolebindings/x", {}, ("watch", "ns", "rolebindings", "x", "")),
        ("GET", f"{RB}/watch/rolebindings", {}, ("watch", "", "rolebindings", "", "")),
        ("GET", f"{RB}/rolebindings", {}, ("list", "", "rolebindings", "", "")),
        ("HEAD", f"{RB}/namespaces/ns/rolebindings/x", {}, ("get", "ns", "rolebindings", "x", "")),
        ("POST", f"{RB}/namespaces/ns/rolebindings", {}, ("create", "ns", "rolebindings", "", "")),
        ("PUT", f"{RB}/namespaces/ns/rolebindings/x", {}, ("update", "ns", "rolebindings", "x", "")),
        ("PATCH", f"{RB}/namespaces/ns/rolebindings/x", {}, ("patch", "ns", "rolebindings", "x", "")),
        ("DELETE", f"{RB}/namespaces/ns/rolebindings/x", {}, ("delete", "ns", "rolebindings", "x", "")),
        (
            "DELETE",
            f"{RB}/namespaces/ns/rolebindings",
            {},
            ("deletecollection", "ns", "rolebindings", "", ""),
        ),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", {}, ("get", "ns", "pods", "p", "log")),
        ("GET", "/api/v1/namespaces/ns", {}, ("get", "ns", "namespaces", "ns", "")),
        ("PUT", "/api/v1/namespaces/ns/finalize", {}, ("update", "ns", "namespaces", "ns", "finalize")),
        ("GET", "/api/v1/namespaces/ns/pods/p/proxy/a/b", {}, ("get", "ns", "pods", "p", "proxy")),
        ("GET", "/api/v1/proxy/namespaces/ns/pods/p/a", {}, ("proxy", "ns", "pods", "p", "")),
        # a list narrowed to one name is about that name
        (
            "GET",
            f"{RB}/namespaces/ns/rolebindings",
            {"fieldSelector": "metadata.name=x"},
            ("list", "ns", "rolebindings", "x", ""),
        ),
        (
            "GET",
            f"{RB}/namespaces/ns/rolebindings",
            {"fieldSelector": "metadata.name!=x"},
            ("list", "ns", "rolebindings", "", ""),
        ),
    ],
)
def test_resource_request_info(
    method: str, path: str, query: dict[str, str], expected: tuple[str, ...]
) -> None:
    got = info(method, path, query)
    assert got.is_resource_request
    assert (got.verb, got.namespace, got.resource, got.name, got.subresource) == expected


@pytest.mark.parametrize(
    ("method", "path", "verb"),
    [
        ("GET", "/version", "get"),
        ("GET", "/openapi/v2", "get"),
        ("GET", "/apis", "get"),
        ("GET", "/apis/rbac.authorization.core.io", "get"),
        ("GET", "/apis/rbac.authorization.core.io/v1", "get"),
        ("GET", "/api", "get"),
        ("GET", "/api/v1", "get"),
        ("POST", "/authorize", "post"),
        ("HEAD", "/healthz", "head"),
    ],
)
def test_non_resource_request_info(method: str, path: str, verb: str) -> None:
    got = info(method, path)
    assert not got.is_resource_request and got.verb == verb and got.path == path


def test_attributes_from_an_aiohttp_request() -> None:
    request = make_mocked_request("GET", f"{RB}/namespaces/ns/rolebindings?watch=1")
    got = attributes_from_request(request)
    assert (got.verb, got.api_group, got.api_version, got.resource) == (
        "watch",
        "rbac.authorization.core.io",
        "v1",
        "rolebindings",
    )


def test_describe() -> None:
    alice = UserInfo("alice", groups=("devs",))
    assert describe(alice, info("GET", "/api/v1/namespaces/ns/pods/p/log")) == (
        'user "alice" with groups ["devs"] to "get" resource "pods/log" named "p" in namespace "ns"'
    )
    assert describe(alice, info("GET", "/version")) == (
        'user "alice" with groups ["devs"] to "get" nonResourceURL "/version" cluster-wide'
    )


# ----------------------------------------------------------------------------- 403 as upstream


@pytest.mark.parametrize(
    ("method", "path", "reason", "message", "details"),
    [
        (
            "GET",
            f"{RB}/namespaces/ns/rolebindings/x",
            "",
            'rolebindings.rbac.authorization.core.io "x" is forbidden: User "alice" cannot get resource '
            '"rolebindings" in API group "rbac.authorization.core.io" in the namespace "ns"',
            {"name": "x", "group": "rbac.authorization.core.io", "kind": "rolebindings"},
        ),
        (
            "GET",
            f"{RB}/rolebindings",
            "",
            'rolebindings.rbac.authorization.core.io is forbidden: User "alice" cannot list resource '
            '"rolebindings" in API group "rbac.authorization.core.io" at the cluster scope',
            {"group": "rbac.authorization.core.io", "kind": "rolebindings"},
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p/log",
            'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found',
            'pods "p" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the '
            'namespace "ns": RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found',
            {"name": "p", "kind": "pods"},
        ),
        (
            "GET",
            "/version",
            "",
            'forbidden: User "alice" cannot get path "/version"',
            None,
        ),
    ],
)
def test_forbidden_status_as_upstream(
    method: str, path: str, reason: str, message: str, details: JSON | None
) -> None:
    err = forbidden(UserInfo("alice"), info(method, path), reason)
    assert (err.code, err.reason, err.message) == (403, "Forbidden", message)
    assert err.status.get("details") == details


# ----------------------------------------------------------------------------- the chain


class Fixed:
    def __init__(self, decision: Decision | None = None, *, fail: bool = False) -> None:
        self.decision = decision or Decision(False)
        self.fail = fail
        self.calls = 0

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        self.calls += 1
        if self.fail:
            raise StatusError(500, "InternalError", "Internal error occurred: authorization failed")
        return self.decision


ALICE = UserInfo("alice", groups=("system:authenticated",))
GET_PODS = resource_attributes("get", api_group="", resource="pods", namespace="ns")


async def test_union_first_allow_wins_and_reasons_join() -> None:
    later = Fixed(Decision(True, "later"))
    union = AuthorizerUnion([Fixed(Decision(False, "one")), Fixed(Decision(True, "two")), later])
    assert await union.authorize(ALICE, GET_PODS) == Decision(True, "two")
    assert later.calls == 0
    union = AuthorizerUnion([Fixed(Decision(False, "one")), Fixed(), Fixed(Decision(False, "three"))])
    assert await union.authorize(ALICE, GET_PODS) == Decision(False, "one\nthree")


async def test_union_failure_only_matters_when_nothing_allows() -> None:
    assert (
        await AuthorizerUnion([Fixed(fail=True), Fixed(Decision(True))]).authorize(ALICE, GET_PODS)
    ).allowed
    with pytest.raises(StatusError) as caught:
        await AuthorizerUnion([Fixed(fail=True), Fixed(Decision(False, "no"))]).authorize(ALICE, GET_PODS)
    assert caught.value.code == 500


async def test_skip_paths_and_always_allow_paths() -> None:
    inner = Fixed(Decision(True))
    skip = SkipPaths(inner, ["/authorize"])
    assert not (await skip.authorize(ALICE, RequestInfo(verb="post", path="/authorize"))).allowed
    assert inner.calls == 0
    assert (await skip.authorize(ALICE, RequestInfo(verb="post", path="/other"))).allowed
    paths = AlwaysAllowPaths(["/healthz", "/metrics/*"])
    assert (await paths.authorize(ALICE, RequestInfo(verb="get", path="/healthz"))).allowed
    assert (await paths.authorize(ALICE, RequestInfo(verb="get", path="/metrics/slis"))).allowed
    assert not (await paths.authorize(ALICE, RequestInfo(verb="get", path="/healthz/etcd"))).allowed
    assert not (await paths.authorize(ALICE, GET_PODS)).allowed


@pytest.mark.parametrize(
    ("groups", "verb", "path", "allowed"),
    [
        (("system:authenticated",), "get", "/apis", True),
        (("system:authenticated",), "get", "/apis/rbac.authorization.core.io/v1", True),
        (("system:authenticated",), "get", "/openapi/v3/apis/x", True),
        (("system:authenticated",), "get", "/version", True),
        (("system:authenticated",), "post", "/apis", False),
        (("system:authenticated",), "get", "/metrics", False),
        (("system:unauthenticated",), "get", "/version", True),
        (("system:unauthenticated",), "get", "/apis", False),
        ((), "get", "/apis", False),
    ],
)
async def test_bootstrap_discovery(groups: tuple[str, ...], verb: str, path: str, allowed: bool) -> None:
    decision = await BootstrapDiscovery().authorize(
        UserInfo("u", groups=groups), RequestInfo(verb=verb, path=path)
    )
    assert decision.allowed is allowed


async def test_chain_order_masters_then_delegate_then_rbac() -> None:
    rbac = RBACAuthorizer(
        Bindings(binding("ns", "view", "User:alice")), StaticRoleSource()
    )  # default view reads pods
    delegate = Fixed(Decision(False, "cluster: no"))
    chain = build_authorizer(rbac, delegate=delegate)
    root = UserInfo("root", groups=("system:masters",))
    assert (await chain.authorize(root, GET_PODS)).allowed
    assert delegate.calls == 0
    decision = await chain.authorize(ALICE, GET_PODS)
    assert decision.allowed and decision.reason.startswith("RBAC: allowed by RoleBinding")
    assert delegate.calls == 1
    bob = UserInfo("bob", groups=("system:authenticated",))
    denied = await chain.authorize(bob, GET_PODS)
    assert denied == Decision(False, "cluster: no")
    # Standalone discovery is off unless asked for.
    assert not (await chain.authorize(bob, RequestInfo(verb="get", path="/apis"))).allowed
    standalone = build_authorizer(rbac, bootstrap_discovery=True)
    assert (await standalone.authorize(bob, RequestInfo(verb="get", path="/apis"))).allowed
    assert (await standalone.authorize(bob, RequestInfo(verb="get", path="/healthz"))).allowed


async def test_delegate_failure_is_an_error_unless_rbac_allows() -> None:
    rbac = RBACAuthorizer(Bindings(binding("ns", "view", "User:alice")), StaticRoleSource())
    chain = build_authorizer(rbac, delegate=Fixed(fail=True))
    assert (await chain.authorize(ALICE, GET_PODS)).allowed
    with pytest.raises(StatusError) as caught:
        await chain.authorize(UserInfo("bob"), GET_PODS)
    assert caught.value.code == 500


# ----------------------------------------------------------------------------- assembly


@pytest.fixture
async def stores(tmp_path: Path) -> Any:
    storage = SQLiteStorage(str(tmp_path / "db.sqlite"))
    await storage.start()
    try:
        yield ResourceStore(RoleBindingKind(), storage), ResourceStore(EventKind(), storage)
    finally:
        await storage.close()


def test_build_authorization_modes(stores: Any, tmp_path: Path) -> None:
    rolebindings, _ = stores
    always = build_authorization(AuthorizationConfig(mode=MODE_ALWAYS_ALLOW), role_bindings=rolebindings)
    assert type(always.authorizer).__name__ == "AlwaysAllow"
    with pytest.raises(ValueError, match="unknown authorization mode"):
        build_authorization(AuthorizationConfig(mode="ABAC"), role_bindings=rolebindings)
    roles = tmp_path / "roles.yaml"
    roles.write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: custom}\nrules: []\n"
    )
    built = build_authorization(AuthorizationConfig(roles_file=roles), role_bindings=rolebindings)
    assert built.roles.get_cluster_role("custom") is not None


async def test_assembled_authorization_runs(stores: Any) -> None:
    rolebindings, events = stores
    authz = build_authorization(
        AuthorizationConfig(webhook_users=("kube",)),
        role_bindings=rolebindings,
        write_event=event_writer(events),
    )
    await rolebindings.create("ns", fresh(binding("ns", "view", "User:alice", name="a")), WriteOptions())
    await rolebindings.create("ns", fresh(binding("ns", "ghost", "User:bob", name="b")), WriteOptions())
    await authz.start()
    try:
        assert authz.ready
        assert (await authz.authorizer.authorize(UserInfo("alice"), GET_PODS)).allowed
        assert (await authz.authorizer.authorize(ALICE, RequestInfo(verb="get", path="/apis"))).allowed
        assert (
            await authz.authorizer.authorize(UserInfo("kube"), RequestInfo(verb="post", path="/authorize"))
        ).allowed
        with pytest.raises(StatusError) as caught:
            await authz.admit_role_binding(ALICE, "ns", binding("ns", "edit", "User:carol"))
        assert caught.value.code == 403

        async def recorded() -> list[JSON]:
            items: list[JSON] = (await events.list("ns", ListOptions())).body()["items"]
            return items

        assert [e["reason"] for e in await async_wait_until(recorded, interval=0.01)] == [
            "UnresolvableRoleRef"
        ]
        assert authz.recorder.counts == {"UnresolvableRoleRef": 1}
    finally:
        await authz.stop()
