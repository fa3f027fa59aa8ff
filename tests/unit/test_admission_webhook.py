"""Admission webhooks' rules, as k8s.io/apiserver's webhook plugins apply them: the review sent,
the answer checked, denials and failed calls worded, patches applied, reinvocation, matchConditions
and failurePolicy. Most tests answer through a fake transport (FakeWebhookClient); the Service
name test calls a real HTTPS webhook on loopback."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from apiserver.admission.request import CREATE, DELETE, AdmissionRequest
from apiserver.admission.sources import ManifestSource
from apiserver.admission.webhook import review as reviews
from apiserver.admission.webhook.client import CallFailure, Endpoint, WebhookClient, answer_of, endpoint
from apiserver.admission.webhook.errors import denied
from apiserver.admission.webhook.mutating import MutatingWebhooks
from apiserver.admission.webhook.validating import ValidatingWebhooks
from apiserver.auth.authz import Decision
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import deadlines, requestnotes
from apiserver.machinery.errors import StatusError
from apiserver.machinery.user import UserInfo
from apiserver.resources.rolebinding import RoleBindingKind
from tests.support.admission_webhook import SERVICE_HOST, AdmissionWebhookServer

JSON = dict[str, Any]
RB = RoleBindingKind()
NAMESPACE = "team"
Answer = Callable[[str, JSON], JSON]


def rolebinding(name: str = "rb", labels: JSON | None = None) -> JSON:
    meta: JSON = {"name": name, "namespace": NAMESPACE, **({"labels": labels} if labels else {})}
    return {
        "kind": "RoleBinding",
        "apiVersion": "rbac.authorization.core.io/v1",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.core.io", "name": "alice"}],
    }


def request(
    obj: JSON | None = None, operation: str = CREATE, old: JSON | None = None, dry_run: bool = False
) -> AdmissionRequest:
    obj = rolebinding() if obj is None and operation != DELETE else obj
    name = str(((obj or old or {}).get("metadata") or {}).get("name") or "")
    user = UserInfo("alice", "uid-1", ("devs",), {"scopes": ("a",)})
    return AdmissionRequest(
        RB, operation, NAMESPACE, name, obj, old, user, dry_run, {"kind": "CreateOptions"}
    )


def webhook(name: str, **spec: Any) -> JSON:
    rules = [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]
    return {
        "name": name,
        "clientConfig": {"url": f"https://127.0.0.1:9/{name}"},
        "rules": rules,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **spec,
    }


def configuration(kind: str, *webhooks: JSON, name: str = "config") -> JSON:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": list(webhooks),
    }


class FakeWebhookClient(WebhookClient):
    """Answers each review with `answer(path, request)` (a response without uid), after the delay
    the path's `delays` entry gives; a CallFailure when the answer is one."""

    def __init__(self, answer: Answer, delays: dict[str, float] | None = None) -> None:
        super().__init__()
        self.answer = answer
        self.delays = delays or {}
        self.sent: list[tuple[str, JSON]] = []
        # The query and the time given of each call.
        self.timeouts: list[tuple[str, float]] = []

    async def post(self, target: Endpoint, body: bytes, seconds: float) -> JSON:
        sent = json.loads(body)
        path = target.url.split("?")[0].rsplit("/", 1)[1]
        self.sent.append((path, sent))
        self.timeouts.append((target.url.split("?")[1], seconds))
        await asyncio.sleep(self.delays.get(path, 0))  # a slow webhook: its time is under test
        response = self.answer(path, sent["request"])
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": sent["request"]["uid"], **response},
        }


def patch(operations: list[JSON]) -> JSON:
    return {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(operations).encode()).decode(),
    }


def validate(
    objects: list[JSON], client: WebhookClient, req: AdmissionRequest | None = None
) -> tuple[StatusError | None, requestnotes.RequestNotes]:
    async def run() -> tuple[StatusError | None, requestnotes.RequestNotes]:
        notes = requestnotes.begin()
        try:
            await ValidatingWebhooks(ManifestSource(objects), client).validate(req or request())
        except StatusError as exc:
            return exc, notes
        return None, notes

    return asyncio.run(run())


def admit(
    objects: list[JSON], client: WebhookClient, req: AdmissionRequest | None = None
) -> tuple[JSON | None, requestnotes.RequestNotes]:
    async def run() -> tuple[JSON | None, requestnotes.RequestNotes]:
        notes = requestnotes.begin()
        return await MutatingWebhooks(ManifestSource(objects), client).admit(req or request()), notes

    return asyncio.run(run())


# ---------------------------------------------------------------- the review


