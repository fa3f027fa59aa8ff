"""The ValidatingAdmissionPolicy plugin's rules, as upstream's validator and dispatcher apply them:
messages and their fallbacks, reasons and codes, the binding's actions, audit annotations,
failurePolicy on errors, matchConditions, variables and params (from a manifest source)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from apiserver.admission.policy.plugin import ValidatingPolicies
from apiserver.admission.request import CREATE, DELETE, AdmissionRequest
from apiserver.admission.sources import ManifestSource
from apiserver.auth.authz import Decision
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import requestnotes
from apiserver.machinery.errors import StatusError
from apiserver.machinery.user import UserInfo
from apiserver.resources.rolebinding import RoleBindingKind

JSON = dict[str, Any]
RB = RoleBindingKind()
NAMESPACE = "team"


def rolebinding(name: str = "rb", role: str = "view", subjects: int = 1) -> JSON:
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "name": f"u{i}"} for i in range(subjects)],
    }


def policy(validations: list[JSON], name: str = "p", **spec: Any) -> JSON:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"validations": validations, **spec},
    }


def binding(actions: list[str], policy_name: str = "p", name: str = "b", **spec: Any) -> JSON:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy_name, "validationActions": actions, **spec},
    }


def request(obj: JSON | None = None, operation: str = CREATE, old: JSON | None = None) -> AdmissionRequest:
    obj = rolebinding() if obj is None and operation != DELETE else obj
    name = str(((obj or old or {}).get("metadata") or {}).get("name") or "")
    user = UserInfo("alice", "uid-1", ("devs", "system:authenticated"))
    return AdmissionRequest(RB, operation, NAMESPACE, name, obj, old, user, False, {"kind": "CreateOptions"})


def run(
    objects: list[JSON], req: AdmissionRequest | None = None
) -> tuple[StatusError | None, requestnotes.RequestNotes]:
    """The plugin's verdict on the request, and the warnings and annotations it noted."""

    async def validate() -> tuple[StatusError | None, requestnotes.RequestNotes]:
        notes = requestnotes.begin()
        try:
            await ValidatingPolicies(ManifestSource(objects)).validate(req or request())
        except StatusError as exc:
            return exc, notes
        return None, notes

    return asyncio.run(validate())


def denied(objects: list[JSON], req: AdmissionRequest | None = None) -> StatusError:
    error, _ = run(objects, req)
    assert error is not None
    return error


NO_ADMIN = {"expression": "object.roleRef.name != 'cluster-admin'", "message": "no bindings to cluster-admin"}


def test_a_denial_is_upstreams_status() -> None:
    error = denied([policy([NO_ADMIN]), binding(["Deny"])], request(rolebinding(role="cluster-admin")))
    message = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no bindings to cluster-admin"
    assert error.code == 422
    assert error.reason == "Invalid"
    assert error.message == f'rolebindings.rbac.authorization.core.io "rb" is forbidden: {message}'
    assert error.details == {
        "name": "rb",
        "group": "rbac.authorization.core.io",
        "kind": "rolebindings",
        "causes": [{"message": message}],
    }
    assert run([policy([NO_ADMIN]), binding(["Deny"])])[0] is None


@pytest.mark.parametrize(
    ("reason", "code"),
    [("Forbidden", 403), ("Unauthorized", 401), ("RequestEntityTooLarge", 413), ("Invalid", 422)],
)
def test_a_reason_sets_the_code(reason: str, code: int) -> None:
    error = denied([policy([{"expression": "false", "reason": reason}]), binding(["Deny"])])
    assert (error.reason, error.code) == (reason, code)


@pytest.mark.parametrize(
    ("validation", "message"),
    [
        ({"expression": "false", "messageExpression": "'name ' + object.metadata.name"}, "name rb"),
        ({"expression": "false", "messageExpression": "  'padded'  "}, "padded"),
        # Not a string, empty, several lines or too long: the message instead, else the expression.
        ({"expression": "false", "messageExpression": "1", "message": "fixed"}, "fixed"),
        ({"expression": "false", "messageExpression": "''", "message": "fixed"}, "fixed"),
        ({"expression": "false", "messageExpression": "'a\\nb'", "message": "fixed"}, "fixed"),
        ({"expression": "false", "messageExpression": "'x'.repeat(6000)", "message": "fixed"}, "fixed"),
        ({"expression": "false", "messageExpression": "object.missing", "message": "fixed"}, "fixed"),
        ({"expression": " false "}, "failed expression: false"),
        # A result that is not true denies, even when it is no bool (an untyped field).
        ({"expression": "object.roleRef.name", "message": "not a bool"}, "not a bool"),
        # A type the checker knows is no bool is a compilation error.
        ({"expression": "'yes'", "message": "x"}, "compilation error: must evaluate to bool but got string"),
    ],
)
def test_the_message_and_its_fallbacks(validation: JSON, message: str) -> None:
    error = denied([policy([validation]), binding(["Deny"])])
    assert error.message.endswith(f"denied request: {message}")


