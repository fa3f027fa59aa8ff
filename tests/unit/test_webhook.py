"""The SubjectAccessReview webhook endpoint: kube-apiserver's wire format (v1 and v1beta1), answers
from coreio's RBAC, who may call it, and that the chain never delegates it back to the cluster."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from apiserver.auth.attributes import USER_KEY
from apiserver.auth.authz import Decision
from apiserver.auth.requestinfo import RequestInfo
from apiserver.http.middleware import authorization, status_errors
from apiserver.machinery.errors import StatusError
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.rbac.authorizer import RBACAuthorizer
from apiserver.rbac.chain import build_authorizer
from apiserver.rbac.roles import Role, StaticRoleSource, rule
from apiserver.rbac.webhook import (
    WEBHOOK_PATH,
    SubjectAccessReviewWebhook,
    WebhookCallers,
    parse_review,
    review_response,
)
from tests.unit.test_rbac import Bindings, binding


def v1_review(**spec: Any) -> JSON:
    """As kube-apiserver's webhook authorizer serializes it (metadata and an empty status included)."""
    return {
        "kind": "SubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": {"allowed": False},
    }


POD_LOG = {
    "namespace": "team",
    "verb": "get",
    "group": "",
    "version": "v1",
    "resource": "pods",
    "subresource": "log",
    "name": "web-0",
}


def test_parse_v1_resource_review() -> None:
    body = v1_review(
        resourceAttributes=POD_LOG,
        user="alice",
        groups=["devs", "system:authenticated"],
        extra={"scopes": ["a", "b"]},
        uid="42",
    )
    version, who, info = parse_review(body)
    assert version == "authorization.k8s.io/v1"
    assert who == UserInfo("alice", "42", ("devs", "system:authenticated"), {"scopes": ("a", "b")})
    assert info.is_resource_request
    assert (info.namespace, info.verb, info.api_group, info.api_version) == ("team", "get", "", "v1")
    assert (info.resource, info.subresource, info.name) == ("pods", "log", "web-0")


def test_parse_v1beta1_uses_group_for_groups() -> None:
    body = {**v1_review(nonResourceAttributes={"path": "/healthz", "verb": "get"}, user="bob", group=["ops"])}
    body["apiVersion"] = "authorization.k8s.io/v1beta1"
    _, who, info = parse_review(body)
    assert who.groups == ("ops",)
    assert not info.is_resource_request and (info.path, info.verb) == ("/healthz", "get")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "must be a SubjectAccessReview"),
        ({**v1_review(user="a"), "kind": "TokenReview"}, "expected kind SubjectAccessReview"),
        ({**v1_review(user="a"), "apiVersion": "authorization.k8s.io/v2"}, "expected kind"),
        ({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1"}, "spec is required"),
        (v1_review(user="a"), "exactly one of nonResourceAttributes or resourceAttributes"),
        (
            v1_review(
                user="a", resourceAttributes=POD_LOG, nonResourceAttributes={"path": "/", "verb": "get"}
            ),
            "exactly one of",
        ),
        (v1_review(resourceAttributes=POD_LOG), "at least one of user or group"),
    ],
)
def test_parse_errors(body: Any, message: str) -> None:
    with pytest.raises(StatusError) as caught:
        parse_review(body)
    assert caught.value.code == 400 and message in caught.value.message


def test_response_echoes_the_review_with_status() -> None:
    body = v1_review(user="a", nonResourceAttributes={"path": "/x", "verb": "get"})
    out = review_response(body, Decision(True, "RBAC: allowed by RoleBinding"))
    assert out == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {"creationTimestamp": None},
        "spec": body["spec"],
        "status": {"allowed": True, "reason": "RBAC: allowed by RoleBinding"},
    }
    assert review_response(body, Decision(False))["status"] == {"allowed": False}


async def test_callers_authorizer_only_speaks_for_the_endpoint() -> None:
    callers = WebhookCallers(["kube-apiserver"], ["webhook-callers"])
    post = RequestInfo(verb="post", path=WEBHOOK_PATH)
    assert (await callers.authorize(UserInfo("kube-apiserver"), post)).allowed
    assert (await callers.authorize(UserInfo("x", groups=("webhook-callers",)), post)).allowed
    assert (await callers.authorize(UserInfo("x", groups=("system:masters",)), post)).allowed
    assert not (await callers.authorize(UserInfo("mallory"), post)).allowed
    assert not (
        await callers.authorize(UserInfo("kube-apiserver"), RequestInfo(verb="get", path=WEBHOOK_PATH))
    ).allowed
    assert not (
        await callers.authorize(UserInfo("kube-apiserver"), RequestInfo(verb="post", path="/other"))
    ).allowed


