"""Authorization of a standalone server by its own RBAC over the RoleBindings it stores, with real
client certificates issued by the server's CA: 403s worded as upstream, bindings that grant,
part-7 errors reported (log, metric, Warning Event), the SubjectAccessReview webhook and the
escalation guard."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apiserver import pki
from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.metrics import wait_for_bindings
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until


class UserApi(Api):
    """An Api that presents a client certificate for `user` issued by the server's CA."""

    def __init__(self, server: ServerProcess, user: str, groups: tuple[str, ...] = ()) -> None:
        super().__init__(server, client_cert=False)
        ca = pki.KeyPair.load(server.data_dir / "pki" / "ca.crt", server.data_dir / "pki" / "ca.key")
        pair = pki.issue_client_certificate(ca, user, groups)
        cert = server.data_dir / f"{user}.crt"
        key = server.data_dir / f"{user}.key"
        pair.save(cert, key)
        self.context.load_cert_chain(str(cert), str(key))


@pytest.fixture(scope="module")
def as_user(server: ServerProcess) -> Callable[..., UserApi]:
    def make(user: str, groups: tuple[str, ...] = ()) -> UserApi:
        return UserApi(server, user, groups)

    return make


def bind(
    api: Api, namespace: str, name: str, role: str, subjects: list[dict[str, str]], kind: str = "ClusterRole"
) -> None:
    body = rolebinding(name)
    body["roleRef"] = {"apiGroup": "rbac.authorization.core.io", "kind": kind, "name": role}
    body["subjects"] = subjects
    response = api.post(rb_path(namespace), body)
    assert response.status == 201, response.body
    # Each worker's binding index follows the store's watch (on SQLite after its poll of the log),
    # within tens of milliseconds; the next request may reach any worker. Authorization is
    # eventually consistent as kube-apiserver's informers are, across its replicas too.
    wait_for_bindings(api.server, response.json["metadata"]["resourceVersion"])


def test_without_a_binding_every_request_is_403_worded_as_upstream(as_user: Callable[..., UserApi]) -> None:
    alice = as_user("alice")
    response = alice.get(rb_path("team-a"))
    assert response.status == 403
    status = response.json
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'rolebindings.rbac.authorization.core.io is forbidden: User "alice" cannot list resource '
        '"rolebindings" in API group "rbac.authorization.core.io" in the namespace "team-a"'
    )
    named = alice.get(ev_path("team-a", "x"))
    assert named.status == 403
    assert named.json["message"].startswith('events.events.core.io "x" is forbidden: User "alice" cannot get')
    # Discovery stays open to every authenticated user, as upstream's system:discovery binding.
    assert alice.get("/apis").status == 200


def test_a_binding_grants_in_its_namespace_only(api: Api, as_user: Callable[..., UserApi]) -> None:
    bind(api, "team-b", "bob-views", "view", [{"kind": "User", "name": "bob"}])
    bob = as_user("bob")
    api.post(ev_path("team-b"), event("seen", namespace="team-b"))
    listed = bob.get(ev_path("team-b"))
    assert listed.status == 200 and [i["metadata"]["name"] for i in listed.json["items"]] == ["seen"]
    assert bob.get(ev_path("team-c")).status == 403
    # view reads but does not write, and does not cover rolebindings.
    assert bob.post(ev_path("team-b"), event("mine", namespace="team-b")).status == 403
    assert bob.get(rb_path("team-b")).status == 403


def test_group_and_service_account_subjects(api: Api, as_user: Callable[..., UserApi]) -> None:
    bind(api, "team-d", "devs-edit", "edit", [{"kind": "Group", "name": "devs"}])
    bind(api, "team-d", "sa-view", "view", [{"kind": "ServiceAccount", "name": "robot"}])
    carol = as_user("carol", ("devs",))
    robot = as_user("system:serviceaccount:team-d:robot")
    assert carol.post(ev_path("team-d"), event("by-carol", namespace="team-d")).status == 201
    assert robot.get(ev_path("team-d", "by-carol")).status == 200
    assert robot.delete(ev_path("team-d", "by-carol")).status == 403


def _binding_warnings(api: Api, namespace: str) -> set[tuple[str, str]]:
    """(binding, reason) of the Warning Events regarding RoleBindings in `namespace`."""
    warnings = api.get(f"{ev_path(namespace)}?fieldSelector=type%3DWarning,regarding.kind%3DRoleBinding")
    return {(w["regarding"]["name"], w["reason"]) for w in warnings.json["items"]}