def test_warn_and_audit_admit_and_say_so() -> None:
    error, notes = run(
        [policy([{"expression": "true"}, NO_ADMIN]), binding(["Warn", "Audit"])],
        request(rolebinding(role="cluster-admin")),
    )
    assert error is None
    assert notes.warnings == [
        "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': no bindings to cluster-admin"
    ]
    failure = notes.annotations["validation.policy.admission.k8s.io/validation_failure"]
    assert failure == (
        '[{"message":"no bindings to cluster-admin","policy":"p","binding":"b","expressionIndex":1,'
        '"validationActions":["Warn","Audit"]}]'
    )


def test_the_first_denial_is_the_answer() -> None:
    objects = [
        policy([{"expression": "false", "message": "first"}], name="a"),
        policy([{"expression": "false", "message": "second"}], name="b"),
        binding(["Deny"], "a", "a-binding"),
        binding(["Deny"], "b", "b-binding"),
    ]
    assert "'a' with binding 'a-binding' denied request: first" in denied(objects).message


def test_errors_follow_the_failure_policy() -> None:
    broken = {"expression": "object.metadata.annotations['absent'] == 'x'"}
    error = denied([policy([broken]), binding(["Deny"])])
    assert error.code == 422
    assert error.message.endswith(
        "denied request: expression 'object.metadata.annotations['absent'] == 'x'' resulted in error: "
        "no such key: annotations"
    )
    assert run([policy([broken], failurePolicy="Ignore"), binding(["Deny"])])[0] is None


def test_a_compile_error_denies_under_fail() -> None:
    error = denied([policy([{"expression": "object.metadata.name ==="}]), binding(["Deny"])])
    assert "denied request: compilation error: compilation failed: " in error.message


def test_match_conditions_skip_or_fail() -> None:
    deny_all = [{"expression": "false", "message": "denied"}]
    skip = [{"name": "never", "expression": "false"}]
    assert run([policy(deny_all, matchConditions=skip), binding(["Deny"])])[0] is None
    holds = [{"name": "always", "expression": "true"}]
    assert denied([policy(deny_all, matchConditions=holds), binding(["Deny"])]).message.endswith("denied")
    # An error and no false condition: failurePolicy decides (Fail: denied with the error).
    erring = [{"name": "err", "expression": "object.nothing == 1"}, {"name": "ok", "expression": "true"}]
    error = denied([policy(deny_all, matchConditions=erring), binding(["Deny"])])
    assert (
        "denied request: expression 'object.nothing == 1' resulted in error: no such key: nothing"
        in error.message
    )
    # A false condition wins over an error.
    assert run([policy(deny_all, matchConditions=[*erring, *skip]), binding(["Deny"])])[0] is None
    assert (
        run([policy(deny_all, matchConditions=erring, failurePolicy="Ignore"), binding(["Deny"])])[0] is None
    )


def test_variables_compose_and_their_errors_reach_only_their_readers() -> None:
    variables = [
        {"name": "role", "expression": "object.roleRef.name"},
        {"name": "admin", "expression": "variables.role == 'cluster-admin'"},
        {"name": "broken", "expression": "object.metadata.labels['x']"},
    ]
    guarded = policy([{"expression": "!variables.admin", "message": "admin"}], variables=variables)
    assert run([guarded, binding(["Deny"])])[0] is None
    assert denied([guarded, binding(["Deny"])], request(rolebinding(role="cluster-admin"))).message.endswith(
        "denied request: admin"
    )
    reader = policy([{"expression": "variables.broken == 'y'"}], variables=variables)
    assert denied([reader, binding(["Deny"])]).message.endswith(
        "denied request: expression 'variables.broken == 'y'' resulted in error: "
        'composited variable "broken" fails to evaluate: no such key: labels'
    )


