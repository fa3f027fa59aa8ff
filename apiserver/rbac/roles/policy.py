"""The default policy: upstream's cluster-admin, admin, edit and view ClusterRoles (aggregated,
as upstream's bootstrap policy defines them), the served kinds' additions to them, and the rules
upstream binds to every user (discovery, public info, the self reviews)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from apiserver.rbac.roles.aggregation import aggregate_cluster_roles
from apiserver.rbac.roles.model import CLUSTER_ROLE_KIND, RBAC_API_GROUP, PolicyRule, Role, rule
from apiserver.resources import KINDS
from apiserver.resources.base import (
    ADMIN_ROLE,
    EDIT_ROLE,
    READ_VERBS,
    VIEW_ROLE,
    WRITE_VERBS,
    ResourceKind,
)
from apiserver.resources.rolebinding import ACCESS_REVIEWS
from apiserver.resources.rolebinding import GROUP as ROLE_BINDING_GROUP

AGGREGATE_TO_ADMIN = "rbac.authorization.k8s.io/aggregate-to-admin"
AGGREGATE_TO_EDIT = "rbac.authorization.k8s.io/aggregate-to-edit"
AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
_AGGREGATE_TO = {ADMIN_ROLE: AGGREGATE_TO_ADMIN, EDIT_ROLE: AGGREGATE_TO_EDIT, VIEW_ROLE: AGGREGATE_TO_VIEW}

READ = READ_VERBS
WRITE = WRITE_VERBS
READ_WRITE = READ + WRITE


def _cluster_role(
    name: str,
    rules: Sequence[PolicyRule] = (),
    *,
    labels: Mapping[str, str] | None = None,
    aggregate: str = "",
) -> Role:
    selectors = ({"matchLabels": {aggregate: "true"}},) if aggregate else None
    return Role(
        CLUSTER_ROLE_KIND,
        name,
        rules=tuple(rules),
        labels=dict(labels or {}) | {"kubernetes.io/bootstrapping": "rbac-defaults"},
        aggregation_selectors=selectors,
    )


# fmt: off
# (verbs, group, resources) of system:aggregate-to-view and -edit: upstream's bootstrap policy as of
# v1.33 with default feature gates (no DynamicResourceAllocation).
_VIEW = (
    (READ, "", ("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                "services", "services/status", "endpoints", "persistentvolumeclaims",
                "persistentvolumeclaims/status", "configmaps")),
    (READ, "", ("limitranges", "resourcequotas", "bindings", "events", "pods/status",
                "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log")),
    (READ, "", ("namespaces",)),
    (READ, "discovery.k8s.io", ("endpointslices",)),
    (READ, "apps", ("controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
                    "daemonsets", "daemonsets/status", "deployments", "deployments/status",
                    "deployments/scale", "replicasets", "replicasets/status", "replicasets/scale")),
    (READ, "autoscaling", ("horizontalpodautoscalers", "horizontalpodautoscalers/status")),
    (READ, "batch", ("jobs", "cronjobs", "cronjobs/status", "jobs/status")),
    (READ, "extensions", ("daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                          "deployments/status", "ingresses", "ingresses/status", "replicasets",
                          "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
                          "networkpolicies")),
    (READ, "policy", ("poddisruptionbudgets", "poddisruptionbudgets/status")),
    (READ, "networking.k8s.io", ("networkpolicies", "ingresses", "ingresses/status")),
)
_EDIT = (
    (READ, "", ("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy")),
    (("impersonate",), "", ("serviceaccounts",)),
    (WRITE, "", ("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward")),
    (("create",), "", ("pods/eviction",)),
    (WRITE, "", ("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                 "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events")),
    (("create",), "", ("serviceaccounts/token",)),
    (WRITE, "apps", ("statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
                     "deployments/rollback", "replicasets", "replicasets/scale")),
    (WRITE, "autoscaling", ("horizontalpodautoscalers",)),
    (WRITE, "batch", ("jobs", "cronjobs")),
    (WRITE, "extensions", ("daemonsets", "deployments", "deployments/scale", "deployments/rollback",
                           "ingresses", "replicasets", "replicasets/scale", "replicationcontrollers/scale",
                           "networkpolicies")),
    (WRITE, "policy", ("poddisruptionbudgets",)),
    (WRITE, "networking.k8s.io", ("networkpolicies", "ingresses")),
    (READ_WRITE, "coordination.k8s.io", ("leases",)),
)
_DISCOVERY_URLS = ("/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*",
                   "/api", "/api/*", "/apis", "/apis/*")
# fmt: on


def _table_rules(table: Sequence[tuple[Sequence[str], str, Sequence[str]]]) -> list[PolicyRule]:
    return [rule(verbs, groups=[group], resources=resources) for verbs, group, resources in table]


def coreio_aggregated_roles(kinds: Iterable[ResourceKind] = KINDS) -> list[Role]:
    """The served kinds' additions to admin, edit and view (`ResourceKind.role_verbs`), as
    ClusterRoles coreio:aggregate-to-<role> carrying upstream's aggregation labels (in a cluster,
    the same roles installed there are aggregated by the cluster)."""
    kinds = tuple(kinds)
    return [
        _cluster_role(
            f"coreio:aggregate-to-{role}",
            [
                rule(kind.role_verbs[role], groups=[kind.group], resources=[kind.plural])
                for kind in kinds
                if kind.role_verbs.get(role)
            ],
            labels={_AGGREGATE_TO[role]: "true"},
        )
        for role in (ADMIN_ROLE, EDIT_ROLE, VIEW_ROLE)
    ]


def default_cluster_roles(kinds: Iterable[ResourceKind] = KINDS) -> list[Role]:
    """Upstream's cluster-admin, admin, edit and view (aggregated, as the cluster would hold them),
    their system:aggregate-to-* parts, and the served kinds' additions (`coreio_aggregated_roles`)."""
    roles = [
        _cluster_role(
            "cluster-admin",
            [rule(["*"], groups=["*"], resources=["*"]), rule(["*"], urls=["*"])],
        ),
        _cluster_role("admin", aggregate=AGGREGATE_TO_ADMIN),
        _cluster_role("edit", labels={AGGREGATE_TO_ADMIN: "true"}, aggregate=AGGREGATE_TO_EDIT),
        _cluster_role("view", labels={AGGREGATE_TO_EDIT: "true"}, aggregate=AGGREGATE_TO_VIEW),
        _cluster_role(
            "system:aggregate-to-admin",
            [
                rule(["create"], groups=["authorization.k8s.io"], resources=["localsubjectaccessreviews"]),
                rule(READ_WRITE, groups=[RBAC_API_GROUP], resources=["roles", "rolebindings"]),
            ],
            labels={AGGREGATE_TO_ADMIN: "true"},
        ),
        _cluster_role("system:aggregate-to-edit", _table_rules(_EDIT), labels={AGGREGATE_TO_EDIT: "true"}),
        _cluster_role("system:aggregate-to-view", _table_rules(_VIEW), labels={AGGREGATE_TO_VIEW: "true"}),
        *coreio_aggregated_roles(kinds),
    ]
    by_name = aggregate_cluster_roles({role.name: role for role in roles})
    return [by_name[role.name] for role in roles]


