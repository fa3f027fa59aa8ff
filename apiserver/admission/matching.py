"""Which requests a policy or a webhook applies to, as upstream's predicates decide: resource rules
(operations, groups, versions, resources and subresources, scope, resource names), exclusions,
namespace and object selectors.

coreio serves each resource in one version only, so `matchPolicy: Equivalent` finds no other
version to match through: both policies match the request's own group/version/resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from apiserver.admission.objects import AdmissionSource
from apiserver.admission.request import AdmissionRequest
from apiserver.machinery import errors
from apiserver.machinery.selectors import label_selector_matches
from apiserver.machinery.types import JSON

ALL = "*"


def _exact_or_wildcard(items: Iterable[Any], wanted: str) -> bool:
    return any(item in (ALL, wanted) for item in items)


def _scope_matches(scope: str | None, request: AdmissionRequest) -> bool:
    if scope in (None, "", ALL):
        return True
    if scope == "Namespaced":
        return bool(request.namespace)
    if scope == "Cluster":
        return not request.namespace
    return False


def _resource_matches(resources: Iterable[Any], request: AdmissionRequest) -> bool:
    for entry in resources:
        resource, _, subresource = str(entry).partition("/")
        if resource in (ALL, request.resource) and subresource in (ALL, request.subresource):
            return True
    return False


def rule_matches(rule: Mapping[str, Any], request: AdmissionRequest) -> bool:
    """One RuleWithOperations against the request."""
    return (
        _scope_matches(rule.get("scope"), request)
        and _exact_or_wildcard(rule.get("operations") or (), request.operation)
        and _exact_or_wildcard(rule.get("apiGroups") or (), request.group)
        and _exact_or_wildcard(rule.get("apiVersions") or (), request.version)
        and _resource_matches(rule.get("resources") or (), request)
    )


def named_rules_match(rules: Iterable[Mapping[str, Any]], request: AdmissionRequest) -> bool:
    """NamedRuleWithOperations: a rule that matches and names no resource, or names this one."""
    for rule in rules:
        if not rule_matches(rule, request):
            continue
        names = rule.get("resourceNames") or []
        if not names or request.name in names:
            return True
    return False


def object_selector_matches(selector: JSON | None, request: AdmissionRequest) -> bool:
    """The labels of the object, or of the old object, match (an empty selector matches all)."""
    if not selector:
        return True
    return any(
        obj is not None and label_selector_matches(selector, (obj.get("metadata") or {}).get("labels") or {})
        for obj in (request.obj, request.old)
    )


async def namespace_selector_matches(
    selector: JSON | None, request: AdmissionRequest, source: AdmissionSource
) -> bool:
    """The labels of the request's namespace match (cluster-scoped requests and an empty selector
    always match); a namespace that does not exist is a 404, as upstream answers it."""
    if not request.namespace or not selector:
        return True
    namespace = await source.namespace(request.namespace)
    if namespace is None:
        raise errors.not_found_error(errors.GroupResource("", "namespaces"), request.namespace)
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    return label_selector_matches(selector, labels)


async def constraints_match(constraints: JSON, request: AdmissionRequest, source: AdmissionSource) -> bool:
    """A policy's matchConstraints (or a binding's matchResources): not excluded, the resource rules
    (none: every resource), the object selector, the namespace selector. As upstream, a missing
    namespace is an error only for a request the rules match."""
    if named_rules_match(constraints.get("excludeResourceRules") or [], request):
        return False
    rules = constraints.get("resourceRules") or []
    if rules and not named_rules_match(rules, request):
        return False
    if not object_selector_matches(constraints.get("objectSelector"), request):
        return False
    return await namespace_selector_matches(constraints.get("namespaceSelector"), request, source)
