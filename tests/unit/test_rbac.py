"""The RBAC authorizer: upstream's rule matching tables, subjects, RoleBindings only, the part-7
reporting, and the RoleBinding index (in memory and over a real registry)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from apiserver.auth.attributes import non_resource_attributes, resource_attributes
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery.options import DeleteOptions, ListOptions, WriteOptions
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.rbac.authorizer import (
    Binding,
    BindingProblem,
    ProblemReason,
    ProblemReporter,
    RBACAuthorizer,
    rule_allows,
    service_account_username,
)
from apiserver.rbac.bindings import (
    INDEX_METRIC_NAME,
    BindingIndex,
    ProblemRecorder,
    event_name,
    warning_event,
)
from apiserver.rbac.roles import PolicyRule, Role, StaticRoleSource, rule
from apiserver.registry.store import ResourceStore
from apiserver.resources.event import EventKind
from apiserver.resources.rolebinding import RoleBindingKind
from apiserver.storage.sqlite.backend import SQLiteStorage
from tests.support.waiting import async_wait_until

GROUP = "rbac.authorization.core.io"


def subject(spec: str, **extra: str) -> JSON:
    kind, _, name = spec.partition(":")
    out: JSON = {"kind": kind, "name": name}
    if kind in ("User", "Group"):
        out["apiGroup"] = GROUP
    out.update(extra)
    return out


def binding(
    namespace: str,
    role: str,
    *subjects: JSON | str,
    kind: str = "ClusterRole",
    name: str = "",
    rv: str = "1",
) -> JSON:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {
            "namespace": namespace,
            "name": name or f"{role}-binding",
            "uid": f"uid-{namespace}-{name or role}",
            "resourceVersion": rv,
        },
        "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
        "subjects": [subject(s) if isinstance(s, str) else s for s in subjects],
    }


class Bindings:
    def __init__(self, *objects: JSON) -> None:
        self.items = [Binding.from_object(o) for o in objects]

    def role_bindings(self, namespace: str) -> Sequence[Binding]:
        return [b for b in self.items if b.namespace == namespace]


def authorizer(
    *objects: JSON, roles: Sequence[Role] = (), reporter: ProblemReporter | None = None
) -> RBACAuthorizer:
    return RBACAuthorizer(Bindings(*objects), StaticRoleSource(roles, defaults=False), reporter=reporter)


def cluster_role(name: str, *rules: PolicyRule) -> Role:
    return Role("ClusterRole", name, rules=rules)


def split_rule(verbs: str, groups: str, resources: str, urls: str) -> PolicyRule:
    """upstream's newRule("verbs", "groups", "resources", "urls") (comma lists)."""
    return PolicyRule(
        verbs=tuple(verbs.split(",")),
        api_groups=tuple(groups.split(",")),
        resources=tuple(resources.split(",")),
        non_resource_urls=tuple(urls.split(",")),
    )


def user(name: str, *groups: str) -> UserInfo:
    return UserInfo(name, groups=groups)


def res(
    verb: str, resource: str, namespace: str = "", group: str = "", sub: str = "", name: str = ""
) -> RequestInfo:
    return resource_attributes(
        verb, api_group=group, resource=resource, namespace=namespace, subresource=sub, name=name
    )


# ----------------------------------------------------------------------------- rule matching


def _r(verb: str, group: str, resource: str, sub: str = "") -> RequestInfo:
    return res(verb, resource, group=group, sub=sub)


def _u(verb: str, path: str) -> RequestInfo:
    return non_resource_attributes(verb, path)


