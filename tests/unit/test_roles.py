"""Role sources: roles files, upstream's default ClusterRoles with coreio's groups, aggregation, and the
in-cluster source's list+watch (against a fake kube-apiserver: the tests named *_fake*)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from apiserver.cluster.connection import ClusterConnection
from apiserver.machinery.selectors import label_selector_matches as selector_matches
from apiserver.machinery.types import JSON
from apiserver.rbac.authorizer import (
    BindingProblem,
    ProblemReason,
    ProblemReporter,
    RBACAuthorizer,
    rules_allow,
)
from apiserver.rbac.bindings import BindingIndex
from apiserver.rbac.roles import (
    ClusterRoleSource,
    PolicyRule,
    Role,
    RoleFormatError,
    StaticRoleSource,
    default_cluster_roles,
    parse_roles,
    rule,
)
from tests.support.waiting import async_wait_until
from tests.unit.test_rbac import binding, res, subject

CORE_RBAC = "rbac.authorization.core.io"
CORE_EVENTS = "events.core.io"


# ----------------------------------------------------------------------------- rules and files


def test_policy_rule_json_round_trip_and_compact_string() -> None:
    raw = {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}
    policy = PolicyRule.from_json(raw)
    assert policy.to_json() == raw
    assert (
        policy.compact_string()
        == '{APIGroups:[""], Resources:["pods"], ResourceNames:["a"], Verbs:["get" "list"]}'
    )
    assert (
        rule(["get"], urls=["/healthz"]).compact_string() == '{NonResourceURLs:["/healthz"], Verbs:["get"]}'
    )
    with pytest.raises(RoleFormatError, match="verbs: expected a list of strings"):
        PolicyRule.from_json({"verbs": "get"})


ROLES_YAML = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: event-reader}
rules:
- {apiGroups: [events.core.io], resources: [events], verbs: [get, list, watch]}
---
apiVersion: v1
kind: List
items:
- apiVersion: rbac.authorization.k8s.io/v1
  kind: Role
  metadata: {name: binder, namespace: team}
  rules:
  - {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [bind], resourceNames: [view]}
"""


def test_parse_roles_documents_and_lists() -> None:
    roles = parse_roles(ROLES_YAML)
    assert [(r.kind, r.namespace, r.name) for r in roles] == [
        ("ClusterRole", "", "event-reader"),
        ("Role", "team", "binder"),
    ]
    as_json = json.dumps([r.to_object() for r in roles])
    assert [r.name for r in parse_roles(as_json)] == ["event-reader", "binder"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: ClusterRole\nmetadata: {name: x}",
            "apiVersion must be rbac.authorization.k8s.io/v1",
        ),
        (
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: x}",
            "needs metadata.namespace",
        ),
        ("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: x}", "kind must be"),
        (
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {}",
            "metadata.name is required",
        ),
        ("- 3", "expected an object"),
        ("a: [", "roles"),
        (
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n---\n"
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}",
            "duplicate ClusterRole x",
        ),
    ],
)
def test_parse_roles_errors(text: str, message: str) -> None:
    with pytest.raises(RoleFormatError, match=message):
        parse_roles(text)


def test_roles_file(tmp_path: Path) -> None:
    path = tmp_path / "roles.yaml"
    path.write_text(ROLES_YAML)
    source = StaticRoleSource.from_file(path)
    assert source.ready
    binder = source.get_role("team", "binder")
    assert binder is not None and binder.rules[0].verbs == ("bind",)
    assert source.get_role("other", "binder") is None
    assert source.get_cluster_role("event-reader") is not None
    assert source.get_cluster_role("view") is not None  # defaults stay
    with pytest.raises(RoleFormatError, match="No such file"):
        StaticRoleSource.from_file(tmp_path / "missing.yaml")


# ----------------------------------------------------------------------------- defaults


def _allows(role: str, verb: str, resource: str, group: str = "") -> bool:
    found = StaticRoleSource().get_cluster_role(role)
    assert found is not None
    return rules_allow(res(verb, resource, "ns", group=group), found.rules)


