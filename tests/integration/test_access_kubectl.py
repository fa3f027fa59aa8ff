"""Identity and access through the real kubectl against a standalone server: `--as` (impersonation)
with and without the right to it, `kubectl auth whoami`, `kubectl auth can-i` and `can-i --list`,
for a token user, a certificate user and an impersonated one; and the audit log naming both the
requestor and the user it impersonated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver import pki
from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.kubectl import Kubectl
from tests.support.metrics import wait_for_bindings
from tests.support.server import ServerProcess, start_server
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools

EV = "events.events.core.io"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("coreio-access")
    tokens = directory / "tokens.csv"
    tokens.write_text('tina-token,tina,tina-uid,"dev,qa"\n')
    audit = directory / "audit.log"
    process = start_server(
        directory / "data", ["--token-auth-file", str(tokens), "--audit-log-path", str(audit)]
    )
    try:
        yield process
    finally:
        process.stop()


def user_kubectl(kubectl: Path, server: ServerProcess, name: str, user: dict[str, str]) -> Kubectl:
    """kubectl with the server's kubeconfig, its admin credentials replaced by `user`'s."""
    return Kubectl(kubectl, server.user_kubeconfig(name, user))


@pytest.fixture(scope="module")
def tina(kubectl: Path, server: ServerProcess) -> Kubectl:
    """A token user (groups dev and qa)."""
    return user_kubectl(kubectl, server, "tina", {"token": "tina-token"})


@pytest.fixture(scope="module")
def carl(kubectl: Path, server: ServerProcess) -> Kubectl:
    """A certificate user (group ops) issued by the server's CA."""
    ca = pki.KeyPair.load(server.data_dir / "pki" / "ca.crt", server.data_dir / "pki" / "ca.key")
    cert, key = server.data_dir / "carl.crt", server.data_dir / "carl.key"
    pki.issue_client_certificate(ca, "carl", ("ops",)).save(cert, key)
    return user_kubectl(kubectl, server, "carl", {"client-certificate": str(cert), "client-key": str(key)})


def bind(server: ServerProcess, namespace: str, name: str, role: str, subject: dict[str, str]) -> None:
    body = rolebinding(name)
    body["roleRef"] = {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": role}
    body["subjects"] = [subject]
    created = Api(server).post(rb_path(namespace), body)
    assert created.status == 201
    wait_for_bindings(server, created.json["metadata"]["resourceVersion"])


def whoami(cli: Kubectl, *args: str) -> list[list[str]]:
    out = cli.run("auth", "whoami", *args).stdout
    return [line.split(None, 1) for line in out.splitlines()]


def test_whoami_for_a_token_user_a_certificate_user_and_an_impersonated_one(
    kubectl_cli: Kubectl, tina: Kubectl, carl: Kubectl
) -> None:
    assert whoami(tina) == [
        ["ATTRIBUTE", "VALUE"],
        ["Username", "tina"],
        ["UID", "tina-uid"],
        ["Groups", "[dev qa system:authenticated]"],
    ]
    assert whoami(carl) == [
        ["ATTRIBUTE", "VALUE"],
        ["Username", "carl"],
        ["Groups", "[ops system:authenticated]"],
    ]
    assert whoami(kubectl_cli, "--as", "bob", "--as-group", "g1", "--as-uid", "u1") == [
        ["ATTRIBUTE", "VALUE"],
        ["Username", "bob"],
        ["UID", "u1"],
        ["Groups", "[g1 system:authenticated]"],
    ]
    review = json.loads(
        kubectl_cli.run("auth", "whoami", "-o", "json", "--as", "system:serviceaccount:team:robot").stdout
    )
    assert (review["kind"], review["apiVersion"]) == ("SelfSubjectReview", "authentication.k8s.io/v1")
    assert review["status"]["userInfo"] == {
        "username": "system:serviceaccount:team:robot",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"],
    }


def test_impersonation_needs_the_right_to_it(
    kubectl_cli: Kubectl, tina: Kubectl, server: ServerProcess
) -> None:
    # Straight to the resource: kubectl's discovery reports a refusal as "unknown".
    refused = tina.run("get", "--raw", ev_path("team"), "--as", "alice", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): users "alice" is forbidden: User "tina" cannot impersonate resource'
        ' "users" in API group "" at the cluster scope'
    )
    # The admin may impersonate, and then has alice's rights, not its own.
    as_alice = kubectl_cli.run("get", EV, "-n", "team", "--as", "alice", check=False)
    assert as_alice.returncode == 1
    assert 'User "alice" cannot list resource "events" in API group "events.core.io"' in as_alice.stderr
    bind(server, "team", "alice-views", "view", {"kind": "User", "name": "alice"})
    assert kubectl_cli.run("get", EV, "-n", "team", "--as", "alice").returncode == 0
    # A group or uid without a user is upstream's plain-text 500.
    bare = Api(server)
    response = bare.get(ev_path("team"), headers={"Impersonate-Group": "g1"})
    assert response.status == 500
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.body == (
        b'Internal Server Error: "/apis/events.core.io/v1/namespaces/team/events": requested'
        b" [{Group  g1    }] without impersonating a user\n"
    )