RULE_MATCHES = [
    # upstream TestRuleMatches: "star verb, exact match other"
    (rule(["*"], groups=["group1"], resources=["resource1"]), _r("verb1", "group1", "resource1"), True),
    (rule(["*"], groups=["group1"], resources=["resource1"]), _r("verb1", "group2", "resource1"), False),
    (rule(["*"], groups=["group1"], resources=["resource1"]), _r("verb1", "group1", "resource2"), False),
    (rule(["*"], groups=["group1"], resources=["resource1"]), _r("verb2", "group1", "resource1"), True),
    # "star group, exact match other"
    (rule(["verb1"], groups=["*"], resources=["resource1"]), _r("verb1", "group1", "resource1"), True),
    (rule(["verb1"], groups=["*"], resources=["resource1"]), _r("verb1", "group2", "resource1"), True),
    (rule(["verb1"], groups=["*"], resources=["resource1"]), _r("verb1", "group1", "resource2"), False),
    (rule(["verb1"], groups=["*"], resources=["resource1"]), _r("verb2", "group1", "resource1"), False),
    # "star resource, exact match other"
    (rule(["verb1"], groups=["group1"], resources=["*"]), _r("verb1", "group1", "resource1"), True),
    (rule(["verb1"], groups=["group1"], resources=["*"]), _r("verb1", "group2", "resource1"), False),
    (rule(["verb1"], groups=["group1"], resources=["*"]), _r("verb1", "group1", "resource2"), True),
    (rule(["verb1"], groups=["group1"], resources=["*"]), _r("verb2", "group1", "resource1"), False),
    # "tuple expansion"
    *(
        (
            rule(["verb1", "verb2"], groups=["group1", "group2"], resources=["resource1", "resource2"]),
            _r(v, g, r),
            True,
        )
        for v in ("verb1", "verb2")
        for g in ("group1", "group2")
        for r in ("resource1", "resource2")
    ),
    # "subresource expansion"
    (
        rule(["*"], groups=["*"], resources=["resource1/subresource1"]),
        _r("verb1", "group1", "resource1", "subresource1"),
        True,
    ),
    (
        rule(["*"], groups=["*"], resources=["resource1/subresource1"]),
        _r("verb1", "group2", "resource1", "subresource2"),
        False,
    ),
    (
        rule(["*"], groups=["*"], resources=["resource1/subresource1"]),
        _r("verb1", "group1", "resource2", "subresource1"),
        False,
    ),
    (
        rule(["*"], groups=["*"], resources=["resource1/subresource1"]),
        _r("verb1", "group1", "resource1"),
        False,
    ),
    # `*/subresource`
    (rule(["get"], groups=["*"], resources=["*/scale"]), _r("get", "apps", "deployments", "scale"), True),
    (rule(["get"], groups=["*"], resources=["*/scale"]), _r("get", "apps", "deployments"), False),
    (rule(["get"], groups=["*"], resources=["*/scale"]), _r("get", "apps", "deployments", "status"), False),
    # "star nonresource, exact match other"
    (rule(["verb1"], urls=["*"]), _u("verb1", "/foo"), True),
    (rule(["verb1"], urls=["*"]), _u("verb1", "/foo/bar/one"), True),
    (rule(["verb1"], urls=["*"]), _u("verb2", "/foo"), False),
    # "star nonresource subpath"
    (rule(["verb1"], urls=["/foo/*"]), _u("verb1", "/foo"), False),
    (rule(["verb1"], urls=["/foo/*"]), _u("verb1", "/foo/bar"), True),
    (rule(["verb1"], urls=["/foo/*"]), _u("verb1", "/foo/baz/one"), True),
    (rule(["verb1"], urls=["/foo/*"]), _u("verb1", "/notfoo"), False),
    (rule(["verb1"], urls=["/foo/*"]), _u("verb1", "/notfoo/bar"), False),
    # "star verb, exact nonresource"
    (rule(["*"], urls=["/foo", "/foo/bar/one"]), _u("verb1", "/foo"), True),
    (rule(["*"], urls=["/foo", "/foo/bar/one"]), _u("verb1", "/foo/bar"), False),
    (rule(["*"], urls=["/foo", "/foo/bar/one"]), _u("verb2", "/foo/bar/one"), True),
    (rule(["*"], urls=["/foo", "/foo/bar/one"]), _u("verb2", "/foo/baz/one"), False),
    # resource names
    (rule(["get"], groups=[""], resources=["pods"], names=["a"]), res("get", "pods", name="a"), True),
    (rule(["get"], groups=[""], resources=["pods"], names=["a"]), res("get", "pods", name="b"), False),
    (rule(["get"], groups=[""], resources=["pods"], names=["a"]), res("list", "pods"), False),
    (rule(["get"], groups=[""], resources=["pods"]), res("get", "pods", name="b"), True),
    # a resource rule says nothing about paths, and a URL rule nothing about resources
    (rule(["get"], groups=["*"], resources=["*"]), _u("get", "/version"), False),
    (rule(["get"], urls=["*"]), res("get", "pods"), False),
]