def test_request_and_namespace_object_are_upstreams() -> None:
    checks = [
        {"expression": "request.operation == 'CREATE' && request.userInfo.username == 'alice'"},
        {"expression": "request.userInfo.groups == ['devs', 'system:authenticated']"},
        {"expression": "request.kind.kind == 'RoleBinding' && request.resource.resource == 'rolebindings'"},
        {"expression": "request.namespace == 'team' && request.name == 'rb' && request.dryRun == false"},
        {"expression": "request.options.kind == 'CreateOptions' && oldObject == null"},
        {"expression": "namespaceObject.metadata.labels['kubernetes.io/metadata.name'] == 'team'"},
    ]
    assert run([policy(checks), binding(["Deny"])])[0] is None


def test_audit_annotations_are_published_per_policy() -> None:
    annotations = [
        {"key": "role", "valueExpression": "'bound to ' + object.roleRef.name"},
        {"key": "empty", "valueExpression": "'  '"},
        {"key": "none", "valueExpression": "null"},
    ]
    error, notes = run([policy([{"expression": "true"}], auditAnnotations=annotations), binding(["Deny"])])
    assert error is None
    assert notes.annotations == {"p/role": "bound to view"}
    unsupported = [{"key": "n", "valueExpression": "object.subjects"}]
    error = denied([policy([{"expression": "true"}], auditAnnotations=unsupported), binding(["Deny"])])
    assert error.message.endswith(
        "denied request: valueExpression 'object.subjects' resulted in unsupported return type: list. "
        "Return type must be either string or null."
    )
    typed = [{"key": "n", "valueExpression": "1"}]
    error = denied([policy([{"expression": "true"}], auditAnnotations=typed), binding(["Deny"])])
    assert error.message.endswith(
        "denied request: compilation error: must evaluate to one of [string null_type] but got int"
    )


def config_map(name: str, forbidden: str, labels: JSON | None = None) -> JSON:
    meta: JSON = {"name": name, "namespace": NAMESPACE, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"forbidden": forbidden}}


PARAM_POLICY = policy(
    [
        {
            "expression": "object.roleRef.name != params.data.forbidden",
            "messageExpression": "params.metadata.name",
        }
    ],
    paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
    auditAnnotations=[{"key": "checked", "valueExpression": "params.data.forbidden"}],
)


def test_params_by_name_and_by_selector() -> None:
    maps = [
        config_map("edit-rule", "edit", {"rule": "yes"}),
        config_map("admin-rule", "admin", {"rule": "yes"}),
    ]
    by_name = binding(["Deny"], paramRef={"name": "edit-rule"})
    assert denied([PARAM_POLICY, by_name, *maps], request(rolebinding(role="edit"))).message.endswith(
        "edit-rule"
    )
    assert run([PARAM_POLICY, by_name, *maps], request(rolebinding(role="admin")))[0] is None
    by_selector = binding(["Deny"], paramRef={"selector": {"matchLabels": {"rule": "yes"}}})
    assert denied([PARAM_POLICY, by_selector, *maps], request(rolebinding(role="admin"))).message.endswith(
        "admin-rule"
    )
    # Every param is evaluated; their distinct annotation values are joined.
    error, notes = run([PARAM_POLICY, by_selector, *maps], request(rolebinding(role="view")))
    assert error is None
    assert notes.annotations == {"p/checked": "edit, admin"}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            {"name": "absent", "parameterNotFoundAction": "Deny"},
            "failed to configure binding: no params found for policy binding "
            "with `Deny` parameterNotFoundAction",
        ),
        (
            {"name": "x", "selector": {}},
            "failed to configure binding: paramRef.name and paramRef.selector are mutually exclusive",
        ),
        ({"namespace": NAMESPACE}, "failed to configure binding: one of name or selector must be provided"),
    ],
)
def test_params_that_cannot_be_had(ref: JSON, message: str) -> None:
    error = denied([PARAM_POLICY, binding(["Deny"], paramRef=ref), config_map("other", "edit")])
    assert error.message.endswith(f"denied request: {message}")
    assert error.code == 422


def test_missing_params_allowed_skip_the_policy() -> None:
    ref = {"name": "absent", "parameterNotFoundAction": "Allow"}
    assert (
        run(
            [PARAM_POLICY, binding(["Deny"], paramRef=ref), config_map("x", "view")],
            request(rolebinding(role="view")),
        )[0]
        is None
    )


