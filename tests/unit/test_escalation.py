"""The escalation guard: upstream's covers tables, the compacted message, and the guard's paths
(masters, bind, held rules, a delegate, missing roles, GC-only updates)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth.authz import Decision
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery.errors import StatusError
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.rbac.authorizer import RBACAuthorizer
from apiserver.rbac.chain import build_authorizer
from apiserver.rbac.escalation import (
    EscalationGuard,
    breakdown_rule,
    compact_rules,
    covers,
    escalation_message,
    rule_attributes,
)
from apiserver.rbac.roles import PolicyRule, Role, StaticRoleSource, rule
from tests.unit.test_rbac import Bindings, binding


def r(
    verbs: list[str], groups: list[str] | None = None, resources: list[str] | None = None, **extra: list[str]
) -> PolicyRule:
    return PolicyRule(
        verbs=tuple(verbs),
        api_groups=tuple(groups or ()),
        resources=tuple(resources or ()),
        resource_names=tuple(extra.get("names", ())),
        non_resource_urls=tuple(extra.get("urls", ())),
    )


# upstream's policy_comparator_test.go, case by case: (owner, servant, uncovered)
COVERS = [
    ([r(["get"], ["v1"], ["builds"])], [r(["get"], ["v1"], ["builds"])], []),
    ([r(["get"], ["v1"], ["*/scale"])], [r(["get"], ["v1"], ["foo/scale"])], []),
    (
        [
            r(["delete"], ["v1"], ["deployments"]),
            r(["delete"], ["v1"], ["builds"]),
            r(["update"], ["v1"], ["builds", "deployments"]),
        ],
        [r(["delete", "update"], ["v1"], ["builds", "deployments"])],
        [],
    ),
    (
        [r(["delete", "update"], ["group1", "group2"], ["builds", "deployments"])],
        [r(["delete"], ["group1"], ["deployments"]), r(["update"], ["group2"], ["builds", "deployments"])],
        [],
    ),
    (
        [r(["delete", "update"], ["v1"], ["builds", "deployments"]), r(["delete"], ["v1"], ["pods"])],
        [r(["delete", "update"], ["v1"], ["builds", "deployments", "pods"])],
        [r(["update"], ["v1"], ["pods"])],
    ),
    ([r(["get"], ["*"], ["roles"])], [r(["get"], ["group1", "group2"], ["roles"])], []),
    (
        [r(["get"], ["dummy-group"], ["roles"])],
        [r(["get"], ["*"], ["roles"])],
        [r(["get"], ["*"], ["roles"])],
    ),
    ([r(["get"], ["*"], ["roles"])], [r(["get"], ["*"], ["roles"])], []),
    ([r(["*"], ["v1"], ["roles"])], [r(["watch", "list"], ["v1"], ["roles"])], []),
    (
        [r(["get", "list", "watch", "create", "update", "delete", "exec"], ["v1"], ["roles"])],
        [r(["*"], ["v1"], ["roles"])],
        [r(["*"], ["v1"], ["roles"])],
    ),
    ([r(["*"], ["v1"], ["roles"])], [r(["*"], ["v1"], ["roles"])], []),
    ([r(["get"], ["v1"], ["*"])], [r(["get"], ["v1"], ["resourcegroup:deployments"])], []),
    (
        [r(["get"], ["v1"], ["roles", "resourcegroup:deployments"])],
        [r(["get"], ["v1"], ["*"])],
        [r(["get"], ["v1"], ["*"])],
    ),
    ([r(["get"], ["v1"], ["pods"])], [r(["get"], ["v1"], ["pods"], names=["foo", "bar"])], []),
    (
        [r(["get"], ["v1"], ["pods"], names=["foo", "bar"])],
        [r(["get"], ["v1"], ["pods"])],
        [r(["get"], ["v1"], ["pods"])],
    ),
    (
        [r(["get"], ["v1"], ["pods"], names=["foo"])],
        [r(["get"], ["v1"], ["pods"], names=["foo", "bar"])],
        [r(["get"], ["v1"], ["pods"], names=["bar"])],
    ),
    ([r(["*"], urls=["/apis"])], [r(["*"], urls=["/apis"])], []),
    ([r(["*"], urls=["*"])], [r(["*"], urls=["/apis", "/apis/v1", "/"])], []),
    ([r(["*"], urls=["/apis/*"])], [r(["get"], urls=["/apis", "/apis/v1"])], [r(["get"], urls=["/apis"])]),
    ([r(["*"], urls=["/apis/*"])], [r(["get"], urls=["/apis/v1/foo", "/apis/v1"])], []),
    (
        [r(["get"], ["v1"], ["builds"], urls=["/apis"])],
        [r(["get"], ["v1"], ["builds"], urls=["/apis"])],
        [],
    ),
]


@pytest.mark.parametrize(("owner", "servant", "uncovered"), COVERS)
def test_covers_upstream_table(
    owner: list[PolicyRule], servant: list[PolicyRule], uncovered: list[PolicyRule]
) -> None:
    held, missing = covers(owner, servant)
    assert held is (not uncovered)
    assert missing == uncovered


def test_breakdown_and_compaction() -> None:
    parts = breakdown_rule(r(["get", "list"], ["", "apps"], ["pods"], names=["a"], urls=["/x"]))
    assert len(parts) == 2 * 2 * 1 + 2
    compacted = compact_rules(
        [
            r(["get"], ["apps"], ["deployments"]),
            r(["list"], ["apps"], ["deployments"]),
            r(["get"], urls=["/x"]),
        ]
    )
    assert compacted == [r(["get"], urls=["/x"]), r(["get", "list"], ["apps"], ["deployments"])]


def test_escalation_message_shape() -> None:
    alice = UserInfo("alice", groups=("devs", "system:authenticated"))
    missing = [
        r(["list"], ["apps"], ["deployments"]),
        r(["get"], ["apps"], ["deployments"]),
        r(["get"], [""], ["pods"]),
    ]
    assert escalation_message(alice, missing, []) == (
        'user "alice" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions '
        "not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}\n'
        '{APIGroups:["apps"], Resources:["deployments"], Verbs:["list" "get"]}'
    )
    with_errors = escalation_message(alice, missing[:1], ['role.rbac.authorization.k8s.io "x" not found'])
    assert with_errors.endswith('; resolution errors: [role.rbac.authorization.k8s.io "x" not found]')


def test_rule_attributes() -> None:
    info = rule_attributes(r(["get"], ["apps"], ["deployments/scale"], names=["web"]), "ns")
    assert (info.verb, info.api_group, info.resource, info.subresource, info.name, info.namespace) == (
        "get",
        "apps",
        "deployments",
        "scale",
        "web",
        "ns",
    )
    url = rule_attributes(r(["get"], urls=["/healthz"]), "ns")
    assert not url.is_resource_request and url.path == "/healthz"


# ----------------------------------------------------------------------------- the guard

NS = "team"
EDIT = Role(
    "ClusterRole",
    "editor",
    rules=(rule(["get", "list", "create"], groups=[""], resources=["pods"]),),
)
VIEW = Role("ClusterRole", "viewer", rules=(rule(["get", "list"], groups=[""], resources=["pods"]),))
BINDER = Role(
    "Role",
    "binder",
    NS,
    rules=(
        rule(["bind"], groups=["rbac.authorization.k8s.io"], resources=["clusterroles"], names=["editor"]),
    ),
)
WRONG_GROUP_BINDER = Role(
    "Role",
    "core-binder",
    NS,
    rules=(
        rule(["bind"], groups=["rbac.authorization.core.io"], resources=["clusterroles"], names=["editor"]),
    ),
)


def guard(*objects: JSON, delegate: Any = None) -> EscalationGuard:
    rbac = RBACAuthorizer(
        Bindings(*objects), StaticRoleSource([EDIT, VIEW, BINDER, WRONG_GROUP_BINDER], defaults=False)
    )
    return EscalationGuard(rbac, build_authorizer(rbac, delegate=delegate), delegate=delegate)


def new_binding(role: str, *subjects: str, name: str = "grant") -> JSON:
    return binding(NS, role, *subjects, name=name)


ALICE = UserInfo("alice", groups=("system:authenticated",))


async def _forbidden(
    g: EscalationGuard, who: UserInfo | None, obj: JSON, old: JSON | None = None
) -> StatusError:
    with pytest.raises(StatusError) as caught:
        await g.admit(who, NS, obj, old)
    return caught.value


async def test_masters_and_no_user_pass() -> None:
    g = guard()
    await g.admit(UserInfo("root", groups=("system:masters",)), NS, new_binding("editor", "User:bob"))
    await g.admit(None, NS, new_binding("editor", "User:bob"))


async def test_holding_the_rules_is_enough() -> None:
    g = guard(binding(NS, "editor", "User:alice", name="alice-edits"))
    await g.admit(ALICE, NS, new_binding("viewer", "User:bob"))
    await g.admit(ALICE, NS, new_binding("editor", "User:bob"))


async def test_granting_more_than_held_is_forbidden_as_upstream() -> None:
    g = guard(binding(NS, "viewer", "User:alice", name="alice-views"))
    err = await _forbidden(g, ALICE, new_binding("editor", "User:bob"))
    assert err.code == 403 and err.reason == "Forbidden"
    assert err.message == (
        'rolebindings.rbac.authorization.core.io "grant" is forbidden: user "alice" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["pods"], Verbs:["create"]}'
    )
    assert err.details == {"name": "grant", "group": "rbac.authorization.core.io", "kind": "rolebindings"}
    # In another namespace alice holds nothing.
    with pytest.raises(StatusError):
        await g.admit(ALICE, "elsewhere", binding("elsewhere", "viewer", "User:bob"))


async def test_generated_names_are_forbidden_without_a_name() -> None:
    obj = new_binding("editor", "User:bob")
    obj["metadata"] = {"generateName": "grant-", "namespace": NS}
    err = await _forbidden(guard(), ALICE, obj)
    assert err.message.startswith("rolebindings.rbac.authorization.core.io is forbidden: user")


async def test_bind_verb_allows_without_holding() -> None:
    g = guard(binding(NS, "binder", "User:alice", kind="Role", name="alice-binds"))
    await g.admit(ALICE, NS, new_binding("editor", "User:bob"))
    # bind is per role name.
    await _forbidden(g, ALICE, new_binding("viewer", "User:bob"))


async def test_bind_in_our_group_does_not_count() -> None:
    g = guard(binding(NS, "core-binder", "User:alice", kind="Role", name="alice-binds"))
    await _forbidden(g, ALICE, new_binding("editor", "User:bob"))


async def test_missing_role_is_not_found() -> None:
    err = await _forbidden(guard(), ALICE, new_binding("ghost", "User:bob"))
    assert err.code == 404
    assert err.message == 'clusterroles.rbac.authorization.k8s.io "ghost" not found'
    err = await _forbidden(guard(), ALICE, binding(NS, "ghost", "User:bob", kind="Role"))
    assert err.message == 'roles.rbac.authorization.k8s.io "ghost" not found'


async def test_malformed_role_ref_is_left_to_validation() -> None:
    obj = new_binding("editor", "User:bob")
    obj["roleRef"]["kind"] = "Policy"
    await guard().admit(ALICE, NS, obj)


async def test_resolution_errors_are_named() -> None:
    g = guard(
        binding(NS, "viewer", "User:alice", name="alice-views"),
        binding(NS, "gone", "User:alice", name="alice-gone"),
    )
    err = await _forbidden(g, ALICE, new_binding("editor", "User:bob"))
    assert err.message.endswith(
        '; resolution errors: [clusterrole.rbac.authorization.k8s.io "gone" not found]'
    )


async def test_updates_touching_only_gc_fields_are_not_checked() -> None:
    g = guard()
    old = new_binding("editor", "User:bob")
    gc = {**old, "metadata": {**old["metadata"], "finalizers": ["x"], "ownerReferences": [{"uid": "1"}]}}
    gc["metadata"]["resourceVersion"] = "99"
    await g.admit(ALICE, NS, gc, old)
    changed = {
        **old,
        "subjects": [{"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.core.io"}],
    }
    await _forbidden(g, ALICE, changed, old)


class Delegate:
    """A stand-in for the cluster: allows what `allowed` says, records what it was asked."""

    def __init__(self, allowed: set[tuple[str, str, str]], fail: bool = False) -> None:
        self.allowed = allowed
        self.fail = fail
        self.asked: list[tuple[str, str, str]] = []

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        key = (info.verb, info.api_group, info.resource)
        self.asked.append(key)
        if self.fail:
            raise StatusError(500, "InternalError", "cluster unreachable")
        return Decision(key in self.allowed)


async def test_delegate_covers_what_the_cluster_allows() -> None:
    cluster = Delegate({("create", "", "pods")})
    g = guard(binding(NS, "viewer", "User:alice", name="alice-views"), delegate=cluster)
    await g.admit(ALICE, NS, new_binding("editor", "User:bob"))
    # The bind check went to the chain (and so to the cluster); then only the missing rule.
    assert cluster.asked == [("bind", "rbac.authorization.k8s.io", "clusterroles"), ("create", "", "pods")]


async def test_delegate_bind_is_enough() -> None:
    cluster = Delegate({("bind", "rbac.authorization.k8s.io", "clusterroles")})
    await guard(delegate=cluster).admit(ALICE, NS, new_binding("editor", "User:bob"))


async def test_failing_delegate_holds_nothing() -> None:
    cluster = Delegate(set(), fail=True)
    err = await _forbidden(guard(delegate=cluster), ALICE, new_binding("viewer", "User:bob"))
    assert err.code == 403