@pytest.mark.parametrize(("policy", "info", "expected"), RULE_MATCHES)
def test_rule_matches_upstream_table(policy: PolicyRule, info: RequestInfo, expected: bool) -> None:
    assert rule_allows(info, policy) is expected


# ----------------------------------------------------------------------------- the authorizer


def _allowed(a: RBACAuthorizer, who: UserInfo, info: RequestInfo) -> bool:
    return a.evaluate(who, info).allowed


def test_role_binding_to_cluster_role_applies_in_its_namespace_only() -> None:
    """upstream TestAuthorizer case 1, with RoleBindings."""
    a = authorizer(
        binding("ns1", "admin", "User:admin", "Group:admins"),
        roles=[cluster_role("admin", split_rule("*", "*", "*", "*"))],
    )
    for who, info in [
        (user("admin"), res("get", "Pods", "ns1")),
        (user("admin"), res("watch", "Pods", "ns1")),
        (user("admin", "group1"), res("watch", "Foobar", "ns1")),
        (user("joe", "admins"), res("watch", "Foobar", "ns1")),
        (user("joe", "group1", "admins"), res("watch", "Foobar", "ns1")),
    ]:
        assert _allowed(a, who, info), (who, info)
    for who, info in [
        (user("admin"), res("GET", "Pods", "ns2")),
        (user("admin"), res("GET", "Nodes")),
        (user("admin", "admins"), res("GET", "Pods", "ns2")),
        (user("admin", "admins"), res("GET", "Nodes")),
        # RoleBindings never reach non-resource requests (those are cluster-wide).
        (user("admin"), non_resource_attributes("get", "/apis")),
    ]:
        assert not _allowed(a, who, info), (who, info)


def test_subresources_as_upstream() -> None:
    """upstream TestAuthorizer cases 3 and 4."""
    a = authorizer(
        binding("ns1", "admin", "User:admin"),
        roles=[cluster_role("admin", split_rule("*", "*", "pods", "*"))],
    )
    assert _allowed(a, user("admin"), res("get", "pods", "ns1"))
    assert not _allowed(a, user("admin"), res("get", "pods", "ns1", sub="status"))
    a = authorizer(
        binding("ns1", "admin", "User:admin"),
        roles=[
            cluster_role(
                "admin", split_rule("*", "*", "pods/status", "*"), split_rule("*", "*", "*/scale", "*")
            )
        ],
    )
    for resource, sub in [
        ("pods", "status"),
        ("pods", "scale"),
        ("deployments", "scale"),
        ("anything", "scale"),
    ]:
        assert _allowed(a, user("admin"), res("get", resource, "ns1", sub=sub))
    assert not _allowed(a, user("admin"), res("get", "pods", "ns1"))


def test_allowed_reason_names_binding_role_and_subject() -> None:
    a = authorizer(
        binding("ns1", "edit", "Group:devs", name="devs-edit"),
        roles=[cluster_role("edit", rule(["get"], groups=[""], resources=["pods"]))],
    )
    decision = a.evaluate(user("alice", "devs"), res("get", "pods", "ns1"))
    assert decision.allowed
    assert (
        decision.reason
        == 'RBAC: allowed by RoleBinding "devs-edit/ns1" of ClusterRole "edit" to Group "devs"'
    )
    denied = a.evaluate(user("bob"), res("get", "pods", "ns1"))
    assert not denied.allowed and denied.reason == ""