def test_a_delete_is_judged_on_the_old_object() -> None:
    keep = {"expression": "oldObject.metadata.name != 'keep' && object == null", "message": "kept"}
    rule = {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["DELETE"], "resources": ["*"]}
    objects = [policy([keep], matchConstraints={"resourceRules": [rule]}), binding(["Deny"])]
    error = denied(objects, request(None, DELETE, rolebinding("keep")))
    assert error.message == (
        "rolebindings.rbac.authorization.core.io \"keep\" is forbidden: ValidatingAdmissionPolicy 'p' "
        "with binding 'b' denied request: kept"
    )
    assert run(objects, request(None, DELETE, rolebinding("other")))[0] is None
    # The policy's rules name DELETE only: creates pass.
    assert run(objects, request(rolebinding("keep")))[0] is None


def test_a_binding_without_its_policy_does_nothing() -> None:
    assert run([binding(["Deny"], policy_name="missing")])[0] is None
    assert json.dumps(run([policy([{"expression": "false"}])])[1].annotations) == "{}"


class FakeAuthorizerForTests:
    """Allows alice to create pods in `team` and to GET /healthz; the service account
    team/builder to list secrets; fails on the group `broken`. Records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, RequestInfo]] = []

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        self.asked.append((user.name, info))
        if info.api_group == "broken":
            raise RuntimeError("the cluster did not answer")
        rules = {
            ("alice", "create", "pods", "team"),
            ("system:serviceaccount:team:builder", "list", "secrets", ""),
        }
        if (user.name, info.verb, info.resource, info.namespace) in rules:
            return Decision(True, "allowed by the fake")
        if (user.name, info.verb, info.path) == ("alice", "get", "/healthz"):
            return Decision(True, "path allowed")
        return Decision(False, "")


def judged(objects: list[JSON], authorizer: Any) -> StatusError | None:
    async def validate() -> StatusError | None:
        requestnotes.begin()
        try:
            await ValidatingPolicies(ManifestSource(objects), authorizer).validate(request())
        except StatusError as exc:
            return exc
        return None

    return asyncio.run(validate())


@pytest.mark.parametrize(
    ("expression", "allowed"),
    [
        ("authorizer.group('').resource('pods').namespace('team').check('create').allowed()", True),
        ("authorizer.group('').resource('pods').namespace('other').check('create').allowed()", False),
        (
            "authorizer.group('').resource('pods').namespace('team').check('create').reason()"
            " == 'allowed by the fake'",
            True,
        ),
        ("authorizer.path('/healthz').check('get').allowed()", True),
        (
            "authorizer.serviceAccount('team', 'builder').group('').resource('secrets')"
            ".check('list').allowed()",
            True,
        ),
        ("authorizer.requestResource.check('create').allowed()", False),
        ("authorizer.group('broken').resource('x').check('get').errored()", True),
        (
            "authorizer.group('broken').resource('x').check('get').error() == 'the cluster did not answer'",
            True,
        ),
        ("authorizer.group('').resource('pods').check('get').errored()", False),
    ],
)
def test_the_authorizer_checks_with_the_servers_authorizer(expression: str, allowed: bool) -> None:
    fake = FakeAuthorizerForTests()
    error = judged([policy([{"expression": expression, "message": "no"}]), binding(["Deny"])], fake)
    assert (error is None) is allowed, error
    assert fake.asked


def test_the_request_resource_is_the_requests_own() -> None:
    fake = FakeAuthorizerForTests()
    judged(
        [
            policy([{"expression": "authorizer.requestResource.check('escalate').allowed()"}]),
            binding(["Deny"]),
        ],
        fake,
    )
    ((name, info),) = fake.asked
    assert name == "alice"
    assert (info.verb, info.api_group, info.api_version, info.resource, info.namespace, info.name) == (
        "escalate",
        "rbac.authorization.core.io",
        "*",
        "rolebindings",
        NAMESPACE,
        "rb",
    )


def test_without_an_authorizer_a_check_is_an_error() -> None:
    expression = "authorizer.group('').resource('pods').check('get').error()"
    error = judged(
        [policy([{"expression": f"{expression} == ''", "message": "errored"}]), binding(["Deny"])], None
    )
    assert error is not None and error.message.endswith("denied request: errored")
