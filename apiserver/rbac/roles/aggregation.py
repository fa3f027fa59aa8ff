"""ClusterRole aggregation, as upstream's clusterrole-aggregation controller keeps it: a ClusterRole
with an aggregationRule holds the rules of the ClusterRoles its label selectors match."""

from __future__ import annotations

from collections.abc import Mapping

from apiserver.machinery.selectors import label_selector_matches
from apiserver.rbac.roles.model import PolicyRule, Role


def aggregate_cluster_roles(roles: Mapping[str, Role]) -> dict[str, Role]:
    """ClusterRoles with an aggregationRule get the rules of every ClusterRole their selectors match
    (selectors in order, matches by name, first occurrence of each rule), as upstream's
    clusterrole-aggregation controller keeps them; aggregated roles may themselves be aggregated."""
    resolved: dict[str, tuple[PolicyRule, ...]] = {}
    in_progress: set[str] = set()

    def rules_of(name: str) -> tuple[PolicyRule, ...]:
        role = roles[name]
        if role.aggregation_selectors is None:
            return role.rules
        if name in resolved:
            return resolved[name]
        if name in in_progress:  # a cycle: the controller would never settle; stop here
            return ()
        in_progress.add(name)
        collected: list[PolicyRule] = []
        for selector in role.aggregation_selectors:
            for other in sorted(roles):
                if other == name or not label_selector_matches(selector, roles[other].labels):
                    continue
                for candidate in rules_of(other):
                    if candidate not in collected:
                        collected.append(candidate)
        in_progress.discard(name)
        resolved[name] = tuple(collected)
        return resolved[name]

    result: dict[str, Role] = {}
    for name, role in roles.items():
        if role.aggregation_selectors is None:
            result[name] = role
        else:
            result[name] = Role(
                kind=role.kind,
                name=role.name,
                rules=rules_of(name),
                labels=role.labels,
                aggregation_selectors=role.aggregation_selectors,
                resource_version=role.resource_version,
            )
    return result