def test_role_resolves_in_the_bindings_namespace() -> None:
    reader = rule(["get"], groups=[""], resources=["pods"])
    roles = [Role("Role", "reader", "ns1", (reader,)), Role("Role", "writer", "ns2", (reader,))]
    a = authorizer(
        binding("ns1", "reader", "User:alice", kind="Role"),
        binding("ns1", "writer", "User:alice", kind="Role"),
        roles=roles,
    )
    assert _allowed(a, user("alice"), res("get", "pods", "ns1"))
    rules, errors = a.rules_for(user("alice"), "ns1")
    assert rules == [reader]
    assert errors == ['role.rbac.authorization.k8s.io "writer" not found']


def test_service_account_subjects() -> None:
    a = authorizer(
        binding("ns1", "view", subject("ServiceAccount:default"), name="local"),
        binding("ns1", "view", subject("ServiceAccount:builder", namespace="ci"), name="remote"),
        roles=[cluster_role("view", rule(["get"], groups=[""], resources=["pods"]))],
    )
    get = res("get", "pods", "ns1")
    assert service_account_username("ns1", "default") == "system:serviceaccount:ns1:default"
    assert _allowed(a, user("system:serviceaccount:ns1:default"), get)
    assert _allowed(a, user("system:serviceaccount:ci:builder"), get)
    assert not _allowed(a, user("system:serviceaccount:ns1:builder"), get)
    assert not _allowed(a, user("system:serviceaccount:ci:default"), get)
    assert not _allowed(a, user("default"), get)


def test_system_masters_short_circuit() -> None:
    a = authorizer()
    decision = a.evaluate(user("root", "system:masters"), non_resource_attributes("get", "/version"))
    assert decision.allowed
    assert 'ClusterRole "cluster-admin" to Group "system:masters"' in decision.reason
    assert _allowed(a, user("root", "system:masters"), res("delete", "rolebindings", group=GROUP))
    assert not _allowed(a, user("root", "system:masters-not"), res("get", "pods", "ns"))


def test_roles_not_ready_is_an_error_not_a_problem() -> None:
    class Unsynced(StaticRoleSource):
        @property
        def ready(self) -> bool:
            return False

    seen: list[BindingProblem] = []
    a = RBACAuthorizer(
        Bindings(binding("ns1", "view", "User:alice")), Unsynced(), reporter=ProblemReporter([seen.append])
    )
    decision = a.evaluate(user("alice"), res("get", "pods", "ns1"))
    assert not decision.allowed
    assert decision.reason == "RBAC: roles are not synced yet"
    assert seen == []


# ----------------------------------------------------------------------------- part 7


def _problems(*objects: JSON, roles: Sequence[Role] = ()) -> tuple[RBACAuthorizer, list[BindingProblem]]:
    seen: list[BindingProblem] = []
    return authorizer(*objects, roles=roles, reporter=ProblemReporter([seen.append])), seen


VIEW = cluster_role("view", rule(["get", "list"], groups=[""], resources=["pods"]))


def test_unresolvable_role_ref_is_reported_once_and_named_in_the_reason() -> None:
    a, seen = _problems(
        binding("ns1", "missing", "User:alice", rv="7"), binding("ns1", "view", "User:bob"), roles=[VIEW]
    )
    decision = a.evaluate(user("alice"), res("get", "pods", "ns1"))
    assert not decision.allowed
    assert decision.reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found'
    a.evaluate(user("alice"), res("list", "pods", "ns1"))
    assert [(p.reason, p.name, p.resource_version) for p in seen] == [
        (ProblemReason.UNRESOLVABLE_ROLE_REF, "missing-binding", "7")
    ]
    assert seen[0].message == 'clusterrole.rbac.authorization.k8s.io "missing" not found'
    # The others still apply.
    assert _allowed(a, user("bob"), res("get", "pods", "ns1"))


