"""The self reviews a standalone server answers as kube-apiserver does, so that `kubectl auth can-i`
(and `--list`) and `kubectl auth whoami` work against it: authorization.k8s.io/v1
SelfSubjectAccessReview and SelfSubjectRulesReview, answered by the server's own authorizer chain
and rules, and authentication.k8s.io/v1 SelfSubjectReview. In a cluster kube-apiserver answers them
(the aggregator does not send these groups here).

Each takes the request's object (JSON, however it came) and returns the answer object; mistakes are
upstream's 400 and 422 Status errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from apiserver.auth.attributes import non_resource_attributes, resource_attributes
from apiserver.auth.authz import Authorizer
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.protobuf import Field, Schema
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.rbac.roles import PolicyRule

AUTHORIZATION_GROUP = "authorization.k8s.io"
AUTHENTICATION_GROUP = "authentication.k8s.io"
ACCESS_REVIEW = "SelfSubjectAccessReview"
RULES_REVIEW = "SelfSubjectRulesReview"
SELF_REVIEW = "SelfSubjectReview"
# (group, plural, kind) of each review, as discovery and the routes name them.
REVIEWS = (
    (AUTHORIZATION_GROUP, "selfsubjectaccessreviews", ACCESS_REVIEW),
    (AUTHORIZATION_GROUP, "selfsubjectrulesreviews", RULES_REVIEW),
    (AUTHENTICATION_GROUP, "selfsubjectreviews", SELF_REVIEW),
)
# A user's rules in a namespace, and the errors met resolving them (upstream's RulesFor).
RulesFor = Callable[[UserInfo, str], tuple[Sequence[PolicyRule], Sequence[str]]]

# --------------------------------------------------------------------- protobuf (what kubectl sends)

_OBJECT_META: Schema = {
    1: Field("name", "string"),
    2: Field("generateName", "string"),
    3: Field("namespace", "string"),
}
_SELECTOR_REQUIREMENT: Schema = {
    1: Field("key", "string"),
    2: Field("operator", "string"),
    3: Field("values", "string", repeated=True),
}
_SELECTOR: Schema = {1: Field("rawSelector", "string"), 2: Field("requirements", _SELECTOR_REQUIREMENT, True)}
_RESOURCE_ATTRIBUTES: Schema = {
    1: Field("namespace", "string"),
    2: Field("verb", "string"),
    3: Field("group", "string"),
    4: Field("version", "string"),
    5: Field("resource", "string"),
    6: Field("subresource", "string"),
    7: Field("name", "string"),
    8: Field("fieldSelector", _SELECTOR),
    9: Field("labelSelector", _SELECTOR),
}
_NON_RESOURCE_ATTRIBUTES: Schema = {1: Field("path", "string"), 2: Field("verb", "string")}
PROTOBUF_SCHEMAS: dict[str, Schema] = {
    ACCESS_REVIEW: {
        1: Field("metadata", _OBJECT_META),
        2: Field(
            "spec",
            {
                1: Field("resourceAttributes", _RESOURCE_ATTRIBUTES),
                2: Field("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    RULES_REVIEW: {1: Field("metadata", _OBJECT_META), 2: Field("spec", {1: Field("namespace", "string")})},
    SELF_REVIEW: {1: Field("metadata", _OBJECT_META)},
}

# --------------------------------------------------------------------- SelfSubjectAccessReview


def _member(obj: JSON, name: str) -> JSON:
    """`obj[name]` when it is an object, else an empty one."""
    value = obj.get(name)
    return value if isinstance(value, dict) else {}


def _invalid(field: str, value: Any, detail: str) -> errors.StatusError:
    return errors.invalid_error(AUTHORIZATION_GROUP, "", "", [errors.invalid(field, value, detail)])


def _strings(attributes: JSON, names: Sequence[str]) -> JSON:
    """The attributes named, in Go's field order, empty ones left out (omitempty)."""
    return {name: str(attributes[name]) for name in names if attributes.get(name)}


_RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")