def test_the_review_carries_every_field_upstream_fills() -> None:
    sent = reviews.review(request(), "u-1")
    assert sent["apiVersion"] == "admission.k8s.io/v1" and sent["kind"] == "AdmissionReview"
    body = sent["request"]
    assert list(body) == [
        "uid", "kind", "resource", "requestKind", "requestResource", "name", "namespace",
        "operation", "userInfo", "object", "oldObject", "dryRun", "options",
    ]  # fmt: skip
    assert body["userInfo"] == {
        "username": "alice",
        "uid": "uid-1",
        "groups": ["devs"],
        "extra": {"scopes": ["a"]},
    }
    assert body["oldObject"] is None and body["dryRun"] is False


def test_a_delete_review_has_the_stored_object_as_old_object_only() -> None:
    body = reviews.review(request(None, DELETE, old=rolebinding("gone")), "u")["request"]
    assert body["object"] is None and body["oldObject"]["metadata"]["name"] == "gone"
    assert body["name"] == "gone" and body["operation"] == "DELETE"


def test_the_first_known_review_version_is_sent() -> None:
    assert reviews.review_version(["v2", "v1beta1", "v1"]) == "v1beta1"
    with pytest.raises(reviews.UnknownVersions, match=r"known AdmissionReview versions \(v1, v1beta1\)"):
        reviews.review_version(["v2"])


@pytest.mark.parametrize(
    ("response", "mutating", "error"),
    [
        ({}, False, "webhook response was absent"),
        ({"response": {"uid": "other", "allowed": True}}, False, 'expected response.uid="u", got "other"'),
        (
            {"response": {"uid": "u", "patch": "W10="}},
            False,
            "validating webhook may not return response.patch",
        ),
        ({"response": {"uid": "u", "patchType": "JSONPatch"}}, False, "may not return response.patchType"),
        (
            {"response": {"uid": "u", "patch": "W10="}},
            True,
            "returned response.patch but not response.patchType",
        ),
        (
            {"response": {"uid": "u", "patchType": "JSONPatch"}},
            True,
            "response.patchType but not response.patch",
        ),
        (
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": {"uid": "u"}},
            False,
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, "
            "got admission.k8s.io/v1beta1",
        ),
    ],
)
def test_unusable_answers_are_refused_in_upstreams_words(response: JSON, mutating: bool, error: str) -> None:
    with pytest.raises(reviews.InvalidResponse, match=error.replace("(", r"\(").replace(".", r"\.")):
        reviews.verify_response(response, "u", "v1", mutating=mutating)


def test_a_v1beta1_answer_is_not_checked_and_its_patch_is_json_patch() -> None:
    answer = {"response": {"uid": "whatever", "allowed": True, "patch": "W10="}}
    verified = reviews.verify_response(answer, "u", "v1beta1", mutating=True)
    assert (verified.patch, verified.patch_type) == (b"[]", "JSONPatch")


# ---------------------------------------------------------------- denials and failures


def test_a_denial_keeps_the_webhooks_status_with_a_floor_of_400() -> None:
    error = denied("w", {"code": 200, "reason": "NotAcceptable", "details": {"name": "x"}})
    assert error.status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'admission webhook "w" denied the request: NotAcceptable',
        "reason": "NotAcceptable", "details": {"name": "x"}, "code": 400,
    }  # fmt: skip
    bare = denied("w", None)
    assert bare.message == 'admission webhook "w" denied the request without explanation'
    assert "reason" not in bare.status


def test_error_answers_are_worded_as_client_go_words_them() -> None:
    with pytest.raises(CallFailure) as failure:
        answer_of("u", 500, "text/plain", b"fell over\n")
    assert (
        failure.value.reason
        == 'an error on the server ("fell over") has prevented the request from succeeding'
    )
    status = json.dumps({"kind": "Status", "status": "Failure", "message": "no way", "code": 429}).encode()
    with pytest.raises(CallFailure, match=r"^no way$"):
        answer_of("u", 429, "application/json", status)


def test_endpoints_are_upstreams_urls() -> None:
    service = {"service": {"namespace": "ns", "name": "hook", "path": "/a//b/"}}
    assert endpoint(service, "w", 10).url == "https://hook.ns.svc:443/a/b?timeout=10s"
    assert endpoint({"url": "https://h:8443/v"}, "w", 30).url == "https://h:8443/v?timeout=30s"