def test_unrecognized_subject_kind_makes_the_binding_grant_nothing() -> None:
    bad = binding("ns1", "view", "User:alice", {"kind": "Robot", "name": "r2d2"}, name="bad")
    good = binding("ns1", "view", "User:carol", name="good")
    a, seen = _problems(bad, good, roles=[VIEW])
    decision = a.evaluate(user("alice"), res("get", "pods", "ns1"))
    assert not decision.allowed
    assert decision.reason == (
        'RBAC: RoleBinding "bad/ns1" of ClusterRole "view" to User "alice": '
        'subjects[1]: unrecognized subject kind "Robot"'
    )
    assert [p.reason for p in seen] == [ProblemReason.UNRECOGNIZED_SUBJECT_KIND]
    assert _allowed(a, user("carol"), res("get", "pods", "ns1"))


def test_subject_kinds_are_qualified_by_api_group() -> None:
    upstream_group = {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}
    defaulted = {"kind": "Group", "name": "devs"}  # empty apiGroup: the default, ours
    sa_with_group = {"kind": "ServiceAccount", "name": "sa", "apiGroup": GROUP}
    a, seen = _problems(
        binding("ns1", "view", upstream_group, name="k8s-group"),
        binding("ns1", "view", defaulted, name="defaulted"),
        binding("ns1", "view", sa_with_group, name="sa-group"),
        roles=[VIEW],
    )
    assert not _allowed(a, user("alice"), res("get", "pods", "ns1"))
    assert _allowed(a, user("bob", "devs"), res("get", "pods", "ns1"))
    assert not _allowed(a, user("system:serviceaccount:ns1:sa"), res("get", "pods", "ns1"))
    assert {p.name for p in seen} == set()  # static problems surface via the index's checker
    a.check_binding(Binding.from_object(binding("ns1", "view", upstream_group, name="k8s-group")))
    assert seen[0].message == (
        'subjects[0]: unrecognized subject kind "User" in API group "rbac.authorization.k8s.io"'
    )


def test_user_or_group_with_namespace_is_reported_and_grants_nothing() -> None:
    a, seen = _problems(
        binding("ns1", "view", subject("User:alice", namespace="ns1"), name="nsuser"), roles=[VIEW]
    )
    assert not _allowed(a, user("alice"), res("get", "pods", "ns1"))
    assert [(p.reason, p.message) for p in seen] == [
        (
            ProblemReason.NAMESPACED_SUBJECT,
            'subjects[0]: User "alice" is not namespaced, but namespace is "ns1"',
        )
    ]


def test_every_problem_of_a_binding_is_reported_once() -> None:
    # A namespaced User subject used to hide the roleRef that does not resolve.
    both = binding("ns1", "missing", subject("User:alice", namespace="ns1"), name="both", rv="4")
    a, seen = _problems(both, roles=[VIEW])
    decision = a.evaluate(user("alice"), res("get", "pods", "ns1"))
    assert not decision.allowed
    assert decision.reason == (
        'RBAC: RoleBinding "both/ns1" of ClusterRole "missing" to User "alice": '
        '[clusterrole.rbac.authorization.k8s.io "missing" not found, '
        'subjects[0]: User "alice" is not namespaced, but namespace is "ns1"]'
    )
    expected = [
        (ProblemReason.UNRESOLVABLE_ROLE_REF, 'clusterrole.rbac.authorization.k8s.io "missing" not found'),
        (
            ProblemReason.NAMESPACED_SUBJECT,
            'subjects[0]: User "alice" is not namespaced, but namespace is "ns1"',
        ),
    ]
    assert [(p.reason, p.message) for p in seen] == expected
    assert {(p.name, p.resource_version) for p in seen} == {("both", "4")}
    # The same revision, looked at again (a request, a re-check): nothing new.
    a.evaluate(user("alice"), res("list", "pods", "ns1"))
    a.check_binding(Binding.from_object(both))
    assert len(seen) == 2