def test_part7_errors_are_reported_and_grant_nothing(
    api: Api, as_user: Callable[..., UserApi], server: ServerProcess
) -> None:
    bind(api, "team-e", "ghost-role", "no-such-role", [{"kind": "User", "name": "dave"}])
    # (An unknown subject kind is refused by validation, as upstream; the authorizer meets one only in
    # data written around the API, which tests/unit/test_rbac.py covers.)
    bind(api, "team-e", "namespaced-user", "view", [{"kind": "User", "name": "dave", "namespace": "team-e"}])
    # Two problems in one binding: each is reported, neither hides the other.
    bind(api, "team-e", "both-wrong", "no-such-role", [{"kind": "Group", "name": "devs", "namespace": "x"}])
    dave = as_user("dave", ("devs",))
    expected = {
        ("ghost-role", "UnresolvableRoleRef"),
        ("namespaced-user", "NamespacedSubject"),
        ("both-wrong", "UnresolvableRoleRef"),
        ("both-wrong", "NamespacedSubject"),
    }

    def reported() -> bool:
        assert dave.get(ev_path("team-e")).status == 403  # none of the bad bindings grants anything
        return _binding_warnings(api, "team-e") == expected

    wait_until(reported, timeout=15, interval=0.2, message="a Warning Event of each problem")
    denied = dave.get(ev_path("team-e")).json["message"]
    assert (
        'RoleBinding "both-wrong/team-e" of ClusterRole "no-such-role" to Group "devs": '
        '[clusterrole.rbac.authorization.k8s.io "no-such-role" not found, '
        'subjects[0]: Group "devs" is not namespaced, but namespace is "x"]'
    ) in denied
    metrics = api.get("/metrics").body.decode()
    # Each worker's authorizer reads the bindings, and counts what is wrong with them.
    for reason in ("UnresolvableRoleRef", "NamespacedSubject"):
        counted = re.findall(
            rf'^coreio_rbac_binding_errors_total{{reason="{reason}"[^}}]*}} (\S+)$', metrics, re.M
        )
        assert counted and all(float(value) == 2 for value in counted), (reason, counted)
    log = Path(server.log_file).read_text()
    assert 'RoleBinding "team-e/ghost-role": clusterrole' in log
    assert 'RoleBinding "team-e/both-wrong": clusterrole' in log
    assert 'RoleBinding "team-e/both-wrong": subjects[0]: Group "devs" is not namespaced' in log
    # The good binding next to them still applies.
    bind(api, "team-e", "good", "view", [{"kind": "User", "name": "dave"}])
    assert dave.get(ev_path("team-e")).status == 200
    # Nothing was reported twice, however often the bad bindings were looked at.
    assert len(api.get(f"{ev_path('team-e')}?fieldSelector=type%3DWarning").json["items"]) == 4


def test_webhook_answers_subject_access_reviews(api: Api) -> None:
    bind(api, "team-f", "erin-view", "view", [{"kind": "User", "name": "erin"}])
    review: dict[str, Any] = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "erin",
            "groups": ["system:authenticated"],
            "resourceAttributes": {
                "namespace": "team-f",
                "verb": "list",
                "group": "events.core.io",
                "resource": "events",
            },
        },
    }
    answer = api.post("/authorize", review)
    assert answer.status == 200 and answer.json["kind"] == "SubjectAccessReview"
    assert answer.json["status"]["allowed"] is True
    review["spec"]["resourceAttributes"]["verb"] = "delete"
    denied = api.post("/authorize", review).json["status"]
    assert denied.get("allowed") is False


def test_escalation_guard(api: Api, as_user: Callable[..., UserApi]) -> None:
    bind(api, "team-g", "frank-admin", "admin", [{"kind": "User", "name": "frank"}])
    frank = as_user("frank")
    assert frank.get(rb_path("team-g")).status == 200
    # frank holds admin in team-g: granting view (covered by admin) there is fine...
    view = rolebinding("frank-grants-view")
    view["roleRef"]["name"] = "view"
    assert frank.post(rb_path("team-g"), view).status == 201
    # ...granting cluster-admin, which he does not hold, is an escalation.
    escalate = rolebinding("frank-grants-cluster-admin")
    escalate["roleRef"]["name"] = "cluster-admin"
    refused = frank.post(rb_path("team-g"), escalate)
    assert refused.status == 403
    assert "is attempting to grant RBAC permissions not currently held" in refused.json["message"]