def test_a_service_account_may_be_impersonated_with_a_namespaced_grant(
    kubectl_cli: Kubectl, tina: Kubectl, server: ServerProcess
) -> None:
    Api(server).post("/apis/events.core.io/v1/namespaces/ci/events", event("built", "ci"))
    impersonator = {"kind": "User", "name": "tina"}
    refused = tina.run("get", "--raw", ev_path("ci"), "--as", "system:serviceaccount:ci:builder", check=False)
    assert (
        'serviceaccounts "builder" is forbidden: User "tina" cannot impersonate resource "serviceaccounts"'
        in refused.stderr
    )
    # The default ClusterRole "edit" grants impersonate on serviceaccounts, as upstream's does.
    bind(server, "ci", "tina-edits", "edit", impersonator)
    bind(
        server,
        "ci",
        "builder-views",
        "view",
        {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
    )
    listed = tina.run("get", EV, "-n", "ci", "--as", "system:serviceaccount:ci:builder", "-o", "name")
    assert listed.stdout.split() == ["event.events.core.io/built"]


def test_can_i_answers_as_the_authorizer_decides(
    kubectl_cli: Kubectl, tina: Kubectl, carl: Kubectl, server: ServerProcess
) -> None:
    denied = carl.run("auth", "can-i", "list", EV, "-n", "ops", check=False)
    assert (denied.returncode, denied.stdout) == (1, "no\n")
    bind(server, "ops", "ops-view", "view", {"kind": "Group", "name": "ops"})
    assert carl.run("auth", "can-i", "list", EV, "-n", "ops").stdout == "yes\n"
    assert carl.run("auth", "can-i", "create", EV, "-n", "ops", check=False).stdout == "no\n"
    assert (
        kubectl_cli.run(
            "auth", "can-i", "delete", "rolebindings.rbac.authorization.core.io", "-n", "x"
        ).stdout
        == "yes\n"
    )
    assert (
        kubectl_cli.run("auth", "can-i", "list", EV, "-n", "ops", "--as", "carl", "--as-group", "ops").stdout
        == "yes\n"
    )
    assert (
        kubectl_cli.run("auth", "can-i", "list", EV, "-n", "ops", "--as", "carl", check=False).stdout
        == "no\n"
    )
    assert tina.run("auth", "can-i", "get", "/healthz").stdout == "yes\n"
    assert tina.run("auth", "can-i", "get", "/metrics", check=False).stdout == "no\n"


def can_i_list(cli: Kubectl, namespace: str) -> dict[str, list[str]]:
    """`kubectl auth can-i --list`: each row's resource (or its URLs) -> its verbs."""
    rows = [line.split() for line in cli.run("auth", "can-i", "--list", "-n", namespace).stdout.splitlines()]
    assert rows[0] == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    listed: dict[str, list[str]] = {}
    for row in rows[1:]:
        verbs = " ".join(row).split("[")[-1].rstrip("]").split()
        listed[row[0]] = verbs
    return listed


def test_can_i_list_shows_the_rules_in_the_namespace(carl: Kubectl, server: ServerProcess) -> None:
    bind(server, "lists", "ops-edit", "edit", {"kind": "Group", "name": "ops"})
    listed = can_i_list(carl, "lists")
    assert sorted(listed["events.events.core.io"]) == sorted(
        ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    )
    for review in (
        "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
    ):
        assert listed[review] == ["create"]
    assert listed["selfsubjectreviews.authentication.k8s.io"] == ["create"]
    assert listed["[/healthz]"] == listed["[/apis]"] == ["get"]
    # edit gives no RoleBindings (admin does), and nothing outside its namespace.
    assert "rolebindings.rbac.authorization.core.io" not in listed
    elsewhere = can_i_list(carl, "other")
    assert (
        "events.events.core.io" not in elsewhere and "selfsubjectreviews.authentication.k8s.io" in elsewhere
    )


def test_the_audit_names_the_requestor_and_the_impersonated_user(
    kubectl_cli: Kubectl, server: ServerProcess
) -> None:
    kubectl_cli.run("get", EV, "-n", "audited", "--as", "dora", "--as-group", "g9", check=False)
    audit = server.data_dir.parent / "audit.log"

    def impersonating_dora() -> list[dict[str, Any]]:
        events = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
        return [e for e in events if e.get("impersonatedUser", {}).get("username") == "dora"]

    found = wait_until(impersonating_dora, interval=0.1, message="an audit event with impersonatedUser dora")
    assert found[-1]["user"]["username"] == "coreio-admin"
    assert found[-1]["impersonatedUser"] == {"username": "dora", "groups": ["g9", "system:authenticated"]}
    assert found[-1]["responseStatus"]["code"] == 403


def test_the_self_reviews_are_in_discovery_and_kubectl_creates_them(
    kubectl_cli: Kubectl, carl: Kubectl
) -> None:
    listed = kubectl_cli.run(
        "api-resources", "--api-group=authorization.k8s.io", "-o", "wide", "--no-headers"
    ).stdout
    assert [line.split() for line in listed.splitlines()] == [
        ["selfsubjectaccessreviews", "authorization.k8s.io/v1", "false", "SelfSubjectAccessReview", "create"],
        ["selfsubjectrulesreviews", "authorization.k8s.io/v1", "false", "SelfSubjectRulesReview", "create"],
    ]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "delete", "group": "events.core.io", "resource": "events"}},
    }
    answered = json.loads(carl.run("create", "-f", "-", "-o", "json", input=json.dumps(review)).stdout)
    assert answered["status"] == {"allowed": False}
    assert answered["spec"] == review["spec"]