def test_an_unsupported_role_ref_is_not_reported_twice() -> None:
    ref = {"apiGroup": "example.com", "kind": "ClusterRole", "name": "view"}
    bad = binding("ns1", "view", {"kind": "Robot", "name": "r2d2"}, name="bad")
    a, seen = _problems({**bad, "roleRef": ref}, roles=[VIEW])
    a.check_binding(Binding.from_object({**bad, "roleRef": ref}))
    assert [(p.reason, p.message) for p in seen] == [
        (ProblemReason.UNRESOLVABLE_ROLE_REF, 'unsupported role reference API group: "example.com"'),
        (ProblemReason.UNRECOGNIZED_SUBJECT_KIND, 'subjects[0]: unrecognized subject kind "Robot"'),
    ]


def test_roles_not_ready_delays_only_the_role_ref_problem() -> None:
    class Syncing(StaticRoleSource):
        synced = False

        @property
        def ready(self) -> bool:
            return self.synced

    roles = Syncing(defaults=False)
    seen: list[BindingProblem] = []
    both = Binding.from_object(binding("ns1", "missing", subject("Group:devs", namespace="ns1"), name="b"))
    a = RBACAuthorizer(Bindings(), roles, reporter=ProblemReporter([seen.append]))
    a.check_binding(both)
    assert [p.reason for p in seen] == [ProblemReason.NAMESPACED_SUBJECT]
    # The roles' first sync re-checks every binding: the roleRef's problem joins, the other is not
    # reported again.
    roles.synced = True
    a.check_binding(both)
    a.check_binding(both)
    assert [p.reason for p in seen] == [ProblemReason.NAMESPACED_SUBJECT, ProblemReason.UNRESOLVABLE_ROLE_REF]


def test_problem_reporter_once_per_revision() -> None:
    seen: list[BindingProblem] = []
    reporter = ProblemReporter([seen.append])
    first = BindingProblem("ns", "b", "u", "1", ProblemReason.UNRESOLVABLE_ROLE_REF, "gone")
    assert reporter.report(first)
    assert not reporter.report(first)
    newer = BindingProblem("ns", "b", "u", "2", ProblemReason.UNRESOLVABLE_ROLE_REF, "gone")
    assert reporter.report(newer)
    assert not reporter.report(newer)
    reporter.forget("ns", "b")
    assert reporter.report(newer)
    assert len(seen) == 3


def test_failing_hook_does_not_disturb_authorization() -> None:
    def broken(_problem: BindingProblem) -> None:
        raise RuntimeError("boom")

    a = authorizer(binding("ns1", "missing", "User:alice"), reporter=ProblemReporter([broken]))
    assert not a.evaluate(user("alice"), res("get", "pods", "ns1")).allowed


# ----------------------------------------------------------------------------- the index


def test_index_replace_apply_delete_and_checks_each_revision_once() -> None:
    checked: list[tuple[str, str]] = []
    index = BindingIndex(checker=lambda b: checked.append((b.name, b.resource_version)))
    index.replace(
        [binding("a", "view", "User:x", name="one"), binding("b", "view", "User:x", name="two")], "5"
    )
    assert index.ready and len(index) == 2 and index.resource_version == "5"
    assert [b.name for b in index.role_bindings("a")] == ["one"]
    index.apply("MODIFIED", binding("a", "edit", "User:x", name="one", rv="6"))
    assert index.role_bindings("a")[0].role_ref.name == "edit"
    index.apply("DELETED", binding("b", "view", "User:x", name="two", rv="7"))
    assert index.role_bindings("b") == ()
    index.apply("BOOKMARK", {"metadata": {"resourceVersion": "9"}})
    assert index.resource_version == "9"
    # A relist with nothing new checks nothing again.
    index.replace([binding("a", "edit", "User:x", name="one", rv="6")])
    assert checked == [("one", "1"), ("two", "1"), ("one", "6")]


