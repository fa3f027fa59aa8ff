"""coreio's access reviews (rbac.authorization.core.io/v1, namespaced, create-only): the objects
`kubectl coreio` sends and reads back.

- ResourceAccessReview (who-can): `spec.resourceAttributes` (verb, group, resource, subresource,
  name); `status.subjects`, each with the binding (`grantedBy`), its `roleRef` and the `rule`;
  `status.incomplete` when the cluster's own bindings may allow more.
- AccessExplanation (why): `spec.user`, `spec.groups`, `spec.uid` and `spec.resourceAttributes`;
  `status.allowed`, `status.reason` and `status.decisions`, one per step of the authorizer chain.
- RoleBindingReview (bindings): `spec.problemsOnly`; `status.roleBindings`, each with its
  `problems` (reason and message, as the authorizer reports them).

Each function takes the parsed spec and answers the whole object; mistakes are upstream's 422 with
the offending field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from apiserver.auth.attributes import non_resource_attributes, resource_attributes
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.types import JSON
from apiserver.rbac.authorizer import Binding, BindingProblem, RBACAuthorizer, RoleRef, Subject
from apiserver.rbac.explain import Decision, Explanation
from apiserver.rbac.roles import PolicyRule
from apiserver.rbac.whocan import Grant, WhoCan
from apiserver.resources.rolebinding import ACCESS_REVIEWS, GROUP

API_VERSION = f"{GROUP}/v1"
RESOURCE_ACCESS_REVIEW, ACCESS_EXPLANATION, ROLE_BINDING_REVIEW = (kind for _, kind in ACCESS_REVIEWS)
_ATTRIBUTES = ("verb", "group", "version", "resource", "subresource", "name")


def member(obj: JSON, name: str) -> JSON:
    value = obj.get(name)
    return value if isinstance(value, dict) else {}


def _invalid(kind: str, *causes: errors.FieldError) -> errors.StatusError:
    return errors.invalid_error(GROUP, kind, "", list(causes))


def check_namespace(body: JSON, namespace: str) -> None:
    """The object's namespace, when it has one, is the request's (upstream's 400)."""
    given = member(body, "metadata").get("namespace")
    if given and given != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )


def attributes(kind: str, body: JSON, namespace: str) -> tuple[JSON, RequestInfo]:
    """The spec's attributes as written back (`resourceAttributes` in `namespace`, or
    `nonResourceAttributes`: exactly one, as upstream's reviews), and the request they describe."""
    spec = member(body, "spec")
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if non_resource is not None:
        if resource is not None:
            detail = "cannot be specified in combination with resourceAttributes"
            raise _invalid(kind, errors.invalid("spec.nonResourceAttributes", non_resource, detail))
        return _non_resource(kind, non_resource if isinstance(non_resource, dict) else {})
    return _resource(kind, resource if isinstance(resource, dict) else {}, namespace)


def _resource(kind: str, given: JSON, namespace: str) -> tuple[JSON, RequestInfo]:
    """Verb and resource required; the namespace is the request's."""
    written = {key: str(given[key]) for key in _ATTRIBUTES if given.get(key)}
    path = "spec.resourceAttributes"
    missing = [errors.required(f"{path}.{key}") for key in ("verb", "resource") if key not in written]
    if missing:
        raise _invalid(kind, *missing)
    if given.get("namespace") not in (None, "", namespace):
        detail = "must match the namespace of the request"
        raise _invalid(kind, errors.invalid(f"{path}.namespace", given["namespace"], detail))
    written["namespace"] = namespace
    info = resource_attributes(
        written["verb"],
        api_group=written.get("group", ""),
        api_version=written.get("version", "*"),
        resource=written["resource"],
        subresource=written.get("subresource", ""),
        namespace=namespace,
        name=written.get("name", ""),
    )
    return {"resourceAttributes": written}, info


def _non_resource(kind: str, given: JSON) -> tuple[JSON, RequestInfo]:
    """A path (such as /healthz) and a verb, both required; RoleBindings never grant these."""
    written = {key: str(given[key]) for key in ("path", "verb") if given.get(key)}
    path = "spec.nonResourceAttributes"
    missing = [errors.required(f"{path}.{key}") for key in ("path", "verb") if key not in written]
    if missing:
        raise _invalid(kind, *missing)
    return {"nonResourceAttributes": written}, non_resource_attributes(written["verb"], written["path"])


