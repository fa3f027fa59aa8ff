"""Admission webhooks standalone, from `--admission-config-file`: a real coreio server calling a
real HTTPS webhook on loopback (tests/support/admission_webhook.py) for RoleBindings and Events.
Each case lives in a namespace of its own, which its webhook's namespaceSelector picks; the
answers, the objects stored, the reviews the webhook was sent and the audit annotations are
checked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.admission_webhook import AdmissionWebhookServer
from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.server import ServerProcess, start_server
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools

JSON = dict[str, Any]
GROUPS = ["rbac.authorization.core.io", "events.core.io"]


def hook(name: str, namespace: str, behaviour: str, hooks: AdmissionWebhookServer, **spec: Any) -> JSON:
    rules = [{"apiGroups": GROUPS, "apiVersions": ["v1"], "operations": ["*"], "resources": ["*"]}]
    return {
        "name": f"{name}.hooks.test",
        "clientConfig": hooks.client_config(behaviour),
        "rules": rules,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **spec,
    }


def configuration(kind: str, name: str, webhooks: list[JSON]) -> JSON:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": webhooks,
    }


def manifest(hooks: AdmissionWebhookServer) -> list[JSON]:
    validating = [
        hook("deny", "denied", "deny", hooks),
        hook("allow", "allowed", "allow", hooks),
        hook("slow-fail", "slow-fail", "slow", hooks, timeoutSeconds=1),
        hook("slow-ignore", "slow-ignore", "slow", hooks, timeoutSeconds=1, failurePolicy="Ignore"),
        hook("side-effects", "side-effects", "allow", hooks, sideEffects="Unknown"),
        hook(
            "conditions",
            "conditions",
            "deny",
            hooks,
            matchConditions=[{"name": "admins", "expression": "object.roleRef.name == 'cluster-admin'"}],
        ),
    ]
    mutating = [
        hook("label", "mutated", "label", hooks),
        hook("first", "reinvoked", "first", hooks, reinvocationPolicy="IfNeeded"),
        hook("second", "reinvoked", "second", hooks),
        hook("invalid", "invalid", "invalid-patch", hooks),
    ]
    return [
        configuration("ValidatingWebhookConfiguration", "validating", validating),
        configuration("MutatingWebhookConfiguration", "mutating", mutating),
    ]


@pytest.fixture(scope="module")
def hooks() -> Iterator[AdmissionWebhookServer]:
    with AdmissionWebhookServer() as server:
        yield server


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, hooks: AdmissionWebhookServer
) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("coreio-webhooks")
    (directory / "admission.yaml").write_text(yaml.safe_dump_all(manifest(hooks)))
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}
    (directory / "audit-policy.yaml").write_text(json.dumps(policy))
    args = [
        f"--admission-config-file={directory / 'admission.yaml'}",
        f"--audit-log-path={directory / 'audit.log'}",
        f"--audit-policy-file={directory / 'audit-policy.yaml'}",
    ]
    process = start_server(directory / "data", args)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> Api:
    return Api(server)


def _annotations(server: ServerProcess, audit_id: str) -> dict[str, str]:
    path = server.data_dir.parent / "audit.log"

    def logged() -> dict[str, Any] | None:
        for line in path.read_text().splitlines():
            event: dict[str, Any] = json.loads(line)
            if event["auditID"] == audit_id and event["stage"] == "ResponseComplete":
                return event
        return None

    return dict(wait_until(logged, timeout=10, message=f"audit event {audit_id}").get("annotations") or {})


def test_a_denial_answers_the_webhooks_status(api: Api, hooks: AdmissionWebhookServer) -> None:
    answer = api.post(rb_path("denied"), rolebinding("nope"))
    assert answer.status == 403
    assert answer.json["reason"] == "Forbidden"
    assert answer.json["message"] == 'admission webhook "deny.hooks.test" denied the request: not on my watch'
    assert api.get(rb_path("denied", "nope")).status == 404
    review = hooks.reviews("deny")[-1]
    assert review["apiVersion"] == "admission.k8s.io/v1"
    request = review["request"]
    assert request["kind"] == {"group": "rbac.authorization.core.io", "version": "v1", "kind": "RoleBinding"}
    assert request["resource"] == {
        "group": "rbac.authorization.core.io",
        "version": "v1",
        "resource": "rolebindings",
    }
    assert request["requestKind"] == request["kind"] and request["requestResource"] == request["resource"]
    assert (request["operation"], request["namespace"], request["name"]) == ("CREATE", "denied", "nope")
    assert request["object"]["metadata"]["name"] == "nope" and request["oldObject"] is None
    assert request["dryRun"] is False and request["options"]["kind"] == "CreateOptions"
    assert request["userInfo"]["username"]
    assert hooks.received[-1].query == "timeout=5s"


def test_an_allowing_webhooks_warnings_and_annotations_reach_the_client_and_audit(
    api: Api, server: ServerProcess
) -> None:
    answer = api.post(ev_path("allowed"), event("ok", "allowed"))
    assert answer.status == 201
    assert answer.header_values("Warning") == ['299 - "checked by the test webhook"']
    annotations = _annotations(server, answer.headers["Audit-Id"])
    assert annotations["allow.hooks.test/seen"] == "yes"


def test_a_timeout_fails_closed_or_open_as_the_failure_policy_says(api: Api, server: ServerProcess) -> None:
    closed = api.post(rb_path("slow-fail"), rolebinding("late"))
    assert closed.status == 500 and closed.json["reason"] == "InternalError"
    message = closed.json["message"]
    assert message.startswith('Internal error occurred: failed calling webhook "slow-fail.hooks.test": ')
    assert message.endswith('/slow?timeout=1s": context deadline exceeded')
    opened = api.post(rb_path("slow-ignore"), rolebinding("late"))
    assert opened.status == 201
    annotations = _annotations(server, opened.headers["Audit-Id"])
    assert (
        annotations["failed-open.validating.webhook.admission.k8s.io/round_0_index_0"]
        == "slow-ignore.hooks.test"
    )


def test_a_dry_run_never_reaches_a_webhook_with_side_effects(api: Api, hooks: AdmissionWebhookServer) -> None:
    before = len(hooks.reviews("allow"))
    answer = api.post(rb_path("side-effects") + "?dryRun=All", rolebinding("dry"))
    assert answer.status == 400
    assert answer.json["message"] == 'admission webhook "side-effects.hooks.test" does not support dry run'
    assert len(hooks.reviews("allow")) == before
    assert api.post(rb_path("side-effects"), rolebinding("wet")).status == 201


def test_match_conditions_choose_which_writes_the_webhook_sees(api: Api) -> None:
    assert api.post(rb_path("conditions"), rolebinding("viewer")).status == 201
    admin = rolebinding(
        "root",
        roleRef={"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "cluster-admin"},
    )
    assert api.post(rb_path("conditions"), admin).status == 403


def test_a_mutating_webhooks_patch_is_stored_and_noted(api: Api, server: ServerProcess) -> None:
    answer = api.post(rb_path("mutated"), rolebinding("labelled"))
    assert answer.status == 201, answer.json
    assert answer.json["metadata"]["labels"] == {"webhook": "patched"}
    assert api.get(rb_path("mutated", "labelled")).json["metadata"]["labels"] == {"webhook": "patched"}
    annotations = _annotations(server, answer.headers["Audit-Id"])
    assert json.loads(annotations["mutation.webhook.admission.k8s.io/round_0_index_0"]) == {
        "configuration": "mutating",
        "webhook": "label.hooks.test",
        "mutated": True,
    }


def test_a_webhook_that_asks_is_reinvoked_after_a_later_change(api: Api, server: ServerProcess) -> None:
    answer = api.post(rb_path("reinvoked"), rolebinding("twice"))
    assert answer.status == 201, answer.json
    assert answer.json["metadata"]["labels"] == {"first": "twice", "second": "yes"}
    annotations = _annotations(server, answer.headers["Audit-Id"])
    assert json.loads(annotations["mutation.webhook.admission.k8s.io/round_1_index_1"])["mutated"] is True


def test_a_patch_that_breaks_the_object_is_an_internal_error(api: Api) -> None:
    answer = api.post(rb_path("invalid"), rolebinding("broken"))
    assert answer.status == 500
    assert answer.json["message"] == (
        "Internal error occurred: json: cannot unmarshal string into Go struct field "
        "RoleBinding.subjects of type []v1.Subject"
    )


def test_a_delete_is_shown_to_webhooks_with_the_stored_object(
    api: Api, hooks: AdmissionWebhookServer
) -> None:
    assert api.post(rb_path("allowed"), rolebinding("going")).status == 201
    assert api.delete(rb_path("allowed", "going")).status == 200
    review = hooks.reviews("allow")[-1]["request"]
    assert review["operation"] == "DELETE" and review["object"] is None
    assert review["oldObject"]["metadata"]["name"] == "going"
    assert review["options"]["kind"] == "DeleteOptions"