def test_the_index_gauges_the_resource_version_it_has_reached() -> None:
    index = BindingIndex()
    registry = CollectorRegistry()
    registry.register(index)
    assert registry.get_sample_value(INDEX_METRIC_NAME) == 0  # nothing listed yet
    index.replace([binding("a", "view", "User:x", name="one")], "5")
    assert registry.get_sample_value(INDEX_METRIC_NAME) == 5
    index.apply("ADDED", binding("a", "edit", "User:x", name="two", rv="6"))
    assert registry.get_sample_value(INDEX_METRIC_NAME) == 6
    index.apply("BOOKMARK", {"metadata": {"resourceVersion": "9"}})
    assert registry.get_sample_value(INDEX_METRIC_NAME) == 9


def test_event_name_and_warning_event() -> None:
    assert event_name("devs-edit", 255) == "devs-edit.ff"
    assert event_name("system:Controller", 1) == "system-controller.1"
    problem = BindingProblem("ns1", "b", "uid-1", "12", ProblemReason.NAMESPACED_SUBJECT, "x" * 2000)
    event = warning_event(problem, instance="host-1")
    assert event["type"] == "Warning" and event["reason"] == "NamespacedSubject"
    assert event["regarding"] == {
        "kind": "RoleBinding",
        "namespace": "ns1",
        "name": "b",
        "apiVersion": f"{GROUP}/v1",
        "uid": "uid-1",
        "resourceVersion": "12",
    }
    assert len(event["note"]) <= 1024 and event["reportingInstance"] == "host-1"
    assert event["metadata"]["namespace"] == "ns1"


async def test_recorder_logs_counts_and_writes_events(caplog: pytest.LogCaptureFixture) -> None:
    written: list[JSON] = []

    async def write(event: JSON) -> None:
        written.append(event)

    recorder = ProblemRecorder(write, instance="test")
    problem = BindingProblem("ns1", "b", "u", "3", ProblemReason.UNRESOLVABLE_ROLE_REF, "role gone")
    with caplog.at_level("WARNING"):
        recorder(problem)
    await recorder.drain()
    assert 'RoleBinding "ns1/b": role gone' in caplog.text
    assert recorder.counts == {"UnresolvableRoleRef": 1}
    assert [e["reason"] for e in written] == ["UnresolvableRoleRef"]
    assert 'coreio_rbac_binding_errors_total{reason="UnresolvableRoleRef"} 1' in recorder.metrics_text()


async def test_recorder_reports_each_problem_of_a_binding_on_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[JSON] = []

    async def write(event: JSON) -> None:
        written.append(event)

    frozen = datetime.datetime(2026, 11, 22, 2, 16, 41, 123456, tzinfo=datetime.UTC)
    recorder = ProblemRecorder(write, instance="test", clock=lambda: frozen)
    ref = BindingProblem("ns1", "b", "u", "3", ProblemReason.UNRESOLVABLE_ROLE_REF, "role gone")
    subject_problem = BindingProblem("ns1", "b", "u", "3", ProblemReason.NAMESPACED_SUBJECT, "namespaced")
    with caplog.at_level("WARNING"):
        recorder(ref)
        recorder(subject_problem)
    await recorder.drain()
    assert [r.getMessage() for r in caplog.records] == [
        'RBAC: RoleBinding "ns1/b": role gone (grants nothing until fixed)',
        'RBAC: RoleBinding "ns1/b": namespaced (grants nothing until fixed)',
    ]
    assert recorder.counts == {"UnresolvableRoleRef": 1, "NamespacedSubject": 1}
    assert [(e["reason"], e["note"]) for e in written] == [
        ("UnresolvableRoleRef", "role gone"),
        ("NamespacedSubject", "namespaced"),
    ]
    # Recorded in the same instant, they still get names (and times) of their own.
    assert [(e["metadata"]["name"], e["eventTime"]) for e in written] == [
        ("b.18ea3c63e051e400", "2026-11-22T02:16:41.123456Z"),
        ("b.18ea3c63e051e7e8", "2026-11-22T02:16:41.123457Z"),
    ]
    assert recorder.metrics_text().splitlines()[2:] == [
        'coreio_rbac_binding_errors_total{reason="NamespacedSubject"} 1.0',
        'coreio_rbac_binding_errors_total{reason="UnresolvableRoleRef"} 1.0',
    ]


