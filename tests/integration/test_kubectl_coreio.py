"""`kubectl coreio` (the plugin this package installs as `kubectl-coreio`) through the real kubectl
against a standalone server: who-can, why and bindings [--problems] as tables and as JSON/YAML, on
bindings with and without problems, each caller seeing only what it may list; and the access
reviews' own errors.

The users (a token file): tina (groups dev, qa) reads Events in shop; nadia administers shop; lena
may only list RoleBindings in shop (a Role of the roles file); otto has nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.rbac.roles import DISCOVERY_RULES
from tests.support.api import Api, rb_path, rolebinding
from tests.support.metrics import wait_for_bindings
from tests.support.plugin import MASTERS_ROW, Plugin, rows
from tests.support.server import ServerProcess, start_server

pytestmark = pytest.mark.tools

SHOP, OTHER = "shop", "other"
DISCOVERY_URLS = DISCOVERY_RULES[0].non_resource_urls
EV = "events.events.core.io"
LISTER_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {"name": "binding-lister", "namespace": SHOP},
    "rules": [
        {"apiGroups": ["rbac.authorization.core.io"], "resources": ["rolebindings"], "verbs": ["list"]}
    ],
}
USERS = {"tina": "dev,qa", "nadia": "", "lena": "", "otto": ""}


def _bindings() -> list[tuple[str, dict[str, Any]]]:
    def ref(kind: str, name: str) -> dict[str, str]:
        return {"apiGroup": "rbac.authorization.core.io", "kind": kind, "name": name}

    return [
        (
            SHOP,
            rolebinding(
                "team-view",
                roleRef=ref("ClusterRole", "view"),
                subjects=[
                    {"kind": "User", "name": "tina"},
                    {"kind": "Group", "name": "qa"},
                    {"kind": "ServiceAccount", "name": "robot"},
                ],
            ),
        ),
        (
            SHOP,
            rolebinding(
                "shop-admin",
                roleRef=ref("ClusterRole", "admin"),
                subjects=[{"kind": "User", "name": "nadia"}],
            ),
        ),
        (
            SHOP,
            rolebinding(
                "listers", roleRef=ref("Role", "binding-lister"), subjects=[{"kind": "User", "name": "lena"}]
            ),
        ),
        # Part 7: a roleRef that does not resolve, and a User subject with a namespace.
        (
            SHOP,
            rolebinding(
                "broken",
                roleRef=ref("ClusterRole", "no-such-role"),
                subjects=[
                    {"kind": "User", "name": "tina", "namespace": SHOP},
                ],
            ),
        ),
        (
            OTHER,
            rolebinding(
                "other-view", roleRef=ref("ClusterRole", "view"), subjects=[{"kind": "User", "name": "otto"}]
            ),
        ),
        (
            OTHER,
            rolebinding("stale", roleRef=ref("Role", "gone"), subjects=[{"kind": "User", "name": "otto"}]),
        ),
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("kubectl-coreio")
    tokens = directory / "tokens.csv"
    tokens.write_text(
        "".join(f'{name}-token,{name},{name}-uid,"{groups}"\n' for name, groups in USERS.items())
    )
    roles = directory / "roles.yaml"
    roles.write_text(yaml.safe_dump(LISTER_ROLE))
    process = start_server(
        directory / "data", ["--token-auth-file", str(tokens), "--authorization-roles-file", str(roles)]
    )
    try:
        api = Api(process)
        for namespace, body in _bindings():
            assert api.post(rb_path(namespace), body).status == 201
        wait_for_bindings(process)  # the authorizer's binding index follows the store's watch
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(kubectl: Path, server: ServerProcess) -> Plugin:
    return Plugin(kubectl, server.kubeconfig)


@pytest.fixture(scope="module")
def users(kubectl: Path, server: ServerProcess) -> dict[str, Plugin]:
    return {name: Plugin(kubectl, server.user_kubeconfig(name, {"token": f"{name}-token"})) for name in USERS}


# ----------------------------------------------------------------------------- who-can


def test_who_can_lists_every_subject_with_its_binding_role_and_rule(admin: Plugin) -> None:
    code, out, err = admin.run("who-can", "list", "events", "-n", SHOP)
    assert code == 0, err
    rule = f"[get list watch] {EV}"
    assert rows(out) == [
        ["SUBJECT", "KIND", "BINDING", "ROLE", "RULE"],
        MASTERS_ROW,
        ["nadia", "User", "RoleBinding/shop-admin", "ClusterRole/admin", _admin_rule(admin)],
        ["tina", "User", "RoleBinding/team-view", "ClusterRole/view", rule],
        ["qa", "Group", "RoleBinding/team-view", "ClusterRole/view", rule],
        ["shop/robot", "ServiceAccount", "RoleBinding/team-view", "ClusterRole/view", rule],
    ]
    # The binding that grants nothing is named, as the authorizer reports it.
    assert err == (
        'Warning: bindings that grant nothing: RoleBinding "shop/broken": '
        '[clusterrole.rbac.authorization.k8s.io "no-such-role" not found, '
        'subjects[0]: User "tina" is not namespaced, but namespace is "shop"]\n'
    )


def _admin_rule(admin: Plugin) -> str:
    """The first rule of ClusterRole admin that lets its holders list Events (from the answer)."""
    answer = admin.json("who-can", "list", "events", "-n", SHOP)
    (nadia,) = [s for s in answer["status"]["subjects"] if s["name"] == "nadia"]
    verbs = " ".join(nadia["rule"]["verbs"])
    assert "list" in nadia["rule"]["verbs"] and "events.core.io" in nadia["rule"]["apiGroups"]
    return f"[{verbs}] " + ",".join(
        f"{r}.{g}" if g else r for g in nadia["rule"]["apiGroups"] for r in nadia["rule"]["resources"]
    )


def test_who_can_answers_in_json_and_yaml(admin: Plugin) -> None:
    answer = admin.json("who-can", "get", f"{EV}/web-0", "-n", SHOP)
    assert answer["kind"] == "ResourceAccessReview"
    assert answer["spec"] == {
        "resourceAttributes": {
            "verb": "get",
            "group": "events.core.io",
            "resource": "events",
            "name": "web-0",
            "namespace": SHOP,
        }
    }
    robot = answer["status"]["subjects"][-1]
    assert robot == {
        "kind": "ServiceAccount",
        "name": "robot",
        "namespace": SHOP,
        "grantedBy": {"kind": "RoleBinding", "name": "team-view", "namespace": SHOP},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "rule": {"verbs": ["get", "list", "watch"], "apiGroups": ["events.core.io"], "resources": ["events"]},
    }
    assert answer["status"]["incomplete"] is False
    assert yaml.safe_load(admin.ok("who-can", "get", f"{EV}/web-0", "-n", SHOP, "-o", "yaml")) == answer


def test_who_can_resolves_names_as_kubectl_does(admin: Plugin) -> None:
    by_plural = admin.json("who-can", "delete", "rolebindings", "-n", SHOP)
    by_kind = admin.json("who-can", "delete", "RoleBinding.rbac.authorization.core.io", "-n", SHOP)
    assert by_plural["spec"] == by_kind["spec"]
    assert by_plural["spec"]["resourceAttributes"]["group"] == "rbac.authorization.core.io"
    assert [s["name"] for s in by_plural["status"]["subjects"]] == ["system:masters", "nadia"]
    code, _, err = admin.run("who-can", "get", "widgets", "-n", SHOP)
    assert code == 0
    assert err.splitlines()[0] == "Warning: the server doesn't have a resource type 'widgets'"


# ----------------------------------------------------------------------------- why


def test_why_shows_the_chain_and_the_binding_that_grants_nothing(admin: Plugin) -> None:
    code, out, err = admin.run("why", "tina", "create", "events", "-n", SHOP)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"denied: tina create {EV} in namespace {SHOP}"
    assert rows("\n".join(lines[2:6])) == [
        ["AUTHORIZER", "ROLEBINDING", "ROLE", "DECISION", "REASON"],
        ["PrivilegedGroups", "<none>", "<none>", "NoOpinion", 'not in group "system:masters"'],
        [
            "DefaultClusterRoleBindings",
            "<none>",
            "<none>",
            "NoOpinion",
            "no default ClusterRoleBinding allows it",
        ],
        [
            "RBAC",
            "broken",
            "ClusterRole/no-such-role",
            "Error",
            'grants nothing: [clusterrole.rbac.authorization.k8s.io "no-such-role" not found, '
            'subjects[0]: User "tina" is not namespaced, but namespace is "shop"]',
        ],
    ]
    assert rows(lines[6]) == [
        ["RBAC", "team-view", "ClusterRole/view", "NoOpinion", 'no rule of ClusterRole "view" allows it']
    ]
    assert lines[7:] == ["", f"2 other RoleBinding(s) in {SHOP} name neither tina nor its groups"]


def test_why_names_the_binding_that_allows(admin: Plugin) -> None:
    answer = admin.json("why", "quinn", "watch", EV, "-n", SHOP, "--group", "qa")
    status = answer["status"]
    assert status["allowed"] is True
    assert (
        status["reason"]
        == 'RBAC: allowed by RoleBinding "team-view/shop" of ClusterRole "view" to Group "qa"'
    )
    (allowing,) = [d for d in status["decisions"] if d["decision"] == "Allow"]
    assert allowing["subject"] == {"kind": "Group", "apiGroup": "rbac.authorization.core.io", "name": "qa"}
    assert allowing["rule"]["verbs"] == ["get", "list", "watch"]
    out = admin.ok("why", "quinn", "watch", EV, "-n", SHOP, "--group", "qa")
    assert out.splitlines()[:2] == [
        f"allowed: quinn watch {EV} in namespace {SHOP}",
        f"reason: {status['reason']}",
    ]


def test_why_a_service_account_gets_its_groups(admin: Plugin) -> None:
    status = admin.json("why", f"system:serviceaccount:{SHOP}:robot", "get", EV, "-n", SHOP)["status"]
    assert status["allowed"] is True
    assert status["reason"].endswith('to ServiceAccount "robot/shop"')


def test_a_non_resource_url_is_answered_by_the_default_bindings(admin: Plugin) -> None:
    code, out, err = admin.run("who-can", "get", "/healthz", "-n", SHOP)
    assert (code, err) == (0, "")
    masters = ["Group", "ClusterRoleBinding/cluster-admin", "ClusterRole/cluster-admin", "[*] *"]
    discovery = ["Group", "ClusterRoleBinding/system:discovery", "ClusterRole/system:discovery"]
    public = [
        "Group",
        "ClusterRoleBinding/system:public-info-viewer",
        "ClusterRole/system:public-info-viewer",
    ]
    public_urls = "[get] /healthz,/livez,/readyz,/version,/version/"
    assert rows(out) == [
        ["SUBJECT", "KIND", "BINDING", "ROLE", "RULE"],
        ["system:masters", *masters],
        ["system:authenticated", *discovery, "[get] " + ",".join(DISCOVERY_URLS)],
        ["system:authenticated", *public, public_urls],
        ["system:unauthenticated", *public, public_urls],
    ]
    why = admin.ok("why", "tina", "get", "/metrics")
    assert why.splitlines()[0] == "denied: tina get /metrics"
    assert admin.json("why", "tina", "get", "/version")["status"]["reason"] == (
        'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group'
        ' "system:authenticated"'
    )


# ----------------------------------------------------------------------------- bindings


def test_bindings_with_problems_are_named_with_why(admin: Plugin) -> None:
    code, out, err = admin.run("bindings", "--problems")
    assert (code, err) == (0, "")
    assert rows(out) == [
        ["NAMESPACE", "NAME", "REASON", "MESSAGE"],
        [OTHER, "stale", "UnresolvableRoleRef", 'role.rbac.authorization.k8s.io "gone" not found'],
        [
            SHOP,
            "broken",
            "UnresolvableRoleRef",
            'clusterrole.rbac.authorization.k8s.io "no-such-role" not found',
        ],
        [
            SHOP,
            "broken",
            "NamespacedSubject",
            'subjects[0]: User "tina" is not namespaced, but namespace is "shop"',
        ],
    ]


def test_bindings_lists_every_binding_with_its_problems(admin: Plugin) -> None:
    table = rows(admin.ok("bindings", "-n", SHOP))
    assert table[0] == ["NAMESPACE", "NAME", "ROLE", "SUBJECTS", "PROBLEMS"]
    assert table[1:] == [
        [SHOP, "broken", "ClusterRole/no-such-role", "User/tina", "UnresolvableRoleRef,NamespacedSubject"],
        [SHOP, "listers", "Role/binding-lister", "User/lena", "<none>"],
        [SHOP, "shop-admin", "ClusterRole/admin", "User/nadia", "<none>"],
        [SHOP, "team-view", "ClusterRole/view", "User/tina,Group/qa,ServiceAccount/shop/robot", "<none>"],
    ]
    review = admin.json("bindings", "-n", OTHER, "--problems")
    assert review["status"]["roleBindings"] == [
        {
            "namespace": OTHER,
            "name": "stale",
            "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "gone"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.core.io", "name": "otto"}],
            "problems": [
                {
                    "reason": "UnresolvableRoleRef",
                    "message": 'role.rbac.authorization.k8s.io "gone" not found',
                }
            ],
        }
    ]


# ----------------------------------------------------------------------------- the caller's own rights


def _forbidden(user: str, verb: str, resource: str, group: str, namespace: str) -> str:
    where = f'in API group "{group}" in the namespace "{namespace}"'
    return f'User "{user}" cannot {verb} resource "{resource}" {where}'


def test_a_caller_who_may_not_list_bindings_is_refused(users: dict[str, Plugin]) -> None:
    code, out, err = users["tina"].run("who-can", "list", "events", "-n", SHOP)
    assert (code, out) == (1, "")
    assert err.startswith(
        "Error from server (Forbidden): rolebindings.rbac.authorization.core.io is forbidden: "
        + _forbidden("tina", "list", "rolebindings", "rbac.authorization.core.io", SHOP)
    )
    assert len(err.splitlines()) == 1


def test_impersonation_through_the_plugin_is_the_impersonated_users_rights(admin: Plugin) -> None:
    code, _, err = admin.run("who-can", "list", "events", "-n", SHOP, "--as", "tina", "--as-group", "dev")
    assert code == 1
    assert _forbidden("tina", "list", "rolebindings", "rbac.authorization.core.io", SHOP) in err


def test_a_namespace_admin_sees_only_its_namespace(users: dict[str, Plugin]) -> None:
    nadia = users["nadia"]
    assert [s["name"] for s in nadia.json("who-can", "get", EV, "-n", SHOP)["status"]["subjects"]][
        -1
    ] == "robot"
    code, _, err = nadia.run("who-can", "get", EV, "-n", OTHER)
    assert (
        code == 1 and _forbidden("nadia", "list", "rolebindings", "rbac.authorization.core.io", OTHER) in err
    )
    # Every namespace, as far as nadia may list: shop's bindings, not other's.
    listed = nadia.json("bindings")["status"]["roleBindings"]
    assert {b["namespace"] for b in listed} == {SHOP}
    # Asking about someone else needs what upstream's LocalSubjectAccessReview needs; admin has it.
    assert nadia.json("why", "tina", "get", EV, "-n", SHOP)["status"]["allowed"] is True


def test_asking_why_about_someone_else_needs_local_subject_access_reviews(users: dict[str, Plugin]) -> None:
    lena = users["lena"]
    code, _, err = lena.run("why", "tina", "get", EV, "-n", SHOP)
    assert code == 1
    assert _forbidden("lena", "create", "localsubjectaccessreviews", "authorization.k8s.io", SHOP) in err
    # About herself she may ask, and may list the bindings.
    assert lena.json("why", "lena", "get", EV, "-n", SHOP)["status"]["allowed"] is False
    assert [
        s["name"] for s in lena.json("who-can", "list", "rolebindings", "-n", SHOP)["status"]["subjects"]
    ] == [
        "system:masters",
        "lena",
        "nadia",
    ]


def test_a_caller_with_nothing_sees_no_binding(users: dict[str, Plugin]) -> None:
    code, out, err = users["otto"].run("bindings", "--problems")
    assert (code, out) == (0, "")
    assert err == "No problems found in any namespace you may list.\n"


# ----------------------------------------------------------------------------- mistakes


def test_command_line_mistakes_are_one_line(admin: Plugin, tmp_path: Path) -> None:
    code, out, err = admin.run("who-can", "list")
    assert (code, out) == (1, "")
    assert (
        err == "error: the following arguments are required: TYPE[/NAME]|URL (see 'kubectl coreio --help')\n"
    )
    code, _, err = admin.run("bindings", "-n", SHOP, "-A")
    assert (code, err) == (1, "error: a namespace (-n) and all namespaces (-A) cannot both be asked for\n")
    code, _, err = admin.run("who-can", "get", "events", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 1 and err.startswith("error: cannot load the kubeconfig: ") and len(err.splitlines()) == 1


def test_the_reviews_refuse_bad_input_with_a_status(server: ServerProcess) -> None:
    api = Api(server)
    path = f"/apis/rbac.authorization.core.io/v1/namespaces/{SHOP}/resourceaccessreviews"
    missing = api.post(
        path, {"kind": "ResourceAccessReview", "spec": {"resourceAttributes": {"verb": "get"}}}
    )
    assert missing.status == 422
    body = missing.json
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value",
            "field": "spec.resourceAttributes.resource",
        }
    ]
    elsewhere = api.post(path, {"metadata": {"namespace": OTHER}, "spec": {}})
    assert (elsewhere.status, elsewhere.json["reason"]) == (400, "BadRequest")
    who = f"/apis/rbac.authorization.core.io/v1/namespaces/{SHOP}/accessexplanations"
    nobody = api.post(who, {"spec": {"resourceAttributes": {"verb": "get", "resource": "events"}}})
    assert nobody.status == 422 and nobody.json["details"]["causes"][0]["field"] == "spec.user"
    assert api.get(path).status == 405