def test_a_webhook_is_given_no_more_time_than_the_request_has_left() -> None:
    """A request with 2.5 s left calls a webhook of 10 s with ?timeout=3s (rounded up, as upstream
    writes it) and gives it 2.5 s; outside a request, its own 10 s."""
    client = FakeWebhookClient(lambda _p, _r: {"allowed": True})
    objects = [configuration("ValidatingWebhookConfiguration", webhook("w", timeoutSeconds=10))]

    async def hasty() -> None:
        requestnotes.begin()
        with deadlines.ending_at(asyncio.get_running_loop().time() + 2.5):
            await ValidatingWebhooks(ManifestSource(objects), client).validate(request())

    asyncio.run(hasty())
    validate(objects, client)
    (hurried, given), unhurried = client.timeouts
    assert hurried == "timeout=3s" and 2.4 < given <= 2.5
    assert unhurried == ("timeout=10s", 10)


# ---------------------------------------------------------------- validating


def test_validating_webhooks_run_at_once_and_the_first_failure_to_arrive_wins() -> None:
    def answer(path: str, _request: JSON) -> JSON:
        return {"allowed": False, "status": {"message": path}}

    hooks = [webhook("slow"), webhook("fast")]
    client = FakeWebhookClient(answer, {"slow": 0.2})
    error, _ = validate([configuration("ValidatingWebhookConfiguration", *hooks)], client)
    assert error is not None and error.message == 'admission webhook "fast" denied the request: fast'
    assert [path for path, _ in client.sent] == ["slow", "fast"]


def test_a_failed_call_fails_closed_or_open_as_the_failure_policy_says() -> None:
    def answer(_path: str, _request: JSON) -> JSON:
        raise CallFailure('Post "x": context deadline exceeded', StatusError(400, "BadRequest", "x"))

    hooks = [webhook("ignored", failurePolicy="Ignore"), webhook("failing")]
    error, notes = validate(
        [configuration("ValidatingWebhookConfiguration", *hooks)], FakeWebhookClient(answer)
    )
    assert error is not None and error.code == 500
    assert error.message == (
        'Internal error occurred: failed calling webhook "failing": failed to call webhook: '
        'Post "x": context deadline exceeded'
    )
    assert notes.annotations == {"failed-open.validating.webhook.admission.k8s.io/round_0_index_0": "ignored"}


def test_a_dry_run_reaching_side_effects_is_a_400_without_a_call() -> None:
    client = FakeWebhookClient(lambda _p, _r: {"allowed": True})
    hooks = [webhook("effects", sideEffects="Some", failurePolicy="Ignore")]
    error, _ = validate(
        [configuration("ValidatingWebhookConfiguration", *hooks)], client, request(dry_run=True)
    )
    assert error is not None and (error.code, error.message) == (
        400,
        'admission webhook "effects" does not support dry run',
    )
    assert client.sent == []


def test_warnings_and_audit_annotations_of_an_answer_are_noted() -> None:
    client = FakeWebhookClient(
        lambda _p, _r: {"allowed": True, "warnings": ["careful"], "auditAnnotations": {"k": "v"}}
    )
    error, notes = validate([configuration("ValidatingWebhookConfiguration", webhook("w"))], client)
    assert error is None and notes.warnings == ["careful"] and notes.annotations == {"w/k": "v"}


def test_match_conditions_skip_the_webhook_and_their_errors_follow_the_failure_policy() -> None:
    client = FakeWebhookClient(lambda _p, _r: {"allowed": False})
    never = [{"name": "never", "expression": "object.metadata.name == 'other'"}]
    broken = [{"name": "broken", "expression": "object.metadata.labels['absent'] == 'x'"}]
    skipped, _ = validate(
        [configuration("ValidatingWebhookConfiguration", webhook("w", matchConditions=never))], client
    )
    ignored, _ = validate(
        [
            configuration(
                "ValidatingWebhookConfiguration", webhook("w", matchConditions=broken, failurePolicy="Ignore")
            )
        ],
        client,
    )
    assert skipped is None and ignored is None and client.sent == []
    refused, _ = validate(
        [configuration("ValidatingWebhookConfiguration", webhook("w", matchConditions=broken))], client
    )
    assert refused is not None and refused.code == 403
    assert refused.message.startswith(
        'rolebindings.rbac.authorization.core.io "rb" is forbidden: expression '
    )


class FakeAuthorizerForTests:
    """Allows alice to `approve` rolebindings, nothing else."""

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        return Decision(user.name == "alice" and info.verb == "approve" and info.resource == "rolebindings")


