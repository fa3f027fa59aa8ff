"""The logic behind kubectl coreio: who may make a request (`rbac.whocan`), why a user may or may
not (`rbac.explain`), and the review objects' checks (`rbac.accessreviews`), over an in-memory
binding list and fixed roles (the real proof is tests/integration/test_kubectl_coreio.py)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth.attributes import resource_attributes
from apiserver.auth.authz import Decision
from apiserver.auth.impersonation import acting_as
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.user import UserInfo
from apiserver.rbac import accessreviews
from apiserver.rbac.authorizer import RBACAuthorizer
from apiserver.rbac.explain import Step, Verdict, explain
from apiserver.rbac.roles import Role, StaticRoleSource, rule
from apiserver.rbac.whocan import who_can
from tests.unit.test_rbac import Bindings, binding, subject

NS = "shop"
READ_EVENTS = rule(["get", "list"], groups=["events.core.io"], resources=["events"])
NAMED_ONLY = rule(["delete"], groups=["events.core.io"], resources=["events"], names=["web-0"])
ROLES = [
    Role("ClusterRole", "reader", rules=(READ_EVENTS,)),
    Role("ClusterRole", "deleter", rules=(NAMED_ONLY,)),
]


def events(verb: str, name: str = "") -> RequestInfo:
    return resource_attributes(verb, api_group="events.core.io", resource="events", namespace=NS, name=name)


def rbac(*objects: Any) -> RBACAuthorizer:
    return RBACAuthorizer(Bindings(*objects), StaticRoleSource(ROLES, defaults=False))


class FakeDelegate:
    """A stand-in for the cluster's SubjectAccessReview (unit tests only)."""

    def __init__(self, decision: Decision | None) -> None:
        self.decision = decision

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if self.decision is None:
            raise errors.internal_error("authorization failed: connection refused")
        return self.decision


# ----------------------------------------------------------------------------- who can


def test_who_can_lists_subjects_of_allowing_bindings_with_the_rule() -> None:
    authorizer = rbac(
        binding(
            NS, "reader", "User:alice", "Group:qa", {"kind": "ServiceAccount", "name": "robot"}, name="b"
        ),
        binding(NS, "reader", "User:zed", name="a-elsewhere")
        | {"metadata": {"namespace": "other", "name": "x"}},
        binding(NS, "deleter", "User:dora", name="c"),
    )
    found = who_can(authorizer, events("list"), bootstrap=False)
    names = [(g.subject.kind, g.subject.name, g.subject.namespace, g.binding) for g in found.grants]
    assert names == [
        ("Group", "system:masters", "", "cluster-admin"),
        ("User", "alice", "", "b"),
        ("Group", "qa", "", "b"),
        ("ServiceAccount", "robot", NS, "b"),  # the binding's namespace filled in
    ]
    assert found.grants[1].rule == READ_EVENTS
    assert found.errors == []


def test_who_can_honours_resource_names() -> None:
    authorizer = rbac(binding(NS, "deleter", "User:dora", name="c"))
    assert [
        g.subject.name for g in who_can(authorizer, events("delete", "web-0"), bootstrap=False).grants
    ] == [
        "system:masters",
        "dora",
    ]
    assert [g.subject.name for g in who_can(authorizer, events("delete"), bootstrap=False).grants] == [
        "system:masters"
    ]


def test_who_can_names_bindings_that_grant_nothing() -> None:
    found = who_can(rbac(binding(NS, "missing", "User:alice", name="broken")), events("get"), bootstrap=False)
    assert found.errors == [
        'RoleBinding "shop/broken": clusterrole.rbac.authorization.k8s.io "missing" not found'
    ]


def test_who_can_standalone_lists_the_default_bindings_that_allow() -> None:
    info = resource_attributes(
        "create", api_group="authorization.k8s.io", resource="selfsubjectaccessreviews"
    )
    found = who_can(rbac(), info, bootstrap=True)
    assert [(g.subject.name, g.binding) for g in found.grants] == [
        ("system:masters", "cluster-admin"),
        ("system:authenticated", "system:basic-user"),
    ]


# ----------------------------------------------------------------------------- why


async def test_why_allowed_names_the_binding_subject_and_rule() -> None:
    authorizer = rbac(binding(NS, "reader", "Group:qa", name="qa-reads"))
    found = await explain(authorizer, acting_as("quinn", ["qa"]), events("get"), defaults=True)
    assert found.allowed
    assert (
        found.reason == 'RBAC: allowed by RoleBinding "qa-reads/shop" of ClusterRole "reader" to Group "qa"'
    )
    steps = [(d.step, d.verdict) for d in found.decisions]
    assert steps == [
        (Step.PRIVILEGED, Verdict.NO_OPINION),
        (Step.DEFAULTS, Verdict.NO_OPINION),
        (Step.RBAC, Verdict.ALLOW),
    ]
    assert found.decisions[-1].rule == READ_EVENTS


async def test_why_shows_a_subject_of_the_wrong_kind_and_counts_the_others() -> None:
    authorizer = rbac(
        binding(NS, "reader", "Group:alice", name="wrong-kind"),
        binding(NS, "reader", "User:bob", name="someone-else"),
    )
    found = await explain(authorizer, acting_as("alice"), events("get"))
    (step,) = [d for d in found.decisions if d.step == Step.RBAC]
    assert (step.verdict, step.reason) == (
        Verdict.NO_OPINION,
        'Group "alice" is not this user: no subject applies',
    )
    assert found.other_bindings == 1
    assert not found.allowed