def subject_of(body: JSON) -> tuple[str, list[str], str]:
    """`spec.user`, `spec.groups` and `spec.uid` of an AccessExplanation (user required)."""
    spec = member(body, "spec")
    user, uid, groups = spec.get("user"), spec.get("uid", ""), spec.get("groups", [])
    if not isinstance(user, str) or not user:
        raise _invalid(ACCESS_EXPLANATION, errors.required("spec.user"))
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise _invalid(ACCESS_EXPLANATION, errors.invalid("spec.groups", groups, "must be a list of strings"))
    if not isinstance(uid, str):
        raise _invalid(ACCESS_EXPLANATION, errors.invalid("spec.uid", uid, "must be a string"))
    return user, list(groups), uid


def answer(kind: str, namespace: str, spec: JSON, status: JSON) -> JSON:
    meta: JSON = {"namespace": namespace} if namespace else {}
    meta["creationTimestamp"] = None
    return {"kind": kind, "apiVersion": API_VERSION, "metadata": meta, "spec": spec, "status": status}


# ----------------------------------------------------------------------------- shapes


def subject_json(subject: Subject) -> JSON:
    """As a RoleBinding's subject is written."""
    written: JSON = {"kind": subject.kind}
    if subject.api_group:
        written["apiGroup"] = subject.api_group
    written["name"] = subject.name
    if subject.namespace:
        written["namespace"] = subject.namespace
    return written


def role_ref_json(ref: RoleRef) -> JSON:
    return {"apiGroup": ref.api_group, "kind": ref.kind, "name": ref.name}


def rule_json(rule: PolicyRule) -> JSON:
    return rule.to_json()


def problems_json(problems: Iterable[BindingProblem]) -> list[JSON]:
    return [{"reason": p.reason.value, "message": p.message} for p in problems]


# ----------------------------------------------------------------------------- the three answers


def who_can_status(found: WhoCan, *, incomplete: bool) -> JSON:
    status: JSON = {"subjects": [_grant_json(grant) for grant in found.grants], "incomplete": incomplete}
    if found.errors:
        status["evaluationError"] = errors.aggregate_message(found.errors)
    return status


def _grant_json(grant: Grant) -> JSON:
    granted_by: JSON = {"kind": grant.binding_kind, "name": grant.binding}
    if grant.namespace:
        granted_by["namespace"] = grant.namespace
    return {
        **subject_json(grant.subject),
        "grantedBy": granted_by,
        "roleRef": role_ref_json(grant.role_ref),
        "rule": rule_json(grant.rule),
    }


def explanation_status(found: Explanation) -> JSON:
    status: JSON = {"allowed": found.allowed}
    if found.reason:
        status["reason"] = found.reason
    if found.evaluation_error:
        status["evaluationError"] = found.evaluation_error
    status["decisions"] = [_decision_json(d) for d in found.decisions]
    status["otherRoleBindings"] = found.other_bindings
    return status


def _decision_json(decision: Decision) -> JSON:
    written: JSON = {"authorizer": decision.step.value, "decision": decision.verdict.value}
    if decision.binding is not None:
        written["roleBinding"] = decision.binding.name
        written["roleRef"] = role_ref_json(decision.binding.role_ref)
    if decision.subject is not None:
        written["subject"] = subject_json(decision.subject)
    if decision.rule is not None:
        written["rule"] = rule_json(decision.rule)
    written["reason"] = decision.reason
    if decision.problems:
        written["problems"] = problems_json(decision.problems)
    return written


def binding_review_status(rbac: RBACAuthorizer, bindings: Sequence[Binding], *, problems_only: bool) -> JSON:
    """Each binding (by namespace and name) with its problems, its roleRef's resolution included."""
    entries = []
    for binding in sorted(bindings, key=lambda b: (b.namespace, b.name)):
        resolved = rbac.resolve(binding)
        if problems_only and not resolved.problems:
            continue
        entries.append(
            {
                "namespace": binding.namespace,
                "name": binding.name,
                "roleRef": role_ref_json(binding.role_ref),
                "subjects": [subject_json(s) for s in binding.subjects],
                "problems": problems_json(resolved.problems),
            }
        )
    return {"roleBindings": entries}