def test_match_conditions_may_ask_the_authorizer() -> None:
    client = FakeWebhookClient(lambda _p, _r: {"allowed": False, "status": {"message": "called"}})
    unapproved = [
        {"name": "unapproved", "expression": "!authorizer.requestResource.check('approve').allowed()"}
    ]
    config = configuration("ValidatingWebhookConfiguration", webhook("w", matchConditions=unapproved))

    async def run(user: str) -> StatusError | None:
        requestnotes.begin()
        req = request()
        req = AdmissionRequest(RB, CREATE, NAMESPACE, "rb", req.obj, None, UserInfo(user), False, {})
        plugin = ValidatingWebhooks(ManifestSource([config]), client, FakeAuthorizerForTests())
        try:
            await plugin.validate(req)
        except StatusError as exc:
            return exc
        return None

    # alice may approve: the condition is false and the webhook is not called.
    assert asyncio.run(run("alice")) is None and client.sent == []
    refused = asyncio.run(run("bob"))
    assert refused is not None and "called" in refused.message and len(client.sent) == 1


# ---------------------------------------------------------------- mutating


def test_patches_apply_in_order_and_an_if_needed_webhook_is_reinvoked() -> None:
    def answer(path: str, sent: JSON) -> JSON:
        labels = sent["object"]["metadata"].get("labels") or {}
        if path == "first":
            return patch(
                [{"op": "add", "path": "/metadata/labels", "value": {**labels, "first": str(len(labels))}}]
            )
        if "second" in labels:
            return {"allowed": True}
        return patch([{"op": "add", "path": "/metadata/labels/second", "value": "yes"}])

    hooks = [webhook("first", reinvocationPolicy="IfNeeded"), webhook("second")]
    client = FakeWebhookClient(answer)
    admitted, notes = admit([configuration("MutatingWebhookConfiguration", *hooks)], client)
    assert admitted is not None and admitted["metadata"]["labels"] == {"first": "2", "second": "yes"}
    assert [path for path, _ in client.sent] == ["first", "second", "first"]
    assert json.loads(notes.annotations["mutation.webhook.admission.k8s.io/round_1_index_0"]) == {
        "configuration": "config",
        "webhook": "first",
        "mutated": True,
    }


@pytest.mark.parametrize(("level", "kept"), [(1, False), (2, True), (3, True)])
def test_the_patch_is_annotated_from_audit_level_request_on(level: int, kept: bool) -> None:
    operations = [{"value": "yes", "path": "/metadata/labels", "op": "add"}]
    client = FakeWebhookClient(
        lambda _p, _r: patch([{"op": "add", "path": "/metadata/labels", "value": {"a": "<b>"}}])
    )
    del operations

    async def run() -> requestnotes.RequestNotes:
        notes = requestnotes.begin()
        notes.audit_level = level
        config = configuration("MutatingWebhookConfiguration", webhook("w"))
        await MutatingWebhooks(ManifestSource([config]), client).admit(request())
        return notes

    annotations = asyncio.run(run()).annotations
    key = "patch.webhook.admission.k8s.io/round_0_index_0"
    assert (key in annotations) is kept
    if kept:
        assert annotations[key] == (
            '{"configuration":"config","webhook":"w","patch":[{"op":"add","path":"/metadata/labels",'
            '"value":{"a":"\\u003cb\\u003e"}}],"patchType":"JSONPatch"}'
        )
    assert "mutation.webhook.admission.k8s.io/round_0_index_0" in annotations


def test_a_patch_on_a_delete_is_an_internal_error() -> None:
    client = FakeWebhookClient(lambda _p, _r: patch([{"op": "add", "path": "/x", "value": 1}]))
    req = request(None, DELETE, old=rolebinding())
    with pytest.raises(StatusError, match="attempted to modify the object, which is not supported"):
        admit([configuration("MutatingWebhookConfiguration", webhook("w"))], client, req)


def test_a_patch_that_does_not_apply_is_an_internal_error_whatever_the_failure_policy() -> None:
    client = FakeWebhookClient(lambda _p, _r: patch([{"op": "remove", "path": "/metadata/labels/absent"}]))
    with pytest.raises(StatusError) as error:
        admit([configuration("MutatingWebhookConfiguration", webhook("w", failurePolicy="Ignore"))], client)
    assert error.value.code == 500 and error.value.reason == "InternalError"


# ---------------------------------------------------------------- a Service on loopback


def test_a_service_name_resolves_where_told_and_its_certificate_is_verified() -> None:
    async def run(server: AdmissionWebhookServer) -> JSON:
        client = WebhookClient({SERVICE_HOST: "127.0.0.1"})
        try:
            config = {
                "service": {"namespace": "webhooks", "name": "hooks", "path": "/allow", "port": server.port}
            }
            target = endpoint({**config, "caBundle": server.ca_bundle}, "w", 5)
            body = json.dumps(reviews.review(request(), "u-1")).encode()
            return await client.post(target, body, 5)
        finally:
            await client.close()

    with AdmissionWebhookServer() as server:
        answer = asyncio.run(run(server))
    assert answer["response"]["uid"] == "u-1" and answer["response"]["allowed"] is True
