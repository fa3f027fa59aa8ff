"""The cluster's ValidatingAdmissionPolicies reach coreio's RoleBindings exactly as they reach
kube-apiserver's own: one policy and binding per case, matching both `rbac.authorization.k8s.io`
and `rbac.authorization.core.io`, the same requests sent to each side (each in a namespace of its
own, selected by the binding's namespace label), and compared: status, reason, message, causes and
warnings, and the audit annotations admission left on the request's audit event (kube-apiserver's
audit log for its side, coreio's own for ours).

Upstream's answers are rewritten to our group name and namespace only; any other difference fails.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.aggregation import AggregatedCoreio, settled_audit_logs
from tests.support.controlplane import ControlPlane
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

JSON = dict[str, Any]
OURS = "rbac.authorization.core.io"
UPSTREAM = "rbac.authorization.k8s.io"
ACTIVE_TIMEOUT = 60.0
ADMISSION_KEYS = ("validation.policy.admission.k8s.io/",)


def rolebinding(
    name: str,
    role: str = "view",
    subjects: int = 1,
    labels: JSON | None = None,
    annotations: JSON | None = None,
) -> JSON:
    metadata: JSON = {"name": name, **({"labels": labels} if labels else {})}
    if annotations:
        metadata["annotations"] = annotations
    obj: JSON = {
        "apiVersion": f"{OURS}/v1",
        "kind": "RoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": OURS, "kind": "ClusterRole", "name": role},
        "subjects": [
            {"apiGroup": OURS, "kind": "User", "name": f"user-{index}"} for index in range(subjects)
        ],
    }
    return obj


@dataclass
class Step:
    method: str
    name: str = ""
    body: JSON | None = None
    query: str = ""
    content_type: str = "application/json"


@dataclass
class Case:
    name: str
    validations: list[JSON]
    actions: list[str] = field(default_factory=lambda: ["Deny"])
    steps: list[Step] = field(default_factory=list)
    spec: JSON = field(default_factory=dict)
    binding: JSON = field(default_factory=dict)
    operations: list[str] = field(default_factory=lambda: ["CREATE", "UPDATE"])
    # Objects (ConfigMaps) each side's namespace holds before the policy goes in.
    params: list[JSON] = field(default_factory=list)


def create(obj: JSON, query: str = "") -> Step:
    return Step("POST", body=obj, query=query)


def put(obj: JSON) -> Step:
    return Step("PUT", str(obj["metadata"]["name"]), obj)


def delete(name: str) -> Step:
    return Step("DELETE", name)


NO_ADMIN = {"expression": "object.roleRef.name != 'cluster-admin'", "message": "no bindings to cluster-admin"}
COSTLY = "object.subjects.all(s, !object.metadata.annotations.big.contains(s.name))"
CASES = [
    Case(
        "deny",
        [NO_ADMIN],
        steps=[create(rolebinding("admin-rb", "cluster-admin")), create(rolebinding("view-rb"))],
    ),
    Case(
        "message-expression",
        [
            {
                "expression": "object.subjects.size() <= 2",
                "messageExpression": "'too many subjects: ' + string(object.subjects.size())",
                "reason": "Forbidden",
            },
            # No message, no messageExpression: the expression is named.
            {"expression": "object.metadata.name.startsWith('ok-')"},
        ],
        steps=[create(rolebinding("ok-many", subjects=3)), create(rolebinding("bad-name"))],
    ),
    Case(
        "warn-audit",
        [NO_ADMIN],
        actions=["Warn", "Audit"],
        steps=[create(rolebinding("warned", "cluster-admin"))],
    ),
    Case(
        "match-conditions",
        [NO_ADMIN],
        spec={
            "matchConditions": [
                {
                    "name": "enforced",
                    "expression": "has(object.metadata.labels) && 'enforce' in object.metadata.labels",
                }
            ]
        },
        steps=[
            create(rolebinding("free", "cluster-admin")),
            create(rolebinding("enforced", "cluster-admin", labels={"enforce": "yes"})),
        ],
    ),
    Case(
        "variables",
        [
            {"expression": "variables.names.all(n, n.startsWith('user-'))", "message": "only user- subjects"},
            {"expression": "variables.missing == 'x'"},
        ],
        spec={
            "variables": [
                {"name": "names", "expression": "object.subjects.map(s, s.name)"},
                {"name": "missing", "expression": "object.metadata.annotations['absent']"},
            ]
        },
        steps=[create(rolebinding("variables-rb"))],
    ),
    Case(
        "ignore-errors",
        [{"expression": "object.metadata.annotations['absent'] == 'x'"}, NO_ADMIN],
        spec={"failurePolicy": "Ignore"},
        steps=[create(rolebinding("ignored")), create(rolebinding("still-denied", "cluster-admin"))],
    ),
    Case(
        "audit-annotations",
        [NO_ADMIN],
        spec={
            "auditAnnotations": [
                {"key": "role", "valueExpression": "'bound to ' + object.roleRef.name"},
                {"key": "none", "valueExpression": "null"},
            ]
        },
        steps=[create(rolebinding("annotated"))],
    ),
    Case(
        "params",
        [
            {
                "expression": "!(object.roleRef.name in params.data.forbidden.split(','))",
                "messageExpression": (
                    "'role ' + object.roleRef.name + ' is forbidden by ' + params.metadata.name"
                ),
            }
        ],
        spec={"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}},
        binding={"paramRef": {"name": "rules", "parameterNotFoundAction": "Deny"}},
        params=[
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "rules"},
                "data": {"forbidden": "admin,edit"},
            }
        ],
        steps=[create(rolebinding("edit-rb", "edit")), create(rolebinding("view-ok"))],
    ),
    Case(
        "params-missing",
        [NO_ADMIN],
        spec={"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}},
        binding={"paramRef": {"name": "absent", "parameterNotFoundAction": "Deny"}},
        steps=[create(rolebinding("no-params"))],
    ),
    Case(
        "update-and-delete",
        [
            {
                "expression": (
                    "request.operation != 'UPDATE' || object.subjects.size() <= oldObject.subjects.size()"
                ),
                "message": "subjects may only be removed",
            },
            {
                "expression": "request.operation != 'DELETE' || !oldObject.metadata.name.startsWith('keep')",
                "message": "kept bindings stay",
            },
        ],
        operations=["CREATE", "UPDATE", "DELETE"],
        steps=[
            create(rolebinding("keep-me", subjects=2)),
            put(rolebinding("keep-me", subjects=3)),
            put(rolebinding("keep-me", subjects=1)),
            delete("keep-me"),
        ],
    ),
    Case(
        "authorizer",
        [
            {"expression": "authorizer.requestResource.check('create').allowed()", "message": "no create"},
            {
                "expression": (
                    "!authorizer.serviceAccount('default', 'nobody').group('').resource('pods')"
                    ".namespace('default').check('get').allowed() || object.roleRef.name == 'view'"
                ),
                "message": "nobody is allowed",
            },
            {
                "expression": "object.roleRef.name != 'edit' || "
                "authorizer.serviceAccount('default', 'nobody').group('').resource('pods')"
                ".check('get').allowed()",
                "message": "edit needs nobody to read pods",
            },
        ],
        steps=[create(rolebinding("authorized")), create(rolebinding("editor", "edit"))],
    ),
    Case(
        "dry-run",
        [NO_ADMIN],
        steps=[create(rolebinding("dry", "cluster-admin"), "dryRun=All")],
    ),
    # Runtime cost, as cel-go's tracker counts it: 12,000 iterations cost about 72,000 (within
    # the per-call limit of 1,000,000, however many iterations that is) ...
    Case(
        "cost-many-iterations",
        [{"expression": "object.subjects.all(s, s.name != 'root')"}],
        steps=[create(rolebinding("many", subjects=12_000))],
    ),
    # ... 40 searches of a 250,000-byte string cost 1,000,401 (over the limit; 38 cost 950,383) ...
    Case(
        "cost-per-call-limit",
        [{"expression": COSTLY}],
        steps=[create(rolebinding("costly", subjects=40, annotations={"big": "a" * 250_000}))],
    ),
    # ... and a policy's expressions spend 10,000,000 in all: the eleventh of 950,383 runs out.
    Case(
        "cost-budget",
        [{"expression": COSTLY, "message": f"costly {index}"} for index in range(11)],
        steps=[
            create(rolebinding("within", subjects=1, annotations={"big": "a" * 250_000})),
            create(rolebinding("spent", subjects=38, annotations={"big": "a" * 250_000})),
        ],
    ),
    # The messageExpressions spend what the validations left: here not enough, so every validation
    # that did not fail is an error ("failed messageExpression: ...").
    Case(
        "cost-message-budget",
        [
            *({"expression": COSTLY} for _ in range(10)),
            {"expression": "true", "messageExpression": f"{COSTLY} ? 'costly' : 'cheap'"},
        ],
        steps=[create(rolebinding("messages", subjects=38, annotations={"big": "a" * 250_000}))],
    ),
    # A variable is charged once, to the first expression that names it: eleven reads of one
    # costing 950,383 fit.
    Case(
        "cost-variable-once",
        [{"expression": "variables.costly"} for _ in range(11)],
        spec={"variables": [{"name": "costly", "expression": COSTLY}]},
        steps=[create(rolebinding("shared", subjects=38, annotations={"big": "a" * 250_000}))],
    ),
    # matchConditions have 2,500,000 between them; audit annotations 10,000,000 of their own.
    Case(
        "cost-match-conditions",
        [NO_ADMIN],
        spec={"matchConditions": [{"name": f"costly-{n}", "expression": COSTLY} for n in range(3)]},
        steps=[create(rolebinding("matched", subjects=38, annotations={"big": "a" * 250_000}))],
    ),
    Case(
        "cost-audit-annotations",
        [NO_ADMIN],
        spec={
            "auditAnnotations": [
                {"key": f"costly-{n}", "valueExpression": f"{COSTLY} ? 'costly' : 'cheap'"} for n in range(11)
            ]
        },
        steps=[create(rolebinding("annotated", subjects=38, annotations={"big": "a" * 250_000}))],
    ),
]
# An authorization check costs 350,000: two in a loop fit the per-call limit, the third does not.
CHECKS = (
    "object.subjects.all(s, "
    "!authorizer.serviceAccount('default', s.name).group('').resource('pods').check('get').allowed())"
)
CASES.append(
    Case(
        "cost-authorizer-checks",
        [{"expression": CHECKS, "message": "a subject may read pods"}],
        steps=[
            create(rolebinding("two-checks", subjects=2)),
            create(rolebinding("three-checks", subjects=3)),
        ],
    )
)
# The rest of the environment: formats, sets, two-variable comprehensions, the lists' indexOf.
NAME_FORMAT = "format.dns1123Label().validate(object.metadata.name)"
CASES.append(
    Case(
        "libraries",
        [
            {
                "expression": f"!{NAME_FORMAT}.hasValue()",
                "messageExpression": f"'bad name: ' + {NAME_FORMAT}.orValue([]).join('; ')",
            },
            {"expression": "!sets.intersects(object.subjects.map(s, s.name), ['root'])", "message": "root"},
            {"expression": "object.subjects.all(i, s, i == 0 || s.kind != 'Group')", "message": "groups"},
            {"expression": "object.subjects.map(s, s.name).indexOf('user-1') != 1", "message": "second"},
            {"expression": "object.subjects.transformMap(i, s, s.name).size() == size(object.subjects)"},
        ],
        steps=[
            create(rolebinding("Bad.Name")),
            create(rolebinding("fine", subjects=1)),
            create(rolebinding("second", subjects=2)),
            create(
                {**rolebinding("rooted"), "subjects": [{"apiGroup": OURS, "kind": "User", "name": "root"}]}
            ),
            create(
                {
                    **rolebinding("grouped"),
                    "subjects": [{"apiGroup": OURS, "kind": k, "name": k.lower()} for k in ("User", "Group")],
                }
            ),
        ],
    )
)
PROBE = {"expression": "object.metadata.name != 'probe'", "message": "probe"}


@dataclass
class Answer:
    status: int
    body: JSON
    warnings: list[str]
    audit_id: str


class Side:
    """One side: the group it writes to and its namespace."""

    def __init__(self, plane: ControlPlane, group: str, namespace: str) -> None:
        self.plane = plane
        self.group = group
        self.namespace = namespace

    def send(self, step: Step) -> Answer:
        path = f"/apis/{self.group}/v1/namespaces/{self.namespace}/rolebindings"
        if step.name:
            path += f"/{step.name}"
        if step.query:
            path += f"?{step.query}"
        body = None
        if step.body is not None:
            body = json.dumps(_for_group(step.body, self.group, self.namespace))
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.plane.port, context=self.plane.ssl_context(), timeout=30
        )
        try:
            connection.request(step.method, path, body=body, headers={"Content-Type": step.content_type})
            response = connection.getresponse()
            raw = response.read()
            warnings = response.headers.get_all("Warning") or []
            return Answer(response.status, json.loads(raw), warnings, response.headers.get("Audit-Id", ""))
        finally:
            connection.close()


def _for_group(obj: JSON, group: str, namespace: str) -> JSON:
    """The body with `group` for ours (apiVersion, roleRef's and subjects' apiGroup)."""
    out: JSON = json.loads(json.dumps(obj).replace(OURS, group))
    out["metadata"]["namespace"] = namespace
    return out


def policy_objects(case: Case) -> list[JSON]:
    name = f"coreio-test-{case.name}"
    rules = [
        {
            "apiGroups": [UPSTREAM, OURS],
            "apiVersions": ["v1"],
            "operations": case.operations,
            "resources": ["rolebindings"],
        }
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": rules},
            "validations": [*case.validations, PROBE],
            **case.spec,
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"{name}-binding"},
        "spec": {
            "policyName": name,
            "validationActions": case.actions,
            "matchResources": {"namespaceSelector": {"matchLabels": {"coreio-vap-case": case.name}}},
            **case.binding,
        },
    }
    return [policy, binding]


def normalized(answer: Answer, side: Side) -> JSON:
    """What is compared: the status code, and for a Status its reason, message and causes; for an
    object its name and role; the warnings. Upstream's group and namespace become ours."""
    text = json.dumps(
        {
            "status": answer.status,
            "reason": answer.body.get("reason"),
            "message": answer.body.get("message"),
            "details": answer.body.get("details"),
            "name": (answer.body.get("metadata") or {}).get("name")
            if answer.body.get("kind") != "Status"
            else None,
            "warnings": answer.warnings,
        }
    )
    rewritten: JSON = json.loads(text.replace(UPSTREAM, OURS).replace(side.namespace, "<namespace>"))
    return rewritten