# ----------------------------------------------------------------------------- over HTTP


class Cluster:
    """The delegate; must never hear of the webhook endpoint."""

    def __init__(self) -> None:
        self.asked: list[RequestInfo] = []

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        self.asked.append(info)
        return Decision(False, "cluster says no")


def _as_header_user(request: web.Request) -> UserInfo:
    name, _, groups = request.headers.get("X-Test-User", "").partition("|")
    return UserInfo(name, groups=tuple(g for g in groups.split(",") if g))


@web.middleware
async def header_authentication(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    request[USER_KEY] = _as_header_user(request)
    return await handler(request)


@pytest.fixture
async def client() -> Any:
    viewer = Role(
        "ClusterRole", "viewer", rules=(rule(["get"], groups=[""], resources=["pods", "pods/log"]),)
    )
    rbac = RBACAuthorizer(
        Bindings(binding("team", "viewer", "Group:devs", name="devs-view")),
        StaticRoleSource([viewer], defaults=False),
    )
    callers = WebhookCallers(["system:kube-apiserver"])
    cluster = Cluster()
    chain = build_authorizer(rbac, delegate=cluster, webhook_callers=callers)
    app = web.Application(middlewares=[status_errors, header_authentication, authorization(chain)])
    app.router.add_post(WEBHOOK_PATH, SubjectAccessReviewWebhook(rbac, callers).handle)
    async with TestClient(TestServer(app)) as test_client:
        test_client.cluster = cluster  # type: ignore[attr-defined]
        yield test_client


KUBE = {"X-Test-User": "system:kube-apiserver|system:authenticated"}


async def test_endpoint_answers_from_rbac(client: Any) -> None:
    body = v1_review(resourceAttributes=POD_LOG, user="alice", groups=["devs", "system:authenticated"])
    response = await client.post(WEBHOOK_PATH, data=json.dumps(body), headers=KUBE)
    assert response.status == 200
    answer = await response.json()
    assert answer["apiVersion"] == "authorization.k8s.io/v1" and answer["kind"] == "SubjectAccessReview"
    assert answer["spec"] == body["spec"]
    assert answer["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "devs-view/team" of ClusterRole "viewer" to Group "devs"',
    }
    assert client.cluster.asked == []


async def test_endpoint_no_opinion_is_not_a_deny(client: Any) -> None:
    other = {**POD_LOG, "namespace": "elsewhere"}
    body = v1_review(resourceAttributes=other, user="alice", groups=["devs"])
    answer = await (await client.post(WEBHOOK_PATH, data=json.dumps(body), headers=KUBE)).json()
    assert answer["status"] == {"allowed": False}
    beta = {
        **v1_review(nonResourceAttributes={"path": "/version", "verb": "get"}, user="alice", group=["devs"])
    }
    beta["apiVersion"] = "authorization.k8s.io/v1beta1"
    answer = await (await client.post(WEBHOOK_PATH, data=json.dumps(beta), headers=KUBE)).json()
    assert answer["apiVersion"] == "authorization.k8s.io/v1beta1" and answer["status"] == {"allowed": False}


async def test_endpoint_refuses_other_callers_without_asking_the_cluster(client: Any) -> None:
    body = v1_review(resourceAttributes=POD_LOG, user="alice", groups=["devs"])
    response = await client.post(WEBHOOK_PATH, data=json.dumps(body), headers={"X-Test-User": "mallory|devs"})
    assert response.status == 403
    status = await response.json()
    # The chain stopped at the callers check; the cluster's reason never enters.
    assert status["message"] == 'forbidden: User "mallory" cannot post path "/authorize"'
    assert client.cluster.asked == []


async def test_endpoint_bad_body(client: Any) -> None:
    response = await client.post(WEBHOOK_PATH, data=b"{", headers=KUBE)
    assert response.status == 400
    assert (await response.json())["reason"] == "BadRequest"


async def test_other_requests_still_go_to_the_cluster(client: Any) -> None:
    response = await client.get("/version", headers={"X-Test-User": "alice|devs"})
    assert response.status == 403
    assert (await response.json())[
        "message"
    ] == 'forbidden: User "alice" cannot get path "/version": cluster says no'
    assert [i.path for i in client.cluster.asked] == ["/version"]
