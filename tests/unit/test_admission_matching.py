"""Which requests a policy or webhook applies to: upstream's rule, selector and exclusion
semantics (k8s.io/apiserver's webhook predicates and policy matching)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver.admission import matching
from apiserver.admission.request import CREATE, DELETE, UPDATE, AdmissionRequest
from apiserver.admission.sources import ManifestSource
from apiserver.machinery.errors import StatusError
from apiserver.resources.event import EventKind
from apiserver.resources.rolebinding import RoleBindingKind

RB = RoleBindingKind()
JSON = dict[str, Any]


def request(
    operation: str = CREATE,
    namespace: str = "team",
    name: str = "rb",
    labels: JSON | None = None,
    old_labels: JSON | None = None,
    kind: Any = RB,
) -> AdmissionRequest:
    obj = None if operation == DELETE else {"metadata": {"name": name, "labels": labels or {}}}
    old = None if operation == CREATE else {"metadata": {"name": name, "labels": old_labels or {}}}
    return AdmissionRequest(kind, operation, namespace, name, obj, old, None, False, {})


def rule(**overrides: Any) -> JSON:
    base = {
        "apiGroups": ["rbac.authorization.core.io"],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["rolebindings"],
    }
    return {**base, **overrides}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, True),
        ({"apiGroups": ["*"]}, True),
        ({"apiGroups": ["rbac.authorization.k8s.io"]}, False),
        ({"apiVersions": ["v1beta1"]}, False),
        ({"operations": ["UPDATE", "DELETE"]}, False),
        ({"operations": ["*"]}, True),
        ({"resources": ["*"]}, True),
        ({"resources": ["events"]}, False),
        ({"resources": ["rolebindings/*"]}, True),
        ({"resources": ["rolebindings/status"]}, False),
        ({"resources": ["*/*"]}, True),
        ({"scope": "Namespaced"}, True),
        ({"scope": "Cluster"}, False),
        ({"scope": "*"}, True),
    ],
)
def test_rule_matches_as_upstream(overrides: JSON, expected: bool) -> None:
    assert matching.rule_matches(rule(**overrides), request()) is expected


def test_resource_names_restrict_a_rule_to_those_names() -> None:
    assert matching.named_rules_match([rule(resourceNames=["rb"])], request())
    assert not matching.named_rules_match([rule(resourceNames=["other"])], request())
    # A create without a name yet (generateName) matches no named rule.
    assert not matching.named_rules_match([rule(resourceNames=["rb"])], request(name=""))


def test_object_selector_matches_the_new_or_the_old_object() -> None:
    selector = {"matchLabels": {"tier": "prod"}}
    assert matching.object_selector_matches(selector, request(labels={"tier": "prod"}))
    assert matching.object_selector_matches(selector, request(UPDATE, labels={}, old_labels={"tier": "prod"}))
    assert matching.object_selector_matches(selector, request(DELETE, old_labels={"tier": "prod"}))
    assert not matching.object_selector_matches(selector, request(labels={"tier": "dev"}))
    assert matching.object_selector_matches({}, request())
    expression = {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["prod"]}]}
    assert matching.object_selector_matches(expression, request(labels={}))


class MissingNamespaces(ManifestSource):
    async def namespace(self, name: str) -> JSON | None:
        return None


def test_constraints_exclusions_and_namespace_selector() -> None:
    source = ManifestSource(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"env": "prod"}}}]
    )
    prod = {"matchLabels": {"env": "prod"}}

    def matches(constraints: JSON, req: AdmissionRequest | None = None) -> bool:
        return asyncio.run(matching.constraints_match(constraints, req or request(), source))

    assert matches({"resourceRules": [rule()], "namespaceSelector": prod})
    assert not matches({"resourceRules": [rule()], "namespaceSelector": {"matchLabels": {"env": "dev"}}})
    assert not matches({"resourceRules": [rule()], "excludeResourceRules": [rule(resourceNames=["rb"])]})
    assert matches({"resourceRules": [rule()], "excludeResourceRules": [rule(resourceNames=["other"])]})
    # No resource rules: every resource.
    assert matches({"namespaceSelector": prod}, request(kind=EventKind()))
    # A namespace not found is an error only for a request the rules match.
    missing = MissingNamespaces([])
    assert not asyncio.run(
        matching.constraints_match(
            {"resourceRules": [rule(operations=["DELETE"])], "namespaceSelector": prod}, request(), missing
        )
    )
    with pytest.raises(StatusError) as caught:
        asyncio.run(
            matching.constraints_match(
                {"resourceRules": [rule()], "namespaceSelector": prod}, request(), missing
            )
        )
    assert (caught.value.code, caught.value.message) == (404, 'namespaces "team" not found')


def test_a_standalone_namespace_is_labelled_with_its_name() -> None:
    namespace = asyncio.run(ManifestSource([]).namespace("anything"))
    assert namespace is not None
    assert namespace["metadata"]["labels"] == {"kubernetes.io/metadata.name": "anything"}