# The rules of upstream's system:discovery and system:public-info-viewer, which upstream binds to
# every authenticated user (and, for the latter, to unauthenticated ones) with ClusterRoleBindings.
DISCOVERY_RULES = (rule(["get"], urls=_DISCOVERY_URLS),)
PUBLIC_INFO_RULES = (rule(["get"], urls=["/livez", "/readyz", "/healthz", "/version", "/version/"]),)
# Upstream's system:basic-user, bound to every authenticated user: the self reviews.
BASIC_USER_RULES = (
    rule(
        ["create"],
        groups=["authorization.k8s.io"],
        resources=["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    ),
    rule(["create"], groups=["authentication.k8s.io"], resources=["selfsubjectreviews"]),
)
# Upstream's system:service-account-issuer-discovery (bound to every service account).
ISSUER_DISCOVERY_RULES = (
    rule(
        ["get"],
        urls=[
            "/.well-known/openid-configuration",
            "/.well-known/openid-configuration/",
            "/openid/v1/jwks",
            "/openid/v1/jwks/",
        ],
    ),
)

# What coreio's ClusterRole ACCESS_REVIEWER holds: creating the access reviews (`kubectl coreio`).
ACCESS_REVIEWER_RULES = (
    rule(["create"], groups=[ROLE_BINDING_GROUP], resources=[plural for plural, _ in ACCESS_REVIEWS]),
)
