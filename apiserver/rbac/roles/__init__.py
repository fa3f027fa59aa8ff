"""Where roleRefs resolve: the Roles and ClusterRoles (rbac.authorization.k8s.io/v1) the RBAC
authorizer reads rules from.

coreio stores RoleBindings only. Their roleRef (apiGroup rbac.authorization.core.io, kind Role or
ClusterRole) names a role of a role source:

- `StaticRoleSource` (standalone, `static`): the roles of a roles file plus upstream's default
  ClusterRoles cluster-admin, admin, edit and view (`policy`), aggregated as upstream's
  clusterrole-aggregation controller does (`aggregation`), with the served kinds added as each
  declares (`ResourceKind.role_verbs`; see `default_cluster_roles`).
- `ClusterRoleSource` (in a cluster, `cluster`): the cluster's own Roles and ClusterRoles, listed
  once and then watched (an informer's list+watch with resourceVersion, relisting on 410), never
  fetched per request.

The role model itself (`Role`, `PolicyRule`, the `RoleSource` protocol) is in `model`.
"""

from apiserver.rbac.roles.aggregation import aggregate_cluster_roles
from apiserver.rbac.roles.cluster import ClusterRoleSource
from apiserver.rbac.roles.model import (
    CLUSTER_ROLE_KIND,
    RBAC_API_GROUP,
    RBAC_API_VERSION,
    ROLE_KIND,
    PolicyRule,
    Role,
    RoleFormatError,
    RoleSource,
    rule,
)
from apiserver.rbac.roles.policy import (
    ACCESS_REVIEWER_RULES,
    AGGREGATE_TO_ADMIN,
    AGGREGATE_TO_EDIT,
    AGGREGATE_TO_VIEW,
    BASIC_USER_RULES,
    DISCOVERY_RULES,
    ISSUER_DISCOVERY_RULES,
    PUBLIC_INFO_RULES,
    READ,
    READ_WRITE,
    WRITE,
    coreio_aggregated_roles,
    default_cluster_roles,
)
from apiserver.rbac.roles.static import StaticRoleSource, load_roles_file, parse_roles

__all__ = [
    "ACCESS_REVIEWER_RULES",
    "AGGREGATE_TO_ADMIN",
    "AGGREGATE_TO_EDIT",
    "AGGREGATE_TO_VIEW",
    "BASIC_USER_RULES",
    "CLUSTER_ROLE_KIND",
    "DISCOVERY_RULES",
    "ISSUER_DISCOVERY_RULES",
    "PUBLIC_INFO_RULES",
    "RBAC_API_GROUP",
    "RBAC_API_VERSION",
    "READ",
    "READ_WRITE",
    "ROLE_KIND",
    "WRITE",
    "ClusterRoleSource",
    "PolicyRule",
    "Role",
    "RoleFormatError",
    "RoleSource",
    "StaticRoleSource",
    "aggregate_cluster_roles",
    "coreio_aggregated_roles",
    "default_cluster_roles",
    "load_roles_file",
    "parse_roles",
    "rule",
]