@pytest.mark.parametrize(
    ("role", "verb", "resource", "group", "expected"),
    [
        # our renamed rolebindings: as upstream's rbac.authorization.k8s.io rolebindings
        ("admin", "create", "rolebindings", CORE_RBAC, True),
        ("admin", "deletecollection", "rolebindings", CORE_RBAC, True),
        ("edit", "get", "rolebindings", CORE_RBAC, False),
        ("edit", "create", "rolebindings", CORE_RBAC, False),
        ("view", "list", "rolebindings", CORE_RBAC, False),
        # upstream's own
        ("admin", "create", "rolebindings", "rbac.authorization.k8s.io", True),
        ("edit", "create", "rolebindings", "rbac.authorization.k8s.io", False),
        # our Events: as upstream's core events
        ("view", "list", "events", CORE_EVENTS, True),
        ("view", "create", "events", CORE_EVENTS, False),
        ("edit", "create", "events", CORE_EVENTS, True),
        ("edit", "watch", "events", CORE_EVENTS, True),
        ("admin", "delete", "events", CORE_EVENTS, True),
        ("view", "get", "events", "", True),
        ("edit", "patch", "events", "", True),
        # a sample of the core groups
        ("view", "get", "pods", "", True),
        ("view", "get", "secrets", "", False),
        ("edit", "get", "secrets", "", True),
        ("edit", "create", "deployments", "apps", True),
        ("edit", "update", "leases", "coordination.k8s.io", True),
        ("admin", "create", "localsubjectaccessreviews", "authorization.k8s.io", True),
        ("admin", "bind", "clusterroles", "rbac.authorization.k8s.io", False),
        ("cluster-admin", "bind", "clusterroles", "rbac.authorization.k8s.io", True),
        ("cluster-admin", "anything", "anything", "any.group", True),
    ],
)
def test_default_cluster_roles(role: str, verb: str, resource: str, group: str, expected: bool) -> None:
    assert _allows(role, verb, resource, group) is expected


def test_default_roles_aggregate_as_upstream() -> None:
    by_name = {r.name: r for r in default_cluster_roles()}
    assert set(by_name) >= {"cluster-admin", "admin", "edit", "view"}
    view, edit, admin = (set(by_name[n].rules) for n in ("view", "edit", "admin"))
    assert view < edit < admin
    assert by_name["view"].labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert by_name["cluster-admin"].rules == (
        rule(["*"], groups=["*"], resources=["*"]),
        rule(["*"], urls=["*"]),
    )