def _admission_annotations(events: list[JSON], audit_id: str) -> JSON:
    for event in events:
        if event.get("auditID") == audit_id and event.get("stage") == "ResponseComplete":
            return {
                key: value
                for key, value in (event.get("annotations") or {}).items()
                if key.startswith(ADMISSION_KEYS) or key.startswith("coreio-test-")
            }
    raise AssertionError(f"no ResponseComplete audit event for {audit_id}")


def _wait_active(sides: tuple[Side, Side]) -> None:
    """Both sides enforce the case's policy: a probe is no longer admitted silently."""
    # Labelled so that the match-conditions case's condition lets it through.
    probe = Step("POST", body=rolebinding("probe", labels={"enforce": "probe"}), query="dryRun=All")
    pending = list(sides)

    def enforced() -> bool:
        pending[:] = [side for side in pending if (a := side.send(probe)).status < 400 and not a.warnings]
        return not pending

    wait_until(
        enforced,
        timeout=ACTIVE_TIMEOUT,
        interval=0.2,
        message=lambda: f"the policy to be enforced by {[s.group for s in pending]}",
    )


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane, aggregated_coreio: AggregatedCoreio) -> Iterator[ControlPlane]:
    yield control_plane


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_policy_answers_as_kube_apiserver(
    case: Case, plane: ControlPlane, aggregated_coreio: AggregatedCoreio
) -> None:
    upstream = Side(plane, UPSTREAM, f"vap-{case.name}-up")
    ours = Side(plane, OURS, f"vap-{case.name}-co")
    for side in (upstream, ours):
        labels = {"coreio-vap-case": case.name}
        plane.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": side.namespace, "labels": labels}}
        )
        for param in case.params:
            plane.apply({**param, "metadata": {**param["metadata"], "namespace": side.namespace}})
    objects = policy_objects(case)
    plane.apply(*objects)
    try:
        _wait_active((upstream, ours))
        answers = [(upstream.send(step), ours.send(step)) for step in case.steps]
        theirs_events, our_events = settled_audit_logs(
            plane, aggregated_coreio, [(t.audit_id, o.audit_id) for t, o in answers]
        )
        for step, (theirs, mine) in zip(case.steps, answers, strict=True):
            where = f"{step.method} {step.name or (step.body and step.body['metadata']['name'])}"
            assert normalized(mine, ours) == normalized(theirs, upstream), where
            assert _admission_annotations(our_events, mine.audit_id) == _admission_annotations(
                theirs_events, theirs.audit_id
            ), where
    finally:
        for obj in reversed(objects):
            plane.run("delete", obj["kind"], obj["metadata"]["name"], "--ignore-not-found", "--wait=false")
