"""The cluster's admission webhooks reach coreio's RoleBindings exactly as they reach
kube-apiserver's own: ONE recording HTTPS webhook on loopback, called by kube-apiserver (for
`rbac.authorization.k8s.io`) and by aggregated coreio (for `rbac.authorization.core.io`), through
the same ValidatingWebhookConfiguration and MutatingWebhookConfiguration applied in the cluster.
Each case's webhooks pick its two namespaces (one a side) by label; the same requests are sent to
both sides and compared: status, reason, message, details, warnings, the object answered, the
AdmissionReviews the webhook received (uids, times and resourceVersions masked) and the admission
audit annotations.

Upstream's answers are rewritten to our group name and namespace only; any other difference fails.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.admission_webhook import AdmissionWebhookServer
from tests.support.aggregation import AggregatedCoreio, settled_audit_logs
from tests.support.controlplane import ControlPlane
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

JSON = dict[str, Any]
OURS = "rbac.authorization.core.io"
UPSTREAM = "rbac.authorization.k8s.io"
LABEL = "coreio-webhook-case"
ACTIVE_TIMEOUT = 60.0
ANNOTATION_PREFIXES = ("mutation.webhook.", "failed-open.", "validating.webhook.")
MASKED = ("uid", "resourceVersion", "creationTimestamp")


def rolebinding(name: str, role: str = "view", generate: bool = False) -> JSON:
    meta: JSON = {"generateName": name} if generate else {"name": name}
    return {
        "apiVersion": f"{OURS}/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": OURS, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": OURS, "kind": "User", "name": "alice"}],
    }


@dataclass
class Step:
    method: str
    name: str = ""
    body: JSON | None = None
    query: str = ""


@dataclass
class Case:
    name: str
    # (behaviour, extra webhook fields) of each webhook, in order.
    hooks: list[tuple[str, JSON]]
    steps: list[Step]
    mutating: bool = False
    operations: list[str] = field(default_factory=lambda: ["CREATE", "UPDATE", "DELETE"])


def create(obj: JSON, query: str = "") -> Step:
    return Step("POST", body=obj, query=query)


CASES = [
    Case("deny", [("deny", {})], [create(rolebinding("denied"))]),
    Case("deny-bare", [("deny-bare", {})], [create(rolebinding("bare"))]),
    Case("deny-reason", [("deny-reason", {})], [create(rolebinding("reason"))]),
    Case(
        "allow",
        [("allow", {})],
        [
            create(rolebinding("kept")),
            Step("PUT", "kept", rolebinding("kept", "view")),
            create(rolebinding("gen-", generate=True)),
            Step("DELETE", "kept"),
        ],
    ),
    Case("dry-run-none", [("allow", {})], [create(rolebinding("dry"), "dryRun=All")]),
    Case("timeout-fail", [("slow", {"timeoutSeconds": 1})], [create(rolebinding("late"))]),
    Case(
        "timeout-ignore",
        [("slow", {"timeoutSeconds": 1, "failurePolicy": "Ignore"})],
        [create(rolebinding("late"))],
    ),
    # A request with less time left than the webhook's timeout gives the webhook that time.
    Case(
        "request-timeout", [("allow", {"timeoutSeconds": 10})], [create(rolebinding("hasty"), "timeout=3s")]
    ),
    Case("bad-uid", [("bad-uid", {})], [create(rolebinding("uid"))]),
    Case("server-error", [("error", {})], [create(rolebinding("oops"))]),
    Case(
        "match-conditions",
        [
            (
                "deny",
                {
                    "matchConditions": [
                        {"name": "admins", "expression": "object.roleRef.name == 'cluster-admin'"}
                    ]
                },
            )
        ],
        [create(rolebinding("viewer")), create(rolebinding("root", "cluster-admin"))],
    ),
    Case("mutate", [("label", {})], [create(rolebinding("labelled"))], mutating=True),
    Case(
        "reinvoke",
        [("first", {"reinvocationPolicy": "IfNeeded"}), ("second", {})],
        [create(rolebinding("twice"))],
        mutating=True,
    ),
    Case("invalid-patch", [("invalid-patch", {})], [create(rolebinding("broken"))], mutating=True),
    Case(
        "mutating-delete",
        [("deny", {})],
        [create(rolebinding("doomed")), Step("DELETE", "doomed")],
        mutating=True,
        operations=["DELETE"],
    ),
]


@dataclass
class Answer:
    status: int
    body: JSON
    warnings: list[str]
    audit_id: str
    reviews: list[JSON]
    # The query of each call (`timeout=10s`: the time the webhook is given).
    queries: list[str]


class Side:
    def __init__(
        self, plane: ControlPlane, hooks: AdmissionWebhookServer, group: str, namespace: str
    ) -> None:
        self.plane = plane
        self.hooks = hooks
        self.group = group
        self.namespace = namespace

    def send(self, step: Step) -> Answer:
        path = f"/apis/{self.group}/v1/namespaces/{self.namespace}/rolebindings"
        path += f"/{step.name}" if step.name else ""
        path += f"?{step.query}" if step.query else ""
        body = None
        if step.body is not None:
            obj = json.loads(json.dumps(step.body).replace(OURS, self.group))
            body = json.dumps({**obj, "metadata": {**obj["metadata"], "namespace": self.namespace}})
        before = len(self.hooks.received)
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.plane.port, context=self.plane.ssl_context(), timeout=30
        )
        try:
            connection.request(step.method, path, body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            raw = response.read()
            received = self.hooks.received[before:]
            warnings = response.headers.get_all("Warning") or []
            audit_id = response.headers.get("Audit-Id", "")
            reviews = [item.review for item in received]
            queries = sorted(item.query for item in received)
            return Answer(response.status, json.loads(raw), warnings, audit_id, reviews, queries)
        finally:
            connection.close()


def configurations(hooks: AdmissionWebhookServer) -> list[JSON]:
    webhooks: dict[bool, list[JSON]] = {False: [], True: []}
    for case in CASES:
        for index, (behaviour, extra) in enumerate(case.hooks):
            rule = {"apiGroups": [UPSTREAM, OURS], "apiVersions": ["v1"], "operations": case.operations}
            webhooks[case.mutating].append(
                {
                    "name": f"{case.name}-{index}.hooks.coreio.test",
                    "clientConfig": hooks.client_config(behaviour),
                    "rules": [{**rule, "resources": ["rolebindings"]}],
                    "namespaceSelector": {"matchLabels": {LABEL: case.name}},
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    **extra,
                }
            )
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": f"coreio-test-{'mutating' if mutating else 'validating'}"},
            "webhooks": webhooks[mutating],
        }
        for kind, mutating in (
            ("ValidatingWebhookConfiguration", False),
            ("MutatingWebhookConfiguration", True),
        )
    ]


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if (key in MASKED and isinstance(item, str)) or (key == "time" and isinstance(item, str)):
                out[key] = "<masked>"
            else:
                out[key] = _masked(item)
        return out
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


def normalized(answer: Answer, side: Side) -> JSON:
    body = answer.body
    reviews = sorted(
        (_masked(review) for review in answer.reviews), key=lambda review: json.dumps(review, sort_keys=True)
    )
    text = json.dumps(
        {
            "status": answer.status,
            "reason": body.get("reason"),
            "message": body.get("message"),
            "details": body.get("details"),
            "object": None
            if body.get("kind") == "Status"
            else {"name": body["metadata"].get("name"), "labels": body["metadata"].get("labels")},
            "warnings": answer.warnings,
            "reviews": reviews,
            "queries": answer.queries,
        }
    )
    text = text.replace(UPSTREAM, OURS).replace(side.namespace, "<namespace>")
    # Random uids in messages (a response's uid that does not match the request's).
    masked: JSON = json.loads(_mask_uids(text))
    return masked


def _mask_uids(text: str) -> str:
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uid>", text)
    # Names generated from `gen-`.
    return re.sub(r"gen-[a-z0-9]{5}", "gen-<generated>", text)


def _admission_annotations(events: list[JSON], audit_id: str) -> JSON:
    for event in events:
        if event.get("auditID") == audit_id and event.get("stage") == "ResponseComplete":
            return {
                key: value
                for key, value in (event.get("annotations") or {}).items()
                if key.startswith(ANNOTATION_PREFIXES) or ".hooks.coreio.test/" in key
            }
    raise AssertionError(f"no ResponseComplete audit event for {audit_id}")


@pytest.fixture(scope="module")
def hooks() -> Iterator[AdmissionWebhookServer]:
    with AdmissionWebhookServer() as server:
        yield server


@pytest.fixture(scope="module")
def sides(
    control_plane: ControlPlane, aggregated_coreio: AggregatedCoreio, hooks: AdmissionWebhookServer
) -> Iterator[dict[str, tuple[Side, Side]]]:
    plane = control_plane
    pairs = {}
    for case in CASES:
        pair = (
            Side(plane, hooks, UPSTREAM, f"wh-{case.name}-up"),
            Side(plane, hooks, OURS, f"wh-{case.name}-co"),
        )
        for side in pair:
            meta = {"name": side.namespace, "labels": {LABEL: case.name}}
            plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        pairs[case.name] = pair
    objects = configurations(hooks)
    plane.apply(*objects)
    try:
        _wait_active(pairs["deny"])
        yield pairs
    finally:
        for obj in objects:
            plane.run("delete", obj["kind"], obj["metadata"]["name"], "--ignore-not-found", "--wait=false")


def _wait_active(pair: tuple[Side, Side]) -> None:
    """Both sides call the webhooks: the deny case's dry run is refused."""
    probe = create(rolebinding("probe"), "dryRun=All")
    pending = list(pair)

    def active() -> bool:
        pending[:] = [side for side in pending if side.send(probe).status < 400]
        return not pending

    wait_until(
        active,
        timeout=ACTIVE_TIMEOUT,
        interval=0.2,
        message=lambda: f"the webhooks to be called by {[s.group for s in pending]}",
    )


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_webhooks_answer_as_kube_apiserver(
    case: Case,
    sides: dict[str, tuple[Side, Side]],
    control_plane: ControlPlane,
    aggregated_coreio: AggregatedCoreio,
) -> None:
    upstream, ours = sides[case.name]
    answers = [(upstream.send(step), ours.send(step)) for step in case.steps]
    theirs_events, our_events = settled_audit_logs(
        control_plane, aggregated_coreio, [(t.audit_id, o.audit_id) for t, o in answers]
    )
    for step, (theirs, mine) in zip(case.steps, answers, strict=True):
        where = f"{step.method} {step.name or (step.body and step.body['metadata'])}"
        assert normalized(mine, ours) == normalized(theirs, upstream), where
        assert _admission_annotations(our_events, mine.audit_id) == _admission_annotations(
            theirs_events, theirs.audit_id
        ), where
