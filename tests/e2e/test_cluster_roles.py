"""In a cluster, coreio's RBAC authorizer resolves the roleRefs of the RoleBindings it stores against
the cluster's own Roles and ClusterRoles, which it watches (`ClusterRoleSource`).

What decides is made unambiguous: the requests go straight to coreio (not through the aggregator,
where kube-apiserver would authorize first) with a token of a ServiceAccount that has no grant in
the cluster on coreio's groups. coreio's chain asks the cluster (SubjectAccessReview: not allowed)
and then its own RBAC, so a RoleBinding stored in coreio is the only thing that can let it in, and
the rules it grants are those of the cluster's ClusterRole as it is now.

Shares the session's control plane and aggregated coreio; keeps to a namespace of its own and
removes what it created in the cluster.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.aggregation import AggregatedCoreio
from tests.support.controlplane import ControlPlane
from tests.support.kubectl import EV, RB, event_yaml
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

NAMESPACE = "e2e-cluster-roles"
READER_ROLE = "e2e-events-reader"
MISSING_ROLE = "e2e-events-reader-not-yet"
# How long coreio may take to follow a change in the cluster (its watch) or in its own storage.
FOLLOW_TIMEOUT = 15.0


def _cluster_role(name: str, verbs: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["events.core.io"], "resources": ["events"], "verbs": verbs}],
    }


def _coreio_binding(name: str, role: str, service_account: str) -> dict[str, Any]:
    """A RoleBinding stored in coreio, of a ClusterRole of the cluster, to a ServiceAccount."""
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}],
    }


def _user(service_account: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{service_account}"


def _forbidden(service_account: str, verb: str, name: str = "", reason: str = "") -> str:
    subject = f'events.events.core.io "{name}"' if name else "events.events.core.io"
    message = (
        f'{subject} is forbidden: User "{_user(service_account)}" cannot {verb} resource "events" '
        f'in API group "events.core.io" in the namespace "{NAMESPACE}"'
    )
    return f"{message}: {reason}" if reason else message


class Direct:
    """Requests straight to coreio with a bearer token."""

    def __init__(self, coreio: AggregatedCoreio, token: str) -> None:
        self.coreio = coreio
        self.token = token

    def get(self, path: str) -> tuple[int, Any]:
        context = ssl.create_default_context(cafile=str(self.coreio.pki_dir / "ca.crt"))
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.coreio.server.port, context=context, timeout=30
        )
        try:
            connection.request(
                "GET", path, headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
            )
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            connection.close()

    def list_events(self) -> tuple[int, Any]:
        return self.get(f"/apis/events.core.io/v1/namespaces/{NAMESPACE}/events")

    def get_event(self, name: str) -> tuple[int, Any]:
        return self.get(f"/apis/events.core.io/v1/namespaces/{NAMESPACE}/events/{name}")


def _wait_for(
    call: Callable[[], tuple[int, Any]], status: int, timeout: float = FOLLOW_TIMEOUT
) -> tuple[Any, float]:
    """Calls until the answer has `status`; (its body, seconds it took)."""
    started = time.monotonic()
    answers: list[tuple[int, Any]] = []

    def answered() -> bool:
        answers[:] = [call()]
        return answers[0][0] == status

    wait_until(answered, timeout=timeout, interval=0.2, message=lambda: f"{status}, still {answers}")
    return answers[0][1], time.monotonic() - started


@pytest.fixture
def cluster_roles(aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane) -> Iterator[ControlPlane]:
    kc = control_plane
    kc.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    try:
        yield kc
    finally:
        kc.run("delete", RB, "--all", "-n", NAMESPACE, check=False)
        kc.run("delete", "clusterrole", READER_ROLE, MISSING_ROLE, "--ignore-not-found", check=False)


def test_coreio_rolebinding_grants_a_cluster_role_as_it_is_now(
    cluster_roles: ControlPlane, aggregated_coreio: AggregatedCoreio
) -> None:
    kc, coreio = cluster_roles, aggregated_coreio
    kc.apply(_cluster_role(READER_ROLE, ["get", "list"]))
    kc.run("create", "-f", "-", input=event_yaml("observed", NAMESPACE))
    bob = Direct(coreio, kc.create_token("bob", NAMESPACE))

    # Nothing grants bob anything on our groups yet: the cluster says no, and so does coreio.
    status, body = bob.list_events()
    assert (status, body["reason"], body["message"]) == (403, "Forbidden", _forbidden("bob", "list"))
    # Through the cluster, kube-apiserver refuses before coreio is asked (and it stays so: a
    # RoleBinding stored in coreio is no grant of the cluster's own RBAC).
    bob_kubeconfig = kc.user_kubeconfig(kc.directory / "bob.kubeconfig", token=bob.token)
    via_cluster = kc.run("--kubeconfig", str(bob_kubeconfig), "get", EV, "-n", NAMESPACE, check=False)
    assert via_cluster.returncode == 1
    assert via_cluster.stderr == (f"Error from server (Forbidden): {_forbidden('bob', 'list')}\n")

    # The RoleBinding, stored in coreio through the cluster (as the cluster's admin).
    created = kc.run("create", "-f", "-", input=json.dumps(_coreio_binding("bob-reads", READER_ROLE, "bob")))
    assert created.stdout == "rolebinding.rbac.authorization.core.io/bob-reads created\n"
    listed, granted_after = _wait_for(bob.list_events, 200)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["observed"]
    status, event = bob.get_event("observed")
    assert (status, event["note"]) == (200, "container started")
    # get and list, not watch.
    status, body = bob.get(
        f"/apis/events.core.io/v1/namespaces/{NAMESPACE}/events?watch=true&timeoutSeconds=1"
    )
    assert (status, body["message"]) == (403, _forbidden("bob", "watch"))
    # Only where the binding is.
    status, body = bob.get("/apis/events.core.io/v1/namespaces/default/events")
    assert status == 403 and 'in the namespace "default"' in body["message"]
    via_cluster = kc.run("--kubeconfig", str(bob_kubeconfig), "get", EV, "-n", NAMESPACE, check=False)
    assert via_cluster.returncode == 1 and "Forbidden" in via_cluster.stderr

    # The cluster's ClusterRole changes: coreio follows its watch; list goes, get stays.
    kc.apply(_cluster_role(READER_ROLE, ["get"]))
    body, revoked_after = _wait_for(bob.list_events, 403)
    assert body["message"] == _forbidden("bob", "list")
    status, event = bob.get_event("observed")
    assert status == 200, event
    # ... and comes back when the role does.
    kc.apply(_cluster_role(READER_ROLE, ["get", "list"]))
    _, regranted_after = _wait_for(bob.list_events, 200)

    # The ClusterRole deleted: the binding now grants nothing.
    kc.run("delete", "clusterrole", READER_ROLE)
    body, deleted_after = _wait_for(lambda: bob.get_event("observed"), 403)
    assert body["message"] == _forbidden(
        "bob", "get", "observed", f'RBAC: clusterrole.rbac.authorization.k8s.io "{READER_ROLE}" not found'
    )
    # ... which coreio reports against the binding it left dangling.
    warnings = wait_until(
        lambda: _warning_events(kc, "bob-reads"),
        timeout=FOLLOW_TIMEOUT,
        interval=0.2,
        message="a Warning Event regarding bob-reads",
    )
    assert [(w["reason"], w["note"]) for w in warnings] == [
        ("UnresolvableRoleRef", f'clusterrole.rbac.authorization.k8s.io "{READER_ROLE}" not found')
    ]
    print(
        f"coreio RoleBinding effective after {granted_after:.2f}s; ClusterRole edits followed after "
        f"{revoked_after:.2f}s (list dropped), {regranted_after:.2f}s (list back), "
        f"{deleted_after:.2f}s (deleted)"
    )


def _warning_events(kc: ControlPlane, binding: str) -> list[dict[str, Any]]:
    items = kc.json("get", EV, "-n", NAMESPACE)["items"]
    return [
        e
        for e in items
        if e["type"] == "Warning"
        and e["regarding"].get("kind") == "RoleBinding"
        and e["regarding"].get("name") == binding
    ]


def test_rolebinding_of_a_missing_cluster_role_warns_and_grants_nothing(
    cluster_roles: ControlPlane, aggregated_coreio: AggregatedCoreio
) -> None:
    kc, coreio = cluster_roles, aggregated_coreio
    carol = Direct(coreio, kc.create_token("carol", NAMESPACE))
    kc.run("create", "-f", "-", input=json.dumps(_coreio_binding("carol-reads", MISSING_ROLE, "carol")))
    binding = kc.json("get", RB, "carol-reads", "-n", NAMESPACE)

    # A Warning Event regarding the RoleBinding, in coreio's events.core.io.
    warnings = wait_until(
        lambda: _warning_events(kc, "carol-reads"),
        timeout=FOLLOW_TIMEOUT,
        interval=0.2,
        message="a Warning Event regarding carol-reads",
    )
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert warning["reason"] == "UnresolvableRoleRef"
    assert warning["note"] == f'clusterrole.rbac.authorization.k8s.io "{MISSING_ROLE}" not found'
    assert warning["reportingController"] == "coreio-rbac-authorizer"
    assert warning["action"] == "Authorize"
    assert warning["regarding"] == {
        "kind": "RoleBinding",
        "namespace": NAMESPACE,
        "name": "carol-reads",
        "apiVersion": "rbac.authorization.core.io/v1",
        "uid": binding["metadata"]["uid"],
        "resourceVersion": binding["metadata"]["resourceVersion"],
    }

    # It grants nothing; the 403 says why, as upstream's RBAC does.
    status, body = carol.list_events()
    assert status == 403
    assert body["message"] == _forbidden(
        "carol", "list", reason=f'RBAC: clusterrole.rbac.authorization.k8s.io "{MISSING_ROLE}" not found'
    )

    # Once the cluster has the ClusterRole, the binding resolves (coreio watched it arrive).
    kc.apply(_cluster_role(MISSING_ROLE, ["list"]))
    _, resolved_after = _wait_for(carol.list_events, 200)
    print(f"ClusterRole created in the cluster: binding effective after {resolved_after:.2f}s")