def test_roles_file_extends_and_overrides_defaults() -> None:
    extra = Role(
        "ClusterRole",
        "widgets-view",
        rules=(rule(["get"], groups=["widgets.example"], resources=["widgets"]),),
        labels={"rbac.authorization.k8s.io/aggregate-to-view": "true"},
    )
    custom_edit = Role(
        "ClusterRole", "cluster-admin", rules=(rule(["get"], groups=[""], resources=["pods"]),)
    )
    source = StaticRoleSource([extra, custom_edit])
    for name in ("view", "edit", "admin"):
        found = source.get_cluster_role(name)
        assert found is not None and extra.rules[0] in found.rules, name
    replaced = source.get_cluster_role("cluster-admin")
    assert replaced is not None and replaced.rules == custom_edit.rules
    assert StaticRoleSource(defaults=False).get_cluster_role("view") is None


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, {"a": ""}, False),
    ],
)
def test_selector_matches(selector: JSON, labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


def test_aggregation_cycles_settle() -> None:
    a = Role(
        "ClusterRole",
        "a",
        labels={"agg": "b"},
        aggregation_selectors=({"matchLabels": {"agg": "a"}},),
    )
    b = Role(
        "ClusterRole",
        "b",
        labels={"agg": "a"},
        aggregation_selectors=({"matchLabels": {"agg": "b"}},),
    )
    leaf = Role(
        "ClusterRole", "leaf", rules=(rule(["get"], groups=[""], resources=["pods"]),), labels={"agg": "a"}
    )
    source = StaticRoleSource([a, b, leaf], defaults=False)
    found = source.get_cluster_role("a")
    assert found is not None and found.rules == leaf.rules


# ----------------------------------------------------------------------------- in-cluster source


class FakeKubeAPIServer:
    """Just enough of kube-apiserver for Roles and ClusterRoles: paginated lists, watches from a
    resourceVersion with bookmarks, 410 for compacted revisions, a bearer token."""

    TOKEN = "sekret"

    def __init__(self) -> None:
        self.revision = 100
        self.compacted = 0
        self.objects: dict[str, dict[tuple[str, str], JSON]] = {"roles": {}, "clusterroles": {}}
        self.watchers: dict[str, list[asyncio.Queue[JSON | None]]] = {"roles": [], "clusterroles": []}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.fail_next = 0
        app = web.Application()
        app.router.add_get("/apis/rbac.authorization.k8s.io/v1/{resource}", self.handle)
        self.server = TestServer(app)

    def put(self, resource: str, obj: JSON, event: str = "") -> JSON:
        self.revision += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.revision)
        key = (meta.get("namespace", ""), meta["name"])
        kind = event or ("MODIFIED" if key in self.objects[resource] else "ADDED")
        if kind == "DELETED":
            self.objects[resource].pop(key, None)
        else:
            self.objects[resource][key] = obj
        for queue in self.watchers[resource]:
            queue.put_nowait({"type": kind, "object": obj})
        return obj

    def end_watches(self) -> None:
        for queues in self.watchers.values():
            for queue in queues:
                queue.put_nowait(None)

    def compact(self) -> None:
        self.compacted = self.revision

    async def handle(self, request: web.Request) -> web.StreamResponse:
        resource = request.match_info["resource"]
        query = dict(request.query)
        self.requests.append((resource, query))
        if request.headers.get("Authorization") != f"Bearer {self.TOKEN}":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        if self.fail_next:
            self.fail_next -= 1
            return web.json_response({"kind": "Status", "code": 500, "message": "boom"}, status=500)
        if query.get("watch") == "true":
            return await self._watch(request, resource, int(query.get("resourceVersion") or 0))
        items = sorted(self.objects[resource].items())
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items)
        page = items[start : start + limit]
        meta: JSON = {"resourceVersion": str(self.revision)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        kind = "RoleList" if resource == "roles" else "ClusterRoleList"
        return web.json_response(
            {
                "kind": kind,
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": meta,
                "items": [o for _, o in page],
            }
        )

    async def _watch(self, request: web.Request, resource: str, since: int) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if since < self.compacted:
            gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
            await response.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
            return response
        queue: asyncio.Queue[JSON | None] = asyncio.Queue()
        self.watchers[resource].append(queue)
        bookmark = {"kind": "ClusterRole", "metadata": {"resourceVersion": str(self.revision)}}
        await response.write(json.dumps({"type": "BOOKMARK", "object": bookmark}).encode() + b"\n")
        try:
            while (event := await queue.get()) is not None:
                # One event in two chunks: the client must reassemble lines.
                data = json.dumps(event).encode() + b"\n"
                await response.write(data[:7])
                await response.write(data[7:])
        finally:
            self.watchers[resource].remove(queue)
        return response

    def connection(self) -> ClusterConnection:
        return ClusterConnection(str(self.server.make_url("")).rstrip("/"), False, token=self.TOKEN)

    def watches(self) -> list[dict[str, str]]:
        return [q for _, q in self.requests if q.get("watch") == "true"]

    def lists(self, resource: str) -> int:
        return sum(1 for r, q in self.requests if r == resource and q.get("watch") != "true")


def cluster_role_object(name: str, *verbs: str) -> JSON:
    return {
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": list(verbs)}],
    }


def role_object(namespace: str, name: str, *verbs: str) -> JSON:
    return {**cluster_role_object(name, *verbs), "metadata": {"name": name, "namespace": namespace}}


@pytest.fixture
async def fake() -> AsyncIterator[FakeKubeAPIServer]:
    server = FakeKubeAPIServer()
    await server.server.start_server()
    try:
        yield server
    finally:
        server.end_watches()
        await server.server.close()


@pytest.fixture
async def source(fake: FakeKubeAPIServer) -> AsyncIterator[ClusterRoleSource]:
    roles = ClusterRoleSource(fake.connection(), page_size=2, min_backoff=0.01, max_backoff=0.05)
    try:
        yield roles
    finally:
        fake.end_watches()
        await roles.close()


def _verbs(found: Role | None) -> tuple[str, ...]:
    assert found is not None
    return found.rules[0].verbs


async def test_cluster_role_source_fake_lists_in_pages_then_watches(
    fake: FakeKubeAPIServer, source: ClusterRoleSource
) -> None:
    for name in ("a", "b", "c", "d", "e"):
        fake.put("clusterroles", cluster_role_object(name, "get"))
    fake.put("roles", role_object("team", "reader", "list"))
    changes: list[None] = []
    source.on_change.append(lambda: changes.append(None))
    assert not source.ready
    source.start()
    async with asyncio.timeout(5):
        await source.wait_ready()
    assert source.ready
    assert [source.get_cluster_role(n) is not None for n in "abcde"] == [True] * 5
    assert fake.lists("clusterroles") == 3  # pages of two
    assert _verbs(source.get_role("team", "reader")) == ("list",)
    assert source.get_role("other", "reader") is None
    await async_wait_until(
        lambda: len(fake.watchers["clusterroles"]) == 1 and len(fake.watchers["roles"]) == 1, interval=0.01
    )
    watch = next(q for r, q in fake.requests if r == "clusterroles" and q.get("watch") == "true")
    assert watch["resourceVersion"] == "106" and watch["allowWatchBookmarks"] == "true"

    fake.put("clusterroles", cluster_role_object("a", "get", "list"))
    fake.put("clusterroles", cluster_role_object("f", "watch"))
    fake.put("roles", role_object("team", "reader", "list"), event="DELETED")
    await async_wait_until(lambda: source.get_role("team", "reader") is None, interval=0.01)
    await async_wait_until(lambda: source.get_cluster_role("f") is not None, interval=0.01)
    assert _verbs(source.get_cluster_role("a")) == ("get", "list")
    assert len(changes) >= 5


async def test_cluster_role_source_fake_rewatches_from_last_revision(
    fake: FakeKubeAPIServer, source: ClusterRoleSource
) -> None:
    fake.put("clusterroles", cluster_role_object("a", "get"))
    source.start()
    async with asyncio.timeout(5):
        await source.wait_ready()
    await async_wait_until(lambda: len(fake.watchers["clusterroles"]) == 1, interval=0.01)
    fake.put("clusterroles", cluster_role_object("b", "get"))
    await async_wait_until(lambda: source.get_cluster_role("b") is not None, interval=0.01)
    last = str(fake.revision)
    fake.end_watches()  # the server's timeoutSeconds ran out
    await async_wait_until(
        lambda: any(q.get("resourceVersion") == last for q in fake.watches()), interval=0.01
    )
    assert fake.lists("clusterroles") == 1  # watched again, not relisted


async def test_cluster_role_source_fake_relists_after_410(
    fake: FakeKubeAPIServer, source: ClusterRoleSource
) -> None:
    fake.put("clusterroles", cluster_role_object("a", "get"))
    source.start()
    async with asyncio.timeout(5):
        await source.wait_ready()
    await async_wait_until(lambda: len(fake.watchers["clusterroles"]) == 1, interval=0.01)
    # While the watch is down, history is compacted and things change.
    fake.end_watches()
    fake.watchers["clusterroles"].clear()
    fake.put("clusterroles", cluster_role_object("a", "get"), event="DELETED")
    fake.put("clusterroles", cluster_role_object("z", "get"))
    fake.compact()
    await async_wait_until(lambda: source.get_cluster_role("z") is not None, interval=0.01)
    assert source.get_cluster_role("a") is None
    assert fake.lists("clusterroles") >= 2


async def test_cluster_role_source_fake_retries_errors(
    fake: FakeKubeAPIServer, source: ClusterRoleSource
) -> None:
    fake.fail_next = 3
    fake.put("clusterroles", cluster_role_object("a", "get"))
    source.start()
    async with asyncio.timeout(5):
        await source.wait_ready()
    assert source.get_cluster_role("a") is not None


async def test_cluster_role_source_fake_needs_credentials(fake: FakeKubeAPIServer) -> None:
    wrong = ClusterConnection(fake.connection().server, False, token="nope")
    roles = ClusterRoleSource(wrong, min_backoff=0.01, max_backoff=0.02)
    roles.start()
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await roles.wait_ready()
        assert not roles.ready
    finally:
        await roles.close()


async def test_cluster_role_source_fake_binding_problems_are_each_reported_once(
    fake: FakeKubeAPIServer, source: ClusterRoleSource
) -> None:
    """A binding with a namespaced subject and a roleRef that stops resolving, as the server wires
    them: its own problem at once, its roleRef's when the roles say so, and neither a second time."""
    seen: list[BindingProblem] = []
    reporter = ProblemReporter([seen.append])
    index = BindingIndex(reporter=reporter)
    index.checker = RBACAuthorizer(index, source, reporter=reporter).check_binding
    source.on_change.append(lambda: index.schedule_recheck(0.01))
    fake.put("clusterroles", cluster_role_object("reader", "get"))
    # Listed before the roles are in: the roleRef cannot be judged yet, the subject can.
    index.replace([binding("team", "reader", subject("User:alice", namespace="team"), name="b")], "1")
    assert [p.reason for p in seen] == [ProblemReason.NAMESPACED_SUBJECT]
    source.start()
    async with asyncio.timeout(5):
        await source.wait_ready()
    index.recheck_all()
    assert len(seen) == 1  # the ClusterRole resolves
    await async_wait_until(lambda: len(fake.watchers["clusterroles"]) == 1, interval=0.01)
    fake.put("clusterroles", cluster_role_object("reader", "get"), event="DELETED")
    await async_wait_until(lambda: len(seen) == 2, interval=0.01)
    assert seen[1].reason is ProblemReason.UNRESOLVABLE_ROLE_REF
    assert seen[1].message == 'clusterrole.rbac.authorization.k8s.io "reader" not found'
    # The binding is unchanged: roles coming and going report nothing again.
    fake.put("clusterroles", cluster_role_object("reader", "get"))
    await async_wait_until(lambda: source.get_cluster_role("reader") is not None, interval=0.01)
    fake.put("clusterroles", cluster_role_object("reader", "get"), event="DELETED")
    await async_wait_until(lambda: source.get_cluster_role("reader") is None, interval=0.01)
    await async_wait_until(lambda: index._recheck is None, interval=0.01)  # the re-check it scheduled ran
    index.recheck_all()
    assert len(seen) == 2
