"""The role model: Roles and ClusterRoles (rbac.authorization.k8s.io/v1) reduced to what the RBAC
authorizer needs, their rules, and the RoleSource protocol roleRefs resolve through."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apiserver.machinery.errors import go_quote
from apiserver.machinery.types import JSON

RBAC_API_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = f"{RBAC_API_GROUP}/v1"
ROLE_KIND = "Role"
CLUSTER_ROLE_KIND = "ClusterRole"


class RoleFormatError(ValueError):
    """A role object (or roles file) that is not a valid rbac.authorization.k8s.io/v1 role."""


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RoleFormatError(f"{where}: expected a list of strings")
    return tuple(value)


def _go_strings(values: Sequence[str]) -> str:
    """Go's %q of a []string: `["a" "b"]`."""
    return "[" + " ".join(go_quote(value) for value in values) + "]"


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a role (rbacv1.PolicyRule); `*` is the wildcard in every list."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: Any, where: str = "rule") -> PolicyRule:
        if not isinstance(value, dict):
            raise RoleFormatError(f"{where}: expected an object")
        return cls(
            verbs=_strings(value.get("verbs"), f"{where}.verbs"),
            api_groups=_strings(value.get("apiGroups"), f"{where}.apiGroups"),
            resources=_strings(value.get("resources"), f"{where}.resources"),
            resource_names=_strings(value.get("resourceNames"), f"{where}.resourceNames"),
            non_resource_urls=_strings(value.get("nonResourceURLs"), f"{where}.nonResourceURLs"),
        )

    def to_json(self) -> JSON:
        """The rule as the API writes it (empty lists left out, as Go's omitempty)."""
        pairs = (
            ("verbs", self.verbs),
            ("apiGroups", self.api_groups),
            ("resources", self.resources),
            ("resourceNames", self.resource_names),
            ("nonResourceURLs", self.non_resource_urls),
        )
        return {key: list(values) for key, values in pairs if values or key == "verbs"}

    def compact_string(self) -> str:
        """How upstream's escalation message shows a rule:
        `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`."""
        parts = []
        for label, values in (
            ("APIGroups", self.api_groups),
            ("Resources", self.resources),
            ("NonResourceURLs", self.non_resource_urls),
            ("ResourceNames", self.resource_names),
            ("Verbs", self.verbs),
        ):
            if values:
                parts.append(f"{label}:{_go_strings(values)}")
        return "{" + ", ".join(parts) + "}"


def rule(
    verbs: Iterable[str],
    *,
    groups: Iterable[str] = (),
    resources: Iterable[str] = (),
    names: Iterable[str] = (),
    urls: Iterable[str] = (),
) -> PolicyRule:
    """A rule with every list sorted, as upstream's rule builder (NewRule(...).RuleOrDie()) makes them."""
    return PolicyRule(
        verbs=tuple(sorted(verbs)),
        api_groups=tuple(sorted(groups)),
        resources=tuple(sorted(resources)),
        resource_names=tuple(sorted(names)),
        non_resource_urls=tuple(sorted(urls)),
    )


@dataclass(frozen=True)
class Role:
    """A Role (namespaced) or ClusterRole (namespace ""), reduced to what authorization needs."""

    kind: str
    name: str
    namespace: str = ""
    rules: tuple[PolicyRule, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    # ClusterRoles with an aggregationRule: its clusterRoleSelectors (metav1.LabelSelector objects).
    aggregation_selectors: tuple[JSON, ...] | None = field(default=None, compare=False, hash=False)
    resource_version: str = ""

    @classmethod
    def from_object(cls, obj: Any, where: str = "role") -> Role:
        if not isinstance(obj, dict):
            raise RoleFormatError(f"{where}: expected an object")
        kind = obj.get("kind")
        if kind not in (ROLE_KIND, CLUSTER_ROLE_KIND):
            raise RoleFormatError(f"{where}: kind must be Role or ClusterRole, not {kind!r}")
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise RoleFormatError(f"{where}: metadata.name is required")
        namespace = meta.get("namespace") or ""
        if not isinstance(namespace, str):
            raise RoleFormatError(f"{where}: metadata.namespace must be a string")
        if kind == ROLE_KIND and not namespace:
            raise RoleFormatError(f"{where}: Role {name!r} needs metadata.namespace")
        if kind == CLUSTER_ROLE_KIND:
            namespace = ""
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            raise RoleFormatError(f"{where}: metadata.labels must be an object")
        raw_rules = obj.get("rules") or []
        if not isinstance(raw_rules, list):
            raise RoleFormatError(f"{where}: rules must be a list")
        selectors: tuple[JSON, ...] | None = None
        aggregation = obj.get("aggregationRule")
        if kind == CLUSTER_ROLE_KIND and isinstance(aggregation, dict):
            raw_selectors = aggregation.get("clusterRoleSelectors") or []
            if not isinstance(raw_selectors, list) or not all(isinstance(s, dict) for s in raw_selectors):
                raise RoleFormatError(
                    f"{where}: aggregationRule.clusterRoleSelectors must be a list of objects"
                )
            selectors = tuple(raw_selectors)
        return cls(
            kind=str(kind),
            name=name,
            namespace=namespace,
            rules=tuple(PolicyRule.from_json(r, f"{where}.rules[{i}]") for i, r in enumerate(raw_rules)),
            labels={str(k): str(v) for k, v in labels.items()},
            aggregation_selectors=selectors,
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    def to_object(self) -> JSON:
        meta: JSON = {"name": self.name}
        if self.namespace:
            meta["namespace"] = self.namespace
        if self.labels:
            meta["labels"] = dict(self.labels)
        obj: JSON = {"apiVersion": RBAC_API_VERSION, "kind": self.kind, "metadata": meta}
        if self.aggregation_selectors is not None:
            obj["aggregationRule"] = {"clusterRoleSelectors": [dict(s) for s in self.aggregation_selectors]}
        obj["rules"] = [r.to_json() for r in self.rules]
        return obj


class RoleSource(Protocol):
    """What the RBAC authorizer resolves roleRefs with. Lookups are in memory and synchronous."""

    @property
    def ready(self) -> bool:
        """False until the source has its first complete view (lookups would wrongly miss)."""
        ...

    def get_role(self, namespace: str, name: str) -> Role | None: ...

    def get_cluster_role(self, name: str) -> Role | None: ...
