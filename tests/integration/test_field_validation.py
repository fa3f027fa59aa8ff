"""fieldValidation Strict / Warn / Ignore on create, update and every patch type; `pretty`; dry
runs that leave no watch event; and kubectl printing the server's warnings."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.api import Api, Response, rb_path, rolebinding
from tests.support.kubectl import Kubectl
from tests.support.waiting import wait_until

UNKNOWN = 'unknown field "spec"'


def _send(api: Api, operation: str, name: str, validation: str) -> Response:
    """One write carrying the unknown top-level field `spec`, by `operation`."""
    query = f"?fieldValidation={validation}&fieldManager=tester"
    body = rolebinding(name)
    body["spec"] = {"x": 1}
    if operation == "create":
        return api.post(rb_path("fv") + query, body)
    api.post(rb_path("fv"), rolebinding(name))
    path = rb_path("fv", name) + query
    if operation == "update":
        return api.put(path, body)
    if operation == "merge":
        return api.patch(path, {"spec": {"x": 1}})
    if operation == "strategic":
        return api.patch(path, {"spec": {"x": 1}}, content_type="application/strategic-merge-patch+json")
    if operation == "json":
        return api.patch(
            path,
            [{"op": "add", "path": "/spec", "value": {"x": 1}}],
            content_type="application/json-patch+json",
        )
    assert operation == "apply"
    return api.request(
        "PATCH", path, raw=yaml.safe_dump(body).encode(), content_type="application/apply-patch+yaml"
    )


OPERATIONS = ["create", "update", "merge", "strategic", "json"]


@pytest.mark.parametrize("operation", ["create", "update"])
def test_strict_refuses_unknown_fields_of_a_body(api: Api, operation: str) -> None:
    response = _send(api, operation, f"strict-{operation}", "Strict")
    assert (response.status, response.json["reason"]) == (400, "BadRequest"), response.body
    assert response.json["message"] == (
        'RoleBinding in version "v1" cannot be handled as a RoleBinding: strict decoding error: ' + UNKNOWN
    )


@pytest.mark.parametrize("operation", ["merge", "strategic", "json"])
def test_strict_refuses_unknown_fields_of_a_patched_object(api: Api, operation: str) -> None:
    # As upstream: the patch's result is invalid, a 422 with one cause on the field `patch`
    # (tests/integration/test_decode_errors.py has the exact answers).
    response = _send(api, operation, f"strict-{operation}", "Strict")
    assert (response.status, response.json["reason"]) == (422, "Invalid"), response.body
    (cause,) = response.json["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
    assert cause["message"].endswith(": strict decoding error: " + UNKNOWN)
    assert response.json["message"] == ' "" is invalid: patch: ' + cause["message"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_warn_answers_a_warning_header_and_drops_the_field(api: Api, operation: str) -> None:
    response = _send(api, operation, f"warn-{operation}", "Warn")
    assert response.status in (200, 201), response.body
    assert response.header_values("Warning") == [f'299 - "{UNKNOWN.replace(chr(34), chr(92) + chr(34))}"']
    assert "spec" not in response.json


@pytest.mark.parametrize("operation", OPERATIONS)
def test_ignore_drops_the_field_silently(api: Api, operation: str) -> None:
    response = _send(api, operation, f"ignore-{operation}", "Ignore")
    assert response.status in (200, 201), response.body
    assert response.header_values("Warning") == []
    assert "spec" not in response.json


def test_apply_refuses_fields_outside_the_schema(api: Api) -> None:
    response = _send(api, "apply", "apply-unknown", "Strict")
    assert response.status == 400
    assert "field not declared in schema" in response.json["message"]


def test_pretty_indents(api: Api) -> None:
    api.post(rb_path("fv"), rolebinding("pretty"))
    compact = api.get(rb_path("fv", "pretty"), headers={"User-Agent": "test"})
    indented = api.get(rb_path("fv", "pretty") + "?pretty=true", headers={"User-Agent": "test"})
    assert b"\n  " not in compact.body.strip()
    assert indented.body.startswith(b'{\n  "kind": "RoleBinding",')
    assert compact.json == indented.json


def test_dry_runs_leave_no_watch_event(api: Api) -> None:
    api.post(rb_path("dryw"), rolebinding("exists"))
    start = api.get(rb_path("dryw")).json["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []
    opened = threading.Event()

    def watch() -> None:
        with api.watch(f"{rb_path('dryw')}?watch=1&resourceVersion={start}&timeoutSeconds=20") as stream:
            opened.set()
            for item in stream:
                events.append(item)
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    wait_until(lambda: opened.is_set() or not thread.is_alive(), message="the watch to answer")
    assert api.post(rb_path("dryw") + "?dryRun=All", rolebinding("ghost")).status == 201
    assert (
        api.patch(rb_path("dryw", "exists") + "?dryRun=All", {"metadata": {"labels": {"a": "b"}}}).status
        == 200
    )
    assert (
        api.put(rb_path("dryw", "exists") + "?dryRun=All", api.get(rb_path("dryw", "exists")).json).status
        == 200
    )
    assert api.delete(rb_path("dryw", "exists") + "?dryRun=All").status == 200
    api.post(rb_path("dryw"), rolebinding("real"))
    thread.join(20)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "real")]


def test_kubectl_prints_the_servers_warnings(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    body = rolebinding("kubectl-warned")
    body["metadata"]["namespace"] = "fv"
    body["spec"] = {"x": 1}
    result = kubectl_cli.run("create", "--validate=warn", "-f", "-", input=yaml.safe_dump(body))
    assert 'Warning: unknown field "spec"' in result.stderr
    assert "rolebinding.rbac.authorization.core.io/kubectl-warned created" in result.stdout
