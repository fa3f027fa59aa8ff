"""The audit log as a policy file shapes it (--audit-policy-file), seen through the real kubectl
against a standalone server: each request at its rule's level (None: not logged), each stage but
the ones omitted, bodies only at Request and RequestResponse and without managedFields, a watch's
ResponseStarted, a refused request's Status and the authorizer's word; and a policy that cannot be
used stops the server with one line."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.api import Api
from tests.support.auditlog import logged_events
from tests.support.kubectl import RB, Kubectl, rolebinding_yaml
from tests.support.server import ServerProcess, start_server
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools

NAMESPACE = "audited"
POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitManagedFields": True,
    "rules": [
        # Discovery and OpenAPI, which kubectl reads first: not logged.
        {"level": "None", "nonResourceURLs": ["/api*", "/openapi*", "/version"]},
        {
            "level": "RequestResponse",
            "verbs": ["create", "get"],
            "resources": [{"group": "rbac.authorization.core.io", "resources": ["rolebindings"]}],
        },
        {"level": "Request", "verbs": ["list"], "omitStages": ["RequestReceived"]},
        {"level": "Metadata", "verbs": ["watch"]},
        {"level": "Metadata", "users": ["tina"]},
    ],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("coreio-audit")
    tokens = directory / "tokens.csv"
    tokens.write_text("tina-token,tina,tina-uid\n")
    policy = directory / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    args = ["--token-auth-file", str(tokens), "--audit-log-path", str(directory / "audit.log")]
    process = start_server(directory / "data", [*args, "--audit-policy-file", str(policy)])
    try:
        yield process
    finally:
        process.stop()


def events(server: ServerProcess, **fields: str) -> list[dict[str, Any]]:
    """The audit log's events whose top-level fields (and objectRef's name, as `name`) are `fields`."""
    path = server.data_dir.parent / "audit.log"
    found = []
    for event in logged_events(path):
        wanted = dict(fields)
        name = wanted.pop("name", None)
        if name is not None and event.get("objectRef", {}).get("name") != name:
            continue
        if all(event.get(key) == value for key, value in wanted.items()):
            found.append(event)
    return found


def settled(server: ServerProcess, count: int, **fields: str) -> list[dict[str, Any]]:
    """The events matching `fields`, once there are `count` (the last is written as the answer goes)."""

    def enough() -> list[dict[str, Any]] | None:
        found = events(server, **fields)
        return found if len(found) >= count else None

    return wait_until(enough, timeout=10, message=f"{count} audit events with {fields}")


def test_a_create_at_request_response_keeps_both_bodies_without_managed_fields(
    kubectl_cli: Kubectl, server: ServerProcess
) -> None:
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("created", NAMESPACE))
    (complete,) = settled(server, 1, verb="create", name="created")
    (received,) = events(server, verb="create", stage="RequestReceived", auditID=complete["auditID"])
    assert (received["stage"], complete["stage"]) == ("RequestReceived", "ResponseComplete")
    assert received["level"] == complete["level"] == "RequestResponse"
    assert received["auditID"] == complete["auditID"]
    # The body is read once the request is under way: RequestReceived has none (as upstream).
    assert "requestObject" not in received and "responseObject" not in received
    assert complete["requestObject"]["metadata"]["name"] == "created"
    assert complete["requestObject"]["subjects"] == [{"kind": "User", "name": "alice"}]
    response = complete["responseObject"]
    assert response["metadata"]["name"] == "created" and response["metadata"]["uid"]
    assert "managedFields" not in response["metadata"]
    # What kubectl got back does carry them: only the audit log drops them.
    assert kubectl_cli.json("get", RB, "created", "-n", NAMESPACE, "--show-managed-fields")["metadata"][
        "managedFields"
    ]
    assert complete["responseStatus"]["code"] == 201
    assert complete["user"]["groups"] == ["system:masters", "system:authenticated"]
    assert complete["annotations"]["authorization.k8s.io/decision"] == "allow"


def test_a_get_logs_the_answer_and_a_list_only_the_request(
    kubectl_cli: Kubectl, server: ServerProcess
) -> None:
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("read", NAMESPACE))
    kubectl_cli.run("get", RB, "read", "-n", NAMESPACE, "-o", "json")
    got = settled(server, 2, verb="get", name="read")
    assert [e["stage"] for e in got] == ["RequestReceived", "ResponseComplete"]
    assert got[1]["responseObject"]["metadata"]["name"] == "read"
    assert "managedFields" not in got[1]["responseObject"]["metadata"]
    assert "requestObject" not in got[1]  # a GET has no body

    kubectl_cli.run("get", RB, "-n", NAMESPACE)
    (listed,) = settled(server, 1, verb="list")
    # RequestReceived omitted by the rule; no answer kept at level Request.
    assert (listed["stage"], listed["level"]) == ("ResponseComplete", "Request")
    assert "responseObject" not in listed and "requestObject" not in listed
    assert listed["objectRef"] == {
        "resource": "rolebindings",
        "namespace": NAMESPACE,
        "apiGroup": "rbac.authorization.core.io",
        "apiVersion": "v1",
    }


def test_a_watch_is_started_then_completed(kubectl_cli: Kubectl, server: ServerProcess) -> None:
    kubectl_cli.run("get", RB, "-n", NAMESPACE, "--watch-only", "--request-timeout=2s", check=False)
    watched = settled(server, 3, verb="watch")
    assert [e["stage"] for e in watched] == ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    assert {e["level"] for e in watched} == {"Metadata"}
    assert watched[1]["responseStatus"]["code"] == 200
    assert all("responseObject" not in e for e in watched)


def test_a_refused_request_logs_its_status_and_the_authorizers_word(
    kubectl: Path, server: ServerProcess
) -> None:
    tina = Kubectl(kubectl, server.user_kubeconfig("tina", {"token": "tina-token"}))
    result = tina.run("delete", RB, "anything", "-n", NAMESPACE, check=False)
    assert "Forbidden" in result.stderr
    received, complete = settled(server, 2, verb="delete", name="anything")
    assert received["user"]["username"] == "tina" and received["level"] == "Metadata"
    assert complete["responseStatus"]["code"] == 403
    assert complete["responseStatus"]["reason"] == "Forbidden"
    assert 'User "tina" cannot delete resource "rolebindings"' in complete["responseStatus"]["message"]
    assert complete["annotations"]["authorization.k8s.io/decision"] == "forbid"


def test_requests_no_rule_matches_are_not_logged(kubectl_cli: Kubectl, server: ServerProcess) -> None:
    kubectl_cli.run("get", "events.events.core.io", "-n", NAMESPACE)  # a list: matched by the list rule
    kubectl_cli.run("get", "events.events.core.io", "missing", "-n", NAMESPACE, check=False)
    time.sleep(0.5)  # time for events that must not be written to land (absence cannot be awaited)
    # A get of an Event matches no rule (the get rule names RoleBindings): level None.
    assert not events(server, verb="get", name="missing")
    assert not [e for e in events(server) if e["requestURI"].startswith(("/api?", "/apis?", "/openapi"))]


def test_an_unusable_policy_stops_the_server_with_one_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "All"}]})
    )
    args = ["--audit-log-path", str(tmp_path / "audit.log"), "--audit-policy-file", str(policy)]
    with pytest.raises(RuntimeError, match="exited") as caught:
        start_server(tmp_path / "data", args)
    errors = [line for line in str(caught.value).splitlines() if "error:" in line]
    assert errors == [
        'coreio-apiserver: error: loading audit policy file: rules[0].level: Unsupported value: "All":'
        ' supported values: "None", "Metadata", "Request", "RequestResponse": from file ' + str(policy)
    ]


def test_a_hostile_body_is_refused_and_logged_without_it(server: ServerProcess) -> None:
    """A YAML alias bomb, at RequestResponse: the audit decodes bodies with the handlers' guards, so
    the request is answered 400 as without an audit, and logged with no requestObject."""
    bomb = b"a: &a [" + b"*a, " * 1000 + b"]"
    path = f"/apis/rbac.authorization.core.io/v1/namespaces/{NAMESPACE}/rolebindings"
    answer = Api(server).request("POST", path, raw=bomb, content_type="application/yaml")
    assert answer.status == 400
    audit_id = answer.headers["Audit-Id"]
    (complete,) = settled(server, 1, verb="create", stage="ResponseComplete", auditID=audit_id)
    assert "requestObject" not in complete
    assert complete["responseStatus"]["code"] == 400 and complete["responseStatus"]["reason"] == "BadRequest"
    assert complete["responseObject"]["kind"] == "Status"


def test_a_yaml_body_is_logged_as_the_object_it_holds(server: ServerProcess) -> None:
    body = yaml.safe_dump(yaml.safe_load(rolebinding_yaml("from-yaml", NAMESPACE))).encode()
    path = f"/apis/rbac.authorization.core.io/v1/namespaces/{NAMESPACE}/rolebindings"
    answer = Api(server).request("POST", path, raw=body, content_type="application/yaml")
    assert answer.status == 201
    (complete,) = settled(server, 1, verb="create", name="from-yaml")
    assert complete["requestObject"]["metadata"]["name"] == "from-yaml"
    assert complete["requestObject"]["roleRef"]["name"] == "view"


def test_a_request_without_credentials_is_one_event_saying_so(server: ServerProcess) -> None:
    path = f"/apis/rbac.authorization.core.io/v1/namespaces/{NAMESPACE}/rolebindings?limit=7"
    answer = Api(server, client_cert=False).get(path)
    assert answer.status == 401
    logged = settled(server, 1, requestURI=path)
    time.sleep(0.2)  # time for a second event, which must not come, to land
    assert [(e["stage"], e["user"]) for e in events(server, requestURI=path)] == [("ResponseStarted", {})]
    assert logged[0]["responseStatus"] == {
        "metadata": {},
        "message": "Authentication failed, no credentials provided",
        "code": 401,
    }