@pytest.fixture
async def stores(tmp_path: Path) -> Any:
    storage = SQLiteStorage(str(tmp_path / "db.sqlite"))
    await storage.start()
    try:
        yield ResourceStore(RoleBindingKind(), storage), ResourceStore(EventKind(), storage)
    finally:
        await storage.close()


def fresh(obj: JSON) -> JSON:
    """`obj` as a create request carries it (no server-set metadata)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "uid")}
    return {**obj, "metadata": meta}


async def test_index_follows_the_registry_and_events_are_recorded(stores: Any) -> None:
    """End to end over SQLite: list+watch keeps the index current, a bad binding is reported once
    per revision as a Warning Event in its namespace, and the good ones keep working."""
    rolebindings, events = stores

    async def write(event: JSON) -> None:
        await events.create(event["metadata"]["namespace"], event, WriteOptions(field_manager="test"))

    recorder = ProblemRecorder(write, instance="test")
    reporter = ProblemReporter([recorder])
    index = BindingIndex(reporter=reporter)
    rbac = RBACAuthorizer(index, StaticRoleSource(), reporter=reporter)
    index.checker = rbac.check_binding
    await rolebindings.create(
        "team", fresh(binding("team", "view", "User:alice", name="readers")), WriteOptions()
    )
    task = asyncio.create_task(index.run(rolebindings))
    recording = asyncio.create_task(recorder.run())
    try:
        await index.wait_ready()
        assert rbac.evaluate(user("alice"), res("list", "events", "team", group="events.core.io")).allowed
        await rolebindings.create(
            "team", fresh(binding("team", "nope", "User:bob", name="broken")), WriteOptions()
        )
        await async_wait_until(lambda: len(index) == 2, interval=0.01)
        assert not rbac.evaluate(user("bob"), res("get", "pods", "team")).allowed

        async def listed() -> list[JSON]:
            items: list[JSON] = (await events.list("team", ListOptions())).body()["items"]
            return items

        found = await async_wait_until(listed, interval=0.01)
        assert [(e["reason"], e["regarding"]["name"], e["type"]) for e in found] == [
            ("UnresolvableRoleRef", "broken", "Warning")
        ]
        assert found[0]["note"] == 'clusterrole.rbac.authorization.k8s.io "nope" not found'
        # Another look at the same revision reports nothing new.
        rbac.evaluate(user("bob"), res("get", "pods", "team"))
        assert recorder.counts == {"UnresolvableRoleRef": 1}
        # Two problems of one binding: two Events, both written.
        both = binding("team", "nope", subject("User:carol", namespace="team"), name="both")
        await rolebindings.create("team", fresh(both), WriteOptions())

        async def about_both() -> list[tuple[str, str]] | None:
            pairs = sorted(
                (e["reason"], e["note"]) for e in await listed() if e["regarding"]["name"] == "both"
            )
            return pairs if len(pairs) == 2 else None

        assert await async_wait_until(about_both, interval=0.01) == [
            ("NamespacedSubject", 'subjects[0]: User "carol" is not namespaced, but namespace is "team"'),
            ("UnresolvableRoleRef", 'clusterrole.rbac.authorization.k8s.io "nope" not found'),
        ]
        assert recorder.counts == {"UnresolvableRoleRef": 2, "NamespacedSubject": 1}
        await rolebindings.delete("team", "readers", DeleteOptions())
        await async_wait_until(lambda: len(index) == 2, interval=0.01)
        assert not rbac.evaluate(user("alice"), res("list", "events", "team", group="events.core.io")).allowed
    finally:
        task.cancel()
        recording.cancel()
        await asyncio.gather(task, recording, return_exceptions=True)