async def test_why_names_the_problems_of_a_binding_that_grants_nothing() -> None:
    broken = binding(NS, "reader", subject("User:alice", namespace=NS), name="broken")
    found = await explain(rbac(broken), acting_as("alice"), events("get"))
    (step,) = [d for d in found.decisions if d.step == Step.RBAC]
    assert step.verdict == Verdict.ERROR
    assert [p.reason.value for p in step.problems] == ["NamespacedSubject"]
    assert found.evaluation_error == (
        'grants nothing: subjects[0]: User "alice" is not namespaced, but namespace is "shop"'
    )


async def test_why_in_a_cluster_asks_the_cluster_and_says_when_it_could_not() -> None:
    allowed = Decision(True, 'RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "alice"')
    found = await explain(rbac(), acting_as("alice"), events("get"), delegate=FakeDelegate(allowed))
    assert (found.allowed, found.reason) == (True, allowed.reason)
    failed = await explain(rbac(), acting_as("alice"), events("get"), delegate=FakeDelegate(None))
    (step,) = [d for d in failed.decisions if d.step == Step.DELEGATED]
    assert step.verdict == Verdict.ERROR
    assert (
        step.reason
        == "the cluster could not be asked: Internal error occurred: authorization failed: connection refused"
    )


async def test_why_a_privileged_user_is_allowed_first() -> None:
    found = await explain(rbac(), UserInfo("root", groups=("system:masters",)), events("delete"))
    assert found.decisions[0].reason == 'in group "system:masters", which may do anything'
    assert found.allowed


# ----------------------------------------------------------------------------- the review objects


def test_the_spec_needs_a_verb_and_a_resource() -> None:
    with pytest.raises(errors.StatusError) as caught:
        accessreviews.attributes("ResourceAccessReview", {"spec": {"resourceAttributes": {}}}, NS)
    assert caught.value.code == 422
    fields = [cause["field"] for cause in (caught.value.details or {})["causes"]]
    assert fields == ["spec.resourceAttributes.verb", "spec.resourceAttributes.resource"]


def test_the_spec_namespace_must_be_the_requests() -> None:
    body = {"spec": {"resourceAttributes": {"verb": "get", "resource": "events", "namespace": "other"}}}
    with pytest.raises(errors.StatusError) as caught:
        accessreviews.attributes("ResourceAccessReview", body, NS)
    assert (caught.value.details or {})["causes"][0]["field"] == "spec.resourceAttributes.namespace"
    spec, info = accessreviews.attributes(
        "ResourceAccessReview",
        {**body, "spec": {"resourceAttributes": {"verb": "get", "resource": "events", "namespace": NS}}},
        NS,
    )
    assert (spec["resourceAttributes"]["namespace"], info.namespace, info.api_group) == (NS, NS, "")


def test_an_explanation_needs_a_user() -> None:
    with pytest.raises(errors.StatusError) as caught:
        accessreviews.subject_of({"spec": {"groups": ["qa"]}})
    assert (caught.value.details or {})["causes"][0]["field"] == "spec.user"


def test_the_binding_review_keeps_problems_only_when_asked() -> None:
    authorizer = rbac(
        binding(NS, "reader", "User:a", name="fine"), binding(NS, "gone", "User:b", name="broken")
    )
    bindings = list(authorizer.bindings.role_bindings(NS))
    everything = accessreviews.binding_review_status(authorizer, bindings, problems_only=False)
    assert [(b["name"], len(b["problems"])) for b in everything["roleBindings"]] == [
        ("broken", 1),
        ("fine", 0),
    ]
    problems = accessreviews.binding_review_status(authorizer, bindings, problems_only=True)
    assert problems["roleBindings"][0]["problems"] == [
        {"reason": "UnresolvableRoleRef", "message": 'clusterrole.rbac.authorization.k8s.io "gone" not found'}
    ]
    assert len(problems["roleBindings"]) == 1


def test_a_non_resource_url_is_asked_alone_with_its_verb() -> None:
    url = {"path": "/healthz", "verb": "get"}
    spec, info = accessreviews.attributes(
        "ResourceAccessReview", {"spec": {"nonResourceAttributes": url}}, NS
    )
    assert spec == {"nonResourceAttributes": url}
    assert (info.is_resource_request, info.path, info.verb, info.namespace) == (False, "/healthz", "get", "")
    both = {
        "spec": {"nonResourceAttributes": url, "resourceAttributes": {"verb": "get", "resource": "events"}}
    }
    with pytest.raises(errors.StatusError) as caught:
        accessreviews.attributes("ResourceAccessReview", both, NS)
    assert (caught.value.details or {})["causes"][0]["field"] == "spec.nonResourceAttributes"
    with pytest.raises(errors.StatusError) as caught:
        accessreviews.attributes(
            "ResourceAccessReview", {"spec": {"nonResourceAttributes": {"verb": "get"}}}, NS
        )
    assert (caught.value.details or {})["causes"][0]["field"] == "spec.nonResourceAttributes.path"
