"""`kubectl auth whoami`, `kubectl auth can-i` (and `--list`) and `--as` asked of a standalone coreio
and of the real kube-apiserver, for the same bindings: a ClusterRole that reads Events (coreio's on
one side, events.k8s.io's on the other) bound in one namespace to an impersonated user (ursula), to
a token user (the ServiceAccount bob) and to a certificate user's group (carl, group devs), the
bindings stored in coreio in its own group and in the cluster in upstream's. The answers must be
the same, group names aside (events.core.io against events.k8s.io).

Shares the session's control plane; keeps to a namespace of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from apiserver import pki
from tests.support.api import Api, rb_path
from tests.support.controlplane import ControlPlane
from tests.support.kubectl import Kubectl
from tests.support.metrics import wait_for_bindings
from tests.support.server import ServerProcess, start_server
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

NAMESPACE = "e2e-access"
VIEWER = "ursula"
REQUESTOR = f"system:serviceaccount:{NAMESPACE}:bob"  # may impersonate nobody on either side
CERT_USER, CERT_GROUP = "carl", "devs"


class Side:
    """kubectl against one server, as its admin, as bob (`bob`: a kubeconfig with bob's token
    only) or as carl (`carl`: a client certificate of the server's CA), and the group its Events
    are in."""

    def __init__(
        self, admin: Kubectl, users: dict[str, Kubectl], events: str, env: dict[str, str] | None = None
    ) -> None:
        self.admin = admin
        self.users = users
        self.events = events
        self.env = env

    def run(self, *args: str, bob: bool = False, user: str = "") -> tuple[int, str, str]:
        cli = self.users[user or "bob"] if bob or user else self.admin
        done = cli.run(*args, check=False, env=self.env)
        return done.returncode, done.stdout, done.stderr


ROLE = "e2e-events-reader"


def _reader_role(events_group: str) -> dict[str, object]:
    rule = {"apiGroups": [events_group], "resources": ["events"], "verbs": ["get", "list", "watch"]}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": ROLE},
        "rules": [rule],
    }


@pytest.fixture(scope="module")
def coreio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("coreio-access-diff")
    tokens = directory / "tokens.csv"
    groups = f"system:serviceaccounts,system:serviceaccounts:{NAMESPACE}"  # as the cluster's tokens give
    tokens.write_text(f'bob-token,{REQUESTOR},bob-uid,"{groups}"\n')
    roles = directory / "roles.yaml"
    roles.write_text(yaml.safe_dump(_reader_role("events.core.io")))
    process = start_server(
        directory / "data", ["--token-auth-file", str(tokens), "--authorization-roles-file", str(roles)]
    )
    try:
        yield process
    finally:
        process.stop()


def _binding(group: str) -> dict[str, object]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "ursula-views", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": ROLE},
        "subjects": [
            {"kind": "User", "name": VIEWER, "apiGroup": group},
            {"kind": "Group", "name": CERT_GROUP, "apiGroup": group},
            {"kind": "ServiceAccount", "name": "bob", "namespace": NAMESPACE},
        ],
    }


@pytest.fixture(scope="module")
def sides(control_plane: ControlPlane, coreio: ServerProcess, kubectl: Path) -> Iterator[tuple[Side, Side]]:
    """(kube-apiserver, coreio), each with the binding."""
    plane = control_plane
    token = plane.create_token("bob", NAMESPACE)
    plane.apply(_reader_role("events.k8s.io"), _binding("rbac.authorization.k8s.io"))
    created = Api(coreio).post(rb_path(NAMESPACE), _binding("rbac.authorization.core.io"))
    assert created.status == 201
    # Authorization follows the bindings as they are stored, on both sides: kube-apiserver's RBAC
    # through its informers, each of coreio's workers through its binding index.
    can_i = ("auth", "can-i", "list", "events.events.k8s.io", "-n", NAMESPACE, "--as", VIEWER)
    wait_until(
        lambda: plane.run(*can_i, check=False).stdout.strip() == "yes", message="kube-apiserver's RBAC"
    )
    wait_for_bindings(coreio, created.json["metadata"]["resourceVersion"])
    kube_bob = Kubectl(kubectl, plane.user_kubeconfig(plane.directory / "bob.kubeconfig", token=token))
    carl = pki.issue_client_certificate(plane.pki.ca, CERT_USER, (CERT_GROUP,))
    kube_carl = Kubectl(kubectl, plane.user_kubeconfig(plane.directory / "carl.kubeconfig", cert=carl))
    kube = Side(
        plane.kubectl, {"bob": kube_bob, "carl": kube_carl}, "events.events.k8s.io", plane.kubectl_env
    )
    # bob on coreio is the same service account: its token file names it; carl a certificate of
    # coreio's CA with the same name and group.
    our_bob = Kubectl(kubectl, coreio.user_kubeconfig("bob", {"token": "bob-token"}))
    ca = pki.KeyPair.load(coreio.ca_file, coreio.data_dir / "pki" / "ca.key")
    cert, key = coreio.data_dir / "carl.crt", coreio.data_dir / "carl.key"
    pki.issue_client_certificate(ca, CERT_USER, (CERT_GROUP,)).save(cert, key)
    carl_user = {"client-certificate": str(cert), "client-key": str(key)}
    our_carl = Kubectl(kubectl, coreio.user_kubeconfig("carl", carl_user))
    ours = Side(
        Kubectl(kubectl, coreio.kubeconfig), {"bob": our_bob, "carl": our_carl}, "events.events.core.io"
    )
    try:
        yield kube, ours
    finally:
        plane.run("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        plane.run("delete", "clusterrole", ROLE, "--ignore-not-found", check=False)


def test_whoami_of_an_impersonated_user_is_the_same(sides: tuple[Side, Side]) -> None:
    kube, ours = sides
    asked = ("auth", "whoami", "--as", VIEWER, "--as-group", "g1", "--as-uid", "u1")
    assert ours.run(*asked) == kube.run(*asked)
    service_account = ("auth", "whoami", "--as", f"system:serviceaccount:{NAMESPACE}:robot")
    assert ours.run(*service_account) == kube.run(*service_account)


def _identity(side: Side, user: str) -> list[str]:
    """whoami's Username and Groups rows (the UID and extras of the cluster's credentials, a
    ServiceAccount's uid and its token's id, are the cluster's own)."""
    code, out, err = side.run("auth", "whoami", user=user)
    assert (code, err) == (0, "")
    return [" ".join(line.split()) for line in out.splitlines() if line.startswith(("Username", "Groups"))]


@pytest.mark.parametrize("user", ["bob", "carl"])
def test_whoami_of_a_token_and_a_certificate_user_is_the_same(sides: tuple[Side, Side], user: str) -> None:
    kube, ours = sides
    assert _identity(ours, user) == _identity(kube, user)
    assert len(_identity(ours, user)) == 2


@pytest.mark.parametrize("user", ["bob", "carl"])
@pytest.mark.parametrize("verb", ["list", "create"])
def test_can_i_of_a_token_and_a_certificate_user_is_the_same(
    sides: tuple[Side, Side], user: str, verb: str
) -> None:
    kube, ours = sides
    for where in (NAMESPACE, "elsewhere"):
        theirs = kube.run("auth", "can-i", verb, kube.events, "-n", where, user=user)
        assert ours.run("auth", "can-i", verb, ours.events, "-n", where, user=user) == theirs
    assert kube.run("auth", "can-i", "list", kube.events, "-n", NAMESPACE, user=user)[1] == "yes\n"


@pytest.mark.parametrize("verb", ["get", "list", "watch", "create", "delete"])
def test_can_i_on_events_is_the_same(sides: tuple[Side, Side], verb: str) -> None:
    kube, ours = sides
    for where in (NAMESPACE, "elsewhere"):
        theirs = kube.run("auth", "can-i", verb, kube.events, "-n", where, "--as", VIEWER)
        assert ours.run("auth", "can-i", verb, ours.events, "-n", where, "--as", VIEWER) == theirs


def _rules(side: Side, *how: str, user: str = "") -> list[str]:
    """The rows of `can-i --list` that both servers can share: the self reviews, the non-resource
    URLs, and the Events (named by group, which differs)."""
    code, out, err = side.run("auth", "can-i", "--list", "-n", NAMESPACE, *how, user=user)
    assert (code, err) == (0, "")
    lines = [" ".join(line.split()) for line in out.splitlines()]
    kept = [line for line in lines if line.startswith(("Resources", "[", "selfsubject", side.events))]
    return [line.replace(side.events, "events") for line in kept]


def test_can_i_list_shows_the_same_rules(sides: tuple[Side, Side]) -> None:
    kube, ours = sides
    assert _rules(ours, "--as", VIEWER) == _rules(kube, "--as", VIEWER)
    for user in ("bob", "carl"):
        assert _rules(ours, user=user) == _rules(kube, user=user)


def test_impersonating_without_the_right_is_refused_alike(sides: tuple[Side, Side]) -> None:
    kube, ours = sides
    # Straight to the resource: kubectl's discovery reports any refusal as "unknown" (on both).
    path = f"/apis/{{}}/v1/namespaces/{NAMESPACE}/events"
    theirs = kube.run("get", "--raw", path.format("events.k8s.io"), "--as", VIEWER, bob=True)
    mine = ours.run("get", "--raw", path.format("events.core.io"), "--as", VIEWER, bob=True)
    assert mine == theirs
    assert theirs[0] == 1
    assert f'users "{VIEWER}" is forbidden: User "{REQUESTOR}" cannot impersonate resource "users"' in mine[2]


@pytest.mark.parametrize("group_version", ["authorization.k8s.io/v1", "authentication.k8s.io/v1"])
def test_the_self_reviews_are_discovered_alike(sides: tuple[Side, Side], group_version: str) -> None:
    kube, ours = sides

    def reviews(side: Side) -> list[object]:
        code, out, _ = side.run("get", "--raw", f"/apis/{group_version}")
        assert code == 0
        return [r for r in json.loads(out)["resources"] if r["name"].startswith("selfsubject")]

    assert reviews(ours) == reviews(kube)