def _access_spec(body: JSON) -> tuple[JSON, RequestInfo]:
    """The spec as upstream writes it back, and what it asks the authorizer."""
    spec = _member(body, "spec")
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is None and non_resource is None:
        raise _invalid(
            "spec.resourceAttributes",
            None,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    if resource is not None and non_resource is not None:
        raise _invalid(
            "spec.nonResourceAttributes",
            non_resource,
            "cannot be specified in combination with resourceAttributes",
        )
    if non_resource is not None:
        attributes = _strings(non_resource if isinstance(non_resource, dict) else {}, ("path", "verb"))
        info = non_resource_attributes(attributes.get("verb", ""), attributes.get("path", ""))
        return {"nonResourceAttributes": attributes}, info
    attributes = _strings(resource if isinstance(resource, dict) else {}, _RESOURCE_FIELDS)
    info = resource_attributes(
        attributes.get("verb", ""),
        api_group=attributes.get("group", ""),
        api_version=attributes.get("version", "*"),
        resource=attributes.get("resource", ""),
        subresource=attributes.get("subresource", ""),
        namespace=attributes.get("namespace", ""),
        name=attributes.get("name", ""),
    )
    return {"resourceAttributes": attributes}, info


def _check_metadata(body: JSON, group: str) -> None:
    """Upstream's rule for these reviews: nothing in metadata (managedFields aside)."""
    meta = body.get("metadata")
    if isinstance(meta, dict) and any(value for key, value in meta.items() if key != "managedFields"):
        raise errors.invalid_error(group, "", "", [errors.invalid("metadata", meta, "must be empty")])


async def access_review(authorizer: Authorizer, user: UserInfo, body: JSON) -> JSON:
    """The review with its status: whether `user` may do what its spec says."""
    _check_metadata(body, AUTHORIZATION_GROUP)
    spec, info = _access_spec(body)
    decision = await authorizer.authorize(user, info)
    status: JSON = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return _answer(AUTHORIZATION_GROUP, ACCESS_REVIEW, {"spec": spec, "status": status})


def _answer(group: str, kind: str, rest: JSON, created: str | None = None) -> JSON:
    return {"kind": kind, "apiVersion": f"{group}/v1", "metadata": {"creationTimestamp": created}, **rest}


# --------------------------------------------------------------------- SelfSubjectRulesReview


def rules_review(rules_for: RulesFor, user: UserInfo, body: JSON) -> JSON:
    """Every rule `user` has in the spec's namespace, as upstream's RulesFor lists them (not
    merged: kubectl merges them for its table)."""
    _check_metadata(body, AUTHORIZATION_GROUP)
    namespace = _member(body, "spec").get("namespace")
    if not namespace or not isinstance(namespace, str):
        raise errors.bad_request("no namespace on request")
    rules, problems = rules_for(user, namespace)
    resource_rules = [rule for rule in rules if not rule.non_resource_urls]
    status: JSON = {
        "resourceRules": [_resource_rule(rule) for rule in resource_rules],
        "nonResourceRules": [
            {"verbs": list(rule.verbs), "nonResourceURLs": list(rule.non_resource_urls)}
            for rule in rules
            if rule.non_resource_urls
        ],
        "incomplete": False,
    }
    if problems:
        status["evaluationError"] = errors.aggregate_message(list(problems))
    return _answer(AUTHORIZATION_GROUP, RULES_REVIEW, {"spec": {}, "status": status})


def _resource_rule(rule: PolicyRule) -> JSON:
    written: JSON = {
        "verbs": list(rule.verbs),
        "apiGroups": list(rule.api_groups),
        "resources": list(rule.resources),
    }
    if rule.resource_names:
        written["resourceNames"] = list(rule.resource_names)
    return written


# --------------------------------------------------------------------- SelfSubjectReview


def self_review(user: UserInfo, body: JSON, now: datetime | None = None) -> JSON:
    """Who the request is (after impersonation), as upstream's SelfSubjectReview answers."""
    _check_metadata(body, AUTHENTICATION_GROUP)
    info: JSON = user.as_json()
    created = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _answer(AUTHENTICATION_GROUP, SELF_REVIEW, {"status": {"userInfo": info}}, created)
