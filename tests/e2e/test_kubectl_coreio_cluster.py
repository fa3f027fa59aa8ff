"""`kubectl coreio` in a cluster: the plugin talks to the real kube-apiserver, which authorizes the
review with its own RBAC (the ClusterRole coreio:access-reviewer lets every user create one) and
proxies it to coreio. Roles come from the cluster, bindings from coreio; the caller's right to list
RoleBindings is the cluster's answer (delegated SubjectAccessReview), and `why` shows the cluster's
own decision for the user it explains.

The users are ServiceAccounts of the namespace, with tokens: carol may list coreio's RoleBindings
there by a Role and RoleBinding of the cluster; dave may not; reader is what coreio's binding grants.
Shares the session's control plane and aggregated coreio; keeps to a namespace of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.aggregation import AggregatedCoreio
from tests.support.controlplane import ControlPlane
from tests.support.metrics import wait_for_bindings
from tests.support.plugin import MASTERS_ROW, Plugin, rows
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

NAMESPACE = "e2e-plugin"
READER_ROLE = "e2e-plugin-events-reader"
LISTER = "e2e-plugin-binding-lister"
EV = "events.events.core.io"
RB = "rolebindings.rbac.authorization.core.io"
RBAC_V1 = "rbac.authorization.k8s.io/v1"


def _service_account(name: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{name}"


def _cluster_objects() -> list[dict[str, Any]]:
    """A ClusterRole coreio's binding refers to, and carol's right (in the cluster) to list coreio's
    RoleBindings in the namespace."""
    reads = {"apiGroups": ["events.core.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]}
    lists = {"apiGroups": ["rbac.authorization.core.io"], "resources": ["rolebindings"], "verbs": ["list"]}
    meta = {"name": LISTER, "namespace": NAMESPACE}
    return [
        {"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": {"name": READER_ROLE}, "rules": [reads]},
        {"apiVersion": RBAC_V1, "kind": "Role", "metadata": meta, "rules": [lists]},
        {
            "apiVersion": RBAC_V1,
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": LISTER},
            "subjects": [{"kind": "ServiceAccount", "name": "carol", "namespace": NAMESPACE}],
        },
    ]


def _coreio_binding(name: str, role: str, subject: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }


@pytest.fixture(scope="module")
def plugins(
    control_plane: ControlPlane, aggregated_coreio: AggregatedCoreio, kubectl: Path
) -> Iterator[dict[str, Plugin]]:
    plane = control_plane
    tokens = {name: plane.create_token(name, NAMESPACE) for name in ("carol", "dave", "reader")}
    plane.apply(
        *_cluster_objects(),
        _coreio_binding("readers", READER_ROLE, {"kind": "ServiceAccount", "name": "reader"}),
        _coreio_binding("broken", "e2e-plugin-no-such-role", {"kind": "User", "name": "erin"}),
    )
    found = {"admin": Plugin(kubectl, plane.kubeconfig, plane.kubectl_env)}
    for name, token in tokens.items():
        path = plane.user_kubeconfig(plane.directory / f"plugin-{name}.kubeconfig", token=token)
        found[name] = Plugin(kubectl, path, plane.kubectl_env)
    try:
        _settled(plane, aggregated_coreio, found["admin"])
        yield found
    finally:
        plane.run("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        plane.run("delete", "clusterrole", READER_ROLE, "--ignore-not-found", check=False)


def _settled(plane: ControlPlane, coreio: AggregatedCoreio, admin: Plugin) -> None:
    """Until what was stored is followed, each by its watches: the cluster's RBAC (carol's right,
    asked first: coreio would keep the cluster's early "no" for a while), coreio's binding index
    and coreio's view of the cluster's roles."""
    carol_lists = ("auth", "can-i", "list", RB, "-n", NAMESPACE, "--as", _service_account("carol"))
    wait_until(lambda: plane.run(*carol_lists, check=False).stdout.strip() == "yes", message="carol's right")
    stored = plane.json("get", RB, "-n", NAMESPACE)["items"]
    wait_for_bindings(coreio.server, max(int(item["metadata"]["resourceVersion"]) for item in stored))
    reader = ("why", _service_account("reader"), "list", EV, "-n", NAMESPACE)
    wait_until(lambda: admin.json(*reader)["status"]["allowed"], message=f"coreio to know {READER_ROLE}")


def test_who_can_through_the_cluster_uses_the_clusters_roles(plugins: dict[str, Plugin]) -> None:
    code, out, err = plugins["admin"].run("who-can", "get", EV, "-n", NAMESPACE)
    assert code == 0, err
    assert rows(out) == [
        ["SUBJECT", "KIND", "BINDING", "ROLE", "RULE"],
        MASTERS_ROW,
        [
            f"{NAMESPACE}/reader",
            "ServiceAccount",
            "RoleBinding/readers",
            f"ClusterRole/{READER_ROLE}",
            f"[get list watch] {EV}",
        ],
    ]
    warnings = err.splitlines()
    assert warnings[0] == (
        f'Warning: bindings that grant nothing: RoleBinding "{NAMESPACE}/broken": '
        'clusterrole.rbac.authorization.k8s.io "e2e-plugin-no-such-role" not found'
    )
    # coreio cannot list what the cluster's own bindings allow, and says so.
    assert warnings[1].startswith("Warning: in a cluster, subjects the cluster's own bindings allow")


def test_a_caller_sees_what_the_cluster_lets_it_list(plugins: dict[str, Plugin]) -> None:
    carol = plugins["carol"].json("who-can", "get", EV, "-n", NAMESPACE)
    assert carol["status"]["incomplete"] is True
    assert [s["name"] for s in carol["status"]["subjects"]] == ["system:masters", "reader"]
    code, out, err = plugins["dave"].run("who-can", "get", EV, "-n", NAMESPACE)
    assert (code, out) == (1, "")
    assert err.startswith(
        "Error from server (Forbidden): rolebindings.rbac.authorization.core.io is forbidden: "
        f'User "{_service_account("dave")}" cannot list resource "rolebindings" in API group '
        f'"rbac.authorization.core.io" in the namespace "{NAMESPACE}"'
    )


def test_why_shows_the_clusters_decision_and_coreios_bindings(plugins: dict[str, Plugin]) -> None:
    admin = plugins["admin"]
    reader = admin.json("why", _service_account("reader"), "list", EV, "-n", NAMESPACE)["status"]
    steps = [(d["authorizer"], d.get("roleBinding", ""), d["decision"]) for d in reader["decisions"]]
    assert steps == [
        ("PrivilegedGroups", "", "NoOpinion"),
        ("SubjectAccessReview", "", "NoOpinion"),
        ("RBAC", "readers", "Allow"),
    ]
    assert reader["allowed"] is True
    assert reader["reason"] == (
        f'RBAC: allowed by RoleBinding "readers/{NAMESPACE}" of ClusterRole "{READER_ROLE}" to '
        f'ServiceAccount "reader/{NAMESPACE}"'
    )
    # carol's right comes from the cluster: its RBAC's own reason, through the SubjectAccessReview.
    carol = admin.json("why", _service_account("carol"), "list", "rolebindings", "-n", NAMESPACE)["status"]
    (delegated,) = [d for d in carol["decisions"] if d["authorizer"] == "SubjectAccessReview"]
    assert delegated["decision"] == "Allow"
    assert delegated["reason"] == (
        f'RBAC: allowed by RoleBinding "{LISTER}/{NAMESPACE}" of Role "{LISTER}" to '
        f'ServiceAccount "carol/{NAMESPACE}"'
    )


def test_bindings_with_problems_in_the_cluster(plugins: dict[str, Plugin]) -> None:
    code, out, err = plugins["admin"].run("bindings", "--problems", "-n", NAMESPACE)
    assert (code, err) == (0, "")
    assert rows(out) == [
        ["NAMESPACE", "NAME", "REASON", "MESSAGE"],
        [
            NAMESPACE,
            "broken",
            "UnresolvableRoleRef",
            'clusterrole.rbac.authorization.k8s.io "e2e-plugin-no-such-role" not found',
        ],
    ]
    # carol may list this namespace's bindings only: across namespaces she sees these alone.
    listed = plugins["carol"].json("bindings")["status"]["roleBindings"]
    assert sorted(b["name"] for b in listed) == ["broken", "readers"]
