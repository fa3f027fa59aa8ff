"""Who may do something in a namespace by what coreio decides (the logic of `kubectl coreio
who-can`): the privileged groups (system:masters, as upstream's cluster-admin binding), a
standalone server's default ClusterRoleBindings, and every subject of each stored RoleBinding whose
role has a rule that allows it. A binding that grants nothing because of its problems is named
among the errors, as the authorizer reports it.

In a cluster the cluster's own bindings may allow more subjects; coreio cannot list them, so the
answer says it is incomplete there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery.errors import go_quote
from apiserver.rbac.authorizer import (
    CLUSTER_ADMIN_RULES,
    Binding,
    RBACAuthorizer,
    RoleRef,
    Subject,
    rule_allows,
)
from apiserver.rbac.chain import BOOTSTRAP_BINDINGS
from apiserver.rbac.roles import CLUSTER_ROLE_KIND, RBAC_API_GROUP, PolicyRule
from apiserver.resources.rolebinding import GROUP, GROUP_KIND, SERVICE_ACCOUNT_KIND

CLUSTER_ROLE_BINDING_KIND = "ClusterRoleBinding"
ROLE_BINDING_KIND = "RoleBinding"
CLUSTER_ADMIN = "cluster-admin"


@dataclass(frozen=True)
class Grant:
    """One subject allowed, by which binding (RoleBinding, or a built-in ClusterRoleBinding) of
    which role, through which rule."""

    subject: Subject
    binding_kind: str
    binding: str
    namespace: str
    role_ref: RoleRef
    rule: PolicyRule


@dataclass
class WhoCan:
    grants: list[Grant] = field(default_factory=list)
    # Bindings that could not be judged: their problems, as the authorizer words them.
    errors: list[str] = field(default_factory=list)


def first_allowing(info: RequestInfo, rules: tuple[PolicyRule, ...]) -> PolicyRule | None:
    return next((rule for rule in rules if rule_allows(info, rule)), None)


def who_can(rbac: RBACAuthorizer, info: RequestInfo, *, bootstrap: bool) -> WhoCan:
    """Every subject allowed to make the request `info` (in its namespace), in the order the
    authorizer asks: privileged groups, default bindings (standalone), then the RoleBindings by name."""
    found = WhoCan(list(_built_in(rbac, info, bootstrap=bootstrap)))
    for binding in sorted(rbac.bindings.role_bindings(info.namespace), key=lambda b: b.name):
        resolved = rbac.resolve(binding)
        if resolved.error:
            found.errors.append(f"{describe_binding(binding)}: {resolved.error}")
            continue
        allowing = first_allowing(info, resolved.rules)
        if allowing is not None:
            found.grants += [_grant(binding, subject, allowing) for subject in binding.subjects]
    return found


def _built_in(rbac: RBACAuthorizer, info: RequestInfo, *, bootstrap: bool) -> Iterator[Grant]:
    cluster_admin = RoleRef(RBAC_API_GROUP, CLUSTER_ROLE_KIND, CLUSTER_ADMIN)
    allowing = first_allowing(info, CLUSTER_ADMIN_RULES)
    for group in sorted(rbac.privileged_groups):
        if allowing is not None:
            subject = Subject(GROUP_KIND, group, GROUP)
            yield Grant(subject, CLUSTER_ROLE_BINDING_KIND, CLUSTER_ADMIN, "", cluster_admin, allowing)
    if not bootstrap:
        return
    for default in BOOTSTRAP_BINDINGS:
        allowing = first_allowing(info, default.rules)
        if allowing is None:
            continue
        role = RoleRef(RBAC_API_GROUP, CLUSTER_ROLE_KIND, default.name)
        for group in default.groups:
            subject = Subject(GROUP_KIND, group, GROUP)
            yield Grant(subject, CLUSTER_ROLE_BINDING_KIND, default.name, "", role, allowing)


def _grant(binding: Binding, subject: Subject, rule: PolicyRule) -> Grant:
    if subject.kind == SERVICE_ACCOUNT_KIND and not subject.namespace:
        subject = Subject(subject.kind, subject.name, subject.api_group, binding.namespace)
    return Grant(subject, ROLE_BINDING_KIND, binding.name, binding.namespace, binding.role_ref, rule)


def describe_binding(binding: Binding) -> str:
    """`RoleBinding "ns/name"`, as the authorizer's problem reports name a binding."""
    return f"RoleBinding {go_quote(binding.namespace + '/' + binding.name)}"
